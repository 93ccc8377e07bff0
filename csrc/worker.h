/*
 * worker.h: one timer's wheel, its lock and pipe, and the hand-off.
 *
 * A started worker is driven by the process's one driver thread (driver.h),
 * which owns the clock: it sleeps until the earliest next event of all
 * started workers (no periodic tick while nothing is due), then, under this
 * worker's lock, advances the wheel to the current tick and leaves what
 * expired on the wheel's due list (hwt_worker_service); drain work waits
 * until no worker is due (hwt_worker_work). When that list goes
 * from empty to non-empty it writes one byte to the pipe; the host thread
 * polls the read end and takes the whole list in one locked step.
 * Every function here but hwt_worker_service and _work is called by the host thread.
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

/* `gap` keeps the wheel 56 bytes after the lock, where it measured fastest
 * for cancel (the wheel's head and the lock on separate cache lines; see
 * docs/internals.md, "Measurements behind the code"). */
struct hwt_worker {
	pthread_mutex_t mu;     /* guards the wheel, wake_at and signalled */
	char gap[56];
	struct hwt_wheel wheel;
	uint64_t wake_at;       /* tick the driver next services this worker at */
	int signalled;          /* a byte is in the pipe for the due list */
	int running;            /* host's: registered with the driver, not yet stopped */
	size_t drv_index;       /* the driver's, under its lock: place in its heap */
	int64_t drv_key;        /* the driver's, under its lock: when this is next due (ns) */
	struct hwt_link drv_link; /* the driver's, under its lock: in its queue of drain work */
	int64_t origin;         /* constant: clock value of tick 0, in ns */
	int64_t tick_ns;        /* constant: length of a tick */
	int fds[2];             /* constant: the wake-up descriptor (pipe.h): polled, written */
	int wake_fd;            /* -1, or the host's paired wake socket (pipe.h) */
	int wake_armed;         /* the host waits on wake_fd: one datagram when due */
	int host_timed;         /* the host wakes at its deadlines itself (hwt_worker_host_timed) */
};

/* Set up (wheel of 2^bits slots a level, pipe, lock); returns 0 or an errno. */
int hwt_worker_init(struct hwt_worker *w, int64_t tick_ns, unsigned bits);
/* Hand the worker to the driver (starting its thread if none runs); 0 or an errno. */
int hwt_worker_start(struct hwt_worker *w);
/* Take it back (joining the thread if this was the last); safe to call twice.
 * When this returns the driver will never touch the worker again. */
void hwt_worker_stop(struct hwt_worker *w);
/* Free what init made; the worker must be stopped (or never started). */
void hwt_worker_destroy(struct hwt_worker *w);
/* Forget the lock and the driver without touching them: for a forked child. */
void hwt_worker_abandon(struct hwt_worker *w);
/* In a forked child, before anything else: forget the parent's driver thread. */
void hwt_worker_forked(void);
/* The driver's thread, when due: advance to now and signal what expired;
 * tell the driver when next (hwt_driver_done). Returns 1 if drain work waits. */
int hwt_worker_service(struct hwt_worker *w);
/* The driver's thread, when no worker is due: one step of drain work (and,
 * once done, the driver is told when next). Returns 1 if more remains. */
int hwt_worker_work(struct hwt_worker *w);
/* First tick at or after the monotonic time `deadline_ns`. */
uint64_t hwt_worker_tick_at(const struct hwt_worker *w, int64_t deadline_ns);
/* Monotonic time, in ns, at which tick `tick` begins. */
int64_t hwt_worker_time_of(const struct hwt_worker *w, uint64_t tick);
/* Add `n` due at `tick`; wakes the driver if that is earlier than its sleep.
 * `now_ns` is the host's clock reading that `tick` was computed from. */
void hwt_worker_add(struct hwt_worker *w, struct hwt_node *n, uint64_t tick, int64_t now_ns);
/* Add `n` straight to the due list, expiring at the current tick; signalled at once. */
void hwt_worker_add_due(struct hwt_worker *w, struct hwt_node *n);
/* Move `n` (pending anywhere, or detached) to expire at `tick`; wakes the
 * driver if needed. `now_ns` as for hwt_worker_add. */
void hwt_worker_move(struct hwt_worker *w, struct hwt_node *n, uint64_t tick, int64_t now_ns);
/* Take `n` out of the wheel or the due list. */
void hwt_worker_del(struct hwt_worker *w, struct hwt_node *n);
/* Take `count` nodes out, in one lock round, their neighbours fetched first. */
void hwt_worker_del_batch(struct hwt_worker *w, struct hwt_node *const *n, unsigned count);
/* Move every due node to the tail of `into` and consume the pipe's byte.
 * `now_ns` is the host's clock: what expired by then is taken too, when the
 * worker has not got to it yet (only a level-0 slot's work and level 0's
 * ring swap: see hwt_wheel_expire). */
void hwt_worker_take(struct hwt_worker *w, struct hwt_link *into, int64_t now_ns);
/* As hwt_worker_take, for a host that only asks how long to wait: the pipe
 * stays readable (made so, when the host took first) while what it took
 * waits in `into` for a dispatch. Returns whether anything was due. */
int hwt_worker_take_announced(struct hwt_worker *w, struct hwt_link *into, int64_t now_ns);
/* Make the pipe readable again: the host kept work it has not run yet. */
void hwt_worker_rearm(struct hwt_worker *w);
/* After stop: move every node still in the wheel or due to `into`. */
void hwt_worker_collect(struct hwt_worker *w, struct hwt_link *into);
/* 0 if timeouts are due, else a tick at or before the next expiry, never
 * for the wheel's own moves (hwt_wheel_next_expiry); UINT64_MAX if none. */
uint64_t hwt_worker_next(struct hwt_worker *w);
/* Use `fd` (a paired wake socket, or -1) from now on; returns the one it
 * replaces, for the caller to close. */
int hwt_worker_wake_use(struct hwt_worker *w, int fd);
/* The host is about to wait on its wake socket: 1 if the due list holds
 * something already (do not wait), else 0 and one datagram comes when it does. */
int hwt_worker_wake_arm(struct hwt_worker *w, int crowded_only);
/* From now on the host wakes at the wheel's deadlines on its own clock and
 * takes what is due (hwt_worker_take expires level 0 for it): the driver
 * wakes only for the work a host does not do (drains, span entries), and for
 * every deadline only while the host waits armed on its wake socket; and
 * a timeout() that takes what is due does not write the pipe for it. */
void hwt_worker_host_timed(struct hwt_worker *w);
/* How many nodes are on the due list (walks it under the lock). */
size_t hwt_worker_count_due(struct hwt_worker *w);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
