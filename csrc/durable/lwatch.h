/*
 * lwatch.h: hwtimer.sqlite.watch (lwatch.c), registered into the module's
 * table by luaopen_hwtimer_sqlite.
 */
#ifndef HWT_LWATCH_H
#define HWT_LWATCH_H

#include <lua.h>

/* The watch type's metatable, and watch() into the table on top of L. */
void hwt_watch_register(lua_State *L);

#endif
