/*
 * compat.h: the few Lua API differences between 5.1, 5.2, 5.3, 5.4 and
 * LuaJIT that the binding meets. Everything version-specific lives here.
 *
 * Userdata "uservalues" are numbered slots 1..n: native in 5.4, emulated on
 * older versions with one table stored as the userdata's environment (5.1,
 * LuaJIT) or uservalue (5.2, 5.3).
 */
#ifndef HWT_COMPAT_H
#define HWT_COMPAT_H

#include "lua.h"
#include "lauxlib.h"

#if LUA_VERSION_NUM >= 504

#define hwt_newuserdata(L, size, nuv) lua_newuserdatauv((L), (size), (nuv))
#define hwt_getuv(L, idx, n) ((void)lua_getiuservalue((L), (idx), (n)))
#define hwt_setuv(L, idx, n) ((void)lua_setiuservalue((L), (idx), (n)))
/* A pack: a row of values. Here it is a userdata's own uservalues, so a
 * timeout with arguments keeps them in its handle, one allocation (a table
 * would be a second object and, in 5.4, two allocations: 220-230 against
 * 175-185 ns a schedule with two arguments, W1's first round). */
#define HWT_PACK_IN_HANDLE 1
#define hwt_packget(L, idx, i) ((void)lua_getiuservalue((L), (idx), (i)))
#define hwt_packset(L, idx, i) ((void)lua_setiuservalue((L), (idx), (i)))

#else

#if LUA_VERSION_NUM == 501
#define hwt_getenv_(L, idx) lua_getfenv((L), (idx))
#define hwt_setenv_(L, idx) lua_setfenv((L), (idx))
#else
#define hwt_getenv_(L, idx) lua_getuservalue((L), (idx))
#define hwt_setenv_(L, idx) lua_setuservalue((L), (idx))
#endif

/* With nuv == 0 no table is made: a timeout's handle has no uservalues, and
 * a table per schedule would double what the collector sees of it. */
static inline void *hwt_newuserdata(lua_State *L, size_t size, int nuv)
{
	void *p = lua_newuserdata(L, size);
	if (nuv > 0) {
		lua_createtable(L, nuv, 0);
		hwt_setenv_(L, -2);
	}
	return p;
}

/* Push slot n of the userdata at idx. */
static inline void hwt_getuv(lua_State *L, int idx, int n)
{
	hwt_getenv_(L, idx);
	lua_rawgeti(L, -1, n);
	lua_remove(L, -2);
}

/* Pop a value into slot n of the userdata at idx. */
static inline void hwt_setuv(lua_State *L, int idx, int n)
{
	idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
	hwt_getenv_(L, idx);
	lua_insert(L, -2);
	lua_rawseti(L, -2, n);
	lua_pop(L, 1);
}

/* A pack (see above) is a table here: a handle's uservalues would be one
 * anyway. */
#define HWT_PACK_IN_HANDLE 0
#define hwt_newpack(L, n) lua_createtable((L), (n), 0)
#define hwt_packget(L, idx, i) lua_rawgeti((L), (idx), (i))
#define hwt_packset(L, idx, i) lua_rawseti((L), (idx), (i))

#endif

#if LUA_VERSION_NUM == 501
#define LUA_OK 0

#if !defined(luaL_newlibtable) /* plain 5.1; LuaJIT 2.1 has these already */
static inline void luaL_setfuncs(lua_State *L, const luaL_Reg *l, int nup)
{
	int i;
	for (; l->name; l++) {
		for (i = 0; i < nup; i++)
			lua_pushvalue(L, -nup);
		lua_pushcclosure(L, l->func, nup);
		lua_setfield(L, -(nup + 2), l->name);
	}
	lua_pop(L, nup);
}

static inline void luaL_traceback(lua_State *L, lua_State *L1, const char *msg, int level)
{
	(void)L1;
	lua_getglobal(L, "debug");
	lua_getfield(L, -1, "traceback");
	lua_remove(L, -2);
	lua_pushstring(L, msg);
	lua_pushinteger(L, level + 1);
	lua_call(L, 2, 1);
}

#define luaL_newlibtable(L, l) lua_createtable((L), 0, sizeof(l) / sizeof((l)[0]) - 1)
#define luaL_newlib(L, l) (luaL_newlibtable(L, l), luaL_setfuncs(L, l, 0))
#endif
#endif

/* A userdata's size in bytes. */
#if LUA_VERSION_NUM == 501
#define hwt_rawlen(L, idx) lua_objlen((L), (idx))
#else
#define hwt_rawlen(L, idx) lua_rawlen((L), (idx))
#endif

#if LUA_VERSION_NUM < 503
#define LUA_MAXINTEGER ((lua_Integer)(((size_t)-1) >> 1))
#endif

/* luaL_newmetatable sets __name from 5.3 on; set it ourselves before that. */
static inline int hwt_newmetatable(lua_State *L, const char *tname)
{
	if (!luaL_newmetatable(L, tname))
		return 0;
	lua_pushstring(L, tname);
	lua_setfield(L, -2, "__name");
	return 1;
}

#endif
