/*
 * lhwtimer.c: the Lua binding, module "hwtimer.core".
 *
 * Two userdata types. A timer owns a worker (wheel + thread + pipe). A
 * timeout's userdata is nothing but its 32-byte wheel node, so scheduling
 * allocates one userdata and nothing else.
 *
 * Each timer makes the metatable of its own timeouts ("handle metatable").
 * That metatable holds the timer (so a handle keeps its timer alive without a
 * reference of its own) and, in its array part, the pending handles: the pins
 * that keep a dropped handle's timeout alive. Pin i is the node's owner_word;
 * unpinning moves the last pin into the hole, so the array stays dense.
 *
 * State changes only here, on the Lua thread: the worker thread only moves
 * nodes between the wheel's lists, under the worker's lock.
 *
 * Uservalues: timer {1 = handle metatable, 2 = on_error};
 * timeout {1 = callback, then the interval if periodic, then the arguments}.
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
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "compat.h"
#include "worker.h"

#define HWT_VERSION "0.1.0"
#define TIMER_MT "hwtimer.timer"
#define TIMEOUT_NAME "hwtimer.timeout"
#define MAX_DELAY 1e9   /* seconds (~31 years): deadlines stay far inside int64 ns */
#define MAX_ARGS 200    /* extra arguments carried to a callback (fits owner_byte) */
#define UV_HANDLE_MT 1
#define UV_ON_ERROR 2
#define UV_CALLBACK 1

/* node->owner_flags: the state in the low bits, then flags */
enum { PENDING, EXPIRED, CANCELLED, STATE_MASK = 3, PERIODIC = 4 };
static const char *const state_names[] = { "pending", "expired", "cancelled" };

/* In a handle metatable: under the short string TIMER_FIELD (upvalue 1 of
 * every timeout function, since Lua looks up short strings fastest), a light
 * userdata for the struct timer; under &TIMER_OBJ_KEY, the timer's userdata. */
#define TIMER_FIELD "__hwtimer.timer"
static const char TIMER_OBJ_KEY;

struct timer {
	struct hwt_worker w;
	struct hwt_link local;     /* taken from the worker, not yet run */
	struct hwt_link batch;     /* being run by the current dispatch */
	struct hwt_node *current;  /* the timeout whose callback runs now */
	uint32_t *free_pins;       /* pin slots to reuse, a stack */
	uint32_t nfree, free_cap;
	lua_Integer pending;       /* scheduled, neither run nor cancelled */
	lua_Integer max_pending;   /* 0: no cap */
	lua_Integer budget;        /* callbacks the current dispatch may still run */
	uint32_t npins;            /* pin slots ever used: the array's length */
	unsigned long forkgen;     /* fork_generation when the timer was made */
	int stopped, dispatching, has_on_error;
};

static int state_of(const struct hwt_node *n) { return n->owner_flags & STATE_MASK; }
static int is_periodic(const struct hwt_node *n) { return n->owner_flags & PERIODIC; }

static void set_state(struct hwt_node *n, int state)
{
	n->owner_flags = (uint8_t)((n->owner_flags & ~STATE_MASK) | state);
}

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

static int type_error(lua_State *L, int idx, const char *expected)
{
	const char *got = luaL_typename(L, idx);
	if (luaL_getmetafield(L, idx, "__name") && lua_type(L, -1) == LUA_TSTRING)
		got = lua_tostring(L, -1);
	return luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

/* The timer at idx, whatever its state. Every function that takes a timer
 * has the timer metatable as upvalue 1: identity beats a registry lookup. */
static struct timer *to_timer(lua_State *L, int idx)
{
	void *p = lua_touserdata(L, idx);
	if (p && lua_getmetatable(L, idx)) {
		int same = lua_rawequal(L, -1, lua_upvalueindex(1));
		lua_pop(L, 1);
		if (same)
			return (struct timer *)p;
	}
	type_error(L, idx, TIMER_MT);
	return NULL;
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

/* The timeout at idx and its timer: a userdata whose metatable knows a
 * timer. Leaves that metatable (the pins) on top of the stack. */
static struct hwt_node *to_timeout_mt(lua_State *L, int idx, struct timer **T)
{
	void *p = lua_touserdata(L, idx);
	if (p && lua_getmetatable(L, idx)) {
		lua_pushvalue(L, lua_upvalueindex(1));
		lua_rawget(L, -2);
		*T = (struct timer *)lua_touserdata(L, -1);
		lua_pop(L, 1);
		if (*T)
			return (struct hwt_node *)p;
	}
	type_error(L, idx, TIMEOUT_NAME);
	return NULL;
}

static struct hwt_node *to_timeout(lua_State *L, int idx, struct timer **T)
{
	struct hwt_node *n = to_timeout_mt(L, idx, T);
	lua_pop(L, 1);
	return n;
}

static struct hwt_node *check_timeout(lua_State *L, int idx)
{
	struct timer *T;
	return to_timeout(L, idx, &T);
}

/* ---- pins: what keeps pending handles alive -------------------------------- */

/* Pin the handle at `h` in the handle metatable at `mt`, reusing a free slot. */
static void pin(lua_State *L, struct timer *T, int mt, int h, struct hwt_node *n)
{
	n->owner_word = T->nfree ? T->free_pins[--T->nfree] : ++T->npins;
	lua_pushvalue(L, h);
	lua_rawseti(L, mt, (lua_Integer)n->owner_word);
}

/* Unpin `n`: one table write; its slot goes on the free stack (if that cannot
 * grow, the slot is simply never reused). */
static void unpin(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	lua_pushnil(L);
	lua_rawseti(L, mt, (lua_Integer)n->owner_word);
	if (T->stopped) { /* no slot is reused after stop; the stack is freed */
		n->owner_word = 0;
		return;
	}
	if (T->nfree == T->free_cap) {
		uint32_t cap = T->free_cap ? 2 * T->free_cap : 64;
		uint32_t *grown = realloc(T->free_pins, cap * sizeof *grown);
		if (!grown) {
			n->owner_word = 0;
			return;
		}
		T->free_pins = grown;
		T->free_cap = cap;
	}
	T->free_pins[T->nfree++] = n->owner_word;
	n->owner_word = 0;
}

/* Cancelled: leave the pending state and the pins at once; the timeout
 * whose callback is running stays pinned until finish_current. */
static void cancel_node(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	set_state(n, CANCELLED);
	T->pending--;
	if (n != T->current)
		unpin(L, T, mt, n);
}

/* ---- scheduling ----------------------------------------------------------- */

/* Put `n` on the wheel `delay_ns` after `now`; due at the next dispatch if <= 0. */
static void arm(struct timer *T, struct hwt_node *n, int64_t now, int64_t delay_ns)
{
	if (delay_ns <= 0)
		hwt_worker_add_due(&T->w, n);
	else
		hwt_worker_add(&T->w, n, hwt_worker_tick_at(&T->w, now + delay_ns));
}

static int64_t check_delay(lua_State *L, int idx, int periodic)
{
	lua_Number d = check_finite(L, idx);
	if (periodic)
		luaL_argcheck(L, d > 0, idx, "positive interval expected");
	luaL_argcheck(L, d <= MAX_DELAY, idx, "delay too large (at most 1e9 seconds)");
	return d <= 0 ? 0 : (int64_t)ceil(d * 1e9);
}

/* New handle (left on top) for a callback at 3 with nargs arguments after it. */
static struct hwt_node *new_timeout(lua_State *L, int64_t interval, int nargs)
{
	int periodic = interval > 0, h, i;
	struct hwt_node *n = hwt_newuserdata(L, sizeof *n, 1 + periodic + nargs);
	h = lua_gettop(L);
	hwt_node_init(n);
	n->owner_flags = (uint8_t)(PENDING | (periodic ? PERIODIC : 0));
	n->owner_byte = (uint8_t)nargs;
	lua_pushvalue(L, 3);
	hwt_setuv(L, h, UV_CALLBACK);
	if (periodic) {
		lua_pushnumber(L, (lua_Number)interval);
		hwt_setuv(L, h, UV_CALLBACK + 1);
	}
	for (i = 0; i < nargs; i++) {
		lua_pushvalue(L, 4 + i);
		hwt_setuv(L, h, UV_CALLBACK + 1 + periodic + i);
	}
	return n;
}

static int schedule(lua_State *L, int periodic)
{
	/* The clock is read first: allocating the handle may run a step of the
	 * garbage collector, which must not push the deadline back. */
	int64_t now = hwt_clock_ns();
	struct timer *T = check_live(L, 1);
	int64_t delay = check_delay(L, 2, periodic);
	int nargs = lua_gettop(L) - 3, h;
	struct hwt_node *n;
	check_callable(L, 3);
	if (nargs > MAX_ARGS)
		return luaL_error(L, "bad argument to 'schedule' (at most %d callback arguments)", MAX_ARGS);
	if (T->max_pending > 0 && T->pending >= T->max_pending) {
		lua_pushnil(L);
		lua_pushfstring(L, "too many pending timeouts (%d pending, max_pending %d)",
				(int)T->pending, (int)T->max_pending);
		return 2;
	}
	n = new_timeout(L, periodic ? delay : 0, nargs);
	h = lua_gettop(L);
	hwt_getuv(L, 1, UV_HANDLE_MT);
	lua_pushvalue(L, -1);
	lua_setmetatable(L, h);
	pin(L, T, h + 1, h, n);
	lua_settop(L, h);
	T->pending++;
	arm(T, n, now, delay);
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

/* The callback of `n` failed with the error on top: give it to on_error
 * (timer at index 1, handle metatable at `mt`). Pops the error. */
static void report_error(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	if (!T->has_on_error) {
		fprintf(stderr, "hwtimer: error in timeout callback: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
		return;
	}
	hwt_getuv(L, 1, UV_ON_ERROR);
	lua_insert(L, -2);
	lua_rawgeti(L, mt, (lua_Integer)n->owner_word); /* still pinned: see finish_current */
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		fprintf(stderr, "hwtimer: error in on_error: %s\n", msg ? msg : luaL_typename(L, -1));
		lua_pop(L, 1);
	}
}

/* After the callback of T->current returned or failed: a one-shot timeout
 * leaves the pins; a periodic one goes back on the wheel unless cancelled. */
static void finish_current(lua_State *L, struct timer *T, int mt)
{
	struct hwt_node *n = T->current;
	T->current = NULL;
	if (is_periodic(n) && state_of(n) == PENDING && !T->stopped) {
		lua_rawgeti(L, mt, (lua_Integer)n->owner_word);
		hwt_getuv(L, -1, UV_CALLBACK + 1);
		arm(T, n, hwt_clock_ns(), (int64_t)lua_tonumber(L, -1));
		lua_pop(L, 2);
	} else {
		unpin(L, T, mt, n);
	}
}

/* Push the callback of `n` and its arguments; returns how many arguments. */
static int push_call(lua_State *L, int mt, struct hwt_node *n)
{
	int h, i, first = UV_CALLBACK + 1 + (is_periodic(n) ? 1 : 0);
	lua_rawgeti(L, mt, (lua_Integer)n->owner_word);
	h = lua_gettop(L);
	luaL_checkstack(L, n->owner_byte + 2, "too many callback arguments");
	hwt_getuv(L, h, UV_CALLBACK);
	lua_pushvalue(L, h);
	for (i = 0; i < n->owner_byte; i++)
		hwt_getuv(L, h, first + i);
	return 1 + n->owner_byte;
}

/* Protected: run callbacks from T->batch while the budget lasts. An error
 * escapes to run_due, which reports it and calls again: one protected call
 * per batch instead of one per callback. Stack: T, handle metatable. */
static int run_batch(lua_State *L)
{
	struct timer *T = (struct timer *)lua_touserdata(L, 1);
	while (T->budget > 0 && !hwt_list_empty(&T->batch)) {
		struct hwt_node *n = hwt_container_of(T->batch.next, struct hwt_node, link);
		hwt_list_unlink(&n->link);
		n->slot = HWT_SLOT_NONE;
		T->budget--;
		T->current = n;
		if (!is_periodic(n)) {
			set_state(n, EXPIRED);
			T->pending--;
		}
		lua_call(L, push_call(L, 2, n), 0);
		lua_settop(L, 2);
		finish_current(L, T, 2);
	}
	return 0;
}

/* Run up to `max` due timeouts (timer at index 1); returns how many ran. */
static lua_Integer run_due(lua_State *L, struct timer *T, lua_Integer max)
{
	int mt, mh = 0;
	hwt_worker_take(&T->w, &T->local);
	hwt_list_splice(&T->batch, &T->local); /* callbacks' new timeouts wait */
	hwt_getuv(L, 1, UV_HANDLE_MT);
	mt = lua_gettop(L);
	if (!T->has_on_error) {
		lua_pushcfunction(L, traceback_handler);
		mh = lua_gettop(L);
	}
	T->budget = max;
	T->dispatching = 1;
	for (;;) {
		lua_pushcfunction(L, run_batch);
		lua_pushlightuserdata(L, T);
		lua_pushvalue(L, mt);
		if (lua_pcall(L, 2, 0, mh) == LUA_OK)
			break;
		if (!T->current) { /* failed outside a callback: keep the rest for later */
			lua_pop(L, 1);
			break;
		}
		report_error(L, T, mt, T->current);
		finish_current(L, T, mt);
	}
	T->dispatching = 0;
	lua_settop(L, mt - 1);
	if (!T->stopped) {
		hwt_list_splice_front(&T->local, &T->batch);
		if (!hwt_list_empty(&T->local))
			hwt_worker_rearm(&T->w); /* left over: keep the pipe readable */
	}
	return max - T->budget;
}

static struct timer *check_dispatcher(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	if (T->dispatching)
		luaL_error(L, "hwtimer: dispatch called from inside a timeout callback");
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
	int64_t end;
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

/* Cancel everything still pending (timer at index 1), appending the handles
 * to the array at `list` (0: no list). */
static void cancel_all(lua_State *L, struct timer *T, int list)
{
	struct hwt_link all;
	int mt, n = 0;
	hwt_list_init(&all);
	hwt_worker_collect(&T->w, &all);
	hwt_list_splice(&all, &T->local);
	hwt_list_splice(&all, &T->batch);
	hwt_getuv(L, 1, UV_HANDLE_MT);
	mt = lua_gettop(L);
	if (T->current && state_of(T->current) == PENDING) /* a periodic one, running */
		hwt_list_push(&all, &T->current->link);
	while (!hwt_list_empty(&all)) {
		struct hwt_node *node = hwt_container_of(all.next, struct hwt_node, link);
		hwt_list_unlink(all.next);
		node->slot = HWT_SLOT_NONE;
		if (list) {
			lua_rawgeti(L, mt, (lua_Integer)node->owner_word);
			lua_rawseti(L, list, ++n);
		}
		cancel_node(L, T, mt, node);
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
	free(T->free_pins);
	T->free_pins = NULL;
	T->nfree = T->free_cap = 0;
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
	struct timer *T;
	struct hwt_node *n;
	lua_settop(L, 1);
	n = to_timeout_mt(L, 1, &T); /* the handle metatable is now at 2 */
	if (forked(T))
		return luaL_error(L, "hwtimer: timeout used in a forked child (timers do not survive fork)");
	if (state_of(n) != PENDING) {
		lua_pushboolean(L, 0);
		return 1;
	}
	/* A pending timeout is linked somewhere (wheel, due list, local or batch)
	 * unless its callback is running. Its slot is the worker's to change, so
	 * it is read only under the lock, inside hwt_worker_del. */
	if (n != T->current)
		hwt_worker_del(&T->w, n);
	cancel_node(L, T, 2, n);
	lua_pushboolean(L, 1);
	return 1;
}

static int timeout_state(lua_State *L)
{
	lua_pushstring(L, state_names[state_of(check_timeout(L, 1))]);
	return 1;
}

static int push_state_is(lua_State *L, int state)
{
	lua_pushboolean(L, state_of(check_timeout(L, 1)) == state);
	return 1;
}

static int timeout_is_pending(lua_State *L) { return push_state_is(L, PENDING); }
static int timeout_is_expired(lua_State *L) { return push_state_is(L, EXPIRED); }
static int timeout_is_cancelled(lua_State *L) { return push_state_is(L, CANCELLED); }

/* Monotonic ns at which `n` is due: its deadline rounded up to a tick. */
static int64_t due_ns(const struct timer *T, const struct hwt_node *n)
{
	return hwt_worker_time_of(&T->w, n->expires);
}

static int timeout_deadline(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = to_timeout(L, 1, &T);
	lua_pushnumber(L, ns_to_s(due_ns(T, n)));
	return 1;
}

static int timeout_remaining(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = to_timeout(L, 1, &T);
	int64_t left = due_ns(T, n) - hwt_clock_ns();
	lua_pushnumber(L, left > 0 ? ns_to_s(left) : 0);
	return 1;
}

static int timeout_timer(lua_State *L)
{
	(void)check_timeout(L, 1);
	lua_getmetatable(L, 1);
	lua_rawgetp(L, -1, &TIMER_OBJ_KEY);
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
	struct timer *T;
	struct hwt_node *n = to_timeout(L, 1, &T);
	int64_t left = due_ns(T, n) - hwt_clock_ns();
	if (state_of(n) == PENDING)
		lua_pushfstring(L, TIMEOUT_NAME " (pending, %s%f s left) %p",
				is_periodic(n) ? "periodic, " : "",
				(double)(left > 0 ? ns_to_s(left) : 0), (void *)n);
	else
		lua_pushfstring(L, TIMEOUT_NAME " (%s) %p", state_names[state_of(n)], (void *)n);
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

/* The metatable of the timer's timeouts (see the top of this file); the
 * timeout methods table is upvalue 2 of hwtimer.new. */
static void new_handle_metatable(lua_State *L, int ud, struct timer *T)
{
	lua_createtable(L, 0, 6);
	lua_pushvalue(L, lua_upvalueindex(2));
	lua_setfield(L, -2, "__index");
	lua_pushvalue(L, lua_upvalueindex(3));
	lua_pushcclosure(L, timeout_tostring, 1);
	lua_setfield(L, -2, "__tostring");
	lua_pushliteral(L, TIMEOUT_NAME);
	lua_setfield(L, -2, "__name");
	lua_pushliteral(L, TIMEOUT_NAME); /* getmetatable() must not expose the pins */
	lua_setfield(L, -2, "__metatable");
	lua_pushlightuserdata(L, T);
	lua_setfield(L, -2, TIMER_FIELD);
	lua_pushvalue(L, ud);
	lua_rawsetp(L, -2, &TIMER_OBJ_KEY);
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
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_setmetatable(L, ud);
	new_handle_metatable(L, ud, T);
	hwt_setuv(L, ud, UV_HANDLE_MT);
	if (o.on_error) {
		lua_pushvalue(L, o.on_error);
		hwt_setuv(L, ud, UV_ON_ERROR);
		T->has_on_error = 1;
	}
	if ((failed = start_timer(L, T, &o)) != 0)
		return failed;
	lua_settop(L, ud);
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

static const luaL_Reg module_functions[] = {
	{ "new", hwtimer_new },
	{ "now", hwtimer_now },
	{ NULL, NULL }
};

/* Stack: ... table upvalue: set `l` into the table, each with the upvalue. */
static void set_with_upvalue(lua_State *L, const luaL_Reg *l, int table, int upvalue)
{
	lua_pushvalue(L, table);
	lua_pushvalue(L, upvalue);
	luaL_setfuncs(L, l, 1);
	lua_pop(L, 1);
}

int luaopen_hwtimer_core(lua_State *L);

int luaopen_hwtimer_core(lua_State *L)
{
	int mt, methods, tmethods;
	pthread_once(&fork_once, register_fork_handler);
	hwt_newmetatable(L, TIMER_MT);
	mt = lua_gettop(L);
	lua_newtable(L);
	methods = lua_gettop(L);
	set_with_upvalue(L, timer_methods, methods, mt);
	set_with_upvalue(L, timer_metamethods, mt, mt);
	lua_setfield(L, mt, "__index");
	lua_newtable(L);
	tmethods = lua_gettop(L);
	lua_pushliteral(L, TIMER_FIELD);
	luaL_setfuncs(L, timeout_methods, 1);
	luaL_newlibtable(L, module_functions);
	lua_pushvalue(L, mt);
	lua_pushvalue(L, tmethods);
	lua_pushliteral(L, TIMER_FIELD);
	luaL_setfuncs(L, module_functions, 3);
	lua_pushliteral(L, HWT_VERSION);
	lua_setfield(L, -2, "_VERSION");
	return 1;
}
