/*
 * driver.c: the one thread that drives every started worker (see driver.h).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include "clock.h"
#include "driver.h"
#include "worker.h"

#define NOT_IN_HEAP SIZE_MAX

/* Process-wide on purpose: the driver exists so that a process has one timer
 * thread however many timers it makes (issue 12, item 5); every timer of
 * every Lua state registers here. `mu` guards every field but `life`, which
 * serialises starting and joining the thread, and those the thread does not
 * exist to race with (written under `life` with the thread not running). */
static struct {
	pthread_mutex_t life;     /* held across register and unregister */
	pthread_mutex_t mu;       /* guards the fields below and each worker's drv_* */
	pthread_cond_t cv;        /* the thread sleeps here (monotonic when possible) */
	pthread_cond_t done;      /* a service ended: unregister waits for it here */
	pthread_t thread;
	struct hwt_worker **heap; /* min-heap of the started workers by drv_key */
	size_t n, cap;
	struct hwt_link work;     /* workers with drain work, in turn (their drv_link) */
	struct hwt_worker *busy;  /* being serviced by the thread, outside `mu` */
	int64_t wake_ns;          /* when the sleeping thread wakes; 0 while it is awake */
	int waiters;              /* unregister calls waiting on `done` */
	int running, stopping;    /* the thread exists; it is asked to end */
	int cv_ready, cv_realtime;
	struct hwt_worker **left_behind; /* a forked child's old heap: see hwt_driver_forget */
} drv = { .life = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER,
	.done = PTHREAD_COND_INITIALIZER };

/* ---- the heap (under mu) ------------------------------------------------------ */

static void place(size_t i, struct hwt_worker *w)
{
	drv.heap[i] = w;
	w->drv_index = i;
}

static void sift_up(size_t i)
{
	struct hwt_worker *w = drv.heap[i];
	while (i > 0 && drv.heap[(i - 1) / 2]->drv_key > w->drv_key) {
		place(i, drv.heap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	place(i, w);
}

static void sift_down(size_t i)
{
	struct hwt_worker *w = drv.heap[i];
	size_t c;
	while ((c = 2 * i + 1) < drv.n) {
		if (c + 1 < drv.n && drv.heap[c + 1]->drv_key < drv.heap[c]->drv_key)
			c++;
		if (w->drv_key <= drv.heap[c]->drv_key)
			break;
		place(i, drv.heap[c]);
		i = c;
	}
	place(i, w);
}

static void rekey(struct hwt_worker *w, int64_t key)
{
	int64_t old = w->drv_key;
	w->drv_key = key;
	if (key < old)
		sift_up(w->drv_index);
	else
		sift_down(w->drv_index);
}

static void heap_remove(struct hwt_worker *w)
{
	struct hwt_worker *last = drv.heap[--drv.n];
	size_t i = w->drv_index;
	w->drv_index = NOT_IN_HEAP;
	if (last == w)
		return;
	place(i, last);
	sift_up(i);
	sift_down(last->drv_index);
}

static int heap_reserve(void)
{
	size_t cap = drv.cap ? 2 * drv.cap : 16;
	struct hwt_worker **grown;
	if (drv.n < drv.cap)
		return 0;
	if (!(grown = realloc(drv.heap, cap * sizeof *grown)))
		return ENOMEM;
	drv.heap = grown;
	drv.cap = cap;
	return 0;
}

/* ---- the thread --------------------------------------------------------------- */

/* The condition variable's timeout for monotonic time `at`. */
static struct timespec cv_deadline(int64_t at)
{
	struct timespec now;
	int64_t rel;
	if (!drv.cv_realtime)
		return hwt_clock_timespec(at);
	/* Without pthread_condattr_setclock the wait runs on the wall clock:
	 * convert, capping the sleep so a wall-clock jump costs one early wake. */
	rel = at - hwt_clock_ns();
	if (rel > INT64_C(1000000000))
		rel = INT64_C(1000000000);
	clock_gettime(CLOCK_REALTIME, &now);
	return hwt_clock_timespec((int64_t)now.tv_sec * 1000000000 + now.tv_nsec + (rel > 0 ? rel : 0));
}

/* Called with mu held: sleep until `at` (INT64_MAX: until signalled). */
static void sleep_until(int64_t at)
{
	struct timespec ts;
	drv.wake_ns = at;
	if (at == INT64_MAX) {
		pthread_cond_wait(&drv.cv, &drv.mu);
	} else {
		ts = cv_deadline(at);
		pthread_cond_timedwait(&drv.cv, &drv.mu, &ts);
	}
	drv.wake_ns = 0;
}

static int queued(struct hwt_worker *w)
{
	return !hwt_list_empty(&w->drv_link);
}

/* Called with mu held: run `step` on `w` outside it, `w` marked busy; then
 * queue `w` for drain work if the step says some remains. */
static int run_step(struct hwt_worker *w, int (*step)(struct hwt_worker *))
{
	int more;
	drv.busy = w;
	pthread_mutex_unlock(&drv.mu);
	more = step(w); /* w's lock is released when this returns */
	pthread_mutex_lock(&drv.mu);
	if (more && !queued(w) && w->drv_index != NOT_IN_HEAP)
		hwt_list_push(&drv.work, &w->drv_link);
	drv.busy = NULL;
	if (drv.waiters)
		pthread_cond_broadcast(&drv.done);
	return more;
}

/* Service the earliest worker while it is due; when none is, give a step of
 * drain work to the first worker in the queue (which goes to its tail if it
 * has more); else sleep until the earliest is due. Drain work has most of a
 * span to finish, expiries none: so an expiry waits on at most the one step
 * in progress, whatever the number of busy timers. */
static void *driver_main(void *arg)
{
	(void)arg;
#if defined(PR_SET_TIMERSLACK)
	/* Linux lets a sleep overrun by 50 us by default to batch wake-ups; this
	 * thread wakes only when something is due, so it asks for none. */
	(void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
#endif
	pthread_mutex_lock(&drv.mu);
	while (!drv.stopping) {
		struct hwt_worker *w = drv.n ? drv.heap[0] : NULL;
		if (w && w->drv_key <= hwt_clock_ns()) {
			(void)run_step(w, hwt_worker_service);
		} else if (!hwt_list_empty(&drv.work)) {
			w = hwt_container_of(drv.work.next, struct hwt_worker, drv_link);
			hwt_list_unlink(&w->drv_link);
			if (run_step(w, hwt_worker_work)) { /* let its host in between steps */
				pthread_mutex_unlock(&drv.mu);
				sched_yield();
				pthread_mutex_lock(&drv.mu);
			}
		} else {
			sleep_until(w ? w->drv_key : INT64_MAX);
		}
	}
	pthread_mutex_unlock(&drv.mu);
	return NULL;
}

static int init_cv(void)
{
	pthread_condattr_t ca;
	int err;
	if ((err = pthread_condattr_init(&ca)))
		return err;
#if defined(__APPLE__) || defined(HWT_CV_REALTIME) /* no setclock (or testing that path) */
	drv.cv_realtime = 1;
#else
	drv.cv_realtime = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0;
#endif
	err = pthread_cond_init(&drv.cv, &ca);
	pthread_condattr_destroy(&ca);
	drv.cv_ready = !err;
	return err;
}

/* Called with life and mu held. */
static int start_thread(void)
{
	int err;
	if (!drv.cv_ready && (err = init_cv()))
		return err;
	drv.stopping = 0;
	drv.wake_ns = 0;
	hwt_list_init(&drv.work);
	err = pthread_create(&drv.thread, NULL, driver_main, NULL);
	drv.running = !err;
	return err;
}

/* ---- registration ------------------------------------------------------------- */

int hwt_driver_register(struct hwt_worker *w, int64_t at_ns)
{
	int err;
	pthread_mutex_lock(&drv.life);
	pthread_mutex_lock(&drv.mu);
	err = heap_reserve();
	if (!err && !drv.running)
		err = start_thread();
	if (!err) {
		w->drv_key = at_ns;
		place(drv.n++, w);
		sift_up(w->drv_index);
		if (at_ns < drv.wake_ns)
			pthread_cond_signal(&drv.cv);
	}
	pthread_mutex_unlock(&drv.mu);
	pthread_mutex_unlock(&drv.life);
	return err;
}

/* Called with life held and mu not: the last worker is gone. */
static void stop_thread(void)
{
	pthread_mutex_lock(&drv.mu);
	drv.stopping = 1;
	pthread_cond_signal(&drv.cv);
	pthread_mutex_unlock(&drv.mu);
	pthread_join(drv.thread, NULL);
	pthread_mutex_lock(&drv.mu);
	drv.running = drv.stopping = 0;
	free(drv.heap);
	drv.heap = NULL;
	drv.cap = 0;
	pthread_mutex_unlock(&drv.mu);
}

void hwt_driver_unregister(struct hwt_worker *w)
{
	int last;
	pthread_mutex_lock(&drv.life);
	pthread_mutex_lock(&drv.mu);
	heap_remove(w);
	if (queued(w))
		hwt_list_unlink(&w->drv_link);
	while (drv.busy == w) {
		drv.waiters++;
		pthread_cond_wait(&drv.done, &drv.mu);
		drv.waiters--;
	}
	last = drv.n == 0;
	pthread_mutex_unlock(&drv.mu);
	if (last)
		stop_thread();
	pthread_mutex_unlock(&drv.life);
}

void hwt_driver_wake(struct hwt_worker *w, int64_t at_ns)
{
	pthread_mutex_lock(&drv.mu);
	if (w->drv_index != NOT_IN_HEAP && at_ns < w->drv_key) {
		rekey(w, at_ns);
		if (at_ns < drv.wake_ns)
			pthread_cond_signal(&drv.cv); /* one signal per earlier wake-up, not per add */
	}
	pthread_mutex_unlock(&drv.mu);
}

void hwt_driver_done(struct hwt_worker *w, int64_t at_ns)
{
	pthread_mutex_lock(&drv.mu);
	if (w->drv_index != NOT_IN_HEAP)
		rekey(w, at_ns);
	pthread_mutex_unlock(&drv.mu);
}

void hwt_driver_forget(void)
{
	/* The child has no driver thread, and a lock may be held by a thread
	 * that is not there: start afresh. The parent's heap may be half-grown
	 * by such a thread, so it is left behind rather than freed. */
	pthread_mutex_init(&drv.life, NULL);
	pthread_mutex_init(&drv.mu, NULL);
	pthread_cond_init(&drv.done, NULL);
	drv.left_behind = drv.heap; /* still reachable, so not a leak */
	drv.heap = NULL;
	drv.n = drv.cap = 0;
	drv.busy = NULL;
	drv.wake_ns = 0;
	drv.waiters = drv.running = drv.stopping = drv.cv_ready = 0;
}

size_t hwt_driver_count(void)
{
	size_t n;
	pthread_mutex_lock(&drv.mu);
	n = drv.n;
	pthread_mutex_unlock(&drv.mu);
	return n;
}
