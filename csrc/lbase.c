/*
 * lbase.c: the bottom of the binding: argument checks, a timer's identity,
 * fork detection. lbase.h says how the binding is built.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* dladdr and RTLD_NODELETE: see register_fork_handler */
#endif
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include "lbase.h"

const char lhwt_timer_magic = 0;

/* ---- fork detection ------------------------------------------------------- */

/* Process-wide by nature: a fork copies every timer at once. Written only by
 * the atfork child handler, which runs in the child before it returns. */
volatile unsigned long lhwt_fork_generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* The child's timers raise (forked()); the driver thread they shared is not
 * in the child, which starts its own with its first new timer. */
static void on_fork_child(void)
{
	lhwt_fork_generation++;
	hwt_worker_forked();
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

void lhwt_detect_forks(void)
{
	pthread_once(&fork_once, register_fork_handler);
}

/* ---- argument checks, identity ---------------------------------------------- */

int lhwt_is_callable(lua_State *L, int idx)
{
	if (lua_type(L, idx) == LUA_TFUNCTION)
		return 1;
	if (!luaL_getmetafield(L, idx, "__call"))
		return 0;
	lua_pop(L, 1);
	return 1;
}

void lhwt_check_callable(lua_State *L, int idx)
{
	if (!lhwt_is_callable(L, idx))
		luaL_argerror(L, idx, lua_pushfstring(L, "function or callable object expected, got %s",
						      luaL_typename(L, idx)));
}

lua_Number lhwt_check_finite(lua_State *L, int idx)
{
	lua_Number x = lua_tonumber(L, idx); /* 0 for a non-number */
	if (x == 0 && !lua_isnumber(L, idx))
		luaL_checknumber(L, idx); /* raises the standard message */
	if (x != x || x == HUGE_VAL || x == -HUGE_VAL)
		luaL_argerror(L, idx, "finite number expected");
	return x;
}

int lhwt_type_error(lua_State *L, int idx, const char *expected)
{
	const char *got = luaL_typename(L, idx);
	if (luaL_getmetafield(L, idx, "__name") && lua_type(L, -1) == LUA_TSTRING)
		got = lua_tostring(L, -1);
	return luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

/* The timer userdata at idx, or NULL (identity: see lhwt_timer_magic). */
static struct timer *test_timer(lua_State *L, int idx)
{
	struct timer *T = (struct timer *)lua_touserdata(L, idx);
	if (T && hwt_rawlen(L, idx) == sizeof *T && T->magic == &lhwt_timer_magic)
		return T;
	return NULL;
}

/* The timer at idx, whatever its state. */
struct timer *lhwt_to_timer(lua_State *L, int idx)
{
	struct timer *T = test_timer(L, idx);
	if (!T)
		lhwt_type_error(L, idx, TIMER_MT);
	return T;
}

/* The timer at idx, usable from this process. */
static struct timer *check_timer(lua_State *L, int idx)
{
	struct timer *T = lhwt_to_timer(L, idx);
	if (forked(T))
		luaL_error(L, "hwtimer: timer used in a forked child (timers do not survive fork; create a new one)");
	return T;
}

/* The slow half of lhwt_check_live (lbase.h): raise what is wrong. */
struct timer *lhwt_live_error(lua_State *L, int idx)
{
	struct timer *T = check_timer(L, idx);
	if (T->stopped)
		luaL_error(L, "attempt to use a stopped timer");
	return T;
}
