/*
 * worker.c: one timer's wheel under its lock, serviced by the driver (see worker.h).
 */
#include <unistd.h>
#include "clock.h"
#include "driver.h"
#include "pipe.h"
#include "worker.h"

/* ---- time <-> ticks ------------------------------------------------------ */

uint64_t hwt_worker_tick_at(const struct hwt_worker *w, int64_t deadline_ns)
{
	int64_t d = deadline_ns - w->origin;
	if (d <= 0)
		return 0;
	return (uint64_t)((d + w->tick_ns - 1) / w->tick_ns); /* round up: never early */
}

int64_t hwt_worker_time_of(const struct hwt_worker *w, uint64_t tick)
{
	if (tick > (uint64_t)((INT64_MAX - w->origin) / w->tick_ns))
		return INT64_MAX;
	return w->origin + (int64_t)tick * w->tick_ns;
}

/* The tick the monotonic time `now_ns` falls in. */
static uint64_t tick_of(const struct hwt_worker *w, int64_t now_ns)
{
	int64_t d = now_ns - w->origin;
	return d <= 0 ? 0 : (uint64_t)(d / w->tick_ns); /* round down: never early */
}

static uint64_t current_tick(const struct hwt_worker *w)
{
	return tick_of(w, hwt_clock_ns());
}

/* ---- the driver's side --------------------------------------------------- */

/* Called with the lock held: a host waiting on its wake socket is woken. */
static void wake_host(struct hwt_worker *w)
{
	if (w->wake_armed) {
		w->wake_armed = 0;
		hwt_wake_send(w->wake_fd);
	}
}

/* Called with the lock held: tell the host when the due list becomes non-empty. */
static void signal_due(struct hwt_worker *w)
{
	if (hwt_list_empty(&w->wheel.due))
		return;
	if (!w->signalled) {
		w->signalled = 1;
		hwt_pipe_signal(w->fds);
	}
	wake_host(w); /* apart from `signalled`: a cancel may have emptied the list since */
}

/* Node moves per locked step of drain work: neither an expiry nor the host
 * waits longer than one step, so a step is kept short (a step four times as
 * long made the host's take wait on the lock four times as long), at the
 * price of more lock rounds in the background (docs/internals.md,
 * "Measurements behind the code"). */
#define WORK_CHUNK 128

/* Called with the lock held: the tick the driver must next see this worker
 * at: every event, or, for a host that wakes itself and waits unarmed, only
 * those it leaves to us. */
static uint64_t driver_next(const struct hwt_worker *w)
{
	if (w->host_timed && !w->wake_armed)
		return hwt_wheel_next_hard(&w->wheel);
	return hwt_wheel_next(&w->wheel);
}

static void plan_wake(struct hwt_worker *w)
{
	w->wake_at = driver_next(w);
	hwt_driver_done(w, hwt_worker_time_of(w, w->wake_at)); /* under w's lock: a
		host's earlier wake-up, which waits for it, is not overwritten */
}

int hwt_worker_service(struct hwt_worker *w)
{
	int64_t now_ns;
	uint64_t now;
	int more;
	pthread_mutex_lock(&w->mu);
	now_ns = hwt_clock_ns();
	now = tick_of(w, now_ns);
	if (now > w->wheel.now)
		hwt_wheel_advance(&w->wheel, now);
	signal_due(w);
	more = hwt_wheel_work(&w->wheel, 0); /* only asks */
	plan_wake(w);
	pthread_mutex_unlock(&w->mu);
	return more;
}

int hwt_worker_work(struct hwt_worker *w)
{
	int more;
	pthread_mutex_lock(&w->mu);
	more = hwt_wheel_work(&w->wheel, WORK_CHUNK);
	if (!more)
		plan_wake(w); /* a finished job's deadline is no longer an event */
	pthread_mutex_unlock(&w->mu);
	return more;
}

/* ---- life cycle ------------------------------------------------------------ */

int hwt_worker_init(struct hwt_worker *w, int64_t tick_ns, unsigned bits)
{
	int err;
	w->wake_at = UINT64_MAX;
	w->signalled = w->running = w->wake_armed = w->host_timed = 0;
	w->wake_fd = -1;
	w->drv_index = SIZE_MAX;
	w->drv_key = INT64_MAX;
	hwt_list_init(&w->drv_link);
	w->tick_ns = tick_ns;
	w->origin = hwt_clock_ns();
	if ((err = hwt_wheel_init(&w->wheel, bits)))
		return err;
	if ((err = hwt_pipe_open(w->fds))) {
		hwt_wheel_free(&w->wheel);
		return err;
	}
	if ((err = pthread_mutex_init(&w->mu, NULL))) {
		hwt_pipe_close(w->fds);
		hwt_wheel_free(&w->wheel);
	}
	return err;
}

int hwt_worker_start(struct hwt_worker *w)
{
	int err = hwt_driver_register(w, hwt_worker_time_of(w, w->wake_at));
	w->running = !err;
	return err;
}

void hwt_worker_stop(struct hwt_worker *w)
{
	if (!w->running)
		return;
	hwt_driver_unregister(w);
	w->running = 0;
	pthread_mutex_lock(&w->mu);
	if (w->wake_fd >= 0) /* armed or not: whatever waits on it must leave */
		hwt_wake_send(w->wake_fd);
	w->wake_armed = 0;
	pthread_mutex_unlock(&w->mu);
}

void hwt_worker_destroy(struct hwt_worker *w)
{
	pthread_mutex_destroy(&w->mu);
	hwt_pipe_close(w->fds);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	w->wake_fd = -1;
	hwt_wheel_free(&w->wheel);
}

void hwt_worker_abandon(struct hwt_worker *w)
{
	/* In a forked child the driver thread does not exist and the lock may be
	 * held by it forever: neither may be touched. Only memory and fds are ours. */
	w->running = 0;
	hwt_pipe_close(w->fds);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	w->wake_fd = -1;
	hwt_wheel_free(&w->wheel);
}

void hwt_worker_forked(void)
{
	hwt_driver_forget();
}

/* ---- host side ------------------------------------------------------------- */

/* Called with the lock held: the driver must see this worker by `tick`. */
static void wake_by(struct hwt_worker *w, uint64_t tick)
{
	if (tick < w->wake_at) {
		w->wake_at = tick; /* one driver call per earlier wake-up, not per add */
		if (w->running)
			hwt_driver_wake(w, hwt_worker_time_of(w, tick));
	}
}

/* Called with the lock held, after `n` was added or moved. */
static void notice(struct hwt_worker *w, struct hwt_node *n)
{
	if (n->slot == HWT_SLOT_DUE) {
		signal_due(w);
	} else {
		if (w->host_timed && !w->wake_armed && n->slot >> w->wheel.bits < 2)
			return; /* level 0: the host's (it learns of the deadline from timeout()) */
		wake_by(w, hwt_wheel_alert(&w->wheel, n));
	}
}

/* Called with the lock held, before placing a node. An idle worker sleeps
 * without advancing the wheel, so after a quiet spell the wheel's time lags
 * the clock and a short timeout would be placed a level too high: it would
 * cost a move down and an extra wake-up, and timeout() would report that
 * move rather than the deadline. When the lag exceeds a level-0 block and no
 * event lies in between, jump the wheel to now first, as the worker itself
 * would on waking; anything due is left to the worker. */
static void catch_up(struct hwt_worker *w, int64_t now_ns)
{
	uint64_t now;
	if (now_ns < hwt_worker_time_of(w, w->wheel.now + ((uint64_t)1 << w->wheel.bits)))
		return;
	now = tick_of(w, now_ns);
	/* wake_at never lies after the next event: while the worker sleeps past
	 * now the jump succeeds, so the lag is fixed in one go and the scan for
	 * the next event runs at most once a block. Otherwise (the worker is
	 * awake or about to be) the worker advances the wheel itself. */
	if (w->wake_at > now && hwt_wheel_next(&w->wheel) > now)
		hwt_wheel_advance(&w->wheel, now);
}

void hwt_worker_add(struct hwt_worker *w, struct hwt_node *n, uint64_t tick, int64_t now_ns)
{
	pthread_mutex_lock(&w->mu);
	catch_up(w, now_ns);
	hwt_wheel_add(&w->wheel, n, tick);
	notice(w, n);
	pthread_mutex_unlock(&w->mu);
}

void hwt_worker_move(struct hwt_worker *w, struct hwt_node *n, uint64_t tick, int64_t now_ns)
{
	pthread_mutex_lock(&w->mu);
	catch_up(w, now_ns);
	if (!hwt_wheel_move(&w->wheel, n, tick))
		notice(w, n); /* it moved: maybe earlier than the worker plans to wake */
	pthread_mutex_unlock(&w->mu);
}

void hwt_worker_add_due(struct hwt_worker *w, struct hwt_node *n)
{
	uint64_t tick = current_tick(w);
	pthread_mutex_lock(&w->mu);
	hwt_wheel_add_due(&w->wheel, n, tick);
	signal_due(w);
	pthread_mutex_unlock(&w->mu);
}

void hwt_worker_del(struct hwt_worker *w, struct hwt_node *n)
{
	pthread_mutex_lock(&w->mu);
	hwt_wheel_del(&w->wheel, n);
	pthread_mutex_unlock(&w->mu);
}

void hwt_worker_del_batch(struct hwt_worker *w, struct hwt_node *const *n, unsigned count)
{
	unsigned i;
	for (i = 0; i < count; i++) /* the misses overlap instead of coming one by one */
		hwt_list_prefetch_neighbours(&n[i]->link);
	pthread_mutex_lock(&w->mu);
	for (i = 0; i < count; i++)
		hwt_wheel_del(&w->wheel, n[i]);
	pthread_mutex_unlock(&w->mu);
}

/* Called with the lock held. A host that wakes at a deadline itself (its
 * poll timed out at timeout()) need not wait for the worker's wake-up and
 * pipe write, a second wake-up in series: when the worker is due by now, the
 * host expires the level-0 slots itself, through level 1 entering a span
 * that starts no drain (level 0's rings swap: a deadline at the first tick
 * of a block is the host's too). Drains, and the span entries that start
 * them, stay the worker's, which wakes anyway and finds the rest. */
static void expire_for_host(struct hwt_worker *w, int64_t now_ns)
{
	uint64_t now = tick_of(w, now_ns);
	if ((w->wake_at <= now || w->host_timed) && now > w->wheel.now)
		(void)hwt_wheel_expire(&w->wheel, now);
}

void hwt_worker_take(struct hwt_worker *w, struct hwt_link *into, int64_t now_ns)
{
	pthread_mutex_lock(&w->mu);
	expire_for_host(w, now_ns);
	hwt_list_splice(into, &w->wheel.due);
	if (w->signalled) {
		w->signalled = 0;
		hwt_pipe_consume(w->fds);
	}
	pthread_mutex_unlock(&w->mu);
}

/* A host that waits on the descriptor after timeout() said 0 must wake: it
 * may dispatch only when the descriptor is readable (a uv poll handle), and
 * when it took before the worker woke, the worker finds nothing to announce. */
int hwt_worker_take_announced(struct hwt_worker *w, struct hwt_link *into, int64_t now_ns)
{
	int took;
	pthread_mutex_lock(&w->mu);
	expire_for_host(w, now_ns);
	took = !hwt_list_empty(&w->wheel.due);
	hwt_list_splice(into, &w->wheel.due);
	if (took && !w->signalled && !w->host_timed) {
		w->signalled = 1;
		hwt_pipe_signal(w->fds);
	}
	pthread_mutex_unlock(&w->mu);
	return took;
}

void hwt_worker_rearm(struct hwt_worker *w)
{
	pthread_mutex_lock(&w->mu);
	if (!w->signalled) {
		w->signalled = 1;
		hwt_pipe_signal(w->fds);
	}
	wake_host(w);
	pthread_mutex_unlock(&w->mu);
}

int hwt_worker_wake_use(struct hwt_worker *w, int fd)
{
	int old;
	pthread_mutex_lock(&w->mu);
	old = w->wake_fd;
	w->wake_fd = fd;
	w->wake_armed = 0;
	pthread_mutex_unlock(&w->mu);
	return old;
}

int hwt_worker_wake_arm(struct hwt_worker *w, int crowded_only)
{
	int due;
	pthread_mutex_lock(&w->mu);
	due = !hwt_list_empty(&w->wheel.due);
	w->wake_armed = !due && w->wake_fd >= 0 && !(crowded_only && hwt_wheel_next_lone(&w->wheel));
	if (w->wake_armed && w->host_timed) /* the driver may sleep past level 0's deadlines */
		wake_by(w, hwt_wheel_next(&w->wheel));
	pthread_mutex_unlock(&w->mu);
	return due;
}

void hwt_worker_host_timed(struct hwt_worker *w)
{
	pthread_mutex_lock(&w->mu);
	w->host_timed = 1;
	pthread_mutex_unlock(&w->mu);
}

uint64_t hwt_worker_next(struct hwt_worker *w)
{
	uint64_t next;
	pthread_mutex_lock(&w->mu);
	next = hwt_list_empty(&w->wheel.due) ? hwt_wheel_next_expiry(&w->wheel) : 0;
	pthread_mutex_unlock(&w->mu);
	return next;
}

size_t hwt_worker_count_due(struct hwt_worker *w)
{
	size_t n = 0;
	const struct hwt_link *l;
	pthread_mutex_lock(&w->mu);
	for (l = w->wheel.due.next; l != &w->wheel.due; l = l->next)
		n++;
	pthread_mutex_unlock(&w->mu);
	return n;
}

void hwt_worker_collect(struct hwt_worker *w, struct hwt_link *into)
{
	hwt_wheel_collect(&w->wheel, into); /* the driver has let go of it: no lock needed */
}
