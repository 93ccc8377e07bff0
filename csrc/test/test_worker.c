/*
 * test_worker.c: the host's side of a worker, with no thread started, so
 * that what the host does itself is seen apart from what the thread does.
 *
 * A host that wakes at a deadline takes what is due by its clock reading
 * without waiting for the worker (level-0 expiries only); anything that needs
 * the worker (entering a span, draining a level) is left to it.
 *
 * usage: test_worker
 */
#include <stdio.h>
#include <stdlib.h>
#include "../clock.h"
#include "../worker.h"

#define MS INT64_C(1000000)

static int failures;

static void expect(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "test_worker: FAIL: %s\n", what);
		failures++;
	}
}

static int taken(struct hwt_link *into, struct hwt_node *n)
{
	struct hwt_link *l;
	for (l = into->next; l != into; l = l->next)
		if (l == &n->link)
			return 1;
	return 0;
}

/* A node due 3 ticks ahead is taken by the host once its clock is there,
 * and not a tick before. */
static void host_takes_a_level0_expiry(void)
{
	struct hwt_worker w;
	struct hwt_node n;
	struct hwt_link into;
	int64_t now;
	uint64_t tick;
	expect(hwt_worker_init(&w, MS, 4) == 0, "init");
	hwt_node_init(&n);
	hwt_list_init(&into);
	now = w.origin + MS / 2; /* inside tick 0: 3 ticks ahead stays in level 0's block */
	tick = hwt_worker_tick_at(&w, now + 2 * MS);
	hwt_worker_add(&w, &n, tick, now);
	hwt_worker_take(&w, &into, hwt_worker_time_of(&w, tick) - 1);
	expect(!taken(&into, &n), "taken before its tick");
	hwt_worker_take(&w, &into, hwt_worker_time_of(&w, tick));
	expect(taken(&into, &n), "not taken at its tick with the worker asleep");
	hwt_worker_destroy(&w);
}

/* A node in level 1 needs a span entered and a drain: the host leaves it. */
static void host_leaves_the_worker_its_work(void)
{
	struct hwt_worker w;
	struct hwt_node n;
	struct hwt_link into;
	uint64_t tick = 40; /* level 0 has 16 slots: tick 40 sits in level 1 */
	expect(hwt_worker_init(&w, MS, 4) == 0, "init");
	hwt_node_init(&n);
	hwt_list_init(&into);
	hwt_worker_add(&w, &n, tick, w.origin);
	hwt_worker_take(&w, &into, hwt_worker_time_of(&w, tick));
	expect(!taken(&into, &n), "the host entered a span (the worker's work)");
	expect(n.slot != HWT_SLOT_DUE, "the host drained a level (the worker's work)");
	hwt_wheel_advance(&w.wheel, tick); /* what the worker does on waking */
	hwt_worker_take(&w, &into, hwt_worker_time_of(&w, tick));
	expect(taken(&into, &n), "not taken once the worker advanced");
	hwt_worker_destroy(&w);
}

/* tick_at is the first tick at or after a time, for every tick length and
 * span: it agrees with ceil((t - origin) / tick) and with time_of both ways. */
static void tick_arithmetic_is_exact(void)
{
	static const int64_t ticks[] = { 1, 7, 1000, 999983, 1000000, 1000000007, INT64_C(3600000000000) };
	uint64_t rng = 20261121;
	unsigned k, i;
	for (k = 0; k < sizeof ticks / sizeof ticks[0]; k++) {
		struct hwt_worker w;
		expect(hwt_worker_init(&w, ticks[k], 4) == 0, "init");
		for (i = 0; i < 200000; i++) {
			int64_t d;
			uint64_t want, got;
			rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
			/* spans from 1 ns to 2^62 ns, evenly over their bit lengths */
			d = (int64_t)((rng * UINT64_C(2685821657736338717)) >> (2 + (i % 62))) + 1;
			want = (uint64_t)((d + ticks[k] - 1) / ticks[k]);
			got = hwt_worker_tick_at(&w, w.origin + d);
			if (got != want) {
				expect(0, "tick_at disagrees with the division");
				break;
			}
			if (hwt_worker_time_of(&w, got) < w.origin + d ||
			    (got > 0 && hwt_worker_time_of(&w, got - 1) >= w.origin + d)) {
				expect(0, "tick_at is not the first tick at or after the time");
				break;
			}
		}
		hwt_worker_destroy(&w);
	}
}

int main(void)
{
	host_takes_a_level0_expiry();
	host_leaves_the_worker_its_work();
	tick_arithmetic_is_exact();
	printf("test_worker: the host's side of a worker\n%d passed, %d failed\n",
	       failures ? 0 : 3, failures);
	return failures != 0;
}
