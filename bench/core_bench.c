/*
 * core_bench.c: the floor: W1 and W4 against the C core alone, no Lua.
 * Nodes are caller-owned (one array); delays in ticks of 1 ms, uniform in
 * [1 s, 60 s]. "wheel" is the bare wheel; "worker" adds the lock round that
 * every Lua-side schedule and cancel pays (the thread is not started, so the
 * lock is uncontended).
 *
 * usage: core_bench WORKLOAD [scale]     WORKLOAD: w1 | w4 | expire
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../csrc/clock.h"
#include "../csrc/worker.h"

static uint64_t rng = 20261121;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * UINT64_C(2685821657736338717);
}

static uint64_t *delays(size_t n)
{
	uint64_t *d = malloc(n * sizeof *d);
	size_t i;
	for (i = 0; i < n; i++)
		d[i] = 1000 + rnd() % 59001;
	return d;
}

static struct hwt_worker *new_worker(void)
{
	static struct hwt_worker w;
	if (hwt_worker_init(&w, 1000000, 9)) {
		fprintf(stderr, "core_bench: init failed\n");
		exit(1);
	}
	return &w;
}

static double w1_pass(struct hwt_worker *w, int locked, struct hwt_node *nodes,
		      const uint64_t *d, size_t n, double *cancel_ns)
{
	int64_t t0, t1, t2;
	size_t i;
	t0 = hwt_clock_ns();
	for (i = 0; i < n; i++)
		if (locked)
			hwt_worker_add(w, &nodes[i], w->wheel.now + d[i], hwt_worker_time_of(w, w->wheel.now));
		else
			hwt_wheel_add(&w->wheel, &nodes[i], w->wheel.now + d[i]);
	t1 = hwt_clock_ns();
	for (i = 0; i < n; i++)
		if (locked)
			hwt_worker_del(w, &nodes[i]);
		else
			hwt_wheel_del(&w->wheel, &nodes[i]);
	t2 = hwt_clock_ns();
	*cancel_ns = (double)(t2 - t1) / (double)n;
	return (double)(t1 - t0) / (double)n;
}

static void w1(double scale)
{
	size_t n = (size_t)(1000000 * scale);
	struct hwt_worker *w = new_worker();
	struct hwt_node *nodes = calloc(n, sizeof *nodes);
	uint64_t *d = delays(n);
	double s_wheel, c_wheel, s_lock, c_lock;
	(void)w1_pass(w, 0, nodes, d, n, &c_wheel); /* warm-up: touch the memory */
	s_wheel = w1_pass(w, 0, nodes, d, n, &c_wheel);
	s_lock = w1_pass(w, 1, nodes, d, n, &c_lock);
	printf("system=core workload=w1 schedule_ns=%.1f cancel_ns=%.1f bytes=%u "
	       "locked_schedule_ns=%.1f locked_cancel_ns=%.1f\n",
	       s_wheel, c_wheel, (unsigned)sizeof(struct hwt_node), s_lock, c_lock);
}

static void w4(double scale)
{
	static const size_t full[] = { 1000, 100000, 1000000, 4000000 };
	static const size_t quick[] = { 1000, 10000, 100000 };
	const size_t *sizes = scale >= 1 ? full : quick;
	size_t nsizes = scale >= 1 ? 4 : 3, pairs = 200000, s;
	struct hwt_worker *w = new_worker();
	printf("system=core workload=w4");
	for (s = 0; s < nsizes; s++) {
		size_t p = sizes[s], k;
		struct hwt_node *nodes = calloc(p + pairs, sizeof *nodes);
		uint64_t *d = delays(p + pairs);
		int64_t t0;
		for (k = 0; k < p; k++)
			hwt_worker_add(w, &nodes[k], w->wheel.now + d[k], hwt_worker_time_of(w, w->wheel.now));
		t0 = hwt_clock_ns();
		for (k = 0; k < pairs; k++) {
			hwt_worker_del(w, &nodes[k]);
			hwt_worker_add(w, &nodes[p + k], w->wheel.now + d[p + k],
				       hwt_worker_time_of(w, w->wheel.now));
		}
		printf(" pair_ns_%zu=%.1f", p, (double)(hwt_clock_ns() - t0) / (double)pairs);
		for (k = pairs; k < p + pairs; k++)
			hwt_worker_del(w, &nodes[k]);
		free(nodes);
		free(d);
	}
	printf("\n");
}

/* How long the worker holds its lock to expire one crowded slot (W2c's
 * 200,000 timeouts due at one tick), nodes 96 bytes apart as userdata are,
 * and out of the cache as after a wait. */
static void expire(double scale)
{
	size_t n = (size_t)(200000 * scale), i, junk_len = (size_t)64 << 20;
	char *mem = malloc(n * 96), *junk = malloc(junk_len);
	struct hwt_wheel w;
	int64_t t0;
	if (!mem || !junk || hwt_wheel_init(&w, 9)) {
		fprintf(stderr, "core_bench: out of memory\n");
		exit(1);
	}
	for (i = 0; i < n; i++) {
		struct hwt_node *node = (struct hwt_node *)(void *)(mem + i * 96);
		hwt_node_init(node);
		hwt_wheel_add(&w, node, 500);
	}
	hwt_wheel_advance(&w, 499);
	for (i = 0; i < junk_len; i += 64)
		junk[i] = (char)i;
	t0 = hwt_clock_ns();
	hwt_wheel_advance(&w, 500);
	printf("system=core workload=expire nodes=%zu expire_us=%.1f\n", n,
	       (double)(hwt_clock_ns() - t0) / 1e3);
	hwt_wheel_free(&w);
	free(junk);
	free(mem);
}

int main(int argc, char **argv)
{
	double scale = argc > 2 ? atof(argv[2]) : 1;
	if (argc < 2 || (strcmp(argv[1], "w1") && strcmp(argv[1], "w4") && strcmp(argv[1], "expire"))) {
		fprintf(stderr, "usage: core_bench w1|w4|expire [scale]\n");
		return 2;
	}
	if (!strcmp(argv[1], "w1"))
		w1(scale);
	else if (!strcmp(argv[1], "w4"))
		w4(scale);
	else
		expire(scale);
	return 0;
}
