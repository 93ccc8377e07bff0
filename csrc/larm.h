/*
 * larm.h: arming (larm.c): pins, putting a timeout's node on the wheel,
 * delays and periods, the pending cap, a node's task, and the schedule that
 * timer:schedule and timer:every share. Above lbase.h; the object files
 * (ltimer.c, ltimeout.c, ldispatch.c) use it.
 */
#ifndef HWT_LARM_H
#define HWT_LARM_H

#include "lbase.h"

HWT_HIDDEN_BEGIN

/* How a periodic timeout repeats (timer:every's first argument). */
struct period {
	int64_t interval; /* ns */
	int advanced;     /* given as a table: rate and jitter apply */
	int rate;         /* fixed rate (from each period's start), else fixed delay */
	int has_first;    /* `first` given: the first run's delay */
	int64_t first;    /* ns */
	lua_Number jitter;
};

/* ---- larm.c ------------------------------------------------------------------ */

/* Push pin slot `slot` on the free stack, growing it (if it cannot grow, the
 * slot is simply never reused); nothing once stopped (the stack is freed). */
void lhwt_free_pin(struct timer *T, uint32_t slot);
/* Where a pack lives in its handle (compat.h): clear it, releasing the
 * callback and arguments of pinned `n` (handle metatable at mt). */
void lhwt_release_pack(lua_State *L, int mt, struct hwt_node *n);
/* Call the host's wakeup hook (timer at ud) and clear the request. */
void lhwt_wake_host(lua_State *L, struct timer *T, int ud);
/* A delay (>= 0) or, if periodic, an interval (> 0) in seconds at idx, as ns. */
int64_t lhwt_check_delay(lua_State *L, int idx, int periodic);
/* Read an advanced period's table (on top; popped) into p; returns its start. */
int64_t lhwt_read_period(lua_State *L, struct period *p);
/* Arm the next run of the periodic timeout `n` (pinned in mt); `now`: the clock. */
void lhwt_next_period(lua_State *L, struct timer *T, int mt, struct hwt_node *n, int64_t now);
/* Put `n` on the wheel at its own expiry (n->expires, a tick), which a reset
 * from its callback set while the host had it taken (timer:done). */
void lhwt_arm_kept(struct timer *T, struct hwt_node *n, int64_t now);
/* Push nil, message and return 2 if max_pending refuses one more; else 0. */
int lhwt_refuse_over_cap(lua_State *L, struct timer *T);

/* Push the callback and the arguments of pinned `n` (handle metatable at
 * mt); returns how many. */
int lhwt_push_task(lua_State *L, struct hwt_node *n, int mt);
/* Push the period of pinned periodic `n` (handle metatable at mt): its
 * interval in ns, or with ADVANCED its schedule table. */
void lhwt_push_period(lua_State *L, struct hwt_node *n, int mt);
/* timer:schedule (periodic 0) and timer:every (1): arguments from 1 on. */
int lhwt_schedule(lua_State *L, int periodic);

/* ---- pins: what keeps pending handles alive (inline: schedule, cancel and
 * every callback pass here) ------------------------------------------------------- */

/* Pin the handle at `h` in the handle metatable at `mt`, reusing a free slot.
 * Its task goes to TASK_AT(n) after this (lhwt_schedule). */
static inline void lhwt_pin(lua_State *L, struct timer *T, int mt, int h, struct hwt_node *n)
{
	PIN(n) = T->nfree ? T->free_pins[--T->nfree] : ++T->npins;
	lua_pushvalue(L, h);
	lua_rawseti(L, mt, HANDLE_AT(n));
}

/* Free the pin slot of `n`, whose handle and task have left the metatable. */
static inline void lhwt_free_slot(struct timer *T, struct hwt_node *n)
{
	if (T->nfree < T->free_cap && !T->stopped)
		T->free_pins[T->nfree++] = PIN(n);
	else
		lhwt_free_pin(T, PIN(n));
	PIN(n) = 0;
}

/* Unpin `n` (a no-op if it is not pinned): its handle and its task leave the
 * metatable, and its slot goes on the free stack. */
static inline void lhwt_unpin(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	if (PIN(n) == 0)
		return;
	if (HWT_PACK_IN_HANDLE && task_packed(n))
		lhwt_release_pack(L, mt, n);
	lua_pushnil(L);
	lua_rawseti(L, mt, HANDLE_AT(n));
	lua_pushnil(L);
	lua_rawseti(L, mt, TASK_AT(n));
	lhwt_free_slot(T, n);
}

/* Cancelled and counted, out of the pending count: the state alone. */
static inline void lhwt_mark_cancelled(struct timer *T, struct hwt_node *n)
{
	if (run_armed(T, n)) {
		COUNT(T, cancelled);
		T->runs_pending--;
	}
	set_state(n, CANCELLED);
	T->pending--;
}

/* Cancelled: leave the pending state and the pins at once; the timeout
 * whose callback is running (dispatched, or taken by the host) stays pinned
 * until its callback ends (finish_current, timer:done). */
static inline void lhwt_cancel_node(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	lhwt_mark_cancelled(T, n);
	if (n != T->current && !(n->owner_flags & RUNNING))
		lhwt_unpin(L, T, mt, n);
}

/* Unlink the nodes cancelled for later (one lock round) and unpin them.
 * Before the host looks at due timeouts (dispatch, take, timeout, stats) and
 * before a stop collects what never ran. */
static inline void lhwt_flush_cancelled(lua_State *L, struct timer *T, int mt)
{
	unsigned i, count = T->ncancelled;
	if (count == 0)
		return;
	T->ncancelled = 0;
	if (!forked(T))
		hwt_worker_del_batch(&T->w, T->cancelled, count);
	else /* no driver thread in a child, and its lock may be held forever */
		for (i = 0; i < count; i++)
			hwt_wheel_del(&T->w.wheel, T->cancelled[i]);
	/* lhwt_cancel_later released the task: only the handle is left */
	for (i = 0; i < count; i++) {
		struct hwt_node *n = T->cancelled[i];
		n->owner_flags &= (uint8_t)~RELEASED;
		lua_pushnil(L);
		lua_rawseti(L, mt, HANDLE_AT(n));
		lhwt_free_slot(T, n);
	}
}

/* The timeout has finished (run, or cancelled, and out of its own callback
 * and not taken): its task is released, so it cannot be reset. Unpinned,
 * or cancelled and waiting for the next flush (RELEASED). */
static inline int lhwt_finished(const struct hwt_node *n)
{
	return PIN(n) == 0 || (n->owner_flags & RELEASED);
}

/* lhwt_flush_cancelled for the timer at index `ud`. */
static inline void lhwt_flush_timer(lua_State *L, struct timer *T, int ud)
{
	if (T->ncancelled == 0)
		return;
	hwt_getuv(L, ud, USERVAL_HANDLE_MT);
	lhwt_flush_cancelled(L, T, lua_gettop(L));
	lua_pop(L, 1);
}

/* Cancelled, its task released at once, its node left where it was until
 * the next flush (lhwt_flush_cancelled), pinned until then so that the
 * collector cannot free it while linked. For a timeout outside its own
 * callback and not taken (its node on the wheel, the due list or the host's
 * list of taken ones): pending. */
static inline void lhwt_cancel_later(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	lhwt_mark_cancelled(T, n);
	if (HWT_PACK_IN_HANDLE && task_packed(n))
		lhwt_release_pack(L, mt, n);
	lua_pushnil(L);
	lua_rawseti(L, mt, TASK_AT(n));
	n->owner_flags |= RELEASED;
	T->cancelled[T->ncancelled++] = n;
	if (T->ncancelled == HWT_CANCEL_BATCH)
		lhwt_flush_cancelled(L, T, mt);
}

HWT_HIDDEN_END

#endif
