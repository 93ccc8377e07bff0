/*
 * worker.h: one timer's wheel, the thread that drives it, and the hand-off.
 *
 * The worker thread owns the clock: it sleeps until the wheel's next event
 * (no periodic tick while nothing is due), advances the wheel to the current
 * tick and leaves what expired on the wheel's due list. When that list goes
 * from empty to non-empty it writes one byte to the pipe; the host thread
 * polls the read end and takes the whole list in one locked step.
 * Every function here except start/stop is called by the host thread.
 */
#ifndef HWT_WORKER_H
#define HWT_WORKER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include "wheel.h"

/* Internal to the module: called directly, never through the PLT, and not
 * exported beside luaopen_hwtimer_core. After the #includes, which must keep
 * their own visibility. */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

struct hwt_worker {
	pthread_mutex_t mu;     /* guards everything below but the constants */
	pthread_cond_t cv;      /* worker sleeps here; signalled by add and stop */
	pthread_t thread;
	struct hwt_wheel wheel;
	uint64_t wake_at;       /* tick the sleeping worker waits for */
	int signalled;          /* a byte is in the pipe for the due list */
	int stopping;
	int running;            /* thread started and not yet joined */
	int cv_realtime;        /* constant: cv times out on CLOCK_REALTIME (no setclock) */
	int64_t origin;         /* constant: clock value of tick 0, in ns */
	int64_t tick_ns;        /* constant: length of a tick */
	int fds[2];             /* constant: the pipe, read end first */
};

/* Set up (wheel of 2^bits slots a level, pipe, lock); returns 0 or an errno. */
int hwt_worker_init(struct hwt_worker *w, int64_t tick_ns, unsigned bits);
/* Start the thread; returns 0 or an errno. */
int hwt_worker_start(struct hwt_worker *w);
/* Ask the thread to finish and join it; safe to call twice. */
void hwt_worker_stop(struct hwt_worker *w);
/* Free what init made; the worker must be stopped (or never started). */
void hwt_worker_destroy(struct hwt_worker *w);
/* Forget the lock and thread without touching them: for a forked child. */
void hwt_worker_abandon(struct hwt_worker *w);
/* First tick at or after the monotonic time `deadline_ns`. */
uint64_t hwt_worker_tick_at(const struct hwt_worker *w, int64_t deadline_ns);
/* Monotonic time, in ns, at which tick `tick` begins. */
int64_t hwt_worker_time_of(const struct hwt_worker *w, uint64_t tick);
/* Add `n` due at `tick`; wakes the worker if that is earlier than its sleep.
 * `now_ns` is the host's clock reading that `tick` was computed from. */
void hwt_worker_add(struct hwt_worker *w, struct hwt_node *n, uint64_t tick, int64_t now_ns);
/* Add `n` straight to the due list, expiring at the current tick; signalled at once. */
void hwt_worker_add_due(struct hwt_worker *w, struct hwt_node *n);
/* Move `n` (pending anywhere, or detached) to expire at `tick`; wakes the
 * worker if needed. `now_ns` as for hwt_worker_add. */
void hwt_worker_move(struct hwt_worker *w, struct hwt_node *n, uint64_t tick, int64_t now_ns);
/* Take `n` out of the wheel or the due list. */
void hwt_worker_del(struct hwt_worker *w, struct hwt_node *n);
/* Move every due node to the tail of `into` and consume the pipe's byte.
 * `now_ns` is the host's clock: what expired by then is taken too, when the
 * worker has not got to it yet (it is only a level-0 slot's work). */
void hwt_worker_take(struct hwt_worker *w, struct hwt_link *into, int64_t now_ns);
/* Make the pipe readable again: the host kept work it has not run yet. */
void hwt_worker_rearm(struct hwt_worker *w);
/* After stop: move every node still in the wheel or due to `into`. */
void hwt_worker_collect(struct hwt_worker *w, struct hwt_link *into);
/* Tick of the wheel's next event (a lower bound on the next expiry); UINT64_MAX if none. */
uint64_t hwt_worker_next(struct hwt_worker *w);
/* How many nodes are on the due list (walks it under the lock). */
size_t hwt_worker_count_due(struct hwt_worker *w);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
