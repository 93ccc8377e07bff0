/*
 * ltimer.h: the timer object (ltimer.c): its methods and metamethods.
 */
#ifndef HWT_LTIMER_H
#define HWT_LTIMER_H

#include "lbase.h"

HWT_HIDDEN_BEGIN

extern const luaL_Reg lhwt_timer_methods[], lhwt_timer_metamethods[];

HWT_HIDDEN_END

#endif
