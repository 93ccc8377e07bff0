/*
 * ltimeout.h: the timeout handle (ltimeout.c): each timer's handle metatable, and its methods.
 */
#ifndef HWT_LTIMEOUT_H
#define HWT_LTIMEOUT_H

#include "lbase.h"

HWT_HIDDEN_BEGIN

/* Push the timeout metatable for timer T (userdata at ud; methods table at methods). */
void lhwt_new_handle_metatable(lua_State *L, int ud, struct timer *T, int methods);

extern const luaL_Reg lhwt_timeout_methods[];

HWT_HIDDEN_END

#endif
