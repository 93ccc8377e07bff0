/*
 * clock.h: the one clock of hwtimer, CLOCK_MONOTONIC in nanoseconds; and a
 * cheaper, coarser one that only times callbacks for the stats.
 */
#ifndef HWT_CLOCK_H
#define HWT_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Internal to the module (see worker.h). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Monotonic time in nanoseconds; unaffected by changes to the wall clock. */
int64_t hwt_clock_ns(void);
/* Monotonic time in ns at the kernel tick's resolution (1-10 ms): a few ns a
 * read where the system has CLOCK_MONOTONIC_COARSE, else hwt_clock_ns. */
int64_t hwt_clock_coarse_ns(void);
/* Nanoseconds of a clock that, unlike the monotonic one, goes on while the
 * machine is suspended (CLOCK_BOOTTIME; CLOCK_REALTIME where there is none):
 * the two apart say how long the monotonic clock stood still. */
int64_t hwt_clock_boot_ns(void);
/* The timespec for `ns` nanoseconds of the monotonic clock. */
struct timespec hwt_clock_timespec(int64_t ns);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
