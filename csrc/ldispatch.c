/*
 * ldispatch.c: running due callbacks on the Lua thread: timer:dispatch and
 * timer:run, which call them below C frames; timer:take and timer:done, which
 * hand them to the host's own Lua code; timer:wakeup and timer:take_only.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* ppoll */
#endif
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include "clock.h"
#include "larm.h"
#include "ldispatch.h"
#include "lstats.h"

/* ---- dispatch ------------------------------------------------------------- */

/* The error at idx as a string: itself, its __tostring, or what it is. May
 * push one value; never converts the error in place (on_error gets it as
 * it was raised). */
static const char *error_message(lua_State *L, int idx)
{
	if (lua_type(L, idx) == LUA_TSTRING)
		return lua_tostring(L, idx);
	if (lua_type(L, idx) == LUA_TNUMBER) {
		lua_pushvalue(L, idx);
		return lua_tostring(L, -1);
	}
	if (luaL_callmeta(L, idx, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
		return lua_tostring(L, -1);
	return lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
}

/* Dispatch's message handler (one per timer, upvalue 1: the struct timer).
 * Runs only when a callback raises, where the stack still is: it keeps the
 * traceback (the message, then the stack) in the registry under the timer's
 * address for run_due, and leaves the error itself as it was. */
static int traceback_handler(lua_State *L)
{
	const char *msg;
	lua_settop(L, 1);
	msg = error_message(L, 1);
	lua_pushvalue(L, lua_upvalueindex(1));
	luaL_traceback(L, L, msg, 1);
	lua_rawset(L, LUA_REGISTRYINDEX);
	lua_settop(L, 1);
	return 1;
}

/* Make the timer's message handler (for hwtimer.new): pushes it. */
void lhwt_new_handler(lua_State *L, struct timer *T)
{
	lua_pushlightuserdata(L, T);
	lua_pushcclosure(L, traceback_handler, 1);
}

/* Replace the error on top by the error and its traceback (taken from where
 * the handler left it; made up if it never ran: a memory error). */
static void push_traceback(lua_State *L, struct timer *T)
{
	int err = lua_gettop(L);
	lua_pushlightuserdata(L, T);
	lua_rawget(L, LUA_REGISTRYINDEX);
	if (lua_type(L, -1) != LUA_TSTRING) {
		lua_pop(L, 1);
		lua_pushfstring(L, "%s\n(no traceback)", error_message(L, err));
		lua_insert(L, err + 1);
		lua_settop(L, err + 1); /* drops what error_message may have pushed */
	}
	lua_pushlightuserdata(L, T);
	lua_pushnil(L);
	lua_rawset(L, LUA_REGISTRYINDEX);
}

/* The callback of `n` failed with the error and its traceback on top: give
 * them to on_error (timer at index 1, handle metatable at `mt`). Pops both. */
static void report_error(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	COUNT(T, errors);
	if (!T->has_on_error) {
		fprintf(stderr, "hwtimer: error in timeout callback: %s\n", lua_tostring(L, -1));
		lua_pop(L, 2);
		return;
	}
	hwt_getuv(L, 1, USERVAL_ON_ERROR);
	lua_insert(L, -3);
	lua_rawgeti(L, mt, HANDLE_AT(n)); /* still pinned: see finish_current */
	lua_insert(L, -2); /* on_error, err, handle, traceback */
	if (lua_pcall(L, 3, 0, 0) != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		fprintf(stderr, "hwtimer: error in on_error: %s\n", msg ? msg : luaL_typename(L, -1));
		lua_pop(L, 1);
	}
}

/* After the callback of T->current returned or failed: a timeout that is done
 * leaves the pins; a periodic one starts its next period, unless its callback
 * re-armed it already (t:reset). */
static void finish_current(lua_State *L, struct timer *T, int mt)
{
	struct hwt_node *n = T->current;
	int rearmed = n->owner_flags & REARMED;
	T->current = NULL;
	n->owner_flags &= (uint8_t)~REARMED;
	if (state_of(n) != PENDING)
		lhwt_unpin(L, T, mt, n);
	else if (!rearmed && !T->stopped)
		lhwt_next_period(L, T, mt, n, hwt_clock_ns());
}

/* Push the callback of `n`, its handle and its arguments above run_batch's
 * two slots (T, handle metatable); returns how many arguments. */
static int push_call(lua_State *L, struct hwt_node *n)
{
	/* A C frame starts with LUA_MINSTACK free slots: enough for the callback,
	 * the handle, the arguments and hwt_getuv's scratch slot unless the
	 * argument list is long. */
	if (NARGS(n) > LUA_MINSTACK - 3)
		luaL_checkstack(L, NARGS(n) + 3, "too many callback arguments");
	if (!task_packed(n)) { /* the common case: the task is the callback */
		lua_rawgeti(L, 2, TASK_AT(n));
		lua_rawgeti(L, 2, HANDLE_AT(n));
		return 1;
	}
	(void)lhwt_push_task(L, n, 2); /* callback, arguments... */
	lua_rawgeti(L, 2, HANDLE_AT(n));
	lua_insert(L, 4); /* callback at 3, handle at 4, then the arguments */
	return 1 + NARGS(n);
}

/* Protected: run callbacks from T->batch while the budget lasts. An error
 * escapes to run_due, which reports it and calls again: one protected call
 * per batch instead of one per callback. Stack: T, handle metatable. */
static int run_batch(lua_State *L)
{
	struct timer *T = (struct timer *)lua_touserdata(L, 1);
	int64_t now;
	while (T->budget > 0 && !hwt_list_empty(&T->batch)) {
		struct hwt_node *n = hwt_container_of(T->batch.next, struct hwt_node, link);
		hwt_list_unlink(&n->link);
		n->slot = HWT_SLOT_NONE;
		T->budget--;
		T->current = n;
		/* due, so expires <= the current tick: no overflow, no guard needed */
		lhwt_record_fired(T, T->batch_now - (T->w.origin + (int64_t)n->expires * T->w.tick_ns));
		if (!is_periodic(n)) {
			set_state(n, EXPIRED);
			T->pending--;
		}
		lua_call(L, push_call(L, n), 0);
		now = hwt_clock_coarse_ns(); /* this one's end, the next one's start */
		record_cb_max(T, now - T->cb_start);
		T->cb_start = now;
		finish_current(L, T, 2);
	}
	return 0;
}

/* Push run_batch. On 5.2+ a light C function, which costs nothing; on 5.1
 * and LuaJIT lua_pushcfunction makes a new closure each time (24 B of
 * garbage a dispatch, seen in collectgarbage("count") around timer:run), so
 * there one closure is made once and kept in the registry. */
#if LUA_VERSION_NUM == 501
static const char run_batch_key = 0;

static void push_run_batch(lua_State *L)
{
	lua_pushlightuserdata(L, (void *)&run_batch_key);
	lua_rawget(L, LUA_REGISTRYINDEX);
	if (lua_type(L, -1) == LUA_TFUNCTION)
		return;
	lua_pop(L, 1);
	lua_pushcfunction(L, run_batch);
	lua_pushlightuserdata(L, (void *)&run_batch_key);
	lua_pushvalue(L, -2);
	lua_rawset(L, LUA_REGISTRYINDEX);
}
#else
#define push_run_batch(L) lua_pushcfunction(L, run_batch)
#endif

/* Run up to `max` due timeouts (timer at index 1); returns how many ran. */
static lua_Integer run_due(lua_State *L, struct timer *T, lua_Integer max)
{
	int64_t now, error_at, outside;
	int mt, mh;
	/* The clock is read once at the start of a batch: what the host may
	 * expire itself, the start for the lateness stats (a timeout the worker
	 * made due a moment after it counts as 0 late) and for cb_time; once at
	 * its end. The coarse clock (a few ns) times each callback for cb_max:
	 * the precise one costs several times as much a read, a large share of
	 * a callback's budget in a burst (W2c). */
	hwt_getuv(L, 1, USERVAL_HANDLE_MT);
	mt = lua_gettop(L);
	lhwt_flush_cancelled(L, T, mt);
	T->batch_now = hwt_clock_ns();
	hwt_worker_take(&T->w, &T->local, T->batch_now);
	hwt_list_splice(&T->batch, &T->local); /* callbacks' new timeouts wait */
	hwt_getuv(L, 1, USERVAL_HANDLER);
	mh = lua_gettop(L);
	T->budget = max;
	T->cb_start = hwt_clock_coarse_ns();
	outside = 0;
	T->dispatching = 1;
	for (;;) {
		push_run_batch(L);
		lua_pushlightuserdata(L, T);
		lua_pushvalue(L, mt);
		if (lua_pcall(L, 2, 0, mh) == LUA_OK)
			break;
		push_traceback(L, T);
		if (!T->current) { /* failed outside a callback: keep the rest for later */
			lua_pop(L, 2);
			break;
		}
		now = hwt_clock_coarse_ns();
		record_cb_max(T, now - T->cb_start);
		error_at = hwt_clock_ns(); /* on_error's time is not a callback's */
		report_error(L, T, mt, T->current);
		finish_current(L, T, mt);
		outside += hwt_clock_ns() - error_at;
		T->cb_start = hwt_clock_coarse_ns();
	}
	T->dispatching = 0;
	if (max != T->budget) /* the batch's time, less on_error's */
		lhwt_record_cb_time(T, hwt_clock_ns() - T->batch_now - outside);
	lua_settop(L, mt - 1);
	if (T->wake)
		lhwt_wake_host(L, T, 1);
	if (!T->stopped) {
		hwt_list_splice_front(&T->local, &T->batch);
		if (!hwt_list_empty(&T->local))
			hwt_worker_rearm(&T->w); /* left over: keep the pipe readable */
	}
	return max - T->budget;
}

static struct timer *check_dispatcher(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	if (T->dispatching)
		luaL_error(L, "hwtimer: dispatch called from inside a timeout callback");
	if (T->take_only)
		luaL_error(L, "hwtimer: this timer's callbacks are run by its host's glue (take_only): "
			   "dispatch and run are not available");
	return T;
}

/* An optional count at idx: a whole number >= 0, checked as a float first
 * (5.1 and LuaJIT turn NaN and infinities into arbitrary integers). */
static lua_Integer opt_count(lua_State *L, int idx)
{
	lua_Number x;
	if (lua_isnoneornil(L, idx))
		return LUA_MAXINTEGER;
	x = luaL_checknumber(L, idx);
	luaL_argcheck(L, x >= 0 && x == floor(x) && x < 9e15, idx, "non-negative integer expected");
	return (lua_Integer)x;
}

static int timer_dispatch(lua_State *L)
{
	struct timer *T = check_dispatcher(L);
	lua_Integer max = opt_count(L, 2);
	lua_settop(L, 1);
	lua_pushinteger(L, run_due(L, T, max));
	return 1;
}

/* Wait on the pipe for up to `ns` nanoseconds (< 0: no limit). */
static void wait_readable(struct timer *T, int64_t ns)
{
	/* (one initializer: no field is left to the stack's garbage) */
	struct pollfd p = { .fd = T->w.fds[0], .events = POLLIN, .revents = 0 };
	if (ns > INT64_C(86400000000000))
		ns = INT64_C(86400000000000);
#if defined(__linux__) /* ppoll: glibc and musl with _GNU_SOURCE; the BSDs hide it under _POSIX_C_SOURCE */
	{ /* to the nanosecond: the wait may end at a deadline */
		struct timespec ts = hwt_clock_timespec(ns < 0 ? 0 : ns);
		(void)ppoll(&p, 1, ns < 0 ? NULL : &ts, NULL); /* EINTR or timeout: the caller loops */
	}
#else
	(void)poll(&p, 1, ns < 0 ? -1 : (int)((ns + 999999) / 1000000));
#endif
}

/* How long timer:run may sleep: until the next deadline (hwt_worker_next),
 * when that lies ahead, since dispatch can then expire it without the
 * worker's wake-up; otherwise (the worker has work in hand) until the pipe
 * says. */
static int64_t sleep_ns(struct timer *T, int limited, int64_t left)
{
	uint64_t next = hwt_worker_next(&T->w);
	int64_t until = next == UINT64_MAX ? -1 : hwt_worker_time_of(&T->w, next) - hwt_clock_ns();
	if (until <= 0)
		return limited ? left : -1;
	return limited && left < until ? left : until;
}

/* ---- the collector in idle gaps (timer:run's gc_step) ------------------------ */
/* A host's collector steps when Lua allocates, which in a server is inside
 * callbacks: a step, or the atomic phase of 5.4's incremental collector,
 * then delays every callback due behind it. timer:run knows when it is about
 * to wait with nothing due: with gc_step it spends that gap on steps, each
 * as if GC_STEP_KB more had been allocated (what the allocations owe is paid
 * first; STEP 0 would forgive it on 5.4 and let the heap grow), reading the
 * clock after each, until the next deadline less a margin, its budget, or
 * the end of a cycle. After a cycle it rests until
 * the heap has grown by half again, so an idle or steady heap is not
 * collected over and over (an idle timer stays idle). */

#define GC_MARGIN_NS INT64_C(200000) /* stop stepping this long before a deadline */
#define GC_DEFAULT_NS INT64_C(1000000) /* gc_step = true: 1 ms a gap at most */
#define GC_STEP_KB 8 /* 5.4's default step size */

struct gc_idle {
	int64_t budget;   /* ns a gap may spend collecting; 0: off */
	int resting;      /* a cycle ended: wait for the heap to grow */
	int rest_kb;      /* ...to this size (KB) */
};

/* run's third argument: nil, or a table whose only key is gc_step. */
static void check_run_opts(lua_State *L, int idx, struct gc_idle *g)
{
	g->budget = 0;
	g->resting = 0;
	g->rest_kb = 0;
	if (lua_isnoneornil(L, idx))
		return;
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_argerror(L, idx, "option names must be strings");
		if (strcmp(lua_tostring(L, -1), "gc_step") != 0)
			luaL_argerror(L, idx, lua_pushfstring(L, "unknown option '%s'", lua_tostring(L, -1)));
	}
	lua_getfield(L, idx, "gc_step");
	if (lua_isboolean(L, -1) || lua_isnil(L, -1)) {
		g->budget = lua_toboolean(L, -1) ? GC_DEFAULT_NS : 0;
	} else {
		lua_Number x = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
		if (!(x >= 0 && x <= 1))
			luaL_argerror(L, idx, "option 'gc_step': boolean or seconds from 0 to 1 expected");
		g->budget = (int64_t)(x * 1e9);
	}
	lua_pop(L, 1);
}

/* How long timer:run may spend collecting before it must look at due
 * timeouts (see sleep_ns): until the next deadline; none when one is due
 * already (the worker has made some due, or the next tick has passed while
 * callbacks ran); -1 with no deadline and nothing ahead. */
static int64_t idle_ns(struct timer *T, int limited, int64_t left)
{
	uint64_t next = hwt_worker_next(&T->w);
	int64_t until;
	if (!hwt_list_empty(&T->local))
		return 0;
	if (next == UINT64_MAX)
		return limited ? left : -1;
	until = hwt_worker_time_of(&T->w, next) - hwt_clock_ns();
	if (until <= 0)
		return 0;
	return limited && left < until ? left : until;
}

/* Step the collector in a gap of `gap_ns` (< 0: no deadline ahead). */
static void gc_idle(lua_State *L, struct gc_idle *g, int64_t gap_ns)
{
	int64_t start, stop;
	if (g->budget == 0)
		return;
	if (g->resting) {
		if (lua_gc(L, LUA_GCCOUNT, 0) < g->rest_kb)
			return;
		g->resting = 0;
	}
	start = hwt_clock_ns();
	stop = start + (gap_ns < 0 || gap_ns - GC_MARGIN_NS > g->budget ? g->budget : gap_ns - GC_MARGIN_NS);
	while (hwt_clock_ns() < stop) {
		if (lua_gc(L, LUA_GCSTEP, GC_STEP_KB)) { /* a cycle ended */
			int kb = lua_gc(L, LUA_GCCOUNT, 0);
			g->resting = 1;
			g->rest_kb = kb + kb / 2 + 1;
			break;
		}
	}
}

static int timer_run(lua_State *L)
{
	struct timer *T = check_dispatcher(L);
	int limited = !lua_isnoneornil(L, 2);
	lua_Number secs = limited ? lhwt_check_finite(L, 2) : 0;
	struct gc_idle g;
	int64_t end;
	lua_Integer total = 0;
	luaL_argcheck(L, secs >= 0 && secs <= MAX_DELAY, 2, "non-negative number of seconds expected");
	check_run_opts(L, 3, &g);
	end = hwt_clock_ns() + (int64_t)(secs * 1e9);
	lua_settop(L, 1);
	for (;;) {
		int64_t left = end - hwt_clock_ns();
		total += run_due(L, T, LUA_MAXINTEGER);
		if (T->stopped || T->pending == 0 || (limited && left <= 0))
			break;
		if (g.budget) {
			gc_idle(L, &g, idle_ns(T, limited, left));
			left = end - hwt_clock_ns();
		}
		wait_readable(T, sleep_ns(T, limited, left));
	}
	lua_pushinteger(L, total);
	return 1;
}

/* ---- take: the host's own Lua code runs the callbacks ------------------------ */
/* Hosts whose callbacks may yield (nginx cosockets, cqueues and copas sockets)
 * cannot run them below dispatch's C frames: a yield there fails, and in nginx
 * a failed yield leaves the request's coroutine state corrupt. take hands one
 * due timeout to Lua instead, with its callback and arguments; the host calls
 * them from a coroutine it owns and reports back with timer:done. */

/* t, callback, ... = timer:take(): one due timeout, or nothing. A one-shot
 * timeout is expired now; a periodic one stays pending. Either is RUNNING and
 * stays pinned (its callback may reset it) until timer:done(t), which unpins
 * a finished one or arms a periodic one's next run. */
static int timer_take(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	struct hwt_node *n;
	int64_t now;
	if (T->dispatching)
		return luaL_error(L, "hwtimer: take called from inside a dispatched callback");
	lhwt_flush_timer(L, T, 1);
	now = hwt_clock_ns();
	if (hwt_list_empty(&T->local))
		hwt_worker_take(&T->w, &T->local, now);
	if (hwt_list_empty(&T->local))
		return 0;
	n = hwt_container_of(T->local.next, struct hwt_node, link);
	/* The stack grows (and may fail: out of memory) before the timeout
	 * leaves the list, not once it is RUNNING and nobody's. */
	luaL_checkstack(L, NARGS(n) + 4, "too many callback arguments");
	hwt_list_unlink(&n->link);
	n->slot = HWT_SLOT_NONE;
	lhwt_record_fired(T, now - (T->w.origin + (int64_t)n->expires * T->w.tick_ns));
	lua_settop(L, 1);
	hwt_getuv(L, 1, USERVAL_HANDLE_MT);
	lua_rawgeti(L, 2, HANDLE_AT(n)); /* the handle, at 3 */
	n->owner_flags |= RUNNING; /* pinned until timer:done */
	if (is_periodic(n)) {
		n->slot = HWT_SLOT_DUE; /* in the host's list: hwt_worker_del unlinks it */
		hwt_list_push(&T->running, &n->link);
	} else {
		set_state(n, EXPIRED);
		T->pending--;
	}
	return 1 + lhwt_push_task(L, n, 2);
}

/* timer:done(t, [ok]): the callback of a taken timeout returned (ok true or
 * absent) or raised (ok false: counted in errors). A periodic timeout starts
 * its next period now, unless it was cancelled meanwhile; one that its
 * callback reset goes on the wheel now, due as that reset said. */
static int timer_done(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	struct timer *owner;
	struct hwt_node *n;
	int mt, rearmed;
	lua_settop(L, 3);
	n = (struct hwt_node *)lua_touserdata(L, 2);
	owner = NULL;
	if (n && lua_getmetatable(L, 2)) { /* a timer method: no TIMER_FIELD upvalue */
		lua_getfield(L, 4, TIMER_FIELD);
		owner = (struct timer *)lua_touserdata(L, -1);
		lua_pop(L, 1);
	}
	if (!owner || owner != T)
		return lhwt_type_error(L, 2, "hwtimer.timeout of this timer");
	mt = 4;
	if (lua_isboolean(L, 3) && !lua_toboolean(L, 3))
		COUNT(T, errors);
	if (!(n->owner_flags & RUNNING))
		return 0; /* done already */
	if (forked(T))
		return luaL_error(L, "hwtimer: timer used in a forked child (timers do not survive fork; create a new one)");
	rearmed = n->owner_flags & REARMED;
	n->owner_flags &= (uint8_t)~(RUNNING | REARMED);
	if (state_of(n) != PENDING) { /* ran, or was cancelled while it ran (reset or not) */
		lhwt_unpin(L, T, mt, n);
		return 0;
	}
	if (T->stopped)
		return 0;
	hwt_list_unlink(&n->link); /* from T->running: the worker never sees that list */
	n->slot = HWT_SLOT_NONE;
	if (rearmed) /* reset from its callback: the run that reset asked for */
		lhwt_arm_kept(T, n, hwt_clock_ns());
	else
		lhwt_next_period(L, T, mt, n, hwt_clock_ns());
	if (T->wake) {
		lua_rawgeti(L, mt, PIN_TIMER);
		lhwt_wake_host(L, T, lua_gettop(L));
	}
	return 0;
}

/* timer:wakeup(fn): fn() is called (once) when a schedule, every, reset or a
 * periodic run makes something due before the host's planned wake-up, which
 * is the time the last timer:timeout() returned. For hosts that sleep on
 * something other than the pipe (an nginx semaphore). nil removes it. */
static int timer_wakeup(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	if (!lua_isnoneornil(L, 2))
		lhwt_check_callable(L, 2);
	lua_settop(L, 2);
	T->has_wakeup = !lua_isnil(L, 2);
	hwt_setuv(L, 1, USERVAL_WAKEUP);
	T->host_wake = 0;
	T->wake = 0;
	return 0;
}

/* timer:take_only(): from now on dispatch and run raise; only take runs callbacks. */
static int timer_take_only(lua_State *L)
{
	lhwt_check_live(L, 1)->take_only = 1;
	return 0;
}


const luaL_Reg lhwt_dispatch_timer_methods[] = {
	{ "dispatch", timer_dispatch },
	{ "run", timer_run },
	{ "take", timer_take },
	{ "done", timer_done },
	{ "wakeup", timer_wakeup },
	{ "take_only", timer_take_only },
	{ NULL, NULL }
};
