/*
 * lhwtimer.c: the Lua binding, module "hwtimer.core".
 *
 * Two userdata types. A timer owns a worker (wheel + thread + pipe). A
 * timeout's userdata is nothing but its 32-byte wheel node, so scheduling
 * allocates one userdata and nothing else.
 *
 * Each timer makes the metatable of its own timeouts ("handle metatable").
 * That metatable holds the timer at [1] (so a handle keeps its timer alive
 * without a reference of its own) and, in the rest of its array part, the
 * pending handles: the pins that keep a dropped handle's timeout alive. Pin i
 * is the node's owner_word; unpinning stores nil there and pushes i on a free
 * stack that the next pin pops, so the array stays as long as the most
 * timeouts ever pending at once.
 *
 * State changes only here, on the Lua thread: the worker thread only moves
 * nodes between the wheel's lists, under the worker's lock.
 *
 * Uservalues: timer {1 = handle metatable, 2 = on_error, 3 = wakeup hook};
 * timeout {1 = callback, then the interval if periodic, then the arguments}.
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* dladdr and RTLD_NODELETE: see register_fork_handler */
#endif
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "clock.h"
#include "compat.h"
#include "worker.h"

#define HWT_VERSION "0.1.0"
#define TIMER_MT "hwtimer.timer"
#define TIMEOUT_NAME "hwtimer.timeout"
#define MAX_DELAY 1e9   /* seconds (~31 years): deadlines stay far inside int64 ns */
#define MAX_ARGS 200    /* extra arguments carried to a callback (fits owner_byte) */
#define UV_HANDLE_MT 1
#define UV_ON_ERROR 2
#define UV_WAKEUP 3
#define UV_CALLBACK 1

/* node->owner_flags: the state in the low bits, then flags. A periodic
 * timeout keeps its schedule in uservalue 2: the interval in ns (a number),
 * or with ADVANCED a table {interval = ns, rate = bool, jitter = fraction,
 * nominal = ns of the current period's start}. REARMED: reset from its own
 * callback, so finishing that callback must leave it armed. RUNNING: a
 * periodic timeout handed to the host by take, until timer:done. */
enum { PENDING, EXPIRED, CANCELLED, STATE_MASK = 3, PERIODIC = 4, ADVANCED = 8, REARMED = 16,
       RUNNING = 32 };
#define LATE_BUCKETS 256 /* lateness histogram: 4 buckets per power of two of ns */
static const char *const state_names[] = { "pending", "expired", "cancelled" };

/* A timer is known without a metatable lookup: a userdata of exactly
 * sizeof(struct timer) whose `magic` is the address of TIMER_MAGIC, which no
 * other module can hold by accident. (Only another C module's userdata of
 * that exact size, left uninitialised over the memory of a freed timer, could
 * pass; `magic` is not cleared by __gc because 5.2+ may resurrect a closed
 * timer, whose methods must then say it is stopped.)
 *
 * Each timer has its own metatable for its timeouts (hidden by __metatable):
 * the timer's userdata at [1], the pins from [2] on, and under the short
 * string TIMER_FIELD (upvalue 1 of every timeout function: short strings are
 * Lua's fastest keys) a light userdata for the struct timer, which is how a
 * timeout is known and finds its timer. */
static const char TIMER_MAGIC;
#define PIN_TIMER 1
#define TIMER_FIELD "__hwtimer.timer"

struct stats {
	lua_Integer scheduled, fired, cancelled, errors;
	int64_t late_max;                 /* ns */
	uint32_t late[LATE_BUCKETS];
};

struct timer {
	const void *magic;         /* &TIMER_MAGIC */
	struct hwt_worker w;
	struct stats life, window;        /* since creation; since stats(true) */
	int64_t batch_now;                /* clock at the start of this dispatch */
	uint64_t rng;                     /* jitter for periodic timeouts */
	struct hwt_link local;     /* taken from the worker, not yet run */
	struct hwt_link batch;     /* being run by the current dispatch */
	struct hwt_node *current;  /* the timeout whose callback runs now */
	struct hwt_link running;   /* periodic timeouts taken by the host, not yet done */
	int64_t host_wake;         /* when the host plans to wake (ns); 0: awake or no hook */
	uint32_t *free_pins;       /* pin slots to reuse, a stack */
	uint32_t nfree, free_cap;
	lua_Integer pending;       /* scheduled, neither run nor cancelled */
	lua_Integer max_pending;   /* 0: no cap */
	lua_Integer budget;        /* callbacks the current dispatch may still run */
	uint32_t npins;            /* pin slots ever used: the array's length */
	unsigned long forkgen;     /* fork_generation when the timer was made */
	int stopped, dispatching, has_on_error;
	int wake;                  /* a deadline came before host_wake: call the hook */
	int take_only;             /* the host runs callbacks itself: no dispatch, no run */
	int has_wakeup;            /* a wakeup hook is set (uservalue 3) */
};

static int state_of(const struct hwt_node *n) { return n->owner_flags & STATE_MASK; }
static int is_periodic(const struct hwt_node *n) { return n->owner_flags & PERIODIC; }

static void set_state(struct hwt_node *n, int state)
{
	n->owner_flags = (uint8_t)((n->owner_flags & ~STATE_MASK) | state);
}

/* ---- stats --------------------------------------------------------------------- */

/* One more of `f`, over the timer's life and in the current window. */
#define COUNT(T, f) ((T)->life.f++, (T)->window.f++)

static unsigned top_bit(uint64_t x) /* x > 0 */
{
#if defined(__GNUC__) || defined(__clang__)
	return 63u - (unsigned)__builtin_clzll(x);
#else
	unsigned i = 0;
	while (x >>= 1)
		i++;
	return i;
#endif
}

/* Log-linear bucket of a lateness in ns: 4 buckets per power of two. */
static unsigned late_bucket(int64_t ns)
{
	uint64_t x = ns > 0 ? (uint64_t)ns : 0;
	unsigned shift, b;
	if (x < 4)
		return (unsigned)x;
	shift = top_bit(x) - 2; /* keep the top 3 bits: 1xx */
	b = 4 * (shift + 1) + (unsigned)((x >> shift) & 3);
	return b < LATE_BUCKETS ? b : LATE_BUCKETS - 1;
}

/* The largest lateness (ns) bucket b holds. */
static int64_t bucket_top(unsigned b)
{
	if (b < 4)
		return (int64_t)b;
	return (int64_t)(((uint64_t)(4 + (b & 3) + 1) << (b / 4 - 1)) - 1);
}

static void record_late(struct timer *T, int64_t late)
{
	unsigned b = late_bucket(late);
	T->life.late[b]++;
	T->window.late[b]++;
	if (late > T->life.late_max) T->life.late_max = late;
	if (late > T->window.late_max) T->window.late_max = late;
}

/* ---- fork detection ------------------------------------------------------- */

/* Process-wide by nature: a fork copies every timer at once. Written only by
 * the atfork child handler, which runs in the child before it returns. */
static volatile unsigned long fork_generation;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void)
{
	fork_generation++;
}

/* The atfork handler lives in this library's code, so the library must never
 * be unloaded (Lua dlcloses C modules when a state closes): pin it. */
static void register_fork_handler(void)
{
	Dl_info info;
	if (dladdr((const void *)&fork_once, &info) && info.dli_fname)
		(void)dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE);
	pthread_atfork(NULL, NULL, on_fork_child);
}

static int forked(const struct timer *T)
{
	return T->forkgen != fork_generation;
}

/* ---- small helpers --------------------------------------------------------- */

static double ns_to_s(int64_t ns)
{
	return (double)ns / 1e9;
}

static int is_callable(lua_State *L, int idx)
{
	if (lua_type(L, idx) == LUA_TFUNCTION)
		return 1;
	if (!luaL_getmetafield(L, idx, "__call"))
		return 0;
	lua_pop(L, 1);
	return 1;
}

static void check_callable(lua_State *L, int idx)
{
	if (!is_callable(L, idx))
		luaL_argerror(L, idx, lua_pushfstring(L, "function or callable object expected, got %s",
						      luaL_typename(L, idx)));
}

static lua_Number check_finite(lua_State *L, int idx)
{
	lua_Number x = lua_tonumber(L, idx); /* 0 for a non-number */
	if (x == 0 && !lua_isnumber(L, idx))
		luaL_checknumber(L, idx); /* raises the standard message */
	if (x != x || x == HUGE_VAL || x == -HUGE_VAL)
		luaL_argerror(L, idx, "finite number expected");
	return x;
}

static int type_error(lua_State *L, int idx, const char *expected)
{
	const char *got = luaL_typename(L, idx);
	if (luaL_getmetafield(L, idx, "__name") && lua_type(L, -1) == LUA_TSTRING)
		got = lua_tostring(L, -1);
	return luaL_argerror(L, idx, lua_pushfstring(L, "%s expected, got %s", expected, got));
}

/* The timer userdata at idx, or NULL (identity: see TIMER_MAGIC). */
static struct timer *test_timer(lua_State *L, int idx)
{
	struct timer *T = (struct timer *)lua_touserdata(L, idx);
	if (T && hwt_rawlen(L, idx) == sizeof *T && T->magic == &TIMER_MAGIC)
		return T;
	return NULL;
}

/* The timer at idx, whatever its state. */
static struct timer *to_timer(lua_State *L, int idx)
{
	struct timer *T = test_timer(L, idx);
	if (!T)
		type_error(L, idx, TIMER_MT);
	return T;
}

/* The timer at idx, usable from this process. */
static struct timer *check_timer(lua_State *L, int idx)
{
	struct timer *T = to_timer(L, idx);
	if (forked(T))
		luaL_error(L, "hwtimer: timer used in a forked child (timers do not survive fork; create a new one)");
	return T;
}

/* The timer at idx, usable and not stopped. */
static struct timer *check_live(lua_State *L, int idx)
{
	struct timer *T = check_timer(L, idx);
	if (T->stopped)
		luaL_error(L, "attempt to use a stopped timer");
	return T;
}

/* The timeout at idx and its timer: a userdata whose metatable knows a
 * timer. Leaves that metatable (the pins) on top of the stack. */
static struct hwt_node *timeout_from(lua_State *L, int idx, void *p, struct timer **T)
{
	if (p && lua_getmetatable(L, idx)) {
		lua_pushvalue(L, lua_upvalueindex(1));
		lua_rawget(L, -2);
		*T = (struct timer *)lua_touserdata(L, -1);
		lua_pop(L, 1);
		if (*T)
			return (struct hwt_node *)p;
	}
	type_error(L, idx, TIMEOUT_NAME);
	return NULL;
}

/* timeout_from for the value at idx. */
static struct hwt_node *to_timeout_mt(lua_State *L, int idx, struct timer **T)
{
	return timeout_from(L, idx, lua_touserdata(L, idx), T);
}

static struct hwt_node *to_timeout(lua_State *L, int idx, struct timer **T)
{
	struct hwt_node *n = to_timeout_mt(L, idx, T);
	lua_pop(L, 1);
	return n;
}

static struct hwt_node *check_timeout(lua_State *L, int idx)
{
	struct timer *T;
	return to_timeout(L, idx, &T);
}

/* ---- pins: what keeps pending handles alive -------------------------------- */

/* Pin the handle at `h` in the handle metatable at `mt`, reusing a free slot. */
static void pin(lua_State *L, struct timer *T, int mt, int h, struct hwt_node *n)
{
	n->owner_word = T->nfree ? T->free_pins[--T->nfree] : ++T->npins;
	lua_pushvalue(L, h);
	lua_rawseti(L, mt, (lua_Integer)n->owner_word);
}

/* Unpin `n`: one table write; its slot goes on the free stack (if that cannot
 * grow, the slot is simply never reused). */
static void unpin(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	lua_pushnil(L);
	lua_rawseti(L, mt, (lua_Integer)n->owner_word);
	if (T->stopped) { /* no slot is reused after stop; the stack is freed */
		n->owner_word = 0;
		return;
	}
	if (T->nfree == T->free_cap) {
		uint32_t cap = T->free_cap ? 2 * T->free_cap : 64;
		uint32_t *grown = realloc(T->free_pins, cap * sizeof *grown);
		if (!grown) {
			n->owner_word = 0;
			return;
		}
		T->free_pins = grown;
		T->free_cap = cap;
	}
	T->free_pins[T->nfree++] = n->owner_word;
	n->owner_word = 0;
}

/* Cancelled: leave the pending state and the pins at once; the timeout
 * whose callback is running stays pinned until finish_current. */
static void cancel_node(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	set_state(n, CANCELLED);
	T->pending--;
	COUNT(T, cancelled);
	if (n != T->current)
		unpin(L, T, mt, n);
}

/* ---- scheduling ----------------------------------------------------------- */

/* Put `n` on the wheel to be due at monotonic time `due` (clock read: `now`). */
static void arm_at(struct timer *T, struct hwt_node *n, int64_t now, int64_t due)
{
	if (due < T->host_wake)
		T->wake = 1;
	hwt_worker_add(&T->w, n, hwt_worker_tick_at(&T->w, due), now);
}

/* Put `n` on the wheel `delay_ns` after `now`; due at the next dispatch if <= 0. */
static void arm(struct timer *T, struct hwt_node *n, int64_t now, int64_t delay_ns)
{
	if (delay_ns > 0) {
		arm_at(T, n, now, now + delay_ns);
		return;
	}
	if (T->host_wake > 0)
		T->wake = 1;
	hwt_worker_add_due(&T->w, n);
}

/* A host that sleeps until timer:timeout() and cannot poll the pipe (nginx)
 * registered a hook: call it once when something became due before the
 * host's planned wake-up. The hook is glue (it posts a semaphore), never the
 * user's callback; an error in it is printed, not raised. */
static void wake_host(lua_State *L, struct timer *T, int ud)
{
	T->wake = 0;
	T->host_wake = 0;
	hwt_getuv(L, ud, UV_WAKEUP);
	if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
		fprintf(stderr, "hwtimer: error in wakeup hook: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
	}
}

static uint64_t next_random(struct timer *T)
{ /* xorshift64* */
	T->rng ^= T->rng >> 12;
	T->rng ^= T->rng << 25;
	T->rng ^= T->rng >> 27;
	return T->rng * UINT64_C(2685821657736338717);
}

static int64_t check_delay(lua_State *L, int idx, int periodic)
{
	lua_Number d = check_finite(L, idx);
	if (periodic)
		luaL_argcheck(L, d > 0, idx, "positive interval expected");
	luaL_argcheck(L, d <= MAX_DELAY, idx, "delay too large (at most 1e9 seconds)");
	return d <= 0 ? 0 : (int64_t)ceil(d * 1e9);
}

/* How a periodic timeout repeats (timer:every's first argument). */
struct period {
	int64_t interval; /* ns */
	int advanced;     /* given as a table: rate and jitter apply */
	int rate;         /* fixed rate (from each period's start), else fixed delay */
	lua_Number jitter;
};

static void check_period(lua_State *L, int idx, struct period *p)
{
	p->advanced = p->rate = 0;
	p->jitter = 0;
	if (lua_type(L, idx) != LUA_TTABLE) {
		p->interval = check_delay(L, idx, 1);
		return;
	}
	p->advanced = 1;
	lua_getfield(L, idx, "interval");
	{
		lua_Number x = lua_tonumber(L, -1);
		if (lua_type(L, -1) != LUA_TNUMBER || !(x > 0 && x <= MAX_DELAY))
			luaL_argerror(L, idx, "field 'interval': positive number of seconds expected");
		p->interval = (int64_t)ceil(x * 1e9);
	}
	lua_getfield(L, idx, "rate");
	p->rate = lua_toboolean(L, -1);
	lua_getfield(L, idx, "jitter");
	if (!lua_isnil(L, -1)) {
		p->jitter = lua_tonumber(L, -1);
		if (lua_type(L, -1) != LUA_TNUMBER || !(p->jitter >= 0 && p->jitter <= 1))
			luaL_argerror(L, idx, "field 'jitter': number from 0 to 1 expected");
	}
	lua_pop(L, 3);
}

/* A random extra delay of up to jitter * interval (never negative: never early). */
static int64_t jitter_ns(struct timer *T, const struct period *p)
{
	double u;
	if (p->jitter <= 0)
		return 0;
	u = (double)(next_random(T) >> 11) / 9007199254740992.0; /* [0, 1) */
	return (int64_t)(u * p->jitter * (double)p->interval);
}

/* New handle (left on top) for a callback at 3 with nargs arguments after it;
 * `p` is NULL for a one-shot timeout. */
static struct hwt_node *new_timeout(lua_State *L, const struct period *p, int nargs)
{
	int periodic = p != NULL, h, i;
	struct hwt_node *n = hwt_newuserdata(L, sizeof *n, 1 + periodic + nargs);
	h = lua_gettop(L);
	hwt_node_init(n);
	n->owner_flags = (uint8_t)(PENDING | (periodic ? PERIODIC : 0) | (p && p->advanced ? ADVANCED : 0));
	n->owner_byte = (uint8_t)nargs;
	lua_pushvalue(L, 3);
	hwt_setuv(L, h, UV_CALLBACK);
	if (periodic && !p->advanced) {
		lua_pushnumber(L, (lua_Number)p->interval);
		hwt_setuv(L, h, UV_CALLBACK + 1);
	} else if (periodic) {
		lua_createtable(L, 0, 4);
		lua_pushnumber(L, (lua_Number)p->interval);
		lua_setfield(L, -2, "interval");
		lua_pushboolean(L, p->rate);
		lua_setfield(L, -2, "rate");
		lua_pushnumber(L, p->jitter);
		lua_setfield(L, -2, "jitter");
		hwt_setuv(L, h, UV_CALLBACK + 1);
	}
	for (i = 0; i < nargs; i++) {
		lua_pushvalue(L, 4 + i);
		hwt_setuv(L, h, UV_CALLBACK + 1 + periodic + i);
	}
	return n;
}

/* Arm an advanced periodic timeout (handle at h) for the period starting at
 * `nominal` ns, storing that start in its schedule table. */
static void arm_period(lua_State *L, struct timer *T, int h, struct hwt_node *n, int64_t now,
		       int64_t nominal, const struct period *p)
{
	hwt_getuv(L, h, UV_CALLBACK + 1);
	lua_pushnumber(L, (lua_Number)nominal);
	lua_setfield(L, -2, "nominal");
	lua_pop(L, 1);
	arm_at(T, n, now, nominal + jitter_ns(T, p));
}

static int refuse_over_cap(lua_State *L, struct timer *T)
{
	if (T->max_pending <= 0 || T->pending < T->max_pending)
		return 0;
	lua_pushnil(L);
	lua_pushfstring(L, "too many pending timeouts (%d pending, max_pending %d)",
			(int)T->pending, (int)T->max_pending);
	return 2;
}

static int schedule(lua_State *L, int periodic)
{
	/* The clock is read first: allocating the handle may run a step of the
	 * garbage collector, which must not push the deadline back. */
	int64_t now = hwt_clock_ns();
	struct timer *T = check_live(L, 1);
	struct period p;
	int64_t delay = 0;
	int nargs = lua_gettop(L) - 3, h, refused;
	struct hwt_node *n;
	if (periodic)
		check_period(L, 2, &p);
	else
		delay = check_delay(L, 2, 0);
	check_callable(L, 3);
	if (nargs > MAX_ARGS)
		return luaL_error(L, "bad argument to 'schedule' (at most %d callback arguments)", MAX_ARGS);
	if ((refused = refuse_over_cap(L, T)) != 0)
		return refused;
	n = new_timeout(L, periodic ? &p : NULL, nargs);
	h = lua_gettop(L);
	hwt_getuv(L, 1, UV_HANDLE_MT);
	pin(L, T, h + 1, h, n);
	lua_setmetatable(L, h);
	T->pending++;
	COUNT(T, scheduled);
	if (periodic && p.advanced)
		arm_period(L, T, h, n, now, now + p.interval, &p);
	else
		arm(T, n, now, periodic ? p.interval : delay);
	if (T->wake)
		wake_host(L, T, 1);
	return 1;
}

static int timer_schedule(lua_State *L)
{
	return schedule(L, 0);
}

static int timer_every(lua_State *L)
{
	return schedule(L, 1);
}

/* ---- dispatch ------------------------------------------------------------- */

/* Message handler for the default on_error: keep where the error happened. */
static int traceback_handler(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);
	if (!msg) {
		if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
			msg = lua_tostring(L, -1);
		else
			msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	}
	luaL_traceback(L, L, msg, 1);
	return 1;
}

/* The callback of `n` failed with the error on top: give it to on_error
 * (timer at index 1, handle metatable at `mt`). Pops the error. */
static void report_error(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	COUNT(T, errors);
	if (!T->has_on_error) {
		fprintf(stderr, "hwtimer: error in timeout callback: %s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
		return;
	}
	hwt_getuv(L, 1, UV_ON_ERROR);
	lua_insert(L, -2);
	lua_rawgeti(L, mt, (lua_Integer)n->owner_word); /* still pinned: see finish_current */
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		const char *msg = lua_tostring(L, -1);
		fprintf(stderr, "hwtimer: error in on_error: %s\n", msg ? msg : luaL_typename(L, -1));
		lua_pop(L, 1);
	}
}

/* Read an advanced period's schedule table (on top of the stack) into p;
 * returns the current period's start. Pops the table. */
static int64_t read_period(lua_State *L, struct period *p)
{
	int64_t nominal;
	lua_getfield(L, -1, "interval");
	lua_getfield(L, -2, "rate");
	lua_getfield(L, -3, "jitter");
	lua_getfield(L, -4, "nominal");
	p->interval = (int64_t)lua_tonumber(L, -4);
	p->rate = lua_toboolean(L, -3);
	p->jitter = lua_tonumber(L, -2);
	p->advanced = 1;
	nominal = (int64_t)lua_tonumber(L, -1);
	lua_pop(L, 5);
	return nominal;
}

/* Start the next period of the periodic timeout `n` (pinned in mt). Fixed
 * rate skips the periods already missed rather than running them in a burst. */
static void next_period(lua_State *L, struct timer *T, int mt, struct hwt_node *n)
{
	int64_t now = hwt_clock_ns(), next;
	struct period p;
	int h;
	lua_rawgeti(L, mt, (lua_Integer)n->owner_word);
	h = lua_gettop(L);
	hwt_getuv(L, h, UV_CALLBACK + 1);
	if (!(n->owner_flags & ADVANCED)) {
		arm(T, n, now, (int64_t)lua_tonumber(L, -1));
		lua_settop(L, h - 1);
		return;
	}
	next = read_period(L, &p);
	if (p.rate) {
		next += p.interval;
		if (next <= now)
			next += ((now - next) / p.interval + 1) * p.interval;
	} else {
		next = now + p.interval;
	}
	arm_period(L, T, h, n, now, next, &p);
	lua_settop(L, h - 1);
}

/* After the callback of T->current returned or failed: a timeout that is done
 * leaves the pins; a periodic one starts its next period, unless its callback
 * re-armed it already (t:reset). */
static void finish_current(lua_State *L, struct timer *T, int mt)
{
	struct hwt_node *n = T->current;
	int rearmed = n->owner_flags & REARMED;
	T->current = NULL;
	n->owner_flags &= (uint8_t)~REARMED;
	if (state_of(n) != PENDING)
		unpin(L, T, mt, n);
	else if (!rearmed && !T->stopped)
		next_period(L, T, mt, n);
}

/* Push the callback of `n`, its handle and its arguments above run_batch's
 * two slots (T, handle metatable); returns how many arguments. */
static int push_call(lua_State *L, struct hwt_node *n)
{
	int i, first = UV_CALLBACK + 1 + (is_periodic(n) ? 1 : 0);
	/* A C frame starts with LUA_MINSTACK free slots: enough for the callback,
	 * the handle, the arguments and hwt_getuv's scratch slot unless the
	 * argument list is long. */
	if (n->owner_byte > LUA_MINSTACK - 3)
		luaL_checkstack(L, n->owner_byte + 3, "too many callback arguments");
	lua_rawgeti(L, 2, (lua_Integer)n->owner_word); /* the handle, at 3 */
	hwt_getuv(L, 3, UV_CALLBACK);
	lua_insert(L, 3); /* callback at 3, handle at 4: the call leaves 2 slots */
	for (i = 0; i < n->owner_byte; i++)
		hwt_getuv(L, 4, first + i);
	return 1 + n->owner_byte;
}

/* Protected: run callbacks from T->batch while the budget lasts. An error
 * escapes to run_due, which reports it and calls again: one protected call
 * per batch instead of one per callback. Stack: T, handle metatable. */
static int run_batch(lua_State *L)
{
	struct timer *T = (struct timer *)lua_touserdata(L, 1);
	while (T->budget > 0 && !hwt_list_empty(&T->batch)) {
		struct hwt_node *n = hwt_container_of(T->batch.next, struct hwt_node, link);
		hwt_list_unlink(&n->link);
		n->slot = HWT_SLOT_NONE;
		T->budget--;
		T->current = n;
		COUNT(T, fired);
		/* due, so expires <= the current tick: no overflow, no guard needed */
		record_late(T, T->batch_now - (T->w.origin + (int64_t)n->expires * T->w.tick_ns));
		if (!is_periodic(n)) {
			set_state(n, EXPIRED);
			T->pending--;
		}
		lua_call(L, push_call(L, n), 0);
		finish_current(L, T, 2);
	}
	return 0;
}

/* Run up to `max` due timeouts (timer at index 1); returns how many ran. */
static lua_Integer run_due(lua_State *L, struct timer *T, lua_Integer max)
{
	int mt, mh = 0;
	/* One clock read a batch: what the host may expire itself, and the start
	 * of the batch for the lateness stats (a timeout the worker made due a
	 * moment after it counts as 0 late). */
	T->batch_now = hwt_clock_ns();
	hwt_worker_take(&T->w, &T->local, T->batch_now);
	hwt_list_splice(&T->batch, &T->local); /* callbacks' new timeouts wait */
	hwt_getuv(L, 1, UV_HANDLE_MT);
	mt = lua_gettop(L);
	if (!T->has_on_error) {
		lua_pushcfunction(L, traceback_handler);
		mh = lua_gettop(L);
	}
	T->budget = max;
	T->dispatching = 1;
	for (;;) {
		lua_pushcfunction(L, run_batch);
		lua_pushlightuserdata(L, T);
		lua_pushvalue(L, mt);
		if (lua_pcall(L, 2, 0, mh) == LUA_OK)
			break;
		if (!T->current) { /* failed outside a callback: keep the rest for later */
			lua_pop(L, 1);
			break;
		}
		report_error(L, T, mt, T->current);
		finish_current(L, T, mt);
	}
	T->dispatching = 0;
	lua_settop(L, mt - 1);
	if (T->wake)
		wake_host(L, T, 1);
	if (!T->stopped) {
		hwt_list_splice_front(&T->local, &T->batch);
		if (!hwt_list_empty(&T->local))
			hwt_worker_rearm(&T->w); /* left over: keep the pipe readable */
	}
	return max - T->budget;
}

static struct timer *check_dispatcher(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	if (T->dispatching)
		luaL_error(L, "hwtimer: dispatch called from inside a timeout callback");
	if (T->take_only)
		luaL_error(L, "hwtimer: this timer's callbacks are run by its host's glue (take_only): "
			   "dispatch and run are not available");
	return T;
}

/* An optional count at idx: a whole number >= 0, checked as a float first
 * (5.1 and LuaJIT turn NaN and infinities into arbitrary integers). */
static lua_Integer opt_count(lua_State *L, int idx)
{
	lua_Number x;
	if (lua_isnoneornil(L, idx))
		return LUA_MAXINTEGER;
	x = luaL_checknumber(L, idx);
	luaL_argcheck(L, x >= 0 && x == floor(x) && x < 9e15, idx, "non-negative integer expected");
	return (lua_Integer)x;
}

static int timer_dispatch(lua_State *L)
{
	struct timer *T = check_dispatcher(L);
	lua_Integer max = opt_count(L, 2);
	lua_settop(L, 1);
	lua_pushinteger(L, run_due(L, T, max));
	return 1;
}

/* Wait on the pipe for up to `ns` nanoseconds (< 0: no limit). */
static void wait_readable(struct timer *T, int64_t ns)
{
	struct pollfd p;
	p.fd = T->w.fds[0];
	p.events = POLLIN;
	p.revents = 0;
	if (ns > INT64_C(86400000000000))
		ns = INT64_C(86400000000000);
#if defined(__linux__) /* ppoll: glibc and musl with _GNU_SOURCE; the BSDs hide it under _POSIX_C_SOURCE */
	{ /* to the nanosecond: the wait may end at a deadline */
		struct timespec ts = hwt_clock_timespec(ns < 0 ? 0 : ns);
		(void)ppoll(&p, 1, ns < 0 ? NULL : &ts, NULL); /* EINTR or timeout: the caller loops */
	}
#else
	(void)poll(&p, 1, ns < 0 ? -1 : (int)((ns + 999999) / 1000000));
#endif
}

/* How long timer:run may sleep: until the wheel's next event, when that lies
 * ahead, since dispatch can then expire it without the worker's wake-up;
 * otherwise (the worker has work in hand) until the pipe says. */
static int64_t sleep_ns(struct timer *T, int limited, int64_t left)
{
	uint64_t next = hwt_worker_next(&T->w);
	int64_t until = next == UINT64_MAX ? -1 : hwt_worker_time_of(&T->w, next) - hwt_clock_ns();
	if (until <= 0)
		return limited ? left : -1;
	return limited && left < until ? left : until;
}

static int timer_run(lua_State *L)
{
	struct timer *T = check_dispatcher(L);
	int limited = !lua_isnoneornil(L, 2);
	lua_Number secs = limited ? check_finite(L, 2) : 0;
	int64_t end;
	lua_Integer total = 0;
	luaL_argcheck(L, secs >= 0 && secs <= MAX_DELAY, 2, "non-negative number of seconds expected");
	end = hwt_clock_ns() + (int64_t)(secs * 1e9);
	lua_settop(L, 1);
	for (;;) {
		int64_t left = end - hwt_clock_ns();
		total += run_due(L, T, LUA_MAXINTEGER);
		if (T->stopped || T->pending == 0 || (limited && left <= 0))
			break;
		wait_readable(T, sleep_ns(T, limited, left));
	}
	lua_pushinteger(L, total);
	return 1;
}

/* ---- take: the host's own Lua code runs the callbacks ------------------------ */
/* Hosts whose callbacks may yield (nginx cosockets, cqueues and copas sockets)
 * cannot run them below dispatch's C frames: a yield there fails, and in nginx
 * a failed yield leaves the request's coroutine state corrupt. take hands one
 * due timeout to Lua instead, with its callback and arguments; the host calls
 * them from a coroutine it owns and reports back with timer:done. */

/* Push the callback and the arguments of `n` (handle at h); returns how many. */
static int push_task(lua_State *L, struct hwt_node *n, int h)
{
	int i, first = UV_CALLBACK + 1 + (is_periodic(n) ? 1 : 0);
	luaL_checkstack(L, n->owner_byte + 2, "too many callback arguments");
	hwt_getuv(L, h, UV_CALLBACK);
	for (i = 0; i < n->owner_byte; i++)
		hwt_getuv(L, h, first + i);
	return 1 + n->owner_byte;
}

/* t, callback, ... = timer:take(): one due timeout, or nothing. A one-shot
 * timeout is expired and unpinned now (the caller holds the handle); a
 * periodic one stays pending, RUNNING, until timer:done(t) arms its next run. */
static int timer_take(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	struct hwt_node *n;
	int64_t now;
	if (T->dispatching)
		return luaL_error(L, "hwtimer: take called from inside a dispatched callback");
	now = hwt_clock_ns();
	if (hwt_list_empty(&T->local))
		hwt_worker_take(&T->w, &T->local, now);
	if (hwt_list_empty(&T->local))
		return 0;
	n = hwt_container_of(T->local.next, struct hwt_node, link);
	hwt_list_unlink(&n->link);
	n->slot = HWT_SLOT_NONE;
	COUNT(T, fired);
	record_late(T, now - (T->w.origin + (int64_t)n->expires * T->w.tick_ns));
	lua_settop(L, 1);
	hwt_getuv(L, 1, UV_HANDLE_MT);
	lua_rawgeti(L, 2, (lua_Integer)n->owner_word); /* the handle, at 3 */
	if (is_periodic(n)) {
		n->owner_flags |= RUNNING;
		n->slot = HWT_SLOT_DUE; /* in the host's list: hwt_worker_del unlinks it */
		hwt_list_push(&T->running, &n->link);
	} else {
		set_state(n, EXPIRED);
		T->pending--;
		unpin(L, T, 2, n);
	}
	return 1 + push_task(L, n, 3);
}

/* timer:done(t, [ok]): the callback of a taken timeout returned (ok true or
 * absent) or raised (ok false: counted in errors). A periodic timeout starts
 * its next period now, unless it was cancelled or re-armed meanwhile. */
static int timer_done(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	struct timer *owner;
	struct hwt_node *n;
	int mt;
	lua_settop(L, 3);
	n = (struct hwt_node *)lua_touserdata(L, 2);
	owner = NULL;
	if (n && lua_getmetatable(L, 2)) { /* a timer method: no TIMER_FIELD upvalue */
		lua_getfield(L, 4, TIMER_FIELD);
		owner = (struct timer *)lua_touserdata(L, -1);
		lua_pop(L, 1);
	}
	if (!owner || owner != T)
		return type_error(L, 2, "hwtimer.timeout of this timer");
	mt = 4;
	if (lua_isboolean(L, 3) && !lua_toboolean(L, 3))
		COUNT(T, errors);
	if (!(n->owner_flags & RUNNING))
		return 0; /* one-shot, or done already */
	n->owner_flags &= (uint8_t)~RUNNING;
	if (n->owner_flags & REARMED) {
		n->owner_flags &= (uint8_t)~REARMED;
		return 0;
	}
	if (state_of(n) != PENDING || T->stopped)
		return 0;
	hwt_list_unlink(&n->link); /* from T->running: the worker never sees that list */
	n->slot = HWT_SLOT_NONE;
	next_period(L, T, mt, n);
	if (T->wake) {
		lua_rawgeti(L, mt, PIN_TIMER);
		wake_host(L, T, lua_gettop(L));
	}
	return 0;
}

/* timer:wakeup(fn): fn() is called (once) when a schedule, every, reset or a
 * periodic run makes something due before the host's planned wake-up, which
 * is the time the last timer:timeout() returned. For hosts that sleep on
 * something other than the pipe (an nginx semaphore). nil removes it. */
static int timer_wakeup(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	if (!lua_isnoneornil(L, 2))
		check_callable(L, 2);
	lua_settop(L, 2);
	T->has_wakeup = !lua_isnil(L, 2);
	hwt_setuv(L, 1, UV_WAKEUP);
	T->host_wake = 0;
	T->wake = 0;
	return 0;
}

/* timer:take_only(): from now on dispatch and run raise; only take runs callbacks. */
static int timer_take_only(lua_State *L)
{
	check_live(L, 1)->take_only = 1;
	return 0;
}

/* ---- stop, close, collect --------------------------------------------------- */

/* Cancel everything still pending (timer at index 1), appending the handles
 * to the array at `list` (0: no list). */
static void cancel_all(lua_State *L, struct timer *T, int list)
{
	struct hwt_link all;
	int mt, n = 0;
	hwt_list_init(&all);
	hwt_worker_collect(&T->w, &all);
	hwt_list_splice(&all, &T->local);
	hwt_list_splice(&all, &T->batch);
	hwt_list_splice(&all, &T->running);
	hwt_getuv(L, 1, UV_HANDLE_MT);
	mt = lua_gettop(L);
	if (T->current && state_of(T->current) == PENDING && !(T->current->owner_flags & REARMED))
		hwt_list_push(&all, &T->current->link); /* a periodic one, running, in no list */
	while (!hwt_list_empty(&all)) {
		struct hwt_node *node = hwt_container_of(all.next, struct hwt_node, link);
		hwt_list_unlink(all.next);
		node->slot = HWT_SLOT_NONE;
		if (list) {
			lua_rawgeti(L, mt, (lua_Integer)node->owner_word);
			lua_rawseti(L, list, ++n);
		}
		cancel_node(L, T, mt, node);
	}
	lua_pop(L, 1);
}

/* Stop the timer at index 1 (list at `list` or 0); idempotent, also in a child. */
static void stop_timer(lua_State *L, struct timer *T, int list)
{
	int child = forked(T);
	if (T->stopped)
		return;
	T->stopped = 1;
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
	struct timer *T = to_timer(L, 1);
	lua_settop(L, 1);
	lua_newtable(L);
	stop_timer(L, T, 2);
	return 1;
}

static int timer_close(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	lua_settop(L, 1);
	stop_timer(L, T, 0);
	return 0;
}

/* ---- timer queries ------------------------------------------------------------ */

static int timer_pending(lua_State *L)
{
	lua_pushinteger(L, to_timer(L, 1)->pending);
	return 1;
}

static int timer_getfd(lua_State *L)
{
	lua_pushinteger(L, check_live(L, 1)->w.fds[0]);
	return 1;
}

static int timer_dirty(lua_State *L)
{
	(void)check_live(L, 1); /* no data is ever buffered outside the pipe */
	lua_pushboolean(L, 0);
	return 1;
}

static int timer_events(lua_State *L)
{
	(void)check_live(L, 1);
	lua_pushliteral(L, "r");
	return 1;
}

/* timer:timeout(): seconds to the next event, 0 if due now, nil if none.
 * With a wakeup hook, the answer is taken as the host's planned wake-up. */
static int timer_timeout(lua_State *L)
{
	struct timer *T = check_live(L, 1);
	uint64_t next;
	int64_t now, at;
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
	T->host_wake = T->has_wakeup && at > now ? at : 0;
	lua_pushnumber(L, at > now ? ns_to_s(at - now) : 0);
	return 1;
}

/* Lateness (seconds) at or below which a share p of the recorded runs fall. */
static lua_Number late_percentile(const struct stats *st, double p)
{
	uint64_t total = 0, seen = 0, want;
	unsigned b;
	for (b = 0; b < LATE_BUCKETS; b++)
		total += st->late[b];
	if (!total)
		return 0;
	want = (uint64_t)ceil((double)total * p);
	for (b = 0; b < LATE_BUCKETS; b++) {
		seen += st->late[b];
		if (seen >= want)
			break;
	}
	b = b < LATE_BUCKETS ? b : LATE_BUCKETS - 1;
	return ns_to_s(bucket_top(b) < st->late_max ? bucket_top(b) : st->late_max);
}

static void set_number(lua_State *L, const char *k, lua_Number v)
{
	lua_pushnumber(L, v);
	lua_setfield(L, -2, k);
}

/* timer:stats([since_last]): counts and lateness over the timer's life, or
 * since the previous stats(true). */
static int timer_stats(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	int since_last = lua_toboolean(L, 2);
	struct stats *st = since_last ? &T->window : &T->life;
	lua_createtable(L, 0, 8);
	set_number(L, "scheduled", (lua_Number)st->scheduled);
	set_number(L, "fired", (lua_Number)st->fired);
	set_number(L, "cancelled", (lua_Number)st->cancelled);
	set_number(L, "errors", (lua_Number)st->errors);
	set_number(L, "pending", (lua_Number)T->pending);
	set_number(L, "late_p50", late_percentile(st, 0.5));
	set_number(L, "late_p99", late_percentile(st, 0.99));
	set_number(L, "late_max", ns_to_s(st->late_max));
	if (since_last)
		memset(&T->window, 0, sizeof T->window);
	return 1;
}

static int timer_tostring(lua_State *L)
{
	struct timer *T = to_timer(L, 1);
	if (T->stopped)
		lua_pushfstring(L, "hwtimer.timer (stopped) %p", (void *)T);
	else
		lua_pushfstring(L, "hwtimer.timer (running, %d pending) %p", (int)T->pending, (void *)T);
	return 1;
}

/* ---- timeout methods ------------------------------------------------------------ */

static int timeout_cancel(lua_State *L)
{
	struct timer *T;
	void *p = lua_touserdata(L, 1);
	struct hwt_node *n = (struct hwt_node *)p;
	int mt;
	/* First of all: with deadlines scattered over a big wheel the unlink's
	 * two neighbours are cache misses, and the unlock would wait for the
	 * writes to them. Fetching them now overlaps that with the checks. A
	 * userdata of a node's size that is not one prefetches harmless junk. */
	if (n && hwt_rawlen(L, 1) == sizeof *n)
		hwt_list_prefetch_neighbours(&n->link);
	n = timeout_from(L, 1, p, &T);
	mt = lua_gettop(L); /* the handle metatable */
	if (forked(T))
		return luaL_error(L, "hwtimer: timeout used in a forked child (timers do not survive fork)");
	if (state_of(n) != PENDING) {
		lua_pushboolean(L, 0);
		return 1;
	}
	/* Linked somewhere (wheel, due list, local or batch) or, while its own
	 * callback runs, maybe nowhere: the slot is the worker's to change, so
	 * it is read only under the lock, inside hwt_worker_del. */
	hwt_worker_del(&T->w, n);
	cancel_node(L, T, mt, n);
	lua_pushboolean(L, 1);
	return 1;
}

/* The delay for t:reset: the argument, or a periodic timeout's interval. */
static int64_t reset_delay(lua_State *L, int h, struct hwt_node *n)
{
	struct period p;
	if (!lua_isnoneornil(L, 2))
		return check_delay(L, 2, 0);
	if (!is_periodic(n))
		luaL_argerror(L, 2, "delay expected (a one-shot timeout has no interval to reuse)");
	hwt_getuv(L, h, UV_CALLBACK + 1);
	if (!(n->owner_flags & ADVANCED)) {
		p.interval = (int64_t)lua_tonumber(L, -1);
		lua_pop(L, 1);
	} else {
		(void)read_period(L, &p);
	}
	return p.interval;
}

/* t:reset([delay]): due `delay` from now again, pending or not, same callback,
 * same handle; when it stays in its slot only its expiry changes. */
static int timeout_reset(lua_State *L)
{
	int64_t now = hwt_clock_ns(), delay;
	struct timer *T;
	struct hwt_node *n;
	int refused;
	lua_settop(L, 2);
	n = to_timeout_mt(L, 1, &T); /* the handle metatable is now at 3 */
	if (forked(T))
		return luaL_error(L, "hwtimer: timeout used in a forked child (timers do not survive fork)");
	if (T->stopped)
		return luaL_error(L, "attempt to use a stopped timer");
	delay = reset_delay(L, 1, n);
	if (state_of(n) != PENDING) {
		if ((refused = refuse_over_cap(L, T)) != 0)
			return refused;
		if (n != T->current) /* the running one is still pinned */
			pin(L, T, 3, 1, n);
		set_state(n, PENDING);
		T->pending++;
		COUNT(T, scheduled);
	}
	if (n == T->current || (n->owner_flags & RUNNING))
		n->owner_flags |= REARMED;
	if (delay <= 0 ? T->host_wake > 0 : now + delay < T->host_wake)
		T->wake = 1;
	if (n->owner_flags & ADVANCED) { /* later periods count from here */
		hwt_getuv(L, 1, UV_CALLBACK + 1);
		lua_pushnumber(L, (lua_Number)(now + delay));
		lua_setfield(L, -2, "nominal");
	}
	if (delay <= 0) {
		hwt_worker_del(&T->w, n);
		hwt_worker_add_due(&T->w, n);
	} else {
		hwt_worker_move(&T->w, n, hwt_worker_tick_at(&T->w, now + delay), now);
	}
	if (T->wake) {
		lua_rawgeti(L, 3, PIN_TIMER);
		wake_host(L, T, lua_gettop(L));
	}
	lua_settop(L, 1);
	return 1;
}

static int timeout_state(lua_State *L)
{
	lua_pushstring(L, state_names[state_of(check_timeout(L, 1))]);
	return 1;
}

static int push_state_is(lua_State *L, int state)
{
	lua_pushboolean(L, state_of(check_timeout(L, 1)) == state);
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
	struct hwt_node *n = to_timeout(L, 1, &T);
	lua_pushnumber(L, ns_to_s(due_ns(T, n)));
	return 1;
}

static int timeout_remaining(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = to_timeout(L, 1, &T);
	int64_t left = due_ns(T, n) - hwt_clock_ns();
	lua_pushnumber(L, left > 0 ? ns_to_s(left) : 0);
	return 1;
}

/* Seconds since the timeout became due (0 before): inside its callback, how
 * late it runs. */
static int timeout_lateness(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = to_timeout(L, 1, &T);
	int64_t late = hwt_clock_ns() - due_ns(T, n);
	lua_pushnumber(L, late > 0 ? ns_to_s(late) : 0);
	return 1;
}

static int timeout_timer(lua_State *L)
{
	(void)check_timeout(L, 1);
	lua_getmetatable(L, 1);
	lua_rawgeti(L, -1, PIN_TIMER);
	return 1;
}

/* t:task(): the callback, then the arguments it is called with after t. */
static int timeout_task(lua_State *L)
{
	struct hwt_node *n = check_timeout(L, 1);
	lua_settop(L, 1);
	return push_task(L, n, 1);
}

static int timeout_tostring(lua_State *L)
{
	struct timer *T;
	struct hwt_node *n = to_timeout(L, 1, &T);
	int64_t left = due_ns(T, n) - hwt_clock_ns();
	if (state_of(n) == PENDING)
		lua_pushfstring(L, TIMEOUT_NAME " (pending, %s%f s left) %p",
				is_periodic(n) ? "periodic, " : "",
				(double)(left > 0 ? ns_to_s(left) : 0), (void *)n);
	else
		lua_pushfstring(L, TIMEOUT_NAME " (%s) %p", state_names[state_of(n)], (void *)n);
	return 1;
}

/* ---- hwtimer.new ---------------------------------------------------------------- */

struct options {
	lua_Number tick;
	lua_Integer wheel_size, max_pending;
	int on_error; /* stack index of the on_error function, 0 if none */
};

static void option_error(lua_State *L, const char *name, const char *expected)
{
	luaL_argerror(L, 1, lua_pushfstring(L, "option '%s': %s expected", name, expected));
}

static lua_Integer int_option(lua_State *L, const char *name, lua_Integer lo, lua_Integer hi,
			      const char *expected)
{
	lua_Number x;
	if (lua_type(L, -1) != LUA_TNUMBER)
		option_error(L, name, expected);
	x = lua_tonumber(L, -1);
	if (!(x >= (lua_Number)lo && x <= (lua_Number)hi) || x != floor(x))
		option_error(L, name, expected);
	return (lua_Integer)x;
}

static void read_option(lua_State *L, const char *name, struct options *o)
{
	if (!strcmp(name, "tick")) {
		lua_Number t = lua_type(L, -1) == LUA_TNUMBER ? lua_tonumber(L, -1) : -1;
		if (!(t >= 1e-6 && t <= 3600))
			option_error(L, name, "number of seconds from 1e-6 to 3600");
		o->tick = t;
	} else if (!strcmp(name, "wheel_size")) {
		o->wheel_size = int_option(L, name, 1, 1 << HWT_WHEEL_MAX_BITS, "integer from 1 to 4096");
	} else if (!strcmp(name, "max_pending")) {
		o->max_pending = int_option(L, name, 0, LUA_MAXINTEGER, "non-negative integer");
	} else if (!strcmp(name, "on_error")) {
		if (!is_callable(L, -1))
			option_error(L, name, "function or callable object");
		o->on_error = 1;
	} else {
		luaL_argerror(L, 1, lua_pushfstring(L, "unknown option '%s'", name));
	}
}

/* Read opts (index 1); leaves the on_error value, if any, at o->on_error. */
static void read_options(lua_State *L, struct options *o)
{
	o->tick = 0.001;
	o->wheel_size = 512;
	o->max_pending = 0;
	o->on_error = 0;
	if (lua_isnoneornil(L, 1))
		return;
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	lua_pushnil(L);
	while (lua_next(L, 1)) {
		if (lua_type(L, -2) != LUA_TSTRING)
			luaL_argerror(L, 1, "option names must be strings");
		read_option(L, lua_tostring(L, -2), o);
		lua_pop(L, 1);
	}
	if (o->on_error) {
		lua_getfield(L, 1, "on_error");
		o->on_error = lua_gettop(L);
	}
}

static int start_timer(lua_State *L, struct timer *T, const struct options *o)
{
	int64_t tick_ns = (int64_t)llround(o->tick * 1e9);
	int err = hwt_worker_init(&T->w, tick_ns, hwt_wheel_bits_for((uint64_t)o->wheel_size));
	if (!err && (err = hwt_worker_start(&T->w)) != 0)
		hwt_worker_destroy(&T->w);
	if (err) {
		lua_pushnil(L);
		lua_pushfstring(L, "hwtimer: cannot start timer: %s", strerror(err));
		return 2;
	}
	T->stopped = 0;
	return 0;
}

/* The metatable of the timer's timeouts (see the top of this file); the
 * timeout methods table is upvalue 2 of hwtimer.new. */
static void new_handle_metatable(lua_State *L, int ud, struct timer *T)
{
	lua_createtable(L, 0, 6);
	lua_pushvalue(L, lua_upvalueindex(2));
	lua_setfield(L, -2, "__index");
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

static int hwtimer_new(lua_State *L)
{
	struct options o;
	struct timer *T;
	int ud, failed;
	read_options(L, &o);
	T = hwt_newuserdata(L, sizeof *T, 3);
	ud = lua_gettop(L);
	memset(T, 0, sizeof *T);
	T->magic = &TIMER_MAGIC;
	T->stopped = 1; /* until the worker runs: __gc must not touch it */
	T->forkgen = fork_generation;
	T->max_pending = o.max_pending;
	T->rng = ((uint64_t)hwt_clock_ns() ^ (uint64_t)(uintptr_t)T) | 1;
	hwt_list_init(&T->local);
	hwt_list_init(&T->batch);
	hwt_list_init(&T->running);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_setmetatable(L, ud);
	new_handle_metatable(L, ud, T);
	hwt_setuv(L, ud, UV_HANDLE_MT);
	if (o.on_error) {
		lua_pushvalue(L, o.on_error);
		hwt_setuv(L, ud, UV_ON_ERROR);
		T->has_on_error = 1;
	}
	if ((failed = start_timer(L, T, &o)) != 0)
		return failed;
	lua_settop(L, ud);
	return 1;
}

static int hwtimer_now(lua_State *L)
{
	lua_pushnumber(L, ns_to_s(hwt_clock_ns()));
	return 1;
}

/* ---- registration ----------------------------------------------------------------- */

static const luaL_Reg timer_methods[] = {
	{ "schedule", timer_schedule },
	{ "every", timer_every },
	{ "dispatch", timer_dispatch },
	{ "run", timer_run },
	{ "pending", timer_pending },
	{ "getfd", timer_getfd },
	{ "dirty", timer_dirty },
	{ "pollfd", timer_getfd },
	{ "events", timer_events },
	{ "timeout", timer_timeout },
	{ "stats", timer_stats },
	{ "take", timer_take },
	{ "done", timer_done },
	{ "wakeup", timer_wakeup },
	{ "take_only", timer_take_only },
	{ "stop", timer_stop },
	{ "close", timer_close },
	{ NULL, NULL }
};

static const luaL_Reg timer_metamethods[] = {
	{ "__gc", timer_close },
	{ "__close", timer_close },
	{ "__tostring", timer_tostring },
	{ NULL, NULL }
};

static const luaL_Reg timeout_methods[] = {
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

static const luaL_Reg module_functions[] = {
	{ "new", hwtimer_new },
	{ "now", hwtimer_now },
	{ NULL, NULL }
};

int luaopen_hwtimer_core(lua_State *L);

int luaopen_hwtimer_core(lua_State *L)
{
	int mt, tmethods;
	pthread_once(&fork_once, register_fork_handler);
	hwt_newmetatable(L, TIMER_MT);
	mt = lua_gettop(L);
	luaL_setfuncs(L, timer_metamethods, 0);
	lua_newtable(L);
	luaL_setfuncs(L, timer_methods, 0);
	lua_setfield(L, mt, "__index");
	lua_newtable(L);
	lua_pushliteral(L, TIMER_FIELD);
	luaL_setfuncs(L, timeout_methods, 1);
	tmethods = lua_gettop(L);
	luaL_newlibtable(L, module_functions);
	lua_pushvalue(L, mt);
	lua_pushvalue(L, tmethods);
	luaL_setfuncs(L, module_functions, 2); /* hwtimer.new's upvalues */
	lua_pushliteral(L, HWT_VERSION);
	lua_setfield(L, -2, "_VERSION");
	return 1;
}
