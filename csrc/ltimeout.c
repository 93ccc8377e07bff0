/*
 * ltimeout.c: the timeout handle: its metatable (made per timer), cancel,
 * reset and the queries. A handle is its wheel node and nothing else;
 * lbase.h says how it finds its timer and what keeps it alive.
 */
#include "clock.h"
#include "larm.h"
#include "ltimeout.h"

static const char *const state_names[] = { "pending", "expired", "cancelled" };

/* The node of the handle at idx (its userdata p, already fetched) and its
 * timer: a userdata whose metatable knows a timer. Leaves that metatable (the
 * pins) on top of the stack. */
static struct hwt_node *node_of(lua_State *L, int idx, void *p, struct timer **T)
{
	if (p && lua_getmetatable(L, idx)) {
		lua_pushvalue(L, lua_upvalueindex(1));
		lua_rawget(L, -2);
		*T = (struct timer *)lua_touserdata(L, -1);
		lua_pop(L, 1);
		if (*T)
			return (struct hwt_node *)p;
	}
	lhwt_type_error(L, idx, TIMEOUT_NAME);
	return NULL;
}

/* node_of for the handle at idx: its node and timer, the pins left on top. */
static struct hwt_node *node_and_pins(lua_State *L, int idx, struct timer **T)
{
	return node_of(L, idx, lua_touserdata(L, idx), T);
}

/* The node of the handle at idx and its timer. */
static struct hwt_node *node_and_timer(lua_State *L, int idx, struct timer **T)
{
	struct hwt_node *n = node_and_pins(L, idx, T);
	lua_pop(L, 1);
	return n;
}

/* The node of the handle at idx. */
static struct hwt_node *check_node(lua_State *L, int idx)
{
	struct timer *T;
	return node_and_timer(L, idx, &T);
}

/* ---- timeout methods ------------------------------------------------------------ */

/* Cancel the handle at 1, node `n` of timer T (handle metatable at mt). */
static int cancel(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	if (forked(T))
		return luaL_error(L, "hwtimer: timeout used in a forked child (timers do not survive fork)");
	if (state_of(n) != PENDING) {
		lua_pushboolean(L, 0);
		return 1;
	}
	/* Linked somewhere (wheel, due list, local or batch) or, while its own
	 * callback runs, maybe nowhere: the slot is the worker's to change, so
	 * it is read only under the lock, inside hwt_worker_del. */
	if (!T->dispatching && n != T->current && !(n->owner_flags & RUNNING)) {
		lhwt_cancel_later(L, T, mt, n); /* the common case: no lock now */
		lua_pushboolean(L, 1);
		return 1;
	}
	hwt_worker_del(&T->w, n);
	lhwt_cancel_node(L, T, mt, n);
	lua_pushboolean(L, 1);
	return 1;
}

/* t:cancel() for any timer's timeout. */
static int timeout_cancel(lua_State *L)
{
	struct timer *T;
	void *p = lua_touserdata(L, 1);
	struct hwt_node *n = (struct hwt_node *)p;
	/* First of all: with deadlines scattered over a big wheel the unlink's
	 * two neighbours are cache misses, and the unlock would wait for the
	 * writes to them. Fetching them now overlaps that with the checks. A
	 * userdata of a node's size that is not one prefetches harmless junk. */
	if (n && hwt_rawlen(L, 1) == sizeof *n)
		hwt_list_prefetch_neighbours(&n->link);
	n = node_of(L, 1, p, &T);
	return cancel(L, T, lua_gettop(L), n);
}

/* t:cancel() as found through a handle of the timer whose methods table holds
 * it (lhwt_new_handle_metatable): upvalue 2 is that timer's handle metatable,
 * 3 the timer. A handle with that metatable is known without looking the timer
 * up in it: ~60 fewer instructions of ~550 a cancel. Anything else (the function
 * taken out and called on another timer's timeout, or on junk) goes the
 * general way. */
static int timeout_cancel_own(lua_State *L)
{
	void *p = lua_touserdata(L, 1);
	if (p && lua_getmetatable(L, 1)) {
		if (lua_rawequal(L, -1, lua_upvalueindex(2))) {
			struct hwt_node *n = (struct hwt_node *)p;
			hwt_list_prefetch_neighbours(&n->link); /* as in timeout_cancel */
			return cancel(L, (struct timer *)lua_touserdata(L, lua_upvalueindex(3)), lua_gettop(L), n);
		}
		lua_pop(L, 1);
	}
	return timeout_cancel(L);
}

/* The delay for t:reset: the argument, or a periodic timeout's interval
 * (`n` pinned, handle metatable at mt). */
static int64_t reset_delay(lua_State *L, int mt, struct hwt_node *n)
{
	struct period p;
	if (!lua_isnoneornil(L, 2))
		return lhwt_check_delay(L, 2, 0);
	if (!is_periodic(n))
		luaL_argerror(L, 2, "delay expected (a one-shot timeout has no interval to reuse)");
	lhwt_push_period(L, n, mt);
	if (!(n->owner_flags & ADVANCED)) {
		p.interval = (int64_t)lua_tonumber(L, -1);
		lua_pop(L, 1);
	} else {
		(void)lhwt_read_period(L, &p);
	}
	return p.interval;
}

/* A taken timeout (the host runs its callback in its own code until
 * timer:done) reset from that callback: its next run waits for done, so
 * that a callback that waits (a cosocket, a sleep) never runs beside itself
 * and take never hands out a timeout already taken. It stays on the host's
 * list of taken ones, where stop() finds it, its expiry set for done to arm
 * (lhwt_arm_kept). That list is the Lua thread's alone: no lock. */
static void keep_for_done(struct timer *T, struct hwt_node *n, int64_t now, int64_t delay)
{
	if (n->slot == HWT_SLOT_DUE) /* a periodic one, or reset twice: on that list already */
		hwt_list_unlink(&n->link);
	if (delay > 0) /* rounded up, never early */
		n->expires = hwt_worker_tick_at(&T->w, now + delay);
	else /* due at done: the tick that has begun */
		n->expires = now > T->w.origin ? (uint64_t)((now - T->w.origin) / T->w.tick_ns) : 0;
	n->slot = HWT_SLOT_DUE;
	hwt_list_push(&T->running, &n->link);
}

/* t:reset([delay]): due `delay` from now again, same callback, same handle,
 * while the timeout holds its callback: pending, or inside its own callback
 * (dispatched, or taken until timer:done). When it stays in its slot only its
 * expiry changes. A finished one has released its callback: nil, message. */
static int timeout_reset(lua_State *L)
{
	int64_t now = hwt_clock_ns(), delay;
	struct timer *T;
	struct hwt_node *n;
	int refused, armed, taken;
	lua_settop(L, 2);
	n = node_and_pins(L, 1, &T); /* the handle metatable is now at 3 */
	if (forked(T))
		return luaL_error(L, "hwtimer: timeout used in a forked child (timers do not survive fork)");
	if (T->stopped)
		return luaL_error(L, "attempt to use a stopped timer");
	if (lhwt_finished(n)) {
		lua_pushnil(L);
		lua_pushfstring(L, "cannot reset a timeout that has %s: its callback was released "
				   "(schedule a new one)",
				state_of(n) == EXPIRED ? "run" : "been cancelled");
		return 2;
	}
	delay = reset_delay(L, 3, n);
	taken = (n->owner_flags & RUNNING) && n != T->current;
	armed = run_armed(T, n); /* else this reset arms a new run */
	if (state_of(n) != PENDING) {
		if ((refused = lhwt_refuse_over_cap(L, T)) != 0)
			return refused;
		set_state(n, PENDING);
		T->pending++;
	}
	if (!armed)
		count_armed(T);
	if (n == T->current || (n->owner_flags & RUNNING))
		n->owner_flags |= REARMED;
	if (!taken && (delay <= 0 ? T->host_wake > 0 : now + delay < T->host_wake))
		T->wake = 1;
	if (n->owner_flags & ADVANCED) { /* later periods count from here */
		lhwt_push_period(L, n, 3);
		lua_pushnumber(L, (lua_Number)(now + delay));
		lua_setfield(L, -2, "nominal");
		lua_pop(L, 1);
		if (T->stopped) /* by a finalizer that the field's allocation ran */
			return luaL_error(L, "attempt to use a stopped timer");
	}
	if (taken) {
		keep_for_done(T, n, now, delay);
	} else if (delay <= 0) {
		hwt_worker_del(&T->w, n);
		hwt_worker_add_due(&T->w, n);
	} else {
		hwt_worker_move(&T->w, n, hwt_worker_tick_at(&T->w, now + delay), now);
	}
	if (T->wake) {
		lua_rawgeti(L, 3, PIN_TIMER);
		lhwt_wake_host(L, T, lua_gettop(L));
	}
	lua_settop(L, 1);
	return 1;
}

static int timeout_state(lua_State *L)
{
	lua_pushstring(L, state_names[state_of(check_node(L, 1))]);
	return 1;
}

static int push_state_is(lua_State *L, int state)
{
	lua_pushboolean(L, state_of(check_node(L, 1)) == state);
	return 1;
}

static int timeout_is_pending(lua_State *L) { return push_state_is(L, PENDING); }
static int timeout_is_expired(lua_State *L) { return push_state_is(L, EXPIRED); }
static int timeout_is_cancelled(lua_State *L) { return push_state_is(L, CANCELLED); }

/* Monotonic ns at which `n` is due: its deadline rounded up to a tick. */
static int64_t due_ns(const struct timer *T, const struct hwt_node *n)
{
	return hwt_worker_time_of(&T->w, n->expires);
}

static int timeout_deadline(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = node_and_timer(L, 1, &T);
	lua_pushnumber(L, ns_to_s(due_ns(T, n)));
	return 1;
}

static int timeout_remaining(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = node_and_timer(L, 1, &T);
	int64_t left = due_ns(T, n) - hwt_clock_ns();
	lua_pushnumber(L, left > 0 ? ns_to_s(left) : 0);
	return 1;
}

/* Seconds since the timeout became due (0 before): inside its callback, how
 * late it runs. */
static int timeout_lateness(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = node_and_timer(L, 1, &T);
	int64_t late = hwt_clock_ns() - due_ns(T, n);
	lua_pushnumber(L, late > 0 ? ns_to_s(late) : 0);
	return 1;
}

static int timeout_timer(lua_State *L)
{
	(void)check_node(L, 1);
	lua_getmetatable(L, 1);
	lua_rawgeti(L, -1, PIN_TIMER);
	return 1;
}

/* t:task(): the callback, then the arguments it is called with after t;
 * nothing once the timeout has finished and released them. */
static int timeout_task(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n;
	lua_settop(L, 1);
	n = node_and_pins(L, 1, &T); /* the handle metatable at 2 */
	if (lhwt_finished(n))
		return 0;
	return lhwt_push_task(L, n, 2);
}

static int timeout_tostring(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = node_and_timer(L, 1, &T);
	int64_t left = due_ns(T, n) - hwt_clock_ns();
	if (state_of(n) == PENDING)
		lua_pushfstring(L, TIMEOUT_NAME " (pending, %s%f s left) %p",
				is_periodic(n) ? "periodic, " : "",
				(double)(left > 0 ? ns_to_s(left) : 0), (void *)n);
	else
		lua_pushfstring(L, TIMEOUT_NAME " (%s) %p", state_names[state_of(n)], (void *)n);
	return 1;
}

/* ---- the handle metatable -------------------------------------------------------- */

/* Push the timer's own copy of the timeout methods (at `methods`), whose
 * cancel knows the handle metatable at mt and the timer. */
static void own_methods(lua_State *L, int mt, struct timer *T, int methods)
{
	lua_createtable(L, 0, 12); /* lhwt_timeout_methods */
	lua_pushnil(L);
	while (lua_next(L, methods)) {
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, -4);
	}
	lua_pushliteral(L, TIMER_FIELD);
	lua_pushvalue(L, mt);
	lua_pushlightuserdata(L, T);
	lua_pushcclosure(L, timeout_cancel_own, 3);
	lua_setfield(L, -2, "cancel");
}

/* The metatable of the timer's timeouts (see lbase.h); the timeout methods
 * table is at `methods` (hwtimer.new passes its upvalue 2): each timer's
 * __index is its own copy (own_methods). */
void lhwt_new_handle_metatable(lua_State *L, int ud, struct timer *T, int methods)
{
	int mt;
	lua_createtable(L, 0, 6);
	mt = lua_gettop(L);
	own_methods(L, mt, T, methods);
	lua_setfield(L, mt, "__index");
	lua_pushliteral(L, TIMER_FIELD);
	lua_pushcclosure(L, timeout_tostring, 1);
	lua_setfield(L, -2, "__tostring");
	lua_pushliteral(L, TIMEOUT_NAME);
	lua_setfield(L, -2, "__name");
	lua_pushliteral(L, TIMEOUT_NAME); /* getmetatable() must not expose the pins */
	lua_setfield(L, -2, "__metatable");
	lua_pushlightuserdata(L, T);
	lua_setfield(L, -2, TIMER_FIELD);
	lua_pushvalue(L, ud);
	lua_rawseti(L, -2, PIN_TIMER);
	T->npins = PIN_TIMER; /* pins follow it */
}


const luaL_Reg lhwt_timeout_methods[] = {
	{ "cancel", timeout_cancel },
	{ "reset", timeout_reset },
	{ "lateness", timeout_lateness },
	{ "state", timeout_state },
	{ "is_pending", timeout_is_pending },
	{ "is_expired", timeout_is_expired },
	{ "is_cancelled", timeout_is_cancelled },
	{ "deadline", timeout_deadline },
	{ "remaining", timeout_remaining },
	{ "timer", timeout_timer },
	{ "task", timeout_task },
	{ NULL, NULL }
};
