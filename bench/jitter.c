/*
 * jitter.c: the machine's own floor for W2b. One thread sleeps until each
 * next millisecond for a few seconds (as a timer thread would) and reports
 * how late it woke: no timer is better than the OS lets it be.
 *
 * usage: jitter [scale]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "../csrc/clock.h"

static int cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	double scale = argc > 1 ? atof(argv[1]) : 1;
	size_t n = (size_t)(2000 * (scale < 1 ? 1 : scale)), i;
	int64_t *late = malloc(n * sizeof *late);
	for (i = 0; i < n; i++) {
		int64_t target = hwt_clock_ns() + 1000000;
		struct timespec ts = hwt_clock_timespec(target);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
			;
		late[i] = hwt_clock_ns() - target;
	}
	qsort(late, n, sizeof *late, cmp);
	printf("system=floor workload=w2b late_min_ms=%.3f late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f\n",
	       late[0] / 1e6, late[n / 2] / 1e6, late[(n * 99) / 100] / 1e6, late[n - 1] / 1e6);
	return 0;
}
