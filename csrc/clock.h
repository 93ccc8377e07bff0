/*
 * clock.h: the one clock of hwtimer, CLOCK_MONOTONIC in nanoseconds.
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
/* The timespec for `ns` nanoseconds of the monotonic clock. */
struct timespec hwt_clock_timespec(int64_t ns);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
