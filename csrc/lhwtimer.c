/*
 * lhwtimer.c: module "hwtimer.core", the top of the binding: hwtimer.new,
 * hwtimer.now, and the registration of every file's methods. lbase.h says
 * how the binding is built and which file holds what.
 */
#include <math.h>
#include <string.h>
#include "clock.h"
#include "ldispatch.h"
#include "lstats.h"
#include "ltimeout.h"
#include "ltimer.h"
#include "lwake.h"

#define HWT_VERSION "0.1.0"

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
	if (x >= (lua_Number)LUA_MAXINTEGER) /* 2^63, as math.maxinteger reads: no cast past the range */
		return LUA_MAXINTEGER;
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
		if (!lhwt_is_callable(L, -1))
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
	T = hwt_newuserdata(L, sizeof *T, TIMER_USERVALS);
	ud = lua_gettop(L);
	memset(T, 0, sizeof *T);
	T->magic = &lhwt_timer_magic;
	T->stopped = 1; /* until the worker runs: __gc must not touch it */
	T->wake_new = -1;
	T->forkgen = lhwt_fork_generation;
	T->max_pending = o.max_pending;
	T->rng = ((uint64_t)hwt_clock_ns() ^ (uint64_t)(uintptr_t)T) | 1;
	hwt_list_init(&T->local);
	hwt_list_init(&T->batch);
	hwt_list_init(&T->running);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_setmetatable(L, ud);
	lhwt_new_handle_metatable(L, ud, T, lua_upvalueindex(2));
	hwt_setuv(L, ud, USERVAL_HANDLE_MT);
	lhwt_new_handler(L, T);
	hwt_setuv(L, ud, USERVAL_HANDLER);
	if (o.on_error) {
		lua_pushvalue(L, o.on_error);
		hwt_setuv(L, ud, USERVAL_ON_ERROR);
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

/* hwtimer.core.boot_now(): seconds of hwt_clock_boot_ns. Not in hwtimer's
 * API: hwtimer.durable.redis_client compares it with now() to know that the
 * machine was not suspended since the server's clock was last read. */
static int hwtimer_boot_now(lua_State *L)
{
	lua_pushnumber(L, ns_to_s(hwt_clock_boot_ns()));
	return 1;
}

/* ---- registration ----------------------------------------------------------------- */

static const luaL_Reg module_functions[] = {
	{ "new", hwtimer_new },
	{ "now", hwtimer_now },
	{ NULL, NULL }
};

int luaopen_hwtimer_core(lua_State *L);

int luaopen_hwtimer_core(lua_State *L)
{
	int mt, tmethods;
	lhwt_detect_forks();
	hwt_newmetatable(L, TIMER_MT);
	mt = lua_gettop(L);
	luaL_setfuncs(L, lhwt_timer_metamethods, 0);
	lua_newtable(L);
	luaL_setfuncs(L, lhwt_timer_methods, 0);
	luaL_setfuncs(L, lhwt_dispatch_timer_methods, 0);
	luaL_setfuncs(L, lhwt_stats_timer_methods, 0);
	luaL_setfuncs(L, lhwt_wake_timer_methods, 0);
	lua_setfield(L, mt, "__index");
	lua_newtable(L);
	lua_pushliteral(L, TIMER_FIELD);
	luaL_setfuncs(L, lhwt_timeout_methods, 1);
	tmethods = lua_gettop(L);
	luaL_newlibtable(L, module_functions);
	lua_pushvalue(L, mt);
	lua_pushvalue(L, tmethods);
	luaL_setfuncs(L, module_functions, 2); /* hwtimer.new's upvalues */
	lua_pushliteral(L, HWT_VERSION);
	lua_setfield(L, -2, "_VERSION");
	lua_pushcfunction(L, hwtimer_boot_now); /* internal: hwtimer.lua does not export it */
	lua_setfield(L, -2, "boot_now");
	return 1;
}
