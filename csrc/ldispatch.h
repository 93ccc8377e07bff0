/*
 * ldispatch.h: running due callbacks (ldispatch.c): the timer methods that do, and dispatch's message handler.
 */
#ifndef HWT_LDISPATCH_H
#define HWT_LDISPATCH_H

#include "lbase.h"

HWT_HIDDEN_BEGIN

/* Push a new message handler for dispatch, for timer T (its uservalue USERVAL_HANDLER). */
void lhwt_new_handler(lua_State *L, struct timer *T);

extern const luaL_Reg lhwt_dispatch_timer_methods[];

HWT_HIDDEN_END

#endif
