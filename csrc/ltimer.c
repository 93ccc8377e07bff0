/*
 * ltimer.c: the timer object: schedule and every (armed by larm.c), stop and
 * close, the queries, tostring. (lbase.h describes the binding's state.)
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "clock.h"
#include "larm.h"
#include "ltimer.h"

/* ---- schedule, every ----------------------------------------------------------- */

static int timer_schedule(lua_State *L)
{
	return lhwt_schedule(L, 0);
}

static int timer_every(lua_State *L)
{
	return lhwt_schedule(L, 1);
}
/* ---- stop, close, collect --------------------------------------------------- */

/* Cancel everything still pending (timer at index 1), appending the handles
 * to the array at `list` (0: no list, and everything is unpinned). */
static void cancel_all(lua_State *L, struct timer *T, int list)
{
	struct hwt_link all;
	int mt, n = 0;
	hwt_list_init(&all);
	/* The due first, then the rest (the wheel's due list, then level 0's
	 * slots on up), and those whose callback runs last: hwtimer.ngx calls
	 * at most exit_max of them at worker exit. */
	hwt_list_splice(&all, &T->batch);
	hwt_list_splice(&all, &T->local);
	hwt_worker_collect(&T->w, &all);
	hwt_list_splice(&all, &T->running);
	hwt_getuv(L, 1, USERVAL_HANDLE_MT);
	mt = lua_gettop(L);
	if (T->current && state_of(T->current) == PENDING && !(T->current->owner_flags & REARMED))
		hwt_list_push(&all, &T->current->link); /* a periodic one, running, in no list */
	while (!hwt_list_empty(&all)) {
		struct hwt_node *node = hwt_container_of(all.next, struct hwt_node, link);
		hwt_list_unlink(all.next);
		node->slot = HWT_SLOT_NONE;
		if (list) { /* handed back pinned: t:task() still gives their callbacks */
			lua_rawgeti(L, mt, HANDLE_AT(node));
			lua_rawseti(L, list, ++n);
			lhwt_mark_cancelled(T, node);
		} else {
			lhwt_cancel_node(L, T, mt, node);
		}
	}
	lua_pop(L, 1);
}

/* Stop the timer at index 1 (list at `list` or 0); idempotent, also in a child. */
static void stop_timer(lua_State *L, struct timer *T, int list)
{
	int child = forked(T);
	if (T->stopped)
		return;
	lhwt_flush_timer(L, T, 1); /* before collecting: they are not "never ran" */
	T->stopped = 1;
	if (T->wake_new >= 0)
		close(T->wake_new);
	T->wake_new = -1;
	if (!child)
		hwt_worker_stop(&T->w);
	cancel_all(L, T, list);
	free(T->free_pins);
	T->free_pins = NULL;
	T->nfree = T->free_cap = 0;
	if (child)
		hwt_worker_abandon(&T->w);
	else
		hwt_worker_destroy(&T->w);
}

static int timer_stop(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	lua_settop(L, 1);
	/* The list is made as long as it can get before anything stops (every
	 * timeout it may hold is pending): filling it then allocates nothing,
	 * so a memory error cannot leave the timeouts half collected, in no
	 * list, and the worker running. */
	lua_createtable(L, T->stopped ? 0 : (int)(T->pending < INT_MAX ? T->pending : INT_MAX), 0);
	stop_timer(L, T, 2);
	return 1;
}

/* (Extra arguments may stay: stop_timer reads the timer at index 1 and
 * whatever it pushes by indexes taken after pushing.) */
static int timer_close(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	stop_timer(L, T, 0);
	return 0;
}

/* A timer that was never closed nor stopped and is collected with timeouts
 * pending drops them: say so (once, on stderr), since nothing else will.
 * Not in a forked child, where the parent's timeouts were never the child's. */
static int timer_gc(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	if (!T->stopped && !forked(T) && T->pending > 0)
		fprintf(stderr, "hwtimer: timer collected with %ld pending timeouts; they will never run "
			"(close or stop it to drop them quietly)\n", (long)T->pending);
	return timer_close(L);
}

/* ---- timer queries ------------------------------------------------------------ */

static int timer_pending(lua_State *L)
{
	lua_pushinteger(L, lhwt_to_timer(L, 1)->pending);
	return 1;
}

static int timer_getfd(lua_State *L)
{
	lua_pushinteger(L, lhwt_check_live(L, 1)->w.fds[0]);
	return 1;
}

static int timer_dirty(lua_State *L)
{
	(void)lhwt_check_live(L, 1); /* no data is ever buffered outside the pipe */
	lua_pushboolean(L, 0);
	return 1;
}

static int timer_events(lua_State *L)
{
	(void)lhwt_check_live(L, 1);
	lua_pushliteral(L, "r");
	return 1;
}

/* timer:timeout(): seconds to the next event, 0 if due now, nil if none.
 * With a wakeup hook, the answer is taken as the host's planned wake-up. */
static int timer_timeout(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	uint64_t next;
	int64_t now, at;
	lhwt_flush_timer(L, T, 1);
	if (!hwt_list_empty(&T->local)) {
		T->host_wake = 0;
		lua_pushnumber(L, 0);
		return 1;
	}
	next = hwt_worker_next(&T->w);
	if (next == UINT64_MAX) {
		T->host_wake = T->has_wakeup ? INT64_MAX : 0;
		lua_pushnil(L);
		return 1;
	}
	now = hwt_clock_ns();
	at = hwt_worker_time_of(&T->w, next);
	if (at <= now && !T->dispatching) {
		/* The time has come: take what is due, as take and dispatch would.
		 * Nothing, and what stands in the way is the worker's (a slot
		 * above level 0 not yet brought down, a span entry that starts a
		 * drain), not the host's to run: a host told 0 would call in a
		 * loop, and its lock rounds can keep the worker from the very
		 * work it waits for (in nginx, 10-30 ms of a blocked event loop).
		 * It waits a tick on its descriptor instead. */
		if (hwt_worker_take_announced(&T->w, &T->local, now)) {
			T->host_wake = 0;
			lua_pushnumber(L, 0);
			return 1;
		}
		at = now + T->w.tick_ns;
	}
	T->host_wake = T->has_wakeup && at > now ? at : 0;
	lua_pushnumber(L, at > now ? ns_to_s(at - now) : 0);
	return 1;
}

static int timer_tostring(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	if (T->stopped)
		lua_pushfstring(L, "hwtimer.timer (stopped) %p", (void *)T);
	else
		lua_pushfstring(L, "hwtimer.timer (running, %d pending) %p", (int)T->pending, (void *)T);
	return 1;
}


const luaL_Reg lhwt_timer_methods[] = {
	{ "schedule", timer_schedule },
	{ "every", timer_every },
	{ "pending", timer_pending },
	{ "getfd", timer_getfd },
	{ "dirty", timer_dirty },
	{ "pollfd", timer_getfd },
	{ "events", timer_events },
	{ "timeout", timer_timeout },
	{ "stop", timer_stop },
	{ "close", timer_close },
	{ NULL, NULL }
};

const luaL_Reg lhwt_timer_metamethods[] = {
	{ "__gc", timer_gc },
	{ "__close", timer_close },
	{ "__tostring", timer_tostring },
	{ NULL, NULL }
};
