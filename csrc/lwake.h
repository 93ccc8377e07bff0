/*
 * lwake.h: the wake socket (lwake.c): the timer methods of a host that waits
 * on a UDP socket of its own instead of polling the timer's descriptor.
 */
#ifndef HWT_LWAKE_H
#define HWT_LWAKE_H

#include "lbase.h"

HWT_HIDDEN_BEGIN

extern const luaL_Reg lhwt_wake_timer_methods[];

HWT_HIDDEN_END

#endif
