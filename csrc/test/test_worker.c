/*
 * test_worker.c: the host's side of a worker, with no thread started, so
 * that what the host does itself is seen apart from what the thread does;
 * then many started workers on the process's one driver thread.
 *
 * A host that wakes at a deadline takes what is due by its clock reading
 * without waiting for the worker (level-0 expiries, through level 0's ring
 * swap); anything that needs the worker (starting or finishing a drain, a
 * level above 1 entering a span) is left to it.
 *
 * Every mutex unlock is matched with a lock (held_mutexes.h).
 *
 * Built twice by make test-c: as it is (an eventfd on Linux) and with
 * -DHWT_NO_EVENTFD (test_worker_pipe: the pipe every other POSIX system gets).
 *
 * usage: test_worker
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "../clock.h"
#include "../driver.h"
#include "../pipe.h"
#include "../worker.h"

#include "held_mutexes.h"
#include "count_blocks.h"

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

/* A node added at a tick the wheel has passed (its caller read the clock,
 * then the driver moved the wheel on before the lock was taken) is due at
 * once, and the host's descriptor says so: a host that waits on it alone
 * would otherwise sleep past it. */
static void add_at_a_passed_tick_signals(void)
{
	struct hwt_worker w;
	struct hwt_node n;
	struct hwt_link into;
	struct pollfd pfd;
	int64_t now;
	expect(hwt_worker_init(&w, MS, 4) == 0, "init");
	hwt_node_init(&n);
	hwt_list_init(&into);
	hwt_worker_host_timed(&w); /* (so that the host's take moves the wheel on) */
	now = w.origin + 5 * MS + MS / 2;
	hwt_worker_take(&w, &into, now); /* the wheel at tick 5 */
	expect(w.wheel.now == 5, "the host's take did not move the wheel to tick 5");
	hwt_worker_add(&w, &n, 3, now); /* tick 3: passed */
	pfd.fd = w.fds[0];
	pfd.events = POLLIN;
	expect(poll(&pfd, 1, 0) == 1, "a node added at a passed tick left the descriptor unreadable");
	hwt_worker_take(&w, &into, now);
	expect(taken(&into, &n), "a node added at a passed tick is not due");
	hwt_worker_destroy(&w);
}

/* A deadline at the first tick of level 0's next block: there level 1
 * enters a span, which only swaps level 0's rings when it starts no drain,
 * so the host takes it; when the entry starts a drain (a node in level 1's
 * next span), the host leaves the tick to the worker. */
static void host_takes_a_deadline_at_a_block_start(void)
{
	struct hwt_worker w;
	struct hwt_node n, far;
	struct hwt_link into;
	int pass;
	for (pass = 0; pass < 2; pass++) {
		expect(hwt_worker_init(&w, MS, 4) == 0, "init");
		hwt_node_init(&n);
		hwt_node_init(&far);
		hwt_list_init(&into);
		hwt_worker_add(&w, &n, 16, w.origin + MS / 2);
		if (pass)
			hwt_worker_add(&w, &far, 40, w.origin + MS / 2); /* level 1, span [32, 48) */
		hwt_worker_take(&w, &into, hwt_worker_time_of(&w, 16) - 1);
		expect(!taken(&into, &n), "taken before its tick");
		hwt_worker_take(&w, &into, hwt_worker_time_of(&w, 16));
		if (pass) {
			expect(!taken(&into, &n), "taken through a span entry that starts a drain");
			expect(w.wheel.jobs[1].src == UINT32_MAX, "the host started a drain job");
			hwt_wheel_advance(&w.wheel, 16); /* what the worker does on waking */
			hwt_worker_take(&w, &into, hwt_worker_time_of(&w, 16));
			expect(taken(&into, &n), "not taken once the worker advanced");
		} else {
			expect(taken(&into, &n), "a deadline at a block's start not taken with the worker asleep");
		}
		hwt_worker_destroy(&w);
	}
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

/* This program's close(2), seen by pipe.c: counts a close of a descriptor
 * that was not open (a second close of one may close another thread's). */
static int bad_closes;
int close(int fd)
{
	long r = syscall(SYS_close, fd);
	if (r < 0 && errno == EBADF)
		bad_closes++;
	return (int)r;
}

/* The wake-up descriptor: the kind this build makes, both ends non-blocking
 * and close-on-exec, readable after a signal (two signals read as one) and
 * not after it is consumed. */
static void wake_descriptor(void)
{
	struct pollfd pfd;
	int fds[2], i;
	expect(hwt_pipe_open(fds) == 0, "the wake-up descriptor did not open");
#if defined(HWT_NO_EVENTFD) || !defined(__linux__)
	expect(fds[0] != fds[1], "not a pipe where eventfd is not to be used");
#else
	expect(fds[0] == fds[1], "not an eventfd on Linux");
#endif
	for (i = 0; i < 2; i++) {
		int blocks = !(fcntl(fds[i], F_GETFL) & O_NONBLOCK);
		expect(!blocks, "a wake-up descriptor blocks");
		expect((fcntl(fds[i], F_GETFD) & FD_CLOEXEC) != 0, "a wake-up descriptor is not close-on-exec");
		if (blocks) { /* (a consume below would wait for ever) */
			hwt_pipe_close(fds);
			return;
		}
	}
	pfd.fd = fds[0];
	pfd.events = POLLIN;
	expect(poll(&pfd, 1, 0) == 0, "readable before a signal");
	hwt_pipe_signal(fds);
	hwt_pipe_signal(fds);
	expect(poll(&pfd, 1, 0) == 1, "not readable after a signal");
#if defined(HWT_NO_EVENTFD) || !defined(__linux__)
	{ /* a byte a signal: a full pipe (64 KiB on Linux) holds 65,536 of them */
		int queued = -1;
		expect(ioctl(fds[0], FIONREAD, &queued) == 0 && queued == 2, "a signal is not one byte in a pipe");
	}
#endif
	hwt_pipe_consume(fds);
#if defined(HWT_NO_EVENTFD) || !defined(__linux__)
	hwt_pipe_consume(fds); /* (a pipe holds a byte a signal) */
#endif
	expect(poll(&pfd, 1, 0) == 0, "still readable once consumed");
	hwt_pipe_consume(fds); /* nothing there: returns at once */
	bad_closes = 0;
	hwt_pipe_close(fds);
	expect(fds[0] == -1 && fds[1] == -1, "closed descriptors not marked");
	expect(bad_closes == 0, "a descriptor closed twice");
}

/* ---- many workers, one driver -------------------------------------------- */

#define NW 100  /* workers */
#define PER 5   /* nodes each */

/* Threads of this process (Linux /proc), or -1 elsewhere, or under
 * ThreadSanitizer, which starts a thread of its own with the first one. */
static int thread_count(void)
{
	char line[256];
	int n = -1;
	FILE *f;
#if defined(__SANITIZE_THREAD__)
	return -1;
#endif
	if (!(f = fopen("/proc/self/status", "r")))
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "Threads:", 8))
			n = atoi(line + 8);
	fclose(f);
	return n;
}

/* Take what worker i has due; each node must be taken once, never before its
 * deadline. Returns how many were taken. */
static int take_due(struct hwt_worker *w, struct hwt_node *nodes, const int64_t *deadline)
{
	struct hwt_link into;
	int got = 0;
	int64_t now = hwt_clock_ns();
	hwt_list_init(&into);
	hwt_worker_take(w, &into, now);
	while (!hwt_list_empty(&into)) {
		struct hwt_node *n = hwt_container_of(into.next, struct hwt_node, link);
		hwt_list_unlink(&n->link);
		n->slot = HWT_SLOT_NONE;
		expect(now >= deadline[n - nodes], "a node was taken before its deadline");
		expect(++n->owner_byte == 1, "a node was taken twice");
		got++;
	}
	return got;
}

/* 100 workers of two tick lengths and two geometries, 5 nodes each, with
 * interleaved deadlines (consecutive deadlines belong to different workers):
 * one thread drives them all, every node comes due on time exactly once,
 * and the thread is joined when the last worker stops. */
static void many_workers_one_driver(void)
{
	static struct hwt_worker w[NW];
	static struct hwt_node nodes[NW][PER];
	static int64_t deadline[NW][PER];
	struct pollfd pfd[NW];
	int before = thread_count(), left = NW * PER, i, k;
	int64_t limit;
	for (i = 0; i < NW; i++) {
		expect(hwt_worker_init(&w[i], i % 2 ? MS / 2 : MS, i % 3 ? 9 : 4) == 0, "init");
		expect(hwt_worker_start(&w[i]) == 0, "start");
		pfd[i].fd = w[i].fds[0];
		pfd[i].events = POLLIN;
	}
	expect(before < 0 || thread_count() == before + 1, "not one thread for 100 workers");
	expect(hwt_driver_count() == NW, "not every worker registered");
	for (k = 0; k < PER; k++)
		for (i = 0; i < NW; i++) {
			int64_t now = hwt_clock_ns();
			deadline[i][k] = now + (int64_t)(i + NW * k) * MS / 2;
			hwt_node_init(&nodes[i][k]);
			hwt_worker_add(&w[i], &nodes[i][k], hwt_worker_tick_at(&w[i], deadline[i][k]), now);
		}
	limit = hwt_clock_ns() + 10000 * MS;
	while (left > 0 && hwt_clock_ns() < limit) {
		(void)poll(pfd, NW, 100);
		for (i = 0; i < NW; i++)
			if (pfd[i].revents & POLLIN)
				left -= take_due(&w[i], nodes[i], deadline[i]);
	}
	expect(left == 0, "not every node came due");
	for (i = 0; i < NW; i++) {
		hwt_worker_stop(&w[i]);
		hwt_worker_stop(&w[i]); /* twice: a no-op */
		hwt_worker_destroy(&w[i]);
	}
	expect(hwt_driver_count() == 0, "a stopped worker is still registered");
	expect(before < 0 || thread_count() == before, "the driver outlived its last worker");
}

/* Workers started and stopped while others are driven: a stopped worker is
 * never touched again (ASan/TSan builds see to that), the others go on. */
static void stop_while_driven(void)
{
	static struct hwt_worker w[8];
	static struct hwt_node nodes[8][64];
	int round, i, k;
	for (round = 0; round < 50; round++) {
		for (i = 0; i < 8; i++) {
			int64_t now;
			expect(hwt_worker_init(&w[i], MS / 10, 4) == 0, "init");
			expect(hwt_worker_start(&w[i]) == 0, "start");
			now = hwt_clock_ns();
			for (k = 0; k < 64; k++) {
				hwt_node_init(&nodes[i][k]);
				hwt_worker_add(&w[i], &nodes[i][k], hwt_worker_tick_at(&w[i], now + k * MS / 20), now);
			}
		}
		for (i = 0; i < 8; i++) {
			struct hwt_link all;
			struct timespec ts = { 0, 100000 * (i % 3) };
			nanosleep(&ts, NULL);
			hwt_worker_stop(&w[i]);
			hwt_list_init(&all);
			hwt_worker_collect(&w[i], &all);
			hwt_worker_destroy(&w[i]);
		}
	}
	expect(hwt_driver_count() == 0, "a stopped worker is still registered");
}

/* Stop, collect and destroy workers 0 .. n-1 (stopped ones too): none is
 * then left on the driver. */
static void stop_all(struct hwt_worker *w, int n)
{
	int i;
	for (i = 0; i < n; i++) {
		struct hwt_link all;
		hwt_worker_stop(&w[i]);
		hwt_list_init(&all);
		hwt_worker_collect(&w[i], &all);
		hwt_worker_destroy(&w[i]);
	}
	expect(hwt_driver_count() == 0, "a stopped worker is still registered");
}

/* Context switches of this process's threads but the main one (the driver),
 * from /proc; -1 where it cannot be read (not Linux). */
static long driver_switches(void)
{
	char path[64], line[128];
	long total = 0, tid, v;
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		FILE *f;
		tid = atol(de->d_name);
		if (tid <= 0 || tid == (long)getpid())
			continue;
		snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
		if (!(f = fopen(path, "r")))
			continue;
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
				total += v;
		fclose(f);
	}
	closedir(d);
	return total;
}

/* The driver sleeps until a deadline, on whichever clock its condition
 * variable waits (the wall clock in the HWT_CV_REALTIME build): a wait
 * computed short would make it wake and wait again, a thread spinning. */
static void driver_sleeps_until_the_deadline(void)
{
	static struct hwt_worker w;
	static struct hwt_node n;
	struct timespec ts = { 0, 150 * 1000000 };
	long before, after;
	int64_t now;
	expect(hwt_worker_init(&w, MS, 4) == 0, "init");
	expect(hwt_worker_start(&w) == 0, "start");
	now = hwt_clock_ns();
	hwt_node_init(&n);
	hwt_worker_add(&w, &n, hwt_worker_tick_at(&w, now + 300 * MS), now);
	nanosleep(&(struct timespec){ 0, 20 * 1000000 }, NULL); /* (the driver has taken the deadline) */
	before = driver_switches();
	nanosleep(&ts, NULL);
	after = driver_switches();
	if (before >= 0)
		expect(after - before <= 10, "the driver woke more than 10 times in 150 ms before its deadline");
	stop_all(&w, 1);
}

/* A worker started with a node already due soon (as one restarted after a
 * fork keeps its wheel) goes before the workers already driven whose next
 * wake-up is later: its node comes due on time, not at theirs. */
static void started_with_an_earlier_deadline(void)
{
	static struct hwt_worker w[3];
	static struct hwt_node n[3];
	static const int64_t in_ms[3] = { 400, 500, 20 };
	struct pollfd pfd;
	int64_t now = hwt_clock_ns(), due = now + in_ms[2] * MS;
	int i, ready;
	for (i = 0; i < 3; i++) {
		expect(hwt_worker_init(&w[i], MS, 9) == 0, "init");
		hwt_node_init(&n[i]);
		if (i < 2)
			expect(hwt_worker_start(&w[i]) == 0, "start");
		hwt_worker_add(&w[i], &n[i], hwt_worker_tick_at(&w[i], now + in_ms[i] * MS), now);
	}
	expect(hwt_worker_start(&w[2]) == 0, "start"); /* after its add: registered with its wake-up */
	pfd.fd = w[2].fds[0];
	pfd.events = POLLIN;
	ready = poll(&pfd, 1, 300);
	expect(ready == 1, "a worker started with a node due in 20 ms was not woken in 300 ms");
	expect(hwt_clock_ns() >= due, "woken before its node was due");
	stop_all(w, 3);
}

/* A worker that stops takes itself out of the driver's heap from its middle:
 * the last one moved into its place goes down where its wake-up is later
 * than those below it. Seven workers registered in the order of their
 * wake-ups (10 ... 300 ms); the second stops, and the 300 ms one takes its
 * place above the 40 and 50 ms ones: the 40 ms one is still woken then, not
 * at 200 ms. */
static void stop_keeps_the_driver_order(void)
{
	static struct hwt_worker w[7];
	static struct hwt_node n[7];
	static const int64_t in_ms[7] = { 10, 20, 30, 40, 50, 200, 300 };
	struct pollfd pfd;
	int64_t now = hwt_clock_ns();
	int i;
	for (i = 0; i < 7; i++) {
		expect(hwt_worker_init(&w[i], MS, 9) == 0, "init");
		hwt_node_init(&n[i]);
		hwt_worker_add(&w[i], &n[i], hwt_worker_tick_at(&w[i], now + in_ms[i] * MS), now);
		expect(hwt_worker_start(&w[i]) == 0, "start"); /* registered with its wake-up */
	}
	hwt_worker_stop(&w[1]);
	pfd.fd = w[3].fds[0];
	pfd.events = POLLIN;
	expect(poll(&pfd, 1, 150) == 1,
	       "a node due in 40 ms was not signalled in 150 ms once another worker had left the driver");
	stop_all(w, 7);
}

/* A host that waits on its paired wake socket is sent one datagram when a
 * node falls due, and none while it is awake (not armed). */
static void wake_socket_armed(void)
{
	struct hwt_worker w;
	struct hwt_node n;
	struct pollfd pfd;
	int sv[2];
	int64_t now = hwt_clock_ns();
	char b;
	expect(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	expect(hwt_worker_init(&w, MS, 9) == 0, "init");
	expect(hwt_worker_wake_use(&w, sv[0]) == -1, "a wake socket before the first");
	expect(hwt_worker_wake_arm(&w, 0) == 0, "armed with nothing due: said due");
	hwt_node_init(&n);
	hwt_worker_add(&w, &n, hwt_worker_tick_at(&w, now + 20 * MS), now);
	expect(hwt_worker_start(&w) == 0, "start");
	pfd.fd = sv[1];
	pfd.events = POLLIN;
	expect(poll(&pfd, 1, 500) == 1, "no datagram in 500 ms for a node due in 20 ms while the host was armed");
	expect(read(sv[1], &b, 1) == 1, "read the datagram");
	expect(hwt_worker_wake_arm(&w, 0) == 1, "armed with a node due: not said due");
	expect(poll(&pfd, 1, 50) == 0, "a datagram while the host was awake");
	hwt_worker_stop(&w);
	expect(hwt_worker_wake_use(&w, -1) == sv[0], "the wake socket given back");
	hwt_worker_destroy(&w);
	close(sv[0]);
	close(sv[1]);
}

/* Armed for crowded deadlines only: a deadline one node's alone at level 0
 * is left to the host's own timer (no datagram); two nodes at its tick, and
 * the driver sends one. */
static void wake_socket_crowded_only(void)
{
	struct hwt_worker w;
	struct hwt_node n[2];
	struct hwt_link into;
	struct pollfd pfd;
	int sv[2];
	int64_t now = hwt_clock_ns();
	uint64_t tick;
	char b;
	expect(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	expect(hwt_worker_init(&w, MS, 9) == 0, "init");
	(void)hwt_worker_wake_use(&w, sv[0]);
	hwt_worker_host_timed(&w);
	hwt_node_init(&n[0]);
	hwt_node_init(&n[1]);
	tick = hwt_worker_tick_at(&w, now + 20 * MS);
	hwt_worker_add(&w, &n[0], tick, now);
	expect(hwt_worker_start(&w) == 0, "start");
	expect(hwt_worker_wake_arm(&w, 1) == 0, "a lone deadline said due");
	pfd.fd = sv[1];
	pfd.events = POLLIN;
	expect(poll(&pfd, 1, 100) == 0, "a datagram for a lone deadline, armed for crowded ones only");
	hwt_list_init(&into);
	hwt_worker_take(&w, &into, hwt_clock_ns());
	expect(taken(&into, &n[0]), "the lone node not taken by the host at its time");
	hwt_list_unlink(&n[0].link);
	hwt_node_init(&n[0]);
	now = hwt_clock_ns();
	tick = hwt_worker_tick_at(&w, now + 20 * MS);
	hwt_worker_add(&w, &n[0], tick, now);
	hwt_worker_add(&w, &n[1], tick, now);
	expect(hwt_worker_wake_arm(&w, 1) == 0, "two nodes 20 ms ahead said due");
	expect(poll(&pfd, 1, 500) == 1, "no datagram in 500 ms for two nodes due at one tick");
	expect(read(sv[1], &b, 1) == 1, "read the datagram");
	hwt_worker_stop(&w);
	(void)hwt_worker_wake_use(&w, -1);
	hwt_worker_destroy(&w);
	close(sv[0]);
	close(sv[1]);
}

/* A host that wakes itself (host_timed): the driver does not wake for a
 * level-0 deadline (nothing on the pipe 30 ms after it) and the host takes
 * it at its time; a node in level 1 is still drained by the driver, for the
 * host to take at its tick; and once the host waits armed on its wake
 * socket the driver wakes at level 0's deadline again, with a datagram. */
static void host_timed_leaves_level0_to_the_host(void)
{
	struct hwt_worker w;
	struct hwt_node n, far, armed;
	struct hwt_link into;
	struct pollfd pfd;
	int sv[2];
	int64_t now;
	uint64_t tick;
	char b;
	expect(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	expect(hwt_worker_init(&w, MS, 4) == 0, "init"); /* 16 ticks a level-0 block */
	hwt_worker_host_timed(&w);
	expect(hwt_worker_wake_use(&w, sv[0]) == -1, "a wake socket before the first");
	hwt_node_init(&n);
	hwt_node_init(&far);
	hwt_node_init(&armed);
	hwt_list_init(&into);
	now = hwt_clock_ns();
	tick = hwt_worker_tick_at(&w, now + 5 * MS);
	if (tick % 16 == 0)
		tick++; /* (a block's first tick may be the driver's: hwt_wheel_next_hard) */
	hwt_worker_add(&w, &n, tick, now);
	hwt_worker_add(&w, &far, hwt_worker_tick_at(&w, now + 200 * MS), now); /* level 1: its drain starts at 176 ms */
	expect(n.slot >> w.wheel.bits < 2, "the near node is not in level 0");
	expect(far.slot >> w.wheel.bits >= 2, "the far node is in level 0");
	expect(hwt_worker_start(&w) == 0, "start");
	pfd.fd = w.fds[0];
	pfd.events = POLLIN;
	expect(poll(&pfd, 1, 35) == 0, "the driver signalled a level-0 deadline of a host that wakes itself");
	hwt_worker_take(&w, &into, hwt_clock_ns());
	expect(taken(&into, &n), "the host did not take its level-0 node at its time");
	while (hwt_clock_ns() < hwt_worker_time_of(&w, far.expires) + 40 * MS)
		poll(NULL, 0, 10);
	hwt_worker_take(&w, &into, hwt_clock_ns());
	expect(taken(&into, &far), "a level-1 node was not brought down for the host to take");
	now = hwt_clock_ns();
	hwt_worker_add(&w, &armed, hwt_worker_tick_at(&w, now + 5 * MS), now);
	expect(hwt_worker_wake_arm(&w, 0) == 0, "armed with nothing due: said due");
	pfd.fd = sv[1];
	expect(poll(&pfd, 1, 500) == 1, "no datagram in 500 ms for a node due in 5 ms while the host was armed");
	expect(read(sv[1], &b, 1) == 1, "read the datagram");
	hwt_worker_stop(&w);
	expect(hwt_worker_wake_use(&w, -1) == sv[0], "the wake socket given back");
	hwt_worker_destroy(&w);
	close(sv[0]);
	close(sv[1]);
}

/* A worker whose wheel cannot be allocated (each of init's allocations
 * refused in turn): init says ENOMEM and keeps nothing; one that could be
 * made gives back every block at destroy. */
static void init_out_of_memory(void)
{
	struct hwt_worker w;
	int at, err;
	for (at = 1; at <= 8; at++) {
		long before = blocks_held();
		fail_alloc_at = at;
		err = hwt_worker_init(&w, MS, 9);
		fail_alloc_at = 0;
		if (err == 0) { /* past init's allocations: it needs fewer than `at` */
			hwt_worker_destroy(&w);
			expect(blocks_held() == before, "a worker destroyed kept blocks");
			expect(at > 1, "init said 0 with its first allocation refused");
			break;
		}
		expect(err == ENOMEM, "an allocation refused: init did not say ENOMEM");
		expect(blocks_held() == before, "a refused init kept blocks");
	}
	expect(at > 4, "init said ENOMEM for fewer refusals than the wheel's four allocations");
}

/* With no descriptor left (EMFILE), init says so and keeps nothing: not a
 * worker that looks made with its wheel already freed. */
static void init_out_of_descriptors(void)
{
	struct rlimit old, low;
	struct hwt_worker w;
	int fds[128], n = 0, err;
	long before;
	if (getrlimit(RLIMIT_NOFILE, &old) != 0)
		return;
	low = old;
	low.rlim_cur = 64;
	if (setrlimit(RLIMIT_NOFILE, &low) != 0)
		return;
	while (n < 128 && (fds[n] = dup(2)) >= 0)
		n++;
	before = blocks_held();
	err = hwt_worker_init(&w, MS, 4);
	expect(err == EMFILE, "init with no descriptor left did not say EMFILE");
	expect(blocks_held() == before, "init with no descriptor left kept blocks");
	if (err == 0)
		hwt_worker_destroy(&w);
	while (n > 0)
		close(fds[--n]);
	setrlimit(RLIMIT_NOFILE, &old);
}

/* A forked child's timer abandons its worker (the driver thread is the
 * parent's, its lock may be held for ever): the memory and the descriptors
 * are the child's own, and are given back. */
static void abandon_gives_back_memory_and_descriptors(void)
{
	struct hwt_worker w;
	long before = blocks_held();
	int fds[2];
	expect(hwt_worker_init(&w, MS, 9) == 0, "init");
	fds[0] = w.fds[0];
	fds[1] = w.fds[1];
	hwt_worker_abandon(&w);
	expect(blocks_held() == before, "an abandoned worker kept blocks");
	expect(fcntl(fds[0], F_GETFD) < 0 && fcntl(fds[1], F_GETFD) < 0, "an abandoned worker kept its descriptor");
	expect(w.fds[0] == -1 && w.wake_fd == -1, "an abandoned worker's descriptors not marked closed");
}

int main(void)
{
	host_takes_a_level0_expiry();
	add_at_a_passed_tick_signals();
	host_takes_a_deadline_at_a_block_start();
	host_leaves_the_worker_its_work();
	tick_arithmetic_is_exact();
	wake_descriptor();
	many_workers_one_driver();
	stop_while_driven();
	started_with_an_earlier_deadline();
	stop_keeps_the_driver_order();
	wake_socket_armed();
	wake_socket_crowded_only();
	host_timed_leaves_level0_to_the_host();
	init_out_of_memory();
	abandon_gives_back_memory_and_descriptors();
	init_out_of_descriptors();
	driver_sleeps_until_the_deadline();
	expect(unheld_unlocks == 0, "an unlock of a mutex not held");
	printf("test_worker: the host's side of a worker; its wake-up descriptor (%s); many workers on one driver\n"
	       "%d passed, %d failed\n",
#if defined(HWT_NO_EVENTFD) || !defined(__linux__)
	       "a pipe",
#else
	       "an eventfd",
#endif
	       failures ? 0 : 16, failures);
	return failures != 0;
}
