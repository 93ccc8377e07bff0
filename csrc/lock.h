/*
 * lock.h: the lock between a timer's host thread and the driver thread.
 *
 * Every schedule, cancel and reset takes it once, and it is almost never
 * contended (the driver holds it for one short step at a time). glibc's
 * pthread_mutex_lock/unlock cost ~160 instructions for that uncontended
 * round trip (callgrind, W1's schedule: 1,398 instructions in all); this
 * lock costs one compare-and-swap and one atomic decrement, inline.
 *
 * On Linux it is the three-state futex lock (0 free, 1 held, 2 held with
 * waiters) that U. Drepper's "Futexes Are Tricky" describes as mutex #2: a
 * waiter sleeps in the kernel, never spins, so a driver preempted while
 * holding it costs the host a sleep, not a burnt core. Elsewhere it is a
 * pthread mutex. Either way: acquire on lock, release on unlock, which is
 * what ThreadSanitizer checks the wheel's accesses against.
 */
#ifndef HWT_LOCK_H
#define HWT_LOCK_H

#if defined(__linux__) && defined(__GNUC__) && !defined(HWT_PTHREAD_LOCK)

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct { int state; } hwt_lock_t;

static inline int hwt_lock_init(hwt_lock_t *l)
{
	l->state = 0;
	return 0;
}

static inline void hwt_lock_destroy(hwt_lock_t *l)
{
	(void)l;
}

/* Contended: mark "waiters" and sleep until the holder's unlock wakes us. */
static inline void hwt_lock_slow(hwt_lock_t *l, int c)
{
	if (c != 2)
		c = __atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		syscall(SYS_futex, &l->state, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
		c = __atomic_exchange_n(&l->state, 2, __ATOMIC_ACQUIRE);
	}
}

static inline void hwt_lock(hwt_lock_t *l)
{
	int c = 0;
	if (!__atomic_compare_exchange_n(&l->state, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		hwt_lock_slow(l, c);
}

static inline void hwt_unlock(hwt_lock_t *l)
{
	if (__atomic_fetch_sub(&l->state, 1, __ATOMIC_RELEASE) != 1) {
		__atomic_store_n(&l->state, 0, __ATOMIC_RELEASE);
		syscall(SYS_futex, &l->state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	}
}

#else

#include <pthread.h>

typedef pthread_mutex_t hwt_lock_t;
#define hwt_lock_init(l) pthread_mutex_init((l), NULL)
#define hwt_lock_destroy(l) pthread_mutex_destroy(l)
#define hwt_lock(l) pthread_mutex_lock(l)
#define hwt_unlock(l) pthread_mutex_unlock(l)

#endif

#endif
