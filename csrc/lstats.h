/*
 * lstats.h: what lstats.c gives the others: recording runs and callback time (ldispatch.c), and timer:stats and timer:count (lhwtimer.c registers them).
 */
#ifndef HWT_LSTATS_H
#define HWT_LSTATS_H

#include "lbase.h"

HWT_HIDDEN_BEGIN

/* A run fired `late` ns after it was due: count it, in both windows. */
void lhwt_record_fired(struct timer *T, int64_t late);
/* A dispatch spent `ns` running callbacks. */
void lhwt_record_cb_time(struct timer *T, int64_t ns);

/* A dispatched callback took `ns` (coarse clock): keep the longest. Inline:
 * once a callback. */
static inline void record_cb_max(struct timer *T, int64_t ns)
{
	if (ns > T->life.cb_max) T->life.cb_max = ns;
	if (ns > T->window.cb_max) T->window.cb_max = ns;
}

extern const luaL_Reg lhwt_stats_timer_methods[];

HWT_HIDDEN_END

#endif
