/*
 * clock.c: monotonic nanoseconds, and the clocks beside it (see clock.h).
 */
#include "clock.h"

static int64_t ns_of(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t hwt_clock_ns(void)
{
	return ns_of(CLOCK_MONOTONIC);
}

#if defined(CLOCK_BOOTTIME)
#define BOOT CLOCK_BOOTTIME
#else
#define BOOT CLOCK_REALTIME
#endif

int64_t hwt_clock_boot_ns(void)
{
	return ns_of(BOOT);
}

#if defined(CLOCK_MONOTONIC_COARSE)
#define COARSE CLOCK_MONOTONIC_COARSE
#else
#define COARSE CLOCK_MONOTONIC
#endif

int64_t hwt_clock_coarse_ns(void)
{
	return ns_of(COARSE);
}

struct timespec hwt_clock_timespec(int64_t ns)
{
	struct timespec ts;
	ts.tv_sec = (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	return ts;
}
