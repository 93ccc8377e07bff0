/*
 * held_mutexes.h: a test program's own pthread_mutex_lock, _trylock and
 * _unlock (glibc's underneath) that keep each mutex's depth and count an
 * unlock of one not held (undefined in POSIX; glibc lets it pass, so no
 * test would see it): unheld_unlocks, 0 when every unlock matched a lock.
 * Included once, by a test's main file, which defines _GNU_SOURCE and
 * includes dlfcn.h, pthread.h and string.h first.
 */
#ifndef HWT_HELD_MUTEXES_H
#define HWT_HELD_MUTEXES_H

#include <stdint.h>

/* pthread_mutex_lock and _unlock are this program's too: each mutex's depth
 * is kept (SQLite's are recursive), and an unlock of one not held, which
 * POSIX leaves undefined and glibc lets pass, is counted. glibc's are found
 * before main (dlsym may allocate, and the allocator locks: until all three
 * are found, which is before any thread, the calls do nothing). */
typedef int (*mutex_fn)(pthread_mutex_t *);
static mutex_fn real_lock, real_trylock, real_unlock;
static int mutex_ready;

static mutex_fn find(const char *name)
{
	mutex_fn f;
	void *sym = dlsym(RTLD_NEXT, name);
	memcpy(&f, &sym, sizeof f);
	return f;
}

__attribute__((constructor)) static void find_mutex_calls(void)
{
	real_unlock = find("pthread_mutex_unlock");
	real_trylock = find("pthread_mutex_trylock");
	real_lock = find("pthread_mutex_lock");
	mutex_ready = real_unlock && real_trylock && real_lock;
}

#define HELD_SLOTS 4096
static struct {
	pthread_mutex_t *m;
	long depth;
} held[HELD_SLOTS];
static int held_guard; /* the table's spin lock (not a mutex: these are the mutex calls) */
static long unheld_unlocks;

static void held_add(pthread_mutex_t *m, long d)
{
	size_t i = (size_t)(((uintptr_t)m >> 3) % HELD_SLOTS), n = 0;
	while (__atomic_exchange_n(&held_guard, 1, __ATOMIC_ACQUIRE))
		;
	while (held[i].m && held[i].m != m && ++n < HELD_SLOTS)
		i = (i + 1) % HELD_SLOTS;
	if (n < HELD_SLOTS) {
		held[i].m = m;
		if (d < 0 && held[i].depth == 0)
			unheld_unlocks++;
		else
			held[i].depth += d;
	}
	__atomic_store_n(&held_guard, 0, __ATOMIC_RELEASE);
}

static int held_after(mutex_fn take, pthread_mutex_t *m)
{
	int r;
	if (!mutex_ready)
		return 0;
	if ((r = take(m)) == 0)
		held_add(m, 1);
	return r;
}

int pthread_mutex_lock(pthread_mutex_t *m) { return held_after(real_lock, m); }
int pthread_mutex_trylock(pthread_mutex_t *m) { return held_after(real_trylock, m); }

int pthread_mutex_unlock(pthread_mutex_t *m)
{
	if (!mutex_ready)
		return 0;
	held_add(m, -1);
	return real_unlock(m);
}

#endif
