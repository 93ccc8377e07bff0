/*
 * lhwtimer.c: the Lua binding, module "hwtimer.core".
 *
 * Two userdata types. A timer owns a worker (wheel + thread + pipe). A
 * timeout is a handle whose memory holds the wheel node, so scheduling
 * allocates one userdata and nothing else.
 *
 * Lifetimes: a pending timeout is pinned in its timer's `pins` array (timer
 * uservalue 1), so dropping the handle does not cancel it; a timeout holds
 * its timer (timeout uservalue 1), so the timer lives while any handle does.
 * State changes only here, on the Lua thread: the worker thread only moves
 * nodes between the wheel's lists under the worker's lock.
 *
 * Uservalues: timer {1 = pins, 2 = on_error}; timeout {1 = timer,
 * 2 = callback, 3.. = extra arguments}.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* dladdr and RTLD_NODELETE: see register_fork_handler */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "clock.h"
#include "compat.h"
#include "worker.h"

#define HWT_VERSION "0.1.0"
#define TIMER_MT "hwtimer.timer"
#define TIMEOUT_MT "hwtimer.timeout"
#define MAX_DELAY 1e9   /* seconds (~31 years): deadlines stay far inside int64 ns */
#define MAX_ARGS 200    /* extra arguments carried to a callback */
#define UV_PINS 1
#define UV_ON_ERROR 2
#define UV_TIMER 1
#define UV_CALLBACK 2
#define UV_ARGS 3

enum { PENDING, EXPIRED, CANCELLED };
static const char *const state_names[] = { "pending", "expired", "cancelled" };

struct timer {
	struct hwt_worker w;
	struct hwt_link local;    /* taken from the worker, not yet run */
	struct hwt_link batch;    /* being run by the current dispatch */
	struct timeout *running;  /* periodic timeout whose callback runs now */
	lua_Integer pending;      /* scheduled, neither run nor cancelled */
	lua_Integer max_pending;  /* 0: no cap */
	lua_Integer npins;
	unsigned long forkgen;    /* fork_generation when the timer was made */
	int stopped, dispatching, has_on_error;
};

struct timeout {
	struct hwt_node node;
	struct timer *owner;
	int64_t deadline;         /* intended, in monotonic ns */
	int64_t interval;         /* > 0: periodic with this fixed delay, in ns */
	lua_Integer pin;          /* index in the owner's pins, 0 when not pinned */
	unsigned short nargs;
	unsigned char state;
};

/* ---- fork detection ------------------------------------------------------- */

/* Process-wide by nature: a fork copies every timer at once. Written only by
 * the atfork child handler, which runs in the child before it returns. */
static volatile unsigned long fork_generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
	fork_generation++;
}

/* The atfork handler lives in this library's code, so the library must never
 * be unloaded (Lua dlcloses C modules when a state closes): pin it. */
static void register_fork_handler(void)
{
	Dl_info info;
	if (dladdr((const void *)&fork_once, &info) && info.dli_fname)
		(void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE);
	pthread_atfork(NULL, NULL, on_fork_child);
}

static int forked(const struct timer *T)
{
	return T->forkgen != fork_generation;
}

/* ---- small helpers --------------------------------------------------------- */

static double ns_to_s(int64_t ns)
{
	return (double)ns / 1e9;
}

static int is_callable(lua_State *L, int idx)
{
	if (lua_type(L, idx) == LUA_TFUNCTION)
		return 1;
	if (!luaL_getmetafield(L, idx, "__call"))
		return 0;
	lua_pop(L, 1);
	return 1;
}

static void check_callable(lua_State *L, int idx)
{
	if (!is_callable(L, idx))
		luaL_argerror(L, idx, lua_pushfstring(L, "function or callable object expected, got %s",
						      luaL_typename(L, idx)));
}

static lua_Number check_finite(lua_State *L, int idx)
{
	lua_Number x = luaL_checknumber(L, idx);
	if (x != x || x == HUGE_VAL || x == -HUGE_VAL)
		luaL_argerror(L, idx, "finite number expected");
	return x;
}

static struct timer *to_timer(lua_State *L, int idx)
{
	return (struct timer *)luaL_checkudata(L, idx, TIMER_MT);
}

/* The timer at idx, usable from this process. */
static struct timer *check_timer(lua_State *L, int idx)
{
	struct timer *T = to_timer(L, idx);
	if (forked(T))
		luaL_error(L, "hwtimer: timer used in a forked child (timers do not survive fork; create a new one)");
	return T;
}

/* The timer at idx, usable and not stopped. */
static struct timer *check_live(lua_State *L, int idx)
{
	struct timer *T = check_timer(L, idx);
	if (T->stopped)
		luaL_error(L, "attempt to use a stopped timer");
	return T;
}

static struct timeout *check_timeout(lua_State *L, int idx)
{
	return (struct timeout *)luaL_checkudata(L, idx, TIMEOUT_MT);
}

/* ---- pins: what keeps pending handles alive -------------------------------- */

/* Pin the handle at `h` in the pins table at `pins`. */
static void pin(lua_State *L, struct timer *T, int pins, int h, struct timeout *tm)
{
	lua_pushvalue(L, h);
	lua_rawseti(L, pins, ++T->npins);
	tm->pin = T->npins;
}

/* Unpin `tm`: the last pin moves into its place, so the array stays dense. */
static void unpin(lua_State *L, struct timer *T, int pins, struct timeout *tm)
{
	lua_Integer last = T->npins--;
	if (tm->pin != last) {
		lua_rawgeti(L, pins, last);
		((struct timeout *)lua_touserdata(L, -1))->pin = tm->pin;
		lua_rawseti(L, pins, tm->pin);
	}
	lua_pushnil(L);
	lua_rawseti(L, pins, last);
	tm->pin = 0;
}

/* Leave the pending state (to expired or cancelled); pins table at `pins`. */
static void finish(lua_State *L, struct timer *T, int pins, struct timeout *tm, int state)
{
	tm->state = (unsigned char)state;
	T->pending--;
	unpin(L, T, pins, tm);
}

/* ---- scheduling ----------------------------------------------------------- */

static void arm(struct timer *T, struct timeout *tm, int64_t now, int64_t delay_ns)
{
	tm->deadline = now + delay_ns;
	hwt_worker_add(&T->w, &tm->node,
		       delay_ns <= 0 ? 0 : hwt_worker_tick_at(&T->w, tm->deadline));
}

static int64_t check_delay(lua_State *L, int idx, int periodic)
{
	lua_Number d = check_finite(L, idx);
	if (periodic)
		luaL_argcheck(L, d > 0, idx, "positive interval expected");
	luaL_argcheck(L, d <= MAX_DELAY, idx, "delay too large (at most 1e9 seconds)");
	return d <= 0 ? 0 : (int64_t)ceil(d * 1e9);
}

/* Build the handle for timer:schedule/every: stack is timer, delay, callback, args. */
static struct timeout *new_timeout(lua_State *L, struct timer *T, int nargs)
{
	struct timeout *tm = hwt_newuserdata(L, sizeof *tm, UV_ARGS - 1 + nargs);
	int i, h = lua_gettop(L);
	luaL_setmetatable(L, TIMEOUT_MT);
	hwt_node_init(&tm->node);
	tm->owner = T;
	tm->pin = 0;
	tm->nargs = (unsigned short)nargs;
	tm->state = PENDING;
	lua_pushvalue(L, 1);
	hwt_setuv(L, h, UV_TIMER);
	for (i = 0; i <= nargs; i++) { /* the callback, then its arguments */
		lua_pushvalue(L, 3 + i);
		hwt_setuv(L, h, UV_CALLBACK + i);
	}
	return tm;
}

static int schedule(lua_State *L, int periodic)
{
	struct timer *T = check_live(L, 1);
	int64_t delay = check_delay(L, 2, periodic);
	int nargs = lua_gettop(L) - 3;
	struct timeout *tm;
	check_callable(L, 3);
	if (nargs > MAX_ARGS)
		return luaL_error(L, "bad argument to 'schedule' (at most %d callback arguments)", MAX_ARGS);
	if (T->max_pending > 0 && T->pending >= T->max_pending) {
		lua_pushnil(L);
		lua_pushfstring(L, "too many pending timeouts (%d pending, max_pending %d)",
				(int)T->pending, (int)T->max_pending);
		return 2;
	}
	tm = new_timeout(L, T, nargs);
	tm->interval = periodic ? delay : 0;
	hwt_getuv(L, 1, UV_PINS);
	pin(L, T, lua_gettop(L), -2, tm);
	lua_pop(L, 1);
	T->pending++;
	arm(T, tm, hwt_clock_ns(), delay);
	return 1;
}

static int timer_schedule(lua_State *L)
{
	return schedule(L, 0);
}

static int timer_every(lua_State *L)
{
	return schedule(L, 1);
}

/* ---- dispatch ------------------------------------------------------------- */

/* Message handler for the default on_error: keep where the error happened. */
static int traceback_handler(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (!msg) {
		if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
			msg = lua_tostring(L, -1);
		else
			msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	}
	luaL_traceback(L, L, msg, 1);
	return 1;
}

/* The callback failed with the error on top; hand it to on_error. Pops it. */
static void report_error(lua_State *L, struct timer *T, int h)
{
	if (!T->has_on_error) {
		fprintf(stderr, "hwtimer: error in timeout callback: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
		return;
	}
	hwt_getuv(L, 1, UV_ON_ERROR);
	lua_insert(L, -2);
	lua_pushvalue(L, h);
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		fprintf(stderr, "hwtimer: error in on_error: %s\n",
			msg ? msg : luaL_typename(L, -1));
		lua_pop(L, 1);
	}
}

/* Run one due timeout; pins table at `pins`, message handler at `mh` (0: none). */
static void run_one(lua_State *L, struct timer *T, int pins, int mh, struct timeout *tm)
{
	int i, h;
	lua_rawgeti(L, pins, tm->pin);
	h = lua_gettop(L);
	if (tm->interval)
		T->running = tm;
	else
		finish(L, T, pins, tm, EXPIRED);
	luaL_checkstack(L, tm->nargs + 2, "too many callback arguments");
	hwt_getuv(L, h, UV_CALLBACK);
	lua_pushvalue(L, h);
	for (i = 0; i < tm->nargs; i++)
		hwt_getuv(L, h, UV_ARGS + i);
	if (lua_pcall(L, 1 + tm->nargs, 0, mh) != LUA_OK)
		report_error(L, T, h);
	if (tm->interval) {
		T->running = NULL;
		if (tm->state == PENDING && !T->stopped) /* not cancelled meanwhile */
			arm(T, tm, hwt_clock_ns(), tm->interval);
	}
	lua_pop(L, 1);
}

/* Run up to `max` due timeouts; returns how many ran. */
static lua_Integer run_due(lua_State *L, struct timer *T, lua_Integer max)
{
	lua_Integer n = 0;
	int pins, mh = 0;
	hwt_worker_take(&T->w, &T->local);
	hwt_list_splice(&T->batch, &T->local); /* callbacks' new timeouts wait */
	hwt_getuv(L, 1, UV_PINS);
	pins = lua_gettop(L);
	if (!T->has_on_error) {
		lua_pushcfunction(L, traceback_handler);
		mh = lua_gettop(L);
	}
	T->dispatching = 1;
	while (n < max && !hwt_list_empty(&T->batch)) {
		struct hwt_link *l = T->batch.next;
		hwt_list_unlink(l);
		hwt_container_of(l, struct hwt_node, link)->slot = HWT_SLOT_NONE;
		run_one(L, T, pins, mh, hwt_container_of(l, struct timeout, node.link));
		n++;
	}
	T->dispatching = 0;
	lua_settop(L, pins - 1);
	if (!T->stopped) {
		hwt_list_splice_front(&T->local, &T->batch);
		if (!hwt_list_empty(&T->local))
			hwt_worker_rearm(&T->w); /* left over: keep the pipe readable */
	}
	return n;
}

static struct timer *check_dispatcher(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	if (T->dispatching)
		luaL_error(L, "hwtimer: dispatch called from inside a timeout callback");
	return T;
}

static int timer_dispatch(lua_State *L)
{
	struct timer *T = check_dispatcher(L);
	lua_Integer max = luaL_optinteger(L, 2, LUA_MAXINTEGER);
	luaL_argcheck(L, max >= 0, 2, "non-negative integer expected");
	lua_settop(L, 1);
	lua_pushinteger(L, run_due(L, T, max));
	return 1;
}

/* Wait on the pipe for up to `ns` nanoseconds (< 0: no limit). */
static void wait_readable(struct timer *T, int64_t ns)
{
	struct pollfd p;
	int ms = ns < 0 ? -1 : ns > INT64_C(86400000000000) ? 86400000 : (int)((ns + 999999) / 1000000);
	p.fd = T->w.fds[0];
	p.events = POLLIN;
	p.revents = 0;
	(void)poll(&p, 1, ms); /* EINTR or timeout: the caller just loops */
}

static int timer_run(lua_State *L)
{
	struct timer *T = check_dispatcher(L);
	int limited = !lua_isnoneornil(L, 2);
	lua_Number secs = limited ? check_finite(L, 2) : 0;
	int64_t end = 0;
	lua_Integer total = 0;
	luaL_argcheck(L, secs >= 0 && secs <= MAX_DELAY, 2, "non-negative number of seconds expected");
	end = hwt_clock_ns() + (int64_t)(secs * 1e9);
	lua_settop(L, 1);
	for (;;) {
		int64_t left = end - hwt_clock_ns();
		total += run_due(L, T, LUA_MAXINTEGER);
		if (T->stopped || T->pending == 0 || (limited && left <= 0))
			break;
		wait_readable(T, limited ? left : -1);
	}
	lua_pushinteger(L, total);
	return 1;
}

/* ---- stop, close, collect --------------------------------------------------- */

/* Cancel everything still pending, pushing the handles onto the list at `list`
 * (0: no list). */
static void cancel_all(lua_State *L, struct timer *T, int list)
{
	struct hwt_link all;
	int pins, n = 0;
	hwt_list_init(&all);
	hwt_worker_collect(&T->w, &all);
	hwt_list_splice(&all, &T->local);
	hwt_list_splice(&all, &T->batch);
	hwt_getuv(L, 1, UV_PINS);
	pins = lua_gettop(L);
	if (T->running) /* a periodic timeout inside its callback: end its series */
		hwt_list_push(&all, &T->running->node.link);
	while (!hwt_list_empty(&all)) {
		struct timeout *tm = hwt_container_of(all.next, struct timeout, node.link);
		hwt_list_unlink(all.next);
		tm->node.slot = HWT_SLOT_NONE;
		if (list) {
			lua_rawgeti(L, pins, tm->pin);
			lua_rawseti(L, list, ++n);
		}
		finish(L, T, pins, tm, CANCELLED);
	}
	lua_pop(L, 1);
}

/* Stop the timer at index 1 (list at `list` or 0); idempotent, also in a child. */
static void stop_timer(lua_State *L, struct timer *T, int list)
{
	int child = forked(T);
	if (T->stopped)
		return;
	T->stopped = 1;
	if (!child)
		hwt_worker_stop(&T->w);
	cancel_all(L, T, list);
	if (child)
		hwt_worker_abandon(&T->w);
	else
		hwt_worker_destroy(&T->w);
}

static int timer_stop(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	lua_settop(L, 1);
	lua_newtable(L);
	stop_timer(L, T, 2);
	return 1;
}

static int timer_close(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	lua_settop(L, 1);
	stop_timer(L, T, 0);
	return 0;
}

/* ---- timer queries ------------------------------------------------------------ */

static int timer_pending(lua_State *L)
{
	lua_pushinteger(L, to_timer(L, 1)->pending);
	return 1;
}

static int timer_getfd(lua_State *L)
{
	lua_pushinteger(L, check_live(L, 1)->w.fds[0]);
	return 1;
}

static int timer_dirty(lua_State *L)
{
	(void)check_live(L, 1); /* no data is ever buffered outside the pipe */
	lua_pushboolean(L, 0);
	return 1;
}

static int timer_events(lua_State *L)
{
	(void)check_live(L, 1);
	lua_pushliteral(L, "r");
	return 1;
}

static int timer_timeout(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	uint64_t next;
	int64_t left;
	if (!hwt_list_empty(&T->local)) {
		lua_pushnumber(L, 0);
		return 1;
	}
	next = hwt_worker_next(&T->w);
	if (next == UINT64_MAX) {
		lua_pushnil(L);
		return 1;
	}
	left = hwt_worker_time_of(&T->w, next) - hwt_clock_ns();
	lua_pushnumber(L, left > 0 ? ns_to_s(left) : 0);
	return 1;
}

static int timer_tostring(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	if (T->stopped)
		lua_pushfstring(L, "hwtimer.timer (stopped) %p", (void *)T);
	else
		lua_pushfstring(L, "hwtimer.timer (running, %d pending) %p", (int)T->pending, (void *)T);
	return 1;
}

/* ---- timeout methods ------------------------------------------------------------ */

static int timeout_cancel(lua_State *L)
{
	struct timeout *tm = check_timeout(L, 1);
	struct timer *T = tm->owner;
	if (forked(T))
		return luaL_error(L, "hwtimer: timeout used in a forked child (timers do not survive fork)");
	if (tm->state != PENDING) {
		lua_pushboolean(L, 0);
		return 1;
	}
	/* A pending timeout is linked somewhere (wheel, due list, local or batch)
	 * unless it is the periodic one running now. Its slot is the worker's to
	 * change, so it is read only under the lock, inside hwt_worker_del. */
	if (T->running != tm)
		hwt_worker_del(&T->w, &tm->node);
	lua_settop(L, 1);
	hwt_getuv(L, 1, UV_TIMER);
	hwt_getuv(L, 2, UV_PINS);
	finish(L, T, 3, tm, CANCELLED);
	lua_pushboolean(L, 1);
	return 1;
}

static int timeout_state(lua_State *L)
{
	lua_pushstring(L, state_names[check_timeout(L, 1)->state]);
	return 1;
}

static int push_state_is(lua_State *L, int state)
{
	lua_pushboolean(L, check_timeout(L, 1)->state == state);
	return 1;
}

static int timeout_is_pending(lua_State *L) { return push_state_is(L, PENDING); }
static int timeout_is_expired(lua_State *L) { return push_state_is(L, EXPIRED); }
static int timeout_is_cancelled(lua_State *L) { return push_state_is(L, CANCELLED); }

static int timeout_deadline(lua_State *L)
{
	lua_pushnumber(L, ns_to_s(check_timeout(L, 1)->deadline));
	return 1;
}

static int timeout_remaining(lua_State *L)
{
	int64_t left = check_timeout(L, 1)->deadline - hwt_clock_ns();
	lua_pushnumber(L, left > 0 ? ns_to_s(left) : 0);
	return 1;
}

static int timeout_timer(lua_State *L)
{
	(void)check_timeout(L, 1);
	hwt_getuv(L, 1, UV_TIMER);
	return 1;
}

static int timeout_task(lua_State *L)
{
	(void)check_timeout(L, 1);
	hwt_getuv(L, 1, UV_CALLBACK);
	return 1;
}

static int timeout_tostring(lua_State *L)
{
	struct timeout *tm = check_timeout(L, 1);
	int64_t left = tm->deadline - hwt_clock_ns();
	if (tm->state == PENDING)
		lua_pushfstring(L, "hwtimer.timeout (pending, %s%f s left) %p",
				tm->interval ? "periodic, " : "",
				(double)(left > 0 ? ns_to_s(left) : 0), (void *)tm);
	else
		lua_pushfstring(L, "hwtimer.timeout (%s) %p", state_names[tm->state], (void *)tm);
	return 1;
}

/* ---- hwtimer.new ---------------------------------------------------------------- */

struct options {
	lua_Number tick;
	lua_Integer wheel_size, max_pending;
	int on_error; /* stack index of the on_error function, 0 if none */
};

static void option_error(lua_State *L, const char *name, const char *expected)
{
	luaL_argerror(L, 1, lua_pushfstring(L, "option '%s': %s expected", name, expected));
}

static lua_Integer int_option(lua_State *L, const char *name, lua_Integer lo, lua_Integer hi,
			      const char *expected)
{
	lua_Number x;
	if (lua_type(L, -1) != LUA_TNUMBER)
		option_error(L, name, expected);
	x = lua_tonumber(L, -1);
	if (!(x >= (lua_Number)lo && x <= (lua_Number)hi) || x != floor(x))
		option_error(L, name, expected);
	return (lua_Integer)x;
}

static void read_option(lua_State *L, const char *name, struct options *o)
{
	if (!strcmp(name, "tick")) {
		lua_Number t = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
		if (!(t >= 1e-6 && t <= 3600))
			option_error(L, name, "number of seconds from 1e-6 to 3600");
		o->tick = t;
	} else if (!strcmp(name, "wheel_size")) {
		o->wheel_size = int_option(L, name, 1, 1 << HWT_WHEEL_MAX_BITS, "integer from 1 to 4096");
	} else if (!strcmp(name, "max_pending")) {
		o->max_pending = int_option(L, name, 0, LUA_MAXINTEGER, "non-negative integer");
	} else if (!strcmp(name, "on_error")) {
		if (!is_callable(L, -1))
			option_error(L, name, "function or callable object");
		o->on_error = 1;
	} else {
		luaL_argerror(L, 1, lua_pushfstring(L, "unknown option '%s'", name));
	}
}

/* Read opts (index 1); leaves the on_error value, if any, at o->on_error. */
static void read_options(lua_State *L, struct options *o)
{
	o->tick = 0.001;
	o->wheel_size = 512;
	o->max_pending = 0;
	o->on_error = 0;
	if (lua_isnoneornil(L, 1))
		return;
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	lua_pushnil(L);
	while (lua_next(L, 1)) {
		if (lua_type(L, -2) != LUA_TSTRING)
			luaL_argerror(L, 1, "option names must be strings");
		read_option(L, lua_tostring(L, -2), o);
		lua_pop(L, 1);
	}
	if (o->on_error) {
		lua_getfield(L, 1, "on_error");
		o->on_error = lua_gettop(L);
	}
}

static int start_timer(lua_State *L, struct timer *T, const struct options *o)
{
	int64_t tick_ns = (int64_t)llround(o->tick * 1e9);
	int err = hwt_worker_init(&T->w, tick_ns, hwt_wheel_bits_for((uint64_t)o->wheel_size));
	if (!err && (err = hwt_worker_start(&T->w)) != 0)
		hwt_worker_destroy(&T->w);
	if (err) {
		lua_pushnil(L);
		lua_pushfstring(L, "hwtimer: cannot start timer: %s", strerror(err));
		return 2;
	}
	T->stopped = 0;
	return 0;
}

static int hwtimer_new(lua_State *L)
{
	struct options o;
	struct timer *T;
	int ud, failed;
	read_options(L, &o);
	T = hwt_newuserdata(L, sizeof *T, 2);
	ud = lua_gettop(L);
	memset(T, 0, sizeof *T);
	T->stopped = 1; /* until the worker runs: __gc must not touch it */
	T->forkgen = fork_generation;
	T->max_pending = o.max_pending;
	hwt_list_init(&T->local);
	hwt_list_init(&T->batch);
	luaL_setmetatable(L, TIMER_MT);
	lua_newtable(L);
	hwt_setuv(L, ud, UV_PINS);
	if (o.on_error) {
		lua_pushvalue(L, o.on_error);
		hwt_setuv(L, ud, UV_ON_ERROR);
		T->has_on_error = 1;
	}
	if ((failed = start_timer(L, T, &o)) != 0)
		return failed;
	return 1;
}

static int hwtimer_now(lua_State *L)
{
	lua_pushnumber(L, ns_to_s(hwt_clock_ns()));
	return 1;
}

/* ---- registration ----------------------------------------------------------------- */

static const luaL_Reg timer_methods[] = {
	{ "schedule", timer_schedule },
	{ "every", timer_every },
	{ "dispatch", timer_dispatch },
	{ "run", timer_run },
	{ "pending", timer_pending },
	{ "getfd", timer_getfd },
	{ "dirty", timer_dirty },
	{ "pollfd", timer_getfd },
	{ "events", timer_events },
	{ "timeout", timer_timeout },
	{ "stop", timer_stop },
	{ "close", timer_close },
	{ NULL, NULL }
};

static const luaL_Reg timer_metamethods[] = {
	{ "__gc", timer_close },
	{ "__close", timer_close },
	{ "__tostring", timer_tostring },
	{ NULL, NULL }
};

static const luaL_Reg timeout_methods[] = {
	{ "cancel", timeout_cancel },
	{ "state", timeout_state },
	{ "is_pending", timeout_is_pending },
	{ "is_expired", timeout_is_expired },
	{ "is_cancelled", timeout_is_cancelled },
	{ "deadline", timeout_deadline },
	{ "remaining", timeout_remaining },
	{ "timer", timeout_timer },
	{ "task", timeout_task },
	{ NULL, NULL }
};

static const luaL_Reg timeout_metamethods[] = {
	{ "__tostring", timeout_tostring },
	{ NULL, NULL }
};

static const luaL_Reg module_functions[] = {
	{ "new", hwtimer_new },
	{ "now", hwtimer_now },
	{ NULL, NULL }
};

static void new_type(lua_State *L, const char *name, const luaL_Reg *methods,
		     const luaL_Reg *metamethods)
{
	hwt_newmetatable(L, name);
	luaL_setfuncs(L, metamethods, 0);
	lua_newtable(L);
	luaL_setfuncs(L, methods, 0);
	lua_setfield(L, -2, "__index");
	lua_pop(L, 1);
}

int luaopen_hwtimer_core(lua_State *L);

int luaopen_hwtimer_core(lua_State *L)
{
	pthread_once(&fork_once, register_fork_handler);
	new_type(L, TIMER_MT, timer_methods, timer_metamethods);
	new_type(L, TIMEOUT_MT, timeout_methods, timeout_metamethods);
	luaL_newlib(L, module_functions);
	lua_pushliteral(L, HWT_VERSION);
	lua_setfield(L, -2, "_VERSION");
	return 1;
}
