/*
 * driver.h: the one thread that drives every started worker of the process.
 *
 * Each worker (worker.h) keeps its own wheel, pipe and lock. The driver keeps
 * the started workers in a min-heap keyed by the monotonic time at which each
 * next needs it, sleeps until the earliest (no periodic tick), and services
 * every due worker in turn with hwt_worker_service, under that worker's lock.
 * It starts with the first worker and is joined when the last one stops.
 *
 * Locks: a worker's lock may be held when the driver's is taken, never the
 * other way round: the driver lets go of its own lock before it services a
 * worker. A worker being serviced is marked busy; unregister waits until it
 * is not, so a stopped worker is never touched again.
 */
#ifndef HWT_DRIVER_H
#define HWT_DRIVER_H

#include <stddef.h>
#include <stdint.h>

/* Internal to the module (see worker.h). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

struct hwt_worker;

/* Add `w`, first due at `at_ns`; starts the thread if none runs. 0 or an errno. */
int hwt_driver_register(struct hwt_worker *w, int64_t at_ns);
/* Remove `w`, waiting out a service in progress; the last one joins the thread. */
void hwt_driver_unregister(struct hwt_worker *w);
/* `w` (its lock held) needs the driver by monotonic time `at_ns`: moves it
 * earlier in the heap and wakes the thread if it sleeps past that. */
void hwt_driver_wake(struct hwt_worker *w, int64_t at_ns);
/* The end of a service (the driver's thread, `w`'s lock held): next due at `at_ns`. */
void hwt_driver_done(struct hwt_worker *w, int64_t at_ns);
/* In a forked child: forget the thread and the parent's workers, untouched. */
void hwt_driver_forget(void);
/* Number of workers registered (for tests). */
size_t hwt_driver_count(void);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
