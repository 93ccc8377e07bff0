/*
 * larm.c: arming: pins, putting a timeout's node on the wheel, delays and
 * periods (fixed delay, fixed rate, jitter), the pending cap, a node's task,
 * and the schedule timer:schedule and timer:every share (larm.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "larm.h"

/* ---- pins: what keeps pending handles alive -------------------------------- */

/* The cold half of lhwt_unpin (larm.h). */
void lhwt_free_pin(struct timer *T, uint32_t slot)
{
	if (T->stopped)
		return;
	if (T->nfree == T->free_cap) {
		uint32_t cap = T->free_cap ? 2 * T->free_cap : 64;
		uint32_t *grown = realloc(T->free_pins, cap * sizeof *grown);
		if (!grown)
			return;
		T->free_pins = grown;
		T->free_cap = cap;
	}
	T->free_pins[T->nfree++] = slot;
}

/* ---- scheduling ----------------------------------------------------------- */

/* Put `n` on the wheel to be due at monotonic time `due` (clock read: `now`). */
static void arm_at(struct timer *T, struct hwt_node *n, int64_t now, int64_t due)
{
	if (due < T->host_wake)
		T->wake = 1;
	hwt_worker_add(&T->w, n, hwt_worker_tick_at(&T->w, due), now);
}

/* Put `n` on the wheel `delay_ns` after `now`; due at the next dispatch if <= 0. */
static void arm(struct timer *T, struct hwt_node *n, int64_t now, int64_t delay_ns)
{
	if (delay_ns > 0) {
		arm_at(T, n, now, now + delay_ns);
		return;
	}
	if (T->host_wake > 0)
		T->wake = 1;
	hwt_worker_add_due(&T->w, n);
}

void lhwt_arm_kept(struct timer *T, struct hwt_node *n, int64_t now)
{
	int64_t due = hwt_worker_time_of(&T->w, n->expires);
	if (due <= now)
		arm(T, n, now, 0); /* due at once, as a reset(0) is */
	else
		arm_at(T, n, now, due);
}

/* A host that sleeps until timer:timeout() and cannot poll the pipe (nginx)
 * registered a hook: call it once when something became due before the
 * host's planned wake-up. The hook is glue (it posts a semaphore), never the
 * user's callback; an error in it is printed, not raised. */
void lhwt_wake_host(lua_State *L, struct timer *T, int ud)
{
	T->wake = 0;
	T->host_wake = 0;
	hwt_getuv(L, ud, USERVAL_WAKEUP);
	if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
		fprintf(stderr, "hwtimer: error in wakeup hook: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
	}
}

static uint64_t next_random(struct timer *T)
{ /* xorshift64* */
	T->rng ^= T->rng >> 12;
	T->rng ^= T->rng << 25;
	T->rng ^= T->rng >> 27;
	return T->rng * UINT64_C(2685821657736338717);
}

int64_t lhwt_check_delay(lua_State *L, int idx, int periodic)
{
	lua_Number d = lhwt_check_finite(L, idx);
	if (periodic)
		luaL_argcheck(L, d > 0, idx, "positive interval expected");
	luaL_argcheck(L, d <= MAX_DELAY, idx, "delay too large (at most 1e9 seconds)");
	return d <= 0 ? 0 : (int64_t)ceil(d * 1e9);
}

/* ---- periods ------------------------------------------------------------------ */

/* Raise unless every key of the table at idx is a field every{} knows. */
static void check_period_keys(lua_State *L, int idx)
{
	static const char *const known[] = { "interval", "rate", "jitter", "first", NULL };
	int i;
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		const char *key;
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_argerror(L, idx, "option names must be strings");
		key = lua_tostring(L, -1);
		for (i = 0; known[i] && strcmp(known[i], key); i++)
			;
		if (!known[i])
			luaL_argerror(L, idx, lua_pushfstring(L, "unknown option '%s'", key));
	}
}

/* A number of seconds in [lo, MAX_DELAY] (lo excluded if open) on top, as ns. */
static int64_t period_field(lua_State *L, int idx, int open, const char *message)
{
	lua_Number x = lua_tonumber(L, -1);
	if (lua_type(L, -1) != LUA_TNUMBER || !((open ? x > 0 : x >= 0) && x <= MAX_DELAY))
		luaL_argerror(L, idx, message);
	return (int64_t)ceil(x * 1e9);
}

static void check_period(lua_State *L, int idx, struct period *p)
{
	p->advanced = p->rate = p->has_first = 0;
	p->first = 0;
	p->jitter = 0;
	if (lua_type(L, idx) != LUA_TTABLE) {
		p->interval = lhwt_check_delay(L, idx, 1);
		return;
	}
	check_period_keys(L, idx);
	p->advanced = 1;
	lua_getfield(L, idx, "interval");
	p->interval = period_field(L, idx, 1, "field 'interval': positive number of seconds expected");
	lua_getfield(L, idx, "rate");
	p->rate = lua_toboolean(L, -1);
	lua_getfield(L, idx, "jitter");
	if (!lua_isnil(L, -1)) {
		p->jitter = lua_tonumber(L, -1);
		if (lua_type(L, -1) != LUA_TNUMBER || !(p->jitter >= 0 && p->jitter <= 1))
			luaL_argerror(L, idx, "field 'jitter': number from 0 to 1 expected");
	}
	lua_getfield(L, idx, "first");
	if (!lua_isnil(L, -1)) {
		p->has_first = 1;
		p->first = period_field(L, idx, 0, "field 'first': non-negative number of seconds expected");
	}
	lua_pop(L, 4);
}

/* A random extra delay of up to jitter * interval (never negative: never early). */
static int64_t jitter_ns(struct timer *T, const struct period *p)
{
	double u;
	if (p->jitter <= 0)
		return 0;
	u = (double)(next_random(T) >> 11) / 9007199254740992.0; /* [0, 1) */
	return (int64_t)(u * p->jitter * (double)p->interval);
}

/* New handle (left on top): a node, and where packs live in the handle
 * (compat.h) room for its pack. `p` is NULL for a one-shot timeout. */
static struct hwt_node *new_handle(lua_State *L, const struct period *p, int nargs)
{
	int packed = p != NULL || nargs > 0;
	struct hwt_node *n = hwt_newuserdata(L, sizeof *n,
					     HWT_PACK_IN_HANDLE && packed ? 1 + (p != NULL) + nargs : 0);
	hwt_node_init(n);
	n->owner_flags = (uint8_t)(PENDING | (p ? PERIODIC : 0) | (p && p->advanced ? ADVANCED : 0));
	NARGS(n) = (uint8_t)nargs;
	return n;
}

/* Push the task of a new timeout (handle at h; lbase.h): the callback at 3
 * itself, or a pack {callback, [period], the nargs arguments from 4 on}. */
static void push_new_task(lua_State *L, int h, const struct period *p, int nargs)
{
	int periodic = p != NULL, t, i;
	if (!periodic && nargs == 0) {
		lua_pushvalue(L, 3);
		return;
	}
#if HWT_PACK_IN_HANDLE
	lua_pushvalue(L, h); /* the pack is the handle itself */
	t = h;
#else
	(void)h;
	hwt_newpack(L, 1 + periodic + nargs);
	t = lua_gettop(L);
#endif
	lua_pushvalue(L, 3);
	hwt_packset(L, t, TASK_CALLBACK);
	if (periodic && !p->advanced) {
		lua_pushnumber(L, (lua_Number)p->interval);
		hwt_packset(L, t, TASK_PERIOD);
	} else if (periodic) {
		lua_createtable(L, 0, 4);
		lua_pushnumber(L, (lua_Number)p->interval);
		lua_setfield(L, -2, "interval");
		lua_pushboolean(L, p->rate);
		lua_setfield(L, -2, "rate");
		lua_pushnumber(L, p->jitter);
		lua_setfield(L, -2, "jitter");
		hwt_packset(L, t, TASK_PERIOD);
	}
	for (i = 0; i < nargs; i++) {
		lua_pushvalue(L, 4 + i);
		hwt_packset(L, t, TASK_PERIOD + periodic + i);
	}
}

void lhwt_release_pack(lua_State *L, int mt, struct hwt_node *n)
{
#if HWT_PACK_IN_HANDLE
	int i, k = 1 + (is_periodic(n) ? 1 : 0) + NARGS(n);
	lua_rawgeti(L, mt, HANDLE_AT(n));
	for (i = 1; i <= k; i++) {
		lua_pushnil(L);
		hwt_packset(L, lua_gettop(L) - 1, i);
	}
	lua_pop(L, 1);
#else
	(void)L, (void)mt, (void)n;
#endif
}

/* Store `nominal` as the start of the current period of an advanced periodic
 * timeout whose task table is at `task`. The field may allocate, and the
 * collector run a finalizer that stops the timer: false then (its worker is
 * gone; nothing may be armed). */
static int set_nominal(lua_State *L, struct timer *T, int task, int64_t nominal)
{
	hwt_packget(L, task, TASK_PERIOD);
	lua_pushnumber(L, (lua_Number)nominal);
	lua_setfield(L, -2, "nominal");
	lua_pop(L, 1);
	return !T->stopped;
}

/* Arm an advanced periodic timeout (task table at `task`) for the period
 * starting at `nominal` ns, storing that start in its schedule table. */
static void arm_period(lua_State *L, struct timer *T, int task, struct hwt_node *n, int64_t now,
		       int64_t nominal, const struct period *p)
{
	if (set_nominal(L, T, task, nominal))
		arm_at(T, n, now, nominal + jitter_ns(T, p));
}

/* Arm the first run of the periodic timeout whose task table is at `task`
 * (`p` as every was given). */
static void arm_first(lua_State *L, struct timer *T, int task, struct hwt_node *n, int64_t now,
		      const struct period *p)
{
	if (!p->advanced) {
		arm(T, n, now, p->interval);
	} else if (!p->has_first) {
		arm_period(L, T, task, n, now, now + p->interval, p);
	} else { /* exactly `first` from now, no jitter; later periods count from there */
		if (set_nominal(L, T, task, now + p->first))
			arm(T, n, now, p->first);
	}
}

/* Read an advanced period's schedule table (on top of the stack) into p;
 * returns the current period's start. Pops the table. */
int64_t lhwt_read_period(lua_State *L, struct period *p)
{
	int64_t nominal;
	lua_getfield(L, -1, "interval");
	lua_getfield(L, -2, "rate");
	lua_getfield(L, -3, "jitter");
	lua_getfield(L, -4, "nominal");
	p->interval = (int64_t)lua_tonumber(L, -4);
	p->rate = lua_toboolean(L, -3);
	p->jitter = lua_tonumber(L, -2);
	p->advanced = 1;
	nominal = (int64_t)lua_tonumber(L, -1);
	lua_pop(L, 5);
	return nominal;
}

/* Start the next period of the periodic timeout `n` (pinned in mt). Fixed
 * rate skips the periods already missed rather than running them in a burst
 * (counted in `skipped`). */
void lhwt_next_period(lua_State *L, struct timer *T, int mt, struct hwt_node *n, int64_t now)
{
	int64_t next;
	struct period p;
	int task;
	count_armed(T);
	lua_rawgeti(L, mt, TASK_AT(n));
	task = lua_gettop(L);
	if (!(n->owner_flags & ADVANCED)) {
		hwt_packget(L, task, TASK_PERIOD);
		arm(T, n, now, (int64_t)lua_tonumber(L, -1));
		lua_settop(L, task - 1);
		return;
	}
	hwt_packget(L, task, TASK_PERIOD);
	next = lhwt_read_period(L, &p);
	if (p.rate) {
		next += p.interval;
		if (next <= now) {
			int64_t missed = (now - next) / p.interval + 1;
			next += missed * p.interval;
			T->life.skipped += missed;
			T->window.skipped += missed;
		}
	} else {
		next = now + p.interval;
	}
	arm_period(L, T, task, n, now, next, &p);
	lua_settop(L, task - 1);
}

/* ---- schedule, every ----------------------------------------------------------- */

int lhwt_refuse_over_cap(lua_State *L, struct timer *T)
{
	if (T->max_pending <= 0 || T->pending < T->max_pending)
		return 0;
	lua_pushnil(L);
	lua_pushfstring(L, "too many pending timeouts (%d pending, max_pending %d)",
			(int)T->pending, (int)T->max_pending);
	return 2;
}

int lhwt_schedule(lua_State *L, int periodic)
{
	/* The clock is read first: allocating the handle may run a step of the
	 * garbage collector, which must not push the deadline back. */
	int64_t now = hwt_clock_ns();
	struct timer *T = lhwt_check_live(L, 1);
	struct period p;
	int64_t delay = 0;
	int nargs = lua_gettop(L) - 3, h, refused;
	struct hwt_node *n;
	if (periodic)
		check_period(L, 2, &p);
	else
		delay = lhwt_check_delay(L, 2, 0);
	lhwt_check_callable(L, 3);
	if (nargs > MAX_ARGS)
		return luaL_error(L, "bad argument to 'schedule' (at most %d callback arguments)", MAX_ARGS);
	if ((refused = lhwt_refuse_over_cap(L, T)) != 0)
		return refused;
	n = new_handle(L, periodic ? &p : NULL, nargs);
	h = lua_gettop(L);
	hwt_getuv(L, 1, USERVAL_HANDLE_MT); /* at h + 1 */
	lhwt_pin(L, T, h + 1, h, n);
	push_new_task(L, h, periodic ? &p : NULL, nargs); /* at h + 2 */
	lua_pushvalue(L, h + 2);
	lua_rawseti(L, h + 1, TASK_AT(n));
	lua_pushvalue(L, h + 1);
	lua_setmetatable(L, h);
	if (T->stopped) { /* by a finalizer that one of the allocations above ran */
		lhwt_unpin(L, T, h + 1, n);
		return luaL_error(L, "attempt to use a stopped timer");
	}
	T->pending++;
	count_armed(T);
	if (periodic)
		arm_first(L, T, h + 2, n, now, &p);
	else
		arm(T, n, now, delay);
	if (T->wake)
		lhwt_wake_host(L, T, 1);
	lua_settop(L, h);
	return 1;
}

/* ---- a node's task ------------------------------------------------------------ */

/* With the packed task of `n` at `task`: push its arguments. */
static int push_packed_args(lua_State *L, struct hwt_node *n, int task)
{
	int i, first = TASK_PERIOD + (is_periodic(n) ? 1 : 0);
	for (i = 0; i < NARGS(n); i++)
		hwt_packget(L, task, first + i);
	return NARGS(n);
}


int lhwt_push_task(lua_State *L, struct hwt_node *n, int mt)
{
	int task;
	luaL_checkstack(L, NARGS(n) + 2, "too many callback arguments");
	lua_rawgeti(L, mt, TASK_AT(n));
	if (!task_packed(n))
		return 1;
	task = lua_gettop(L);
	hwt_packget(L, task, TASK_CALLBACK);
	push_packed_args(L, n, task);
	lua_remove(L, task);
	return 1 + NARGS(n);
}

void lhwt_push_period(lua_State *L, struct hwt_node *n, int mt)
{
	lua_rawgeti(L, mt, TASK_AT(n));
	hwt_packget(L, lua_gettop(L), TASK_PERIOD);
	lua_remove(L, -2);
}
