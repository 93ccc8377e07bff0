/*
 * test_wheel.c: the wheel against a naive model, driven by fake ticks.
 *
 * The model is a plain array of expiry ticks and states. After every
 * operation the wheel's invariant checker runs (on every geometry), and after every advance the
 * due list must hold exactly the nodes whose expiry has been reached (none
 * early, none lost), and next() must be a lower bound on the next expiry.
 *
 * usage: test_wheel [operations-per-geometry] [seed]
 *
 * Built with -DHWT_FUZZ it is a libFuzzer target instead: the same
 * operations and checks, with the fuzzer's input as the source of choices.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../wheel.h"

#define NODES 512

/* TAKEN: taken from the due list by its owner, not yet run (as dispatch
 * holds it): still deletable and movable, and the wheel must know it is due. */
enum { OUT, IN_WHEEL, IN_DUE, TAKEN };

struct model {
	struct hwt_wheel w;
	struct hwt_node node[NODES];
	int state[NODES];
	struct hwt_link taken;
	uint64_t rng;
	const uint8_t *in; /* fuzzing: choices come from here */
	size_t in_len;
	unsigned long ops, fired;
	/* Expiries of nodes that left a slot above level 0, or moved within it:
	 * the only values hwt_wheel_next_expiry may name besides the least. */
	uint64_t *left;
	size_t nleft, cap;
};

static void note_left(struct model *m, int i)
{
	if (m->state[i] != IN_WHEEL || m->node[i].slot >> m->w.bits < 2)
		return;
	if (m->nleft == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 1024;
		m->left = realloc(m->left, m->cap * sizeof *m->left);
		if (!m->left)
			abort();
	}
	m->left[m->nleft++] = m->node[i].expires;
}

static uint64_t rnd(struct model *m)
{ /* xorshift64*: deterministic for a given seed */
	if (m->in) { /* fuzzing: up to 8 bytes of input; 0 once it is used up */
		uint64_t v = 0;
		int i;
		for (i = 0; i < 8 && m->in_len; i++, m->in_len--)
			v = v << 8 | *m->in++;
		return v;
	}
	m->rng ^= m->rng >> 12;
	m->rng ^= m->rng << 25;
	m->rng ^= m->rng >> 27;
	return m->rng * UINT64_C(2685821657736338717);
}

static void fail(struct model *m, const char *what)
{
	fprintf(stderr, "test_wheel: FAIL after %lu ops (bits %u, now %" PRIu64 "): %s\n",
		m->ops, m->w.bits, m->w.now, what);
	abort();
}

/* A delay drawn across every level: tiny, one level's span, or huge. */
static uint64_t random_delay(struct model *m)
{
	unsigned shift = (unsigned)(rnd(m) % 62);
	switch (rnd(m) % 4) {
	case 0: return rnd(m) % 4;
	case 1: return rnd(m) % ((uint64_t)1 << (m->w.bits * (1 + rnd(m) % 3) % 62));
	default: return rnd(m) & (((uint64_t)1 << shift) - 1);
	}
}

static int op_add(struct model *m, int i)
{
	uint64_t room = HWT_TICK_MAX - m->w.now, delay = random_delay(m);
	if (m->state[i] != OUT)
		return 0;
	if (delay > room)
		delay = room;
	hwt_wheel_add(&m->w, &m->node[i], m->w.now + delay);
	m->state[i] = delay == 0 ? IN_DUE : IN_WHEEL;
	if ((m->node[i].slot == HWT_SLOT_DUE) != (delay == 0))
		fail(m, "add put a node in the wrong place");
	return 1;
}

/* A deleted node is detached (wheel.h): a second del is a no-op, and
 * nothing of the wheel's is left in it. */
static void op_del(struct model *m, int i)
{
	note_left(m, i);
	hwt_wheel_del(&m->w, &m->node[i]);
	if (m->node[i].slot != HWT_SLOT_NONE)
		fail(m, "a deleted node still records a slot");
	m->state[i] = OUT;
}

/* After an advance: exactly the reached nodes are due; the owner takes them
 * (it runs them later, in op_run, unless they are deleted or moved first). */
static void verify_due(struct model *m)
{
	struct hwt_link *l;
	char in_due[NODES] = { 0 };
	int i;
	for (l = m->w.due.next; l != &m->w.due; l = l->next)
		in_due[hwt_container_of(l, struct hwt_node, link) - m->node] = 1;
	for (i = 0; i < NODES; i++)
		if (m->state[i] == IN_WHEEL && m->node[i].expires <= m->w.now) {
			if (!in_due[i])
				fail(m, "a reached node was not made due (lost)");
			m->state[i] = IN_DUE;
		}
	for (l = m->w.due.next; l != &m->w.due; l = l->next) {
		i = (int)(hwt_container_of(l, struct hwt_node, link) - m->node);
		if (m->state[i] != IN_DUE || m->node[i].expires > m->w.now)
			fail(m, "a node was made due early or twice");
		m->state[i] = TAKEN;
	}
	hwt_list_splice(&m->taken, &m->w.due);
}

/* The owner runs what it took: each node leaves its list, detached. */
static void op_run(struct model *m)
{
	while (!hwt_list_empty(&m->taken)) {
		struct hwt_node *n = hwt_container_of(m->taken.next, struct hwt_node, link);
		int i = (int)(n - m->node);
		if (m->state[i] != TAKEN)
			fail(m, "the taken list holds a node not taken");
		hwt_list_unlink(&n->link);
		n->slot = HWT_SLOT_NONE;
		m->state[i] = OUT;
		m->fired++;
	}
}

static int needs_driver(const struct hwt_wheel *w, uint64_t t);

/* A host that expires level 0 itself (host_timed) wakes the driver only
 * at next_hard(): never sooner than the wheel's next event, never in the
 * past, and never later than an event that is the driver's. */
static void verify_next_hard(struct model *m, uint64_t next)
{
	uint64_t hard = hwt_wheel_next_hard(&m->w);
	if (hard < next)
		fail(m, "next_hard() is sooner than next()");
	if (hard != UINT64_MAX && hard <= m->w.now)
		fail(m, "next_hard() is not in the future");
	if (next != UINT64_MAX && needs_driver(&m->w, next) && hard != next)
		fail(m, "next_hard() is not the next event, which is the driver's");
}

/* What a host waits for: never later than the earliest expiry, never
 * sooner than the wheel's next event, and ahead of now. The earliest expiry
 * itself, unless a node left a slot above level 0 that still holds others:
 * then possibly that node's expiry, and never before the start of the
 * earliest node's slot. */
static void verify_next_expiry(struct model *m, uint64_t next, uint64_t least, int high)
{
	uint64_t e = hwt_wheel_next_expiry(&m->w), start = UINT64_MAX, t;
	unsigned lvl;
	size_t k;
	int i;
	for (i = 0; i < NODES; i++)
		if (m->state[i] == IN_WHEEL) {
			lvl = (m->node[i].slot >> m->w.bits) / 2;
			t = m->node[i].expires & ~((UINT64_C(1) << (lvl * m->w.bits)) - 1);
			if (t < start)
				start = t;
		}
	if (e < start)
		fail(m, "next_expiry() is before the earliest node's slot begins");
	for (k = 0; e != least && k < m->nleft && m->left[k] != e; k++)
		;
	if (e != least && k == m->nleft)
		fail(m, "next_expiry() is neither the earliest expiry nor one a node left behind");
	if (e > least)
		fail(m, "next_expiry() is later than the earliest expiry");
	if (e < next)
		fail(m, "next_expiry() is sooner than next()");
	if (!high && e != least)
		fail(m, "next_expiry() is not the earliest expiry though every node is at level 0");
	if (least != UINT64_MAX && e <= m->w.now)
		fail(m, "next_expiry() is not in the future");
}

/* next_lone(): the earliest expiry is one level-0 node's alone. Said of
 * it, the earliest is at level 0 with no other node at its tick; not said
 * while every node is at level 0, either none is pending or two share it. */
static void verify_next_lone(struct model *m, uint64_t least, int high)
{
	int lone = hwt_wheel_next_lone(&m->w), i, at = 0, low = 0;
	for (i = 0; i < NODES; i++)
		if (m->state[i] == IN_WHEEL && m->node[i].expires == least) {
			at++;
			low += m->node[i].slot >> m->w.bits < 2;
		}
	if (lone && !(at == 1 && low == 1))
		fail(m, "next_lone() said of an expiry not one level-0 node's alone");
	if (!lone && !high && at == 1)
		fail(m, "next_lone() did not say it of a lone level-0 expiry");
}

static void verify_next(struct model *m)
{
	uint64_t next = hwt_wheel_next(&m->w), least = UINT64_MAX;
	int i, high = 0;
	unsigned lvl;
	for (i = 0; i < NODES; i++)
		if (m->state[i] == IN_WHEEL) {
			if (m->node[i].expires < least)
				least = m->node[i].expires;
			high |= m->node[i].slot >> m->w.bits >= 2; /* above level 0 */
		}
	for (lvl = 1; lvl < m->w.levels; lvl++)
		high |= m->w.jobs[lvl].src != UINT32_MAX;
	if (next > least)
		fail(m, "next() is later than the earliest expiry");
	/* With every node at level 0 the wheel has nothing to do before the
	 * earliest expiry: not even at a block's end, where level 0's rings swap
	 * (a host told to wake there would find nothing due). */
	if (!high && next != least)
		fail(m, "next() is not the earliest expiry though every node is at level 0");
	if (least != UINT64_MAX && next <= m->w.now)
		fail(m, "next() is not in the future");
	verify_next_hard(m, next);
	verify_next_expiry(m, next, least, high);
	verify_next_lone(m, least, high);
}

static void op_advance(struct model *m)
{
	uint64_t next = hwt_wheel_next(&m->w), to = m->w.now;
	switch (rnd(m) % 4) {
	case 0: to += rnd(m) % 3; break;
	case 1: if (next != UINT64_MAX) to = next; break;
	case 2: if (next != UINT64_MAX && next > to + 1) to = next - 1; break;
	default: to += random_delay(m); break;
	}
	if (to > HWT_TICK_MAX)
		to = HWT_TICK_MAX;
	hwt_wheel_advance(&m->w, to);
	if (m->w.now != to)
		fail(m, "advance did not reach its target");
	verify_due(m);
}

/* The driver's share of the event at t: a drain job due, a level above 1
 * entering a span, or level 1 entering one that starts a job (the slot of
 * its next span holds nodes). Level 1 entering an empty one only swaps
 * level 0's rings: the host's. */
static int needs_driver(const struct hwt_wheel *w, uint64_t t)
{
	unsigned lvl, bits = w->bits;
	uint64_t u1 = UINT64_C(1) << bits;
	uint32_t mask = (uint32_t)u1 - 1, d, src;
	for (lvl = 1; lvl < w->levels; lvl++)
		if (w->jobs[lvl].src != UINT32_MAX && w->jobs[lvl].deadline <= t)
			return 1;
	if ((t & (u1 - 1)) != 0)
		return 0;
	if (w->levels > 2 && (t & ((u1 << bits) - 1)) == 0)
		return 1;
	d = (uint32_t)(t >> bits & mask) + 1;
	src = d <= mask ? (uint32_t)(2 + w->cur[1]) << bits | d : (uint32_t)(2 + (w->cur[1] ^ 1)) << bits;
	return !hwt_list_empty(&w->slots[src]);
}

/* The host's cheap advance: it reaches its target or stops right before an
 * event that is the driver's; either way what it reached is due. */
static void op_expire(struct model *m)
{
	uint64_t next = hwt_wheel_next(&m->w), to = m->w.now, from = m->w.now;
	unsigned lvl, levels = m->w.levels;
	uint8_t cur[64];
	struct hwt_job jobs[64];
	if (rnd(m) % 2)
		to += rnd(m) % 3;
	else if (next != UINT64_MAX)
		to = next + rnd(m) % ((uint64_t)1 << m->w.bits);
	if (to > HWT_TICK_MAX)
		to = HWT_TICK_MAX;
	memcpy(cur, m->w.cur, levels * sizeof cur[0]);
	memcpy(jobs, m->w.jobs, levels * sizeof jobs[0]);
	if (hwt_wheel_expire(&m->w, to)) {
		if (m->w.now != to)
			fail(m, "expire said it reached its target and did not");
	} else {
		next = hwt_wheel_next(&m->w);
		if (m->w.now >= to || next > to || !needs_driver(&m->w, next))
			fail(m, "expire stopped short without a driver's event in the way");
	}
	/* Level 0's rings swap on the way into a new block (hwt_wheel_check
	 * finds a wrong swap: nodes then sit in the wrong ring). */
	if (from >> m->w.bits != m->w.now >> m->w.bits)
		cur[0] = m->w.cur[0];
	for (lvl = 0; lvl < levels; lvl++)
		if (cur[lvl] != m->w.cur[lvl] || (lvl && (jobs[lvl].src != m->w.jobs[lvl].src ||
							    jobs[lvl].deadline != m->w.jobs[lvl].deadline)))
			fail(m, "expire did the driver's work (entered a span or drained)");
	verify_due(m);
}

/* Re-arm a node (pending or not) to a new expiry, as t:reset does. */
static void op_move(struct model *m, int i)
{
	uint64_t room = HWT_TICK_MAX - m->w.now, delay = 1 + random_delay(m);
	uint32_t slot = m->node[i].slot;
	unsigned lvl = slot < HWT_SLOT_DUE ? (slot >> m->w.bits) / 2 : 0;
	if (delay > room)
		delay = room;
	if (lvl && m->state[i] == IN_WHEEL && rnd(m) % 2) { /* within its slot, sooner or later */
		uint64_t u = UINT64_C(1) << (lvl * m->w.bits), to = (m->node[i].expires & ~(u - 1)) + rnd(m) % u;
		if (to > m->w.now)
			delay = to - m->w.now;
	}
	/* (in a slot, not due, and no drain job's source: moved within that slot, it stays) */
	int may_stay = slot < HWT_SLOT_DUE && m->node[i].expires > m->w.now &&
		       m->w.jobs[(slot >> m->w.bits) / 2].src != slot;
	int kept;
	note_left(m, i);
	kept = hwt_wheel_move(&m->w, &m->node[i], m->w.now + delay);
	/* 1 only where the node stayed in its slot (its expiry alone changed) */
	if (kept != 0 && !(kept == 1 && m->node[i].slot == slot && m->node[i].expires == m->w.now + delay))
		fail(m, "move said the node stayed in its slot, and it did not, or said neither 0 nor 1");
	/* and 1 wherever it could: a node that ends in the slot it was in was not relinked */
	if (kept == 0 && may_stay && m->node[i].slot == slot)
		fail(m, "move relinked a node into the slot it was in (it says 0 where it kept the node)");
	m->state[i] = m->node[i].slot == HWT_SLOT_DUE ? IN_DUE : IN_WHEEL;
}

static int any_job(const struct model *m)
{
	unsigned lvl;
	for (lvl = 1; lvl < m->w.levels; lvl++)
		if (m->w.jobs[lvl].src != UINT32_MAX) /* (wheel.c: NO_SLOT) */
			return 1;
	return 0;
}

/* Drain work in small steps, as the worker does between expiries: a step
 * with a budget moves some nodes of an active job, never more than the
 * budget, and says whether work is left (a step that moved nothing and said
 * "more" would keep the worker spinning until the deadline). */
static void op_work(struct model *m)
{
	unsigned budget = (unsigned)(rnd(m) % 64), moved = 0;
	uint32_t before[NODES];
	int i, active = any_job(m), left;
	for (i = 0; i < NODES; i++)
		before[i] = m->node[i].slot;
	left = hwt_wheel_work(&m->w, budget);
	for (i = 0; i < NODES; i++)
		moved += m->node[i].slot != before[i];
	if (moved > budget)
		fail(m, "a step of drain work moved more nodes than its budget");
	if (active && budget > 0 && moved == 0)
		fail(m, "a step of drain work with a budget moved nothing");
	if (left != any_job(m))
		fail(m, "drain work said wrongly whether work is left");
}

/* For a node just added: alert() is in the future, and if the node brought
 * the wheel's next event forward, alert() is that event: not later (the
 * worker would sleep through it), not earlier (it would wake for nothing). */
static void verify_alert(struct model *m, int i)
{
	uint64_t alert, with, without;
	if (m->node[i].slot >= HWT_SLOT_DUE)
		return;
	alert = hwt_wheel_alert(&m->w, &m->node[i]);
	if (alert <= m->w.now)
		fail(m, "alert() is not in the future");
	with = hwt_wheel_next(&m->w);
	hwt_wheel_del(&m->w, &m->node[i]);
	without = hwt_wheel_next(&m->w);
	hwt_wheel_add(&m->w, &m->node[i], m->node[i].expires);
	if (with < without && alert != with)
		fail(m, "alert() is not the event the new node brought");
}

static void run(struct model *m, unsigned bits, unsigned long nops)
{
	const char *err;
	int i;
	if (hwt_wheel_init(&m->w, bits))
		fail(m, "out of memory");
	for (i = 0; i < NODES; i++) {
		hwt_node_init(&m->node[i]);
		m->state[i] = OUT;
	}
	hwt_list_init(&m->taken);
	m->nleft = 0;
	for (m->ops = 0; m->ops < nops && !(m->in && !m->in_len); m->ops++) {
		uint64_t r = rnd(m) % 15;
		i = (int)(rnd(m) % NODES);
		if (r < 5) { if (op_add(m, i)) verify_alert(m, i); }
		else if (r < 7) op_del(m, i);
		else if (r == 12) op_move(m, i);
		else if (r == 13) op_expire(m);
		else if (r == 14) op_run(m);
		else if (r < 9) op_work(m);
		else op_advance(m);
		if ((err = hwt_wheel_check(&m->w)))
			fail(m, err);
		verify_next(m);
	}
	hwt_wheel_free(&m->w);
}

#if defined(HWT_FUZZ)
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct model m;
	if (size < 1)
		return 0;
	m.in = data + 1;
	m.in_len = size - 1;
	run(&m, 1 + data[0] % HWT_WHEEL_MAX_BITS, (unsigned long)-1);
	return 0;
}
#else
/* The list primitives: a splice onto the tail (hwt_list_splice) or the head
 * (hwt_list_splice_front, how dispatch puts back what its budget left over)
 * of a list, empty or not, leaves a well formed list in the order said,
 * walked forward and back, and `from` empty. The model above splices only
 * onto the tail, and a bad head splice goes unseen in most specs: dispatch's
 * next splice rewrites the last node's link (only a walk in between, as
 * stats().due makes, would loop), so the head splice is checked here. */
static void check_list(const char *what, struct hwt_link *l, struct hwt_link *const *want, int n)
{
	struct hwt_link *p = l;
	int i;
	for (i = 0; i < n; i++) {
		if (p->next->prev != p || p->next != want[i]) {
			fprintf(stderr, "test_wheel: FAIL: %s: node %d is not where it belongs\n", what, i);
			abort();
		}
		p = p->next;
	}
	if (p->next != l || l->prev != p) {
		fprintf(stderr, "test_wheel: FAIL: %s: the last node and the head do not point at each other\n", what);
		abort();
	}
}

static void test_splices(void)
{
	struct hwt_link to, from, a, b, c, d;
	int front, filled;
	for (front = 0; front < 2; front++) {
		for (filled = 0; filled < 2; filled++) {
			struct hwt_link *const tail[] = { &c, &d, &a, &b }, *const head[] = { &a, &b, &c, &d };
			char what[64];
			snprintf(what, sizeof what, "splice%s onto %s list", front ? "_front" : "",
				 filled ? "a two-node" : "an empty");
			hwt_list_init(&to);
			hwt_list_init(&from);
			if (filled) {
				hwt_list_push(&to, &c);
				hwt_list_push(&to, &d);
			}
			hwt_list_push(&from, &a);
			hwt_list_push(&from, &b);
			if (front)
				hwt_list_splice_front(&to, &from);
			else
				hwt_list_splice(&to, &from);
			if (filled)
				check_list(what, &to, front ? head : tail, 4);
			else
				check_list(what, &to, head, 2);
			check_list(what, &from, NULL, 0);
		}
	}
}

/* The checker the model leans on must look at every occupied slot: nodes
 * in three slots side by side, each in turn recording the wrong slot, are
 * each found. */
static void test_check_sees_every_slot(void)
{
	struct hwt_wheel w;
	struct hwt_node n[3];
	int i;
	if (hwt_wheel_init(&w, 2))
		abort();
	for (i = 0; i < 3; i++) {
		hwt_node_init(&n[i]);
		hwt_wheel_add(&w, &n[i], (uint64_t)i + 1);
	}
	if (hwt_wheel_check(&w)) {
		fprintf(stderr, "test_wheel: FAIL: check: a sound wheel reads as broken\n");
		abort();
	}
	for (i = 0; i < 3; i++) {
		uint32_t slot = n[i].slot;
		n[i].slot = n[(i + 1) % 3].slot;
		if (!hwt_wheel_check(&w)) {
			fprintf(stderr, "test_wheel: FAIL: check: node %d records the wrong slot, unseen\n", i);
			abort();
		}
		n[i].slot = slot;
	}
	hwt_wheel_free(&w);
}

/* Damage a sound wheel one way at a time: the checker names each, and reads
 * the wheel as sound again once it is undone (a checker that cannot fail
 * would pass the model test whatever the wheel did). */
static void expect_check(const struct hwt_wheel *w, const char *want, const char *what)
{
	const char *err = hwt_wheel_check(w);
	if (want ? !err || strcmp(err, want) : err != NULL) {
		fprintf(stderr, "test_wheel: FAIL: check: %s: got \"%s\", not \"%s\"\n", what,
			err ? err : "(sound)", want ? want : "(sound)");
		abort();
	}
}

static void test_check_names_each_damage(void)
{
	struct hwt_wheel w, w2;
	struct hwt_node a, b, c, d, e;
	struct hwt_link *saved;
	uint64_t x;
	if (hwt_wheel_init(&w, 2) || hwt_wheel_init(&w2, 2))
		abort();
	hwt_node_init(&a);
	hwt_node_init(&b);
	hwt_node_init(&c);
	hwt_node_init(&d);
	hwt_node_init(&e);
	hwt_wheel_add(&w, &a, 2); /* level 0, current ring, slot 2, with c */
	hwt_wheel_add(&w, &c, 2);
	hwt_wheel_add(&w, &b, 1);
	hwt_wheel_add(&w, &d, 0); /* due at once: the due list */
	expect_check(&w, NULL, "a sound wheel");

	w.occ[0] ^= UINT64_C(1) << 3; /* slot 3 of ring 0 is empty */
	expect_check(&w, "occupancy bit disagrees with slot list", "an empty slot's bit set");
	w.occ[0] ^= UINT64_C(1) << 3;
	w.summary[1] ^= 1; /* ring 1 is empty */
	expect_check(&w, "summary bit disagrees with occupancy word", "an empty ring's summary bit set");
	w.summary[1] ^= 1;

	saved = c.link.prev; /* a then c in slot 2 */
	c.link.prev = c.link.next;
	expect_check(&w, "broken links in a slot", "a back link that points elsewhere");
	c.link.prev = saved;

	x = a.expires;
	a.expires = w.now;
	expect_check(&w, "overdue node left in a slot", "a node due by now in a slot");
	a.expires = 3;
	expect_check(&w, "node in the wrong slot of its ring", "a node whose tick is another slot's");
	a.expires = 6; /* slot 2 of the next block */
	expect_check(&w, "node in the wrong ring (current or next block)", "a node of the next block in the current ring");
	a.expires = x;

	d.slot = HWT_SLOT_NONE;
	expect_check(&w, "bad node in the due list", "a node in the due list marked out of the wheel");
	d.slot = HWT_SLOT_DUE;
	expect_check(&w, NULL, "the wheel undone");

	hwt_wheel_add(&w2, &e, 12); /* level 1, three level-0 blocks ahead */
	expect_check(&w2, NULL, "a sound wheel with a level-1 node");
	w2.now = 8; /* (as if ticks passed without the wheel's moving it down) */
	expect_check(&w2, "node left at too high a level", "a level-1 node one block ahead");
	w2.now = 0;
	hwt_wheel_free(&w);
	hwt_wheel_free(&w2);
}

/* The checker names a drain job that outlived its deadline, and one that
 * drains a slot of another level: on a wheel walked tick by tick with nodes
 * spread over its levels, each job found under way is broken both ways in
 * turn, each named, and put back. */
static void test_check_sees_broken_jobs(void)
{
	enum { NN = 400 };
	static struct hwt_node n[NN];
	struct hwt_wheel w;
	uint64_t t;
	unsigned lvl, seen = 0;
	int i;
	if (hwt_wheel_init(&w, 2))
		abort();
	for (i = 0; i < NN; i++) {
		hwt_node_init(&n[i]);
		hwt_wheel_add(&w, &n[i], (uint64_t)i * 3 + 1);
	}
	for (t = 1; t < (uint64_t)NN * 3; t++) {
		if (!hwt_wheel_expire(&w, t))
			hwt_wheel_advance(&w, t);
		for (lvl = 1; lvl < w.levels; lvl++) {
			uint32_t src = w.jobs[lvl].src;
			if (src == UINT32_MAX) /* (wheel.c: NO_SLOT) */
				continue;
			seen++;
			uint64_t deadline = w.jobs[lvl].deadline;
			const char *err;
			w.jobs[lvl].deadline = w.now;
			err = hwt_wheel_check(&w);
			if (!err || strcmp(err, "a drain job outlived its deadline")) {
				fprintf(stderr, "test_wheel: FAIL: check: a level-%u drain job past its deadline, unseen\n", lvl);
				abort();
			}
			w.jobs[lvl].deadline = deadline;
			w.jobs[lvl].src = ((lvl + 1) * 2) << w.bits;
			err = hwt_wheel_check(&w);
			if (!err || strcmp(err, "a drain job drains the wrong level")) {
				fprintf(stderr, "test_wheel: FAIL: check: a level-%u drain job on another level's slot, unseen\n", lvl);
				abort();
			}
			w.jobs[lvl].src = src;
		}
		if (hwt_wheel_check(&w)) {
			fprintf(stderr, "test_wheel: FAIL: check: a sound wheel at tick %d reads as broken\n", (int)t);
			abort();
		}
		hwt_list_init(&w.due);
	}
	if (seen == 0) {
		fprintf(stderr, "test_wheel: FAIL: check: no drain job was ever under way\n");
		abort();
	}
	hwt_wheel_free(&w);
}

/* collect (a timer's stop) takes every node: one due, and one at each of
 * the next 200 ticks (level 0's both rings, and levels above), from each
 * of 64 starting ticks, so that each slot of the lower levels holds some at
 * one start or another. Each is taken once, marked out of the wheel, and the
 * wheel is left empty. */
static void test_collect_takes_every_node(void)
{
	enum { NN = 201 };
	static struct hwt_node n[NN];
	uint64_t start;
	for (start = 0; start < 64; start++) {
		struct hwt_wheel w;
		struct hwt_link all, *l;
		int i, got = 0;
		if (hwt_wheel_init(&w, 2))
			abort();
		hwt_wheel_advance(&w, start);
		for (i = 0; i < NN; i++) {
			hwt_node_init(&n[i]);
			n[i].owner_byte = 0; /* (the owner's: init leaves it) */
			if (i == 0)
				hwt_wheel_add_due(&w, &n[i], start);
			else
				hwt_wheel_add(&w, &n[i], start + (uint64_t)i);
		}
		hwt_list_init(&all);
		hwt_wheel_collect(&w, &all);
		for (l = all.next; l != &all; l = l->next) {
			struct hwt_node *x = hwt_container_of(l, struct hwt_node, link);
			if (x->slot != HWT_SLOT_NONE || x->owner_byte++) {
				fprintf(stderr, "test_wheel: FAIL: collect: node %d taken twice or still marked in\n",
					(int)(x - n));
				abort();
			}
			got++;
		}
		if (got != NN || hwt_wheel_next(&w) != UINT64_MAX || hwt_wheel_check(&w)) {
			fprintf(stderr, "test_wheel: FAIL: collect from tick %d took %d of %d nodes, or left the wheel "
				"unsound\n", (int)start, got, NN);
			abort();
		}
		hwt_wheel_free(&w);
	}
}

#include "count_blocks.h" /* this program's allocator: the blocks it holds */

/* hwt_wheel_free gives back every block init took, on every geometry. */
static void test_free_gives_back_all(void)
{
#if defined(__GLIBC__)
	long before = blocks_held();
	unsigned i;
	for (i = 0; i < 100; i++) {
		struct hwt_wheel w;
		if (hwt_wheel_init(&w, 1 + i % HWT_WHEEL_MAX_BITS))
			abort();
		hwt_wheel_free(&w);
	}
	if (blocks_held() != before) {
		fprintf(stderr, "test_wheel: FAIL: 100 wheels made and freed kept %ld blocks\n", blocks_held() - before);
		abort();
	}
#endif
}

int main(int argc, char **argv)
{
	static struct model m; /* large: keep it off the stack */
	static const unsigned geometries[] = { 1, 2, 3, 4, 6, 9, 12 };
	unsigned long nops = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
	unsigned g;
	m.rng = argc > 2 ? strtoull(argv[2], NULL, 10) : 0x9E3779B97F4A7C15u;
	if (!m.rng)
		m.rng = 1;
	test_splices();
	test_check_sees_every_slot();
	test_check_names_each_damage();
	test_check_sees_broken_jobs();
	test_collect_takes_every_node();
	test_free_gives_back_all();
	for (g = 0; g < sizeof geometries / sizeof *geometries; g++)
		run(&m, geometries[g], nops);
	free(m.left);
	printf("test_wheel: %lu ops on each of %u geometries, %lu expiries checked\n",
	       nops, g, m.fired);
	printf("1 passed, 0 failed\n");
	return 0;
}
#endif
