/*
 * failthread.c: an LD_PRELOAD shim for the specs that makes the first N
 * calls of one POSIX thread function fail, as a machine out of threads or
 * memory would: HWT_FAIL_CALL names it (pthread_create, pthread_cond_init),
 * HWT_FAIL_TIMES how many calls fail (default 1), with HWT_FAIL_ERRNO
 * (default EAGAIN). The calls after them, and every other function, reach
 * the C library. It lets a spec see that a refused thread or condition
 * variable gives a Lua error or nil, message, and that the next try works.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* How many calls of `name` are still to fail. The count lives in the
 * environment's first read and is kept here: a shim has no other place
 * (each call is the process's own, not a spec's). */
static int left_for(const char *name)
{
	static int left = -1;
	const char *call = getenv("HWT_FAIL_CALL");
	if (!call || strcmp(call, name) != 0)
		return 0;
	if (left < 0) {
		const char *times = getenv("HWT_FAIL_TIMES");
		left = times ? atoi(times) : 1;
	}
	if (left == 0)
		return 0;
	left--;
	return 1;
}

static int failure(void)
{
	const char *e = getenv("HWT_FAIL_ERRNO");
	return e ? atoi(e) : EAGAIN;
}

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	if (left_for("pthread_create"))
		return failure();
	*(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
	return real(t, a, fn, arg);
}

int pthread_condattr_init(pthread_condattr_t *a)
{
	int (*real)(pthread_condattr_t *);
	if (left_for("pthread_condattr_init"))
		return failure();
	*(void **)&real = dlsym(RTLD_NEXT, "pthread_condattr_init");
	return real(a);
}

int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
	int (*real)(pthread_cond_t *, const pthread_condattr_t *);
	if (left_for("pthread_cond_init"))
		return failure();
	*(void **)&real = dlsym(RTLD_NEXT, "pthread_cond_init");
	return real(c, a);
}
