/*
 * wheel.c: the hierarchical timing wheel (see wheel.h for the layout).
 *
 * Vocabulary: U(l) = 2^(l*bits) ticks is a level-l slot, a "span"; a level's
 * ring of 2^bits slots covers a "block" of U(l+1) ticks. block_of(t, l) is
 * which span of level l the tick t falls in.
 *
 * Placement: a node goes to the lowest level l whose current block
 * (block_of(e, l+1) == block_of(now, l+1)) or next block (one more) holds
 * its expiry e; within it, to slot digit(e, l) of the current or next ring.
 *
 * Time entering a new level-l span (a multiple of U(l)) means, for l >= 1:
 * level l-1 enters a new block (its next ring becomes current), and the
 * nodes of the following span, still in level l, become a drain job into
 * level l-1's next ring, due by the time that span begins: a whole span of
 * time to do it in small steps, well before anything it holds is due. A
 * drain places each node relative to the current tick, so a job finished
 * late (at its deadline, by advance) still puts every node where it belongs.
 */
#include <errno.h>
#include <stdlib.h>
#include "wheel.h"

#define NO_SLOT UINT32_MAX

#if defined(__GNUC__) || defined(__clang__)
static unsigned lowest_bit(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
#else
static unsigned lowest_bit(uint64_t x)
{
	unsigned i = 0;
	while (!(x & 1)) { x >>= 1; i++; }
	return i;
}
#endif

/* ---- geometry ---------------------------------------------------------- */

unsigned hwt_wheel_bits_for(uint64_t size)
{
	unsigned bits = 1;
	if (size < 1 || size > (UINT64_C(1) << HWT_WHEEL_MAX_BITS))
		return 0;
	while ((UINT64_C(1) << bits) < size)
		bits++;
	return bits;
}

static uint32_t slot_mask(const struct hwt_wheel *w)
{
	return (UINT32_C(1) << w->bits) - 1;
}

/* Which level-`lvl` span tick t is in (0 above the top level's block). */
static uint64_t block_of(const struct hwt_wheel *w, uint64_t t, unsigned lvl)
{
	unsigned shift = lvl * w->bits;
	return shift >= 64 ? 0 : t >> shift;
}

/* First tick of span `b` of level `lvl`. */
static uint64_t start_of(const struct hwt_wheel *w, uint64_t b, unsigned lvl)
{
	unsigned shift = lvl * w->bits;
	return shift >= 64 ? 0 : b << shift; /* above the top level b is 0 */
}

static uint64_t span(const struct hwt_wheel *w, unsigned lvl)
{
	return UINT64_C(1) << (lvl * w->bits);
}

static uint32_t digit(const struct hwt_wheel *w, uint64_t t, unsigned lvl)
{
	return (uint32_t)(t >> (lvl * w->bits)) & slot_mask(w);
}

/* Physical ring number of level `lvl`'s current (next = 0) or next ring. */
static unsigned ring_of(const struct hwt_wheel *w, unsigned lvl, unsigned next)
{
	return lvl * 2 + (w->cur[lvl] ^ next);
}

static uint32_t slot_of(const struct hwt_wheel *w, unsigned ring, uint32_t idx)
{
	return (ring << w->bits) | idx;
}

/* ---- occupancy bitmaps ------------------------------------------------- */

static void mark(struct hwt_wheel *w, uint32_t slot)
{
	unsigned ring = slot >> w->bits;
	uint32_t idx = slot & slot_mask(w);
	w->occ[ring * w->words + (idx >> 6)] |= UINT64_C(1) << (idx & 63);
	w->summary[ring] |= UINT64_C(1) << (idx >> 6);
}

/* The earliest expiry slot `slot` (above level 0) may hold: see least. */
static uint64_t *least_of(const struct hwt_wheel *w, uint32_t slot)
{
	return &w->least[slot - ((uint32_t)2 << w->bits)];
}

/* How many slots lie above level 0 (the length of least). */
static size_t upper_slots(const struct hwt_wheel *w)
{
	return ((size_t)w->levels - 1) * 2 << w->bits;
}

/* `slot` holds a node expiring at `expires` from now on. */
static void note_expiry(struct hwt_wheel *w, uint32_t slot, uint64_t expires)
{
	if (slot >> w->bits >= 2 && expires < *least_of(w, slot))
		*least_of(w, slot) = expires;
}

static void unmark(struct hwt_wheel *w, uint32_t slot)
{
	unsigned ring = slot >> w->bits;
	uint32_t idx = slot & slot_mask(w);
	uint64_t *o = &w->occ[ring * w->words + (idx >> 6)];
	if (ring >= 2)
		*least_of(w, slot) = UINT64_MAX;
	*o &= ~(UINT64_C(1) << (idx & 63));
	if (!*o)
		w->summary[ring] &= ~(UINT64_C(1) << (idx >> 6));
}

/* Lowest occupied index >= from in `ring`, or NO_SLOT. */
static uint32_t first_from(const struct hwt_wheel *w, unsigned ring, uint32_t from)
{
	const uint64_t *occ = &w->occ[ring * w->words];
	uint32_t word = from >> 6;
	uint64_t bits, rest;
	if (from > slot_mask(w))
		return NO_SLOT;
	bits = occ[word] & (~UINT64_C(0) << (from & 63));
	if (bits)
		return word * 64 + lowest_bit(bits);
	if (word + 1 >= w->words)
		return NO_SLOT;
	rest = w->summary[ring] & (~UINT64_C(0) << (word + 1));
	if (!rest)
		return NO_SLOT;
	word = lowest_bit(rest);
	return word * 64 + lowest_bit(occ[word]);
}

/* ---- life cycle -------------------------------------------------------- */

int hwt_wheel_init(struct hwt_wheel *w, unsigned bits)
{
	size_t heads, i;
	w->now = 0;
	w->bits = bits;
	w->levels = (64 + bits - 1) / bits;
	w->words = bits >= 6 ? 1u << (bits - 6) : 1;
	heads = (size_t)w->levels * 2 << bits;
	w->slots = malloc(heads * sizeof *w->slots);
	w->occ = calloc((size_t)w->levels * 2 * w->words, sizeof *w->occ);
	w->summary = calloc((size_t)w->levels * 2, sizeof *w->summary);
	w->cur = calloc(w->levels, sizeof *w->cur);
	w->jobs = calloc(w->levels, sizeof *w->jobs);
	w->least = malloc(upper_slots(w) * sizeof *w->least);
	if (!w->slots || !w->occ || !w->summary || !w->cur || !w->jobs || !w->least) {
		hwt_wheel_free(w);
		return ENOMEM;
	}
	for (i = 0; i < heads; i++)
		hwt_list_init(&w->slots[i]);
	for (i = 0; i < upper_slots(w); i++)
		w->least[i] = UINT64_MAX;
	for (i = 0; i < w->levels; i++)
		w->jobs[i].src = NO_SLOT;
	hwt_list_init(&w->due);
	return 0;
}

void hwt_wheel_free(struct hwt_wheel *w)
{
	free(w->slots);
	free(w->occ);
	free(w->summary);
	free(w->cur);
	free(w->jobs);
	free(w->least);
	w->least = NULL;
	w->slots = NULL;
	w->occ = w->summary = NULL;
	w->cur = NULL;
	w->jobs = NULL;
}

void hwt_node_init(struct hwt_node *n)
{
	hwt_list_init(&n->link);
	n->expires = 0;
	n->slot = HWT_SLOT_NONE;
}

/* ---- add, delete ------------------------------------------------------- */

/* Whether a linked node is due: in the due list, or in its owner's lists
 * after being taken from it. A node made due by itself is marked so; a slot
 * that expires moves to the due list whole, in O(1), leaving its nodes' slot
 * fields as they were: their expiry, now reached, is what says they are due
 * (a node in a slot always has expires > now). */
static int is_due(const struct hwt_wheel *w, const struct hwt_node *n)
{
	return n->slot == HWT_SLOT_DUE || n->expires <= w->now;
}

static void make_due(struct hwt_wheel *w, struct hwt_node *n)
{
	n->slot = HWT_SLOT_DUE;
	hwt_list_push(&w->due, &n->link);
}

/* The slot the placement rule gives a node expiring at `expires` (> now). */
static uint32_t slot_for(const struct hwt_wheel *w, uint64_t expires)
{
	unsigned lvl = 0;
	uint64_t ahead;
	for (;; lvl++) { /* ends: above the top level every block is block 0 */
		ahead = block_of(w, expires, lvl + 1) - block_of(w, w->now, lvl + 1);
		if (ahead <= 1)
			break;
	}
	return slot_of(w, ring_of(w, lvl, (unsigned)ahead), digit(w, expires, lvl));
}

/* Put `n` (expires > now) where the placement rule says. */
static void place(struct hwt_wheel *w, struct hwt_node *n)
{
	n->slot = (uint16_t)slot_for(w, n->expires);
	hwt_list_push(&w->slots[n->slot], &n->link);
	mark(w, n->slot);
	note_expiry(w, n->slot, n->expires);
}

void hwt_wheel_add(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires)
{
	n->expires = expires;
	if (expires <= w->now)
		make_due(w, n);
	else
		place(w, n);
}

void hwt_wheel_add_due(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires)
{
	n->expires = expires;
	make_due(w, n);
}

void hwt_wheel_del(struct hwt_wheel *w, struct hwt_node *n)
{
	uint32_t slot = n->slot;
	int due;
	if (slot == HWT_SLOT_NONE)
		return;
	due = is_due(w, n);
	hwt_list_unlink(&n->link);
	n->slot = HWT_SLOT_NONE;
	if (due)
		return;
	if (hwt_list_empty(&w->slots[slot])) {
		unsigned lvl = (slot >> w->bits) / 2;
		unmark(w, slot);
		if (w->jobs[lvl].src == slot) /* its job has nothing left to move */
			w->jobs[lvl].src = NO_SLOT;
	}
}

static int is_job_source(const struct hwt_wheel *w, uint32_t slot)
{
	return w->jobs[(slot >> w->bits) / 2].src == slot;
}

int hwt_wheel_move(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires)
{
	if (n->slot < HWT_SLOT_DUE && !is_due(w, n) && expires > w->now && !is_job_source(w, n->slot) &&
	    slot_for(w, expires) == n->slot) {
		n->expires = expires; /* same slot: nothing to relink */
		note_expiry(w, n->slot, expires);
		return 1;
	}
	hwt_wheel_del(w, n);
	hwt_wheel_add(w, n, expires);
	return 0;
}

uint64_t hwt_wheel_alert(const struct hwt_wheel *w, const struct hwt_node *n)
{
	unsigned ring = n->slot >> w->bits, lvl = ring / 2;
	uint64_t job = lvl ? start_of(w, block_of(w, n->expires, lvl), lvl) - span(w, lvl) : n->expires;
	uint64_t swap;
	if (lvl == 0 || (ring & 1) == w->cur[lvl])
		return job; /* a current ring: only its job; level 0: its expiry (see set_now) */
	swap = start_of(w, block_of(w, w->now, lvl + 1) + 1, lvl + 1); /* it becomes current then */
	return swap && swap < job ? swap : job;
}

/* ---- drain jobs ---------------------------------------------------------- */

static int job_active(const struct hwt_wheel *w, unsigned lvl)
{
	return w->jobs[lvl].src != NO_SLOT;
}

/* Move up to `budget` nodes of level `lvl`'s job down; returns how many. */
static unsigned drain(struct hwt_wheel *w, unsigned lvl, unsigned budget)
{
	struct hwt_job *job = &w->jobs[lvl];
	struct hwt_link *head = &w->slots[job->src];
	unsigned moved = 0;
	while (moved < budget && !hwt_list_empty(head)) {
		struct hwt_node *n = hwt_container_of(head->next, struct hwt_node, link);
		hwt_wheel_del(w, n);
		/* Lands at a lower level. Its expiry is not written again: only the
		 * Lua thread writes it (under the lock), and reads it without. */
		if (n->expires <= w->now)
			make_due(w, n);
		else
			place(w, n);
		moved++;
	}
	if (hwt_list_empty(head))
		job->src = NO_SLOT;
	return moved;
}

int hwt_wheel_work(struct hwt_wheel *w, unsigned budget)
{
	unsigned lvl;
	int left = 0;
	for (lvl = 1; lvl < w->levels; lvl++) /* lowest first: earliest deadlines */
		if (job_active(w, lvl)) {
			budget -= drain(w, lvl, budget);
			left |= job_active(w, lvl);
		}
	return left;
}

/* ---- advancing ----------------------------------------------------------- */

/* The slot of level lvl >= 1 that a drain job empties when time enters the
 * span at t: the span after t's. */
static uint32_t job_source(const struct hwt_wheel *w, unsigned lvl, uint64_t t)
{
	uint32_t d = digit(w, t, lvl) + 1;
	return d <= slot_mask(w) ? slot_of(w, ring_of(w, lvl, 0), d) : slot_of(w, ring_of(w, lvl, 1), 0);
}

/* Time enters span `digit(t, lvl)` of level lvl >= 1 (t a multiple of U(lvl)). */
static void enter_span(struct hwt_wheel *w, unsigned lvl, uint64_t t)
{
	uint32_t src = job_source(w, lvl, t);
	w->cur[lvl - 1] ^= 1; /* level lvl-1's next block is now its current one */
	if (hwt_list_empty(&w->slots[src]))
		return;
	w->jobs[lvl].src = src;
	w->jobs[lvl].deadline = t + span(w, lvl); /* out of level lvl before its span begins */
}

/* O(1) whatever the slot holds: no node is touched (see is_due). */
static void expire_slot(struct hwt_wheel *w, uint32_t slot)
{
	struct hwt_link *head = &w->slots[slot];
	if (hwt_list_empty(head))
		return;
	hwt_list_splice(&w->due, head);
	unmark(w, slot);
}

/* Move now forward to `to` over no event. Level 0's rings swap when time
 * enters a level-1 span; when that entry does nothing else, hwt_wheel_next
 * does not stop there (a host told to wake at a block's end would find
 * nothing due and wake again for the deadline), and the swap is done here,
 * on the way. Level 0's current ring is then empty (its slots lay before the
 * boundary, all of them events), and its next ring can only be one block
 * ahead; when both rings are empty which one is current does not matter. */
static void set_now(struct hwt_wheel *w, uint64_t to)
{
	if (block_of(w, to, 1) != block_of(w, w->now, 1) && w->summary[ring_of(w, 0, 1)])
		w->cur[0] ^= 1;
	w->now = to;
}

/* Everything that must happen at tick t (the next event), in order: jobs due
 * by t finish, as of the tick before t, since entering t may swap the rings
 * they fill; then levels enter their new spans, top down; then level 0's
 * slot for t expires. */
static void step_to(struct hwt_wheel *w, uint64_t t)
{
	unsigned lvl;
	set_now(w, t - 1); /* no event lies between the old now and t */
	for (lvl = w->levels - 1; lvl >= 1; lvl--)
		if (job_active(w, lvl) && w->jobs[lvl].deadline <= t)
			drain(w, lvl, UINT32_MAX);
	w->now = t;
	for (lvl = w->levels - 1; lvl >= 1; lvl--)
		if ((t & (span(w, lvl) - 1)) == 0)
			enter_span(w, lvl, t);
	expire_slot(w, slot_of(w, ring_of(w, 0, 0), digit(w, t, 0)));
}

/* First occupied index of `ring` at or after `from`, skipping level lvl's job source. */
static uint32_t first_not_job(const struct hwt_wheel *w, unsigned lvl, unsigned ring, uint32_t from)
{
	uint32_t i = first_from(w, ring, from);
	if (i != NO_SLOT && job_active(w, lvl) && w->jobs[lvl].src == slot_of(w, ring, i))
		i = first_from(w, ring, i + 1);
	return i;
}

/* When level lvl >= 1 next needs enter_span: to swap level lvl-1's rings
 * (its next ring is occupied; for level 0 that swap is done on the way, by
 * set_now) or to start a job one span ahead of a node. */
static uint64_t span_event(const struct hwt_wheel *w, unsigned lvl)
{
	uint64_t best = UINT64_MAX, first_start;
	uint64_t next_span = start_of(w, block_of(w, w->now, lvl) + 1, lvl);
	uint32_t i;
	if (lvl >= 2 && w->summary[ring_of(w, lvl - 1, 1)])
		best = next_span;
	i = first_not_job(w, lvl, ring_of(w, lvl, 0), 0);
	if (i != NO_SLOT) {
		first_start = start_of(w, block_of(w, w->now, lvl + 1), lvl + 1) + start_of(w, i, lvl);
	} else {
		i = first_not_job(w, lvl, ring_of(w, lvl, 1), 0);
		if (i == NO_SLOT)
			return best;
		first_start = start_of(w, block_of(w, w->now, lvl + 1) + 1, lvl + 1) + start_of(w, i, lvl);
	}
	return first_start - span(w, lvl) < best ? first_start - span(w, lvl) : best;
}

/* The earliest event of levels 1 and up (span entries, jobs' deadlines). */
static uint64_t upper_next(const struct hwt_wheel *w)
{
	uint64_t best = UINT64_MAX, t;
	unsigned lvl;
	for (lvl = 1; lvl < w->levels; lvl++) {
		t = span_event(w, lvl);
		if (t < best)
			best = t;
		if (job_active(w, lvl) && w->jobs[lvl].deadline < best)
			best = w->jobs[lvl].deadline;
	}
	return best;
}

/* Level lvl's first occupied slot, its current ring's before its next
 * ring's (which lie a block later); NO_SLOT if none. *next says which. */
static uint32_t first_slot(const struct hwt_wheel *w, unsigned lvl, unsigned *next)
{
	uint32_t i;
	for (*next = 0; *next <= 1; ++*next)
		if ((i = first_from(w, ring_of(w, lvl, *next), 0)) != NO_SLOT)
			return slot_of(w, ring_of(w, lvl, *next), i);
	return NO_SLOT;
}

/* The tick of level 0's first occupied slot `slot` (first_slot). */
static uint64_t level0_tick(const struct hwt_wheel *w, uint32_t slot, unsigned next)
{
	return start_of(w, block_of(w, w->now, 1) + next, 1) + (slot & slot_mask(w));
}

/* The tick of level 0's first occupied slot; UINT64_MAX if none. */
static uint64_t level0_next(const struct hwt_wheel *w)
{
	unsigned next;
	uint32_t slot = first_slot(w, 0, &next);
	return slot == NO_SLOT ? UINT64_MAX : level0_tick(w, slot, next);
}

uint64_t hwt_wheel_next(const struct hwt_wheel *w)
{
	uint64_t low = level0_next(w), up = upper_next(w);
	return low < up ? low : up;
}

/* The earliest expiry level lvl >= 1 may hold: its first occupied slot's
 * (a drain's source included), whose nodes all expire before the later
 * slots'. */
static uint64_t upper_least(const struct hwt_wheel *w, unsigned lvl)
{
	unsigned next;
	uint32_t slot = first_slot(w, lvl, &next);
	return slot == NO_SLOT ? UINT64_MAX : *least_of(w, slot);
}

uint64_t hwt_wheel_next_expiry(const struct hwt_wheel *w)
{
	uint64_t best = level0_next(w), t;
	unsigned lvl;
	for (lvl = 1; lvl < w->levels; lvl++)
		if ((t = upper_least(w, lvl)) < best)
			best = t;
	return best;
}

int hwt_wheel_next_lone(const struct hwt_wheel *w)
{
	unsigned next, lvl;
	uint32_t slot = first_slot(w, 0, &next);
	const struct hwt_link *head = slot == NO_SLOT ? NULL : &w->slots[slot];
	uint64_t tick;
	if (!head || head->next->next != head)
		return 0;
	tick = level0_tick(w, slot, next);
	for (lvl = 1; lvl < w->levels; lvl++) /* (a node above may share its tick) */
		if (upper_least(w, lvl) <= tick)
			return 0;
	return 1;
}

uint64_t hwt_wheel_next_hard(const struct hwt_wheel *w)
{
	uint64_t best = upper_next(w);
	/* The one level-0 tick at a multiple of U(1) that can lie ahead: the
	 * next block's first, an expiry hwt_wheel_expire may refuse (a level
	 * entering its span there, a job due then). Counted whenever it is
	 * occupied: a needless wake-up costs less than a host left waiting. */
	uint64_t edge = start_of(w, block_of(w, w->now, 1) + 1, 1);
	if (edge < best && (w->occ[ring_of(w, 0, 1) * w->words] & 1))
		best = edge;
	return best;
}

void hwt_wheel_advance(struct hwt_wheel *w, uint64_t to)
{
	for (;;) {
		uint64_t t = hwt_wheel_next(w);
		if (t > to)
			break;
		step_to(w, t);
	}
	if (to > w->now)
		set_now(w, to);
}

/* Whether the event at t is one a host may step through (hwt_wheel_expire):
 * it expires a level-0 slot and, at most, swaps level 0's rings, which
 * set_now does on the way anyway. Spans of every level start at multiples
 * of U(1), and so do drain jobs' deadlines (each is the start of a span), so
 * any other tick enters nothing and finishes no job. At a multiple of U(1)
 * level 1 enters a span: the host's too when that starts no job and no job
 * is due to finish, unless a higher level enters one as well. */
static int expiry_only(const struct hwt_wheel *w, uint64_t t)
{
	unsigned lvl;
	if ((t & (span(w, 1) - 1)) != 0)
		return 1;
	if (w->levels > 2 && (t & (span(w, 2) - 1)) == 0)
		return 0;
	for (lvl = 1; lvl < w->levels; lvl++)
		if (job_active(w, lvl) && w->jobs[lvl].deadline <= t)
			return 0;
	return hwt_list_empty(&w->slots[job_source(w, 1, t)]);
}

int hwt_wheel_expire(struct hwt_wheel *w, uint64_t to)
{
	for (;;) {
		uint64_t t = hwt_wheel_next(w);
		if (t > to)
			break;
		if (!expiry_only(w, t))
			return 0;
		step_to(w, t);
	}
	if (to > w->now)
		set_now(w, to);
	return 1;
}

void hwt_wheel_collect(struct hwt_wheel *w, struct hwt_link *into)
{
	uint32_t slot, heads = (uint32_t)w->levels * 2 << w->bits;
	unsigned i;
	struct hwt_link *l;
	hwt_list_splice(into, &w->due); /* first: a host that can call only some of them calls these */
	for (slot = 0; slot < heads; slot++)
		hwt_list_splice(into, &w->slots[slot]);
	for (l = into->next; l != into; l = l->next)
		hwt_container_of(l, struct hwt_node, link)->slot = HWT_SLOT_NONE;
	for (i = 0; i < w->levels * 2; i++)
		w->summary[i] = 0;
	for (i = 0; i < w->levels * 2 * w->words; i++)
		w->occ[i] = 0;
	for (i = 0; i < upper_slots(w); i++)
		w->least[i] = UINT64_MAX;
	for (i = 0; i < w->levels; i++)
		w->jobs[i].src = NO_SLOT;
}

/* ---- invariant checker ------------------------------------------------- */

/* Is node n where the placement rule (or its level's job) says? */
static const char *check_place(const struct hwt_wheel *w, const struct hwt_node *n, uint32_t slot)
{
	unsigned ring = slot >> w->bits, lvl = ring / 2;
	unsigned next = (ring & 1) != w->cur[lvl];
	if (n->expires <= w->now)
		return "overdue node left in a slot";
	if (digit(w, n->expires, lvl) != (slot & slot_mask(w)))
		return "node in the wrong slot of its ring";
	if (lvl >= 1 && job_active(w, lvl) && w->jobs[lvl].src == slot) {
		if (block_of(w, n->expires, lvl) != block_of(w, w->now, lvl) + 1)
			return "node in a drain job that is not the next span";
		return NULL;
	}
	if (block_of(w, n->expires, lvl + 1) - block_of(w, w->now, lvl + 1) != next)
		return "node in the wrong ring (current or next block)";
	if (lvl >= 1 && block_of(w, n->expires, lvl) - block_of(w, w->now, lvl) < 2)
		return "node left at too high a level";
	return NULL;
}

static const char *check_slot(const struct hwt_wheel *w, uint32_t slot)
{
	const struct hwt_link *head = &w->slots[slot], *l;
	unsigned ring = slot >> w->bits;
	uint32_t idx = slot & slot_mask(w);
	const char *err;
	int bit = (int)((w->occ[ring * w->words + (idx >> 6)] >> (idx & 63)) & 1);
	if (bit != !hwt_list_empty(head))
		return "occupancy bit disagrees with slot list";
	for (l = head->next; l != head; l = l->next) {
		const struct hwt_node *n = hwt_container_of(l, struct hwt_node, link);
		if (l->next->prev != l || l->prev->next != l)
			return "broken links in a slot";
		if (n->slot != slot)
			return "node records the wrong slot";
		if (ring >= 2 && n->expires < *least_of(w, slot))
			return "a node expires before its slot's least";
		if ((err = check_place(w, n, slot)))
			return err;
	}
	return NULL;
}

static const char *check_summary(const struct hwt_wheel *w, unsigned ring)
{
	unsigned word;
	for (word = 0; word < w->words; word++) {
		int any = w->occ[ring * w->words + word] != 0;
		if (any != (int)((w->summary[ring] >> word) & 1))
			return "summary bit disagrees with occupancy word";
	}
	return NULL;
}

static const char *check_jobs(const struct hwt_wheel *w)
{
	unsigned lvl;
	for (lvl = 1; lvl < w->levels; lvl++) {
		if (!job_active(w, lvl))
			continue;
		if (w->jobs[lvl].deadline <= w->now)
			return "a drain job outlived its deadline";
		if ((w->jobs[lvl].src >> w->bits) / 2 != lvl)
			return "a drain job drains the wrong level";
	}
	return NULL;
}

/* Walks the occupied slots only (found through the bitmaps), so it is cheap
 * enough to run after every operation. (A node in a slot whose bit is clear
 * is not seen here; the model test finds it lost when it comes due.) */
const char *hwt_wheel_check(const struct hwt_wheel *w)
{
	const struct hwt_link *l;
	const char *err;
	unsigned ring;
	uint32_t idx;
	for (ring = 0; ring < w->levels * 2; ring++)
		if ((err = check_summary(w, ring)))
			return err;
	if ((err = check_jobs(w)))
		return err;
	for (ring = 0; ring < w->levels * 2; ring++)
		for (idx = first_from(w, ring, 0); idx != NO_SLOT; idx = first_from(w, ring, idx + 1))
			if ((err = check_slot(w, slot_of(w, ring, idx))))
				return err;
	for (l = w->due.next; l != &w->due; l = l->next) {
		const struct hwt_node *n = hwt_container_of(l, struct hwt_node, link);
		if (n->slot == HWT_SLOT_NONE || !is_due(w, n))
			return "bad node in the due list";
	}
	return NULL;
}
