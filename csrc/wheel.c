/*
 * wheel.c: the hierarchical timing wheel (see wheel.h for the layout).
 *
 * Invariant: a node in level l, slot s agrees with `now` on every digit above
 * l and has digit l == s > digit l of now. Its slot is therefore reached when
 * `now` first has digit l == s and zeros below: the slot's trigger tick. At
 * that tick the slot is emptied; each node is either due or re-placed, always
 * at a lower level than before.
 */
#include <errno.h>
#include <stdlib.h>
#include "wheel.h"

#if defined(__GNUC__) || defined(__clang__)
static unsigned lowest_bit(uint64_t x) { return (unsigned)__builtin_ctzll(x); }
static unsigned highest_bit(uint64_t x) { return 63u - (unsigned)__builtin_clzll(x); }
#else
static unsigned lowest_bit(uint64_t x)
{
	unsigned i = 0;
	while (!(x & 1)) { x >>= 1; i++; }
	return i;
}
static unsigned highest_bit(uint64_t x)
{
	unsigned i = 0;
	while (x >>= 1) i++;
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

static uint64_t slot_mask(const struct hwt_wheel *w)
{
	return (UINT64_C(1) << w->bits) - 1;
}

/* Level at which a node expiring at `expires` (> now) belongs. */
static unsigned level_of(const struct hwt_wheel *w, uint64_t expires)
{
	return highest_bit(expires ^ w->now) / w->bits;
}

/* Ticks above level `lvl`'s digit, taken from `now` (0 for the top level). */
static uint64_t high_part(const struct hwt_wheel *w, unsigned lvl)
{
	unsigned shift = (lvl + 1) * w->bits;
	if (shift >= 64)
		return 0;
	return w->now & ~((UINT64_C(1) << shift) - 1);
}

/* ---- occupancy bitmaps ------------------------------------------------- */

static void mark(struct hwt_wheel *w, unsigned lvl, uint32_t idx)
{
	unsigned word = idx >> 6;
	w->occ[lvl * w->words + word] |= UINT64_C(1) << (idx & 63);
	w->summary[lvl] |= UINT64_C(1) << word;
}

static void unmark(struct hwt_wheel *w, unsigned lvl, uint32_t idx)
{
	unsigned word = idx >> 6;
	uint64_t *o = &w->occ[lvl * w->words + word];
	*o &= ~(UINT64_C(1) << (idx & 63));
	if (!*o)
		w->summary[lvl] &= ~(UINT64_C(1) << word);
}

/* Lowest occupied slot of level `lvl`; the level must not be empty. */
static uint32_t first_slot(const struct hwt_wheel *w, unsigned lvl)
{
	unsigned word = lowest_bit(w->summary[lvl]);
	return (uint32_t)(word * 64 + lowest_bit(w->occ[lvl * w->words + word]));
}

/* ---- life cycle -------------------------------------------------------- */

int hwt_wheel_init(struct hwt_wheel *w, unsigned bits)
{
	size_t heads, i;
	w->now = 0;
	w->bits = bits;
	w->levels = (64 + bits - 1) / bits;
	w->words = bits >= 6 ? 1u << (bits - 6) : 1;
	w->count = 0;
	heads = (size_t)w->levels << bits;
	w->slots = malloc(heads * sizeof *w->slots);
	w->occ = calloc((size_t)w->levels * w->words, sizeof *w->occ);
	w->summary = calloc(w->levels, sizeof *w->summary);
	if (!w->slots || !w->occ || !w->summary) {
		hwt_wheel_free(w);
		return ENOMEM;
	}
	for (i = 0; i < heads; i++)
		hwt_list_init(&w->slots[i]);
	hwt_list_init(&w->due);
	return 0;
}

void hwt_wheel_free(struct hwt_wheel *w)
{
	free(w->slots);
	free(w->occ);
	free(w->summary);
	w->slots = NULL;
	w->occ = w->summary = NULL;
}

void hwt_node_init(struct hwt_node *n)
{
	hwt_list_init(&n->link);
	n->expires = 0;
	n->slot = HWT_SLOT_NONE;
}

/* ---- add, delete ------------------------------------------------------- */

static void make_due(struct hwt_wheel *w, struct hwt_node *n)
{
	n->slot = HWT_SLOT_DUE;
	hwt_list_push(&w->due, &n->link);
}

/* Put `n` (expires > now) into its slot. */
static void place(struct hwt_wheel *w, struct hwt_node *n)
{
	unsigned lvl = level_of(w, n->expires);
	uint32_t idx = (uint32_t)((n->expires >> (lvl * w->bits)) & slot_mask(w));
	n->slot = (lvl << w->bits) | idx;
	hwt_list_push(&w->slots[n->slot], &n->link);
	mark(w, lvl, idx);
	w->count++;
}

void hwt_wheel_add(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires)
{
	n->expires = expires;
	if (expires <= w->now)
		make_due(w, n);
	else
		place(w, n);
}

void hwt_wheel_del(struct hwt_wheel *w, struct hwt_node *n)
{
	uint32_t slot = n->slot;
	if (slot == HWT_SLOT_NONE)
		return;
	hwt_list_unlink(&n->link);
	n->slot = HWT_SLOT_NONE;
	if (slot == HWT_SLOT_DUE)
		return;
	w->count--;
	if (hwt_list_empty(&w->slots[slot]))
		unmark(w, slot >> w->bits, slot & (uint32_t)slot_mask(w));
}

/* ---- advancing ----------------------------------------------------------- */

/* Next trigger tick over all levels; sets lvl_out, idx_out to its slot. */
static uint64_t next_trigger(const struct hwt_wheel *w, unsigned *lvl_out,
			     uint32_t *idx_out)
{
	uint64_t best = UINT64_MAX;
	unsigned lvl;
	for (lvl = 0; lvl < w->levels; lvl++) {
		uint32_t idx;
		uint64_t t;
		if (!w->summary[lvl])
			continue;
		idx = first_slot(w, lvl);
		t = high_part(w, lvl) | ((uint64_t)idx << (lvl * w->bits));
		if (t < best) {
			best = t;
			*lvl_out = lvl;
			*idx_out = idx;
		}
	}
	return best;
}

/* Empty one slot at its trigger tick: each node is now due or moves down. */
static void cascade(struct hwt_wheel *w, unsigned lvl, uint32_t idx)
{
	struct hwt_link batch, *l;
	hwt_list_init(&batch);
	hwt_list_splice(&batch, &w->slots[(lvl << w->bits) | idx]);
	unmark(w, lvl, idx);
	while (!hwt_list_empty(&batch)) {
		l = batch.next;
		hwt_list_unlink(l);
		w->count--;
		hwt_wheel_add(w, hwt_container_of(l, struct hwt_node, link),
			      hwt_container_of(l, struct hwt_node, link)->expires);
	}
}

void hwt_wheel_advance(struct hwt_wheel *w, uint64_t to)
{
	unsigned lvl = 0;
	uint32_t idx = 0;
	while (w->count) {
		uint64_t t = next_trigger(w, &lvl, &idx);
		if (t > to)
			break;
		w->now = t;
		cascade(w, lvl, idx);
	}
	if (to > w->now)
		w->now = to;
}

uint64_t hwt_wheel_next(const struct hwt_wheel *w)
{
	unsigned lvl;
	uint32_t idx;
	if (!w->count)
		return UINT64_MAX;
	return next_trigger(w, &lvl, &idx);
}

void hwt_wheel_collect(struct hwt_wheel *w, struct hwt_link *into)
{
	uint32_t slot, heads = (uint32_t)w->levels << w->bits;
	struct hwt_link *l;
	for (slot = 0; slot < heads; slot++)
		hwt_list_splice(into, &w->slots[slot]);
	hwt_list_splice(into, &w->due);
	for (l = into->next; l != into; l = l->next)
		hwt_container_of(l, struct hwt_node, link)->slot = HWT_SLOT_NONE;
	for (slot = 0; slot < w->levels; slot++)
		w->summary[slot] = 0;
	for (slot = 0; slot < w->levels * w->words; slot++)
		w->occ[slot] = 0;
	w->count = 0;
}

/* ---- invariant checker ------------------------------------------------- */

static const char *check_slot(const struct hwt_wheel *w, uint32_t slot,
			      uint64_t *count)
{
	const struct hwt_link *head = &w->slots[slot], *l;
	unsigned lvl = slot >> w->bits;
	uint32_t idx = slot & (uint32_t)slot_mask(w);
	int bit = (int)((w->occ[lvl * w->words + (idx >> 6)] >> (idx & 63)) & 1);
	if (bit != !hwt_list_empty(head))
		return "occupancy bit disagrees with slot list";
	for (l = head->next; l != head; l = l->next) {
		const struct hwt_node *n = hwt_container_of(l, struct hwt_node, link);
		if (l->next->prev != l || l->prev->next != l)
			return "broken links in a slot";
		if (n->slot != slot)
			return "node records the wrong slot";
		if (n->expires <= w->now)
			return "overdue node left in a slot";
		if (level_of(w, n->expires) != lvl)
			return "node at the wrong level";
		if (((n->expires >> (lvl * w->bits)) & slot_mask(w)) != idx)
			return "node in the wrong slot of its level";
		(*count)++;
	}
	return NULL;
}

static const char *check_summary(const struct hwt_wheel *w, unsigned lvl)
{
	unsigned word;
	for (word = 0; word < w->words; word++) {
		int any = w->occ[lvl * w->words + word] != 0;
		if (any != (int)((w->summary[lvl] >> word) & 1))
			return "summary bit disagrees with occupancy word";
	}
	return NULL;
}

const char *hwt_wheel_check(const struct hwt_wheel *w)
{
	uint64_t count = 0;
	uint32_t slot, heads = (uint32_t)w->levels << w->bits;
	const struct hwt_link *l;
	const char *err;
	unsigned lvl;
	for (lvl = 0; lvl < w->levels; lvl++)
		if ((err = check_summary(w, lvl)))
			return err;
	for (slot = 0; slot < heads; slot++)
		if ((err = check_slot(w, slot, &count)))
			return err;
	if (count != w->count)
		return "node count disagrees with the slots";
	for (l = w->due.next; l != &w->due; l = l->next) {
		const struct hwt_node *n = hwt_container_of(l, struct hwt_node, link);
		if (n->slot != HWT_SLOT_DUE || n->expires > w->now)
			return "bad node in the due list";
	}
	return NULL;
}
