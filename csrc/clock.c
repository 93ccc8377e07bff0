/*
 * clock.c: monotonic nanoseconds (see clock.h).
 */
#include "clock.h"

int64_t hwt_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#if defined(CLOCK_BOOTTIME)
#define BOOT CLOCK_BOOTTIME
#else
#define BOOT CLOCK_REALTIME
#endif

int64_t hwt_clock_boot_ns(void)
{
	struct timespec ts;
	clock_gettime(BOOT, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#if defined(CLOCK_MONOTONIC_COARSE)
#define COARSE CLOCK_MONOTONIC_COARSE
#else
#define COARSE CLOCK_MONOTONIC
#endif

int64_t hwt_clock_coarse_ns(void)
{
	struct timespec ts;
	clock_gettime(COARSE, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t hwt_clock_coarse_res(void)
{
	struct timespec ts;
	if (clock_getres(COARSE, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec hwt_clock_timespec(int64_t ns)
{
	struct timespec ts;
	ts.tv_sec = (time_t)(ns / 1000000000);
	ts.tv_nsec = (long)(ns % 1000000000);
	return ts;
}
