/*
 * floor.c: the machine's floor for W2b, measured beside it in the same
 * `make bench` run. W2b's deadlines are N instants uniform in [1, 2] s; a
 * timer with a 1 ms tick can fire each no sooner than the tick it rounds up
 * to. Here nothing but the OS stands between a deadline and its callback:
 *
 *   thread  one thread clock_nanosleep()s (absolute) to each tick in turn and
 *           stamps, on waking, every deadline of that tick: one wake-up per
 *           tick, as a timer thread that runs its callbacks itself;
 *   pipe    the same thread writes a byte to a pipe instead, and a second
 *           thread, asleep in poll(2) on it, stamps: two wake-ups in series,
 *           the shape of any timer whose thread hands work to a host's loop.
 *
 * Lateness = stamp - deadline, rounding to the tick included (~0.5 ms of the
 * median). The thread asks for no timer slack, as hwtimer's driver does.
 *
 * usage: floor [scale] [tick_seconds]
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include "../csrc/clock.h"

struct run {
	size_t n, ticks;       /* deadlines; distinct ticks */
	int64_t *due;          /* deadlines, ascending (ns) */
	int64_t *tick_at;      /* each distinct tick's time, ascending */
	int64_t *stamp;        /* when each tick was seen */
	int fds[2];            /* pipe mode: read end, write end */
};

static uint64_t rng = 20261121;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * UINT64_C(2685821657736338717);
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void no_slack(void)
{
#if defined(PR_SET_TIMERSLACK)
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
}

/* Deadlines from now + [1, 2) s, their ticks from an origin at now. */
static void plan(struct run *r, int64_t tick)
{
	int64_t t0 = hwt_clock_ns(), last = -1;
	size_t i;
	for (i = 0; i < r->n; i++)
		r->due[i] = t0 + 1000000000 + (int64_t)(rnd() % 1000000000);
	qsort(r->due, r->n, sizeof *r->due, cmp64);
	r->ticks = 0;
	for (i = 0; i < r->n; i++) {
		int64_t at = t0 + (r->due[i] - t0 + tick - 1) / tick * tick;
		if (at != last)
			r->tick_at[r->ticks++] = last = at;
	}
}

static void sleep_to(int64_t at)
{
	struct timespec ts = hwt_clock_timespec(at);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Pipe mode's second thread: a byte per tick, stamped when read. */
static void *reader(void *arg)
{
	struct run *r = arg;
	size_t k = 0;
	char buf[64];
	struct pollfd p;
	p.fd = r->fds[0];
	p.events = POLLIN;
	while (k < r->ticks) {
		ssize_t got;
		(void)poll(&p, 1, -1);
		got = read(r->fds[0], buf, sizeof buf);
		if (got > 0) {
			int64_t now = hwt_clock_ns();
			for (; got > 0; got--)
				r->stamp[k++] = now;
		}
	}
	return NULL;
}

static void sleeper(struct run *r, int piped)
{
	size_t k;
	char b = 1;
	for (k = 0; k < r->ticks; k++) {
		sleep_to(r->tick_at[k]);
		if (piped)
			(void)!write(r->fds[1], &b, 1);
		else
			r->stamp[k] = hwt_clock_ns();
	}
}

/* Lateness of every deadline, sorted, into `late`. */
static void lateness(const struct run *r, int64_t tick, int64_t *late)
{
	size_t i, k = 0;
	for (i = 0; i < r->n; i++) {
		while (r->tick_at[k] < r->due[i] || r->tick_at[k] - r->due[i] >= tick)
			k++;
		late[i] = r->stamp[k] - r->due[i];
	}
	qsort(late, r->n, sizeof *late, cmp64);
}

static void measure(struct run *r, int64_t tick, int piped, int64_t *late)
{
	pthread_t th;
	plan(r, tick);
	if (piped && (pipe(r->fds) || pthread_create(&th, NULL, reader, r))) {
		perror("floor");
		exit(1);
	}
	sleeper(r, piped);
	if (piped) {
		pthread_join(th, NULL);
		close(r->fds[0]);
		close(r->fds[1]);
	}
	lateness(r, tick, late);
}

static double q(const int64_t *late, size_t n, double p)
{
	size_t i = (size_t)(p * (double)n + 0.999999);
	return (double)late[i ? i - 1 : 0] / 1e6;
}

int main(int argc, char **argv)
{
	double scale = argc > 1 ? atof(argv[1]) : 1;
	int64_t tick = (int64_t)((argc > 2 ? atof(argv[2]) : 0.001) * 1e9);
	struct run r;
	int64_t *thread_late, *pipe_late;
	r.n = (size_t)(200000 * scale);
	if (r.n < 1000)
		r.n = 1000;
	r.due = malloc(r.n * sizeof *r.due);
	r.tick_at = malloc(r.n * sizeof *r.tick_at);
	r.stamp = malloc(r.n * sizeof *r.stamp);
	thread_late = malloc(r.n * sizeof *thread_late);
	pipe_late = malloc(r.n * sizeof *pipe_late);
	if (!r.due || !r.tick_at || !r.stamp || !thread_late || !pipe_late)
		return 1;
	no_slack();
	measure(&r, tick, 0, thread_late);
	measure(&r, tick, 1, pipe_late);
	printf("system=floor workload=w2b late_min_ms=%.3f late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f"
	       " pipe_p50_ms=%.3f pipe_p99_ms=%.3f pipe_max_ms=%.3f\n",
	       q(thread_late, r.n, 0), q(thread_late, r.n, 0.5), q(thread_late, r.n, 0.99),
	       q(thread_late, r.n, 1), q(pipe_late, r.n, 0.5), q(pipe_late, r.n, 0.99), q(pipe_late, r.n, 1));
	return 0;
}
