/*
 * lbase.h: the bottom of the Lua binding (module "hwtimer.core"): the timer's
 * state, the node helpers, argument checks, a timer's identity and fork
 * detection. Every other file of the binding includes it; it includes none of
 * theirs. The layers, each using only those below it:
 *
 *   lbase.c     argument checks, a timer's identity, fork detection
 *   larm.c      arming: pins, putting nodes on the wheel, delays, periods,
 *               the pending cap, a node's task; timer:schedule and every
 *   ltimer.c    the timer object: schedule, every, stop, close, queries
 *   ltimeout.c  the timeout handle: its metatable, cancel, reset, queries
 *   lstats.c    counts and the lateness histogram: timer:stats
 *   lwake.c     the wake socket, for hosts that wait on a UDP socket (nginx)
 *   ldispatch.c running due callbacks: dispatch, run, take, done, wakeup
 *               (it records into lstats.c's counts)
 *   lhwtimer.c  the module: hwtimer.new, hwtimer.now, registration
 *
 * Two userdata types. A timer owns a worker (wheel + lock + pipe), which the
 * process's one driver thread drives for every timer (driver.h). A
 * timeout's userdata is nothing but its 32-byte wheel node; one with no
 * arguments has no uservalues, so scheduling it allocates one small userdata
 * and nothing else (a uservalue would put every handle on the collector's
 * gray list: 85 of a schedule's ~165 ns, measured; see docs/internals.md).
 *
 * Each timer makes the metatable of its own timeouts ("handle metatable").
 * That metatable holds the timer at [1] (so a handle keeps its timer alive
 * without a reference of its own) and, in the rest of its array part, two
 * entries per pending timeout: pin p = PIN(n) holds the handle at 2p (what
 * keeps a dropped handle's timeout alive) and its task at 2p + 1: the
 * callback itself, or, for a periodic timeout or one with arguments, a pack
 * {callback, [period], arguments...} (TASK_* below): in 5.4 the handle's own
 * uservalues (so the handle is at 2p + 1 too), elsewhere a table (compat.h). Unpinning stores nil in
 * both and pushes p on a free stack that the next pin pops, so the array
 * stays as long as the most timeouts ever pending at once. A timeout that
 * has finished (run, or cancelled, and out of its own callback) keeps
 * nothing but its node: its callback and arguments are released, so it can
 * no longer be reset.
 *
 * State changes only in the binding, on the Lua thread: the worker thread only
 * moves nodes between the wheel's lists, under the worker's lock.
 *
 * Uservalues: timer {1 = handle metatable, 2 = on_error, 3 = wakeup hook,
 * 4 = dispatch's message handler}; a timeout: none, or in 5.4 its pack.
 */
#ifndef HWT_LBASE_H
#define HWT_LBASE_H

#include <stdint.h>
#include "compat.h"
#include "worker.h"

/* Hidden, like the core's functions (see worker.h): only luaopen_hwtimer_core
 * is exported from the module. */
#if defined(__GNUC__)
#define HWT_HIDDEN_BEGIN _Pragma("GCC visibility push(hidden)")
#define HWT_HIDDEN_END _Pragma("GCC visibility pop")
#else
#define HWT_HIDDEN_BEGIN
#define HWT_HIDDEN_END
#endif

HWT_HIDDEN_BEGIN

#define TIMER_MT "hwtimer.timer"
#define TIMEOUT_NAME "hwtimer.timeout"
#define MAX_DELAY 1e9   /* seconds (~31 years): deadlines stay far inside int64 ns */
#define MAX_ARGS 200    /* extra arguments carried to a callback (fits NARGS) */
#define USERVAL_HANDLE_MT 1
#define USERVAL_ON_ERROR 2
#define USERVAL_WAKEUP 3
#define USERVAL_HANDLER 4
#define TIMER_USERVALS 4
/* A packed task (a periodic timeout's, or one with arguments): the pack
 * {callback, [period], arguments...}. */
#define TASK_CALLBACK 1
#define TASK_PERIOD 2

/* node->owner_flags: the state in the low bits, then flags. A periodic
 * timeout keeps its schedule in its task's TASK_PERIOD: the interval in ns (a number),
 * or with ADVANCED a table {interval = ns, rate = bool, jitter = fraction,
 * nominal = ns of the current period's start}. REARMED: reset from its own
 * callback, so finishing that callback must leave it armed (a dispatched
 * one is on the wheel already; a taken one goes there at done). RUNNING: handed
 * to the host by take, until timer:done (pinned until then, so that its
 * callback may still reset it). RELEASED: cancelled, its task released,
 * its node pinned until the next flush of cancels (larm.h). */
enum { PENDING, EXPIRED, CANCELLED, STATE_MASK = 3, PERIODIC = 4, ADVANCED = 8, REARMED = 16,
       RUNNING = 32, RELEASED = 64 };
/* Cancels unlinked in one lock round (see struct timer's `cancelled`). */
#define HWT_CANCEL_BATCH 64
#define LATE_BUCKETS 256 /* lateness histogram: 4 buckets per power of two of ns */

/* A timer is known without a metatable lookup: a userdata of exactly
 * sizeof(struct timer) whose `magic` is the address of lhwt_timer_magic,
 * which no other module can hold by accident. (Only another C module's
 * userdata of that exact size, left uninitialised over the memory of a freed
 * timer, could pass; `magic` is not cleared by __gc because 5.2+ may
 * resurrect a closed timer, whose methods must then say it is stopped.)
 *
 * Each timer has its own metatable for its timeouts (hidden by __metatable):
 * the timer's userdata at [1], the pins from [2] on, and under the short
 * string TIMER_FIELD (upvalue 1 of every timeout function: short strings are
 * Lua's fastest keys) a light userdata for the struct timer, which is how a
 * timeout is known and finds its timer. (Its __index is the timer's own copy
 * of the methods, whose cancel knows both: ltimeout.c.) */
extern const char lhwt_timer_magic;
#define PIN_TIMER 1
#define TIMER_FIELD "__hwtimer.timer"

/* Counts are of runs: see run_armed below and docs/api.md's stats. */
struct stats {
	lua_Integer scheduled, fired, cancelled, errors, skipped;
	lua_Integer retry_started, retry_succeeded, retry_failed; /* timer:count */
	int64_t cb_time, cb_max;          /* ns: callbacks run by dispatch (see ldispatch.c) */
	int64_t late_max;                 /* ns */
	double late_sum;                  /* seconds: a double, as an int64 of ns would
	                                     overflow within months at a million runs a second */
	uint32_t late[LATE_BUCKETS];
};

struct timer {
	const void *magic;         /* &lhwt_timer_magic */
	struct hwt_worker w;
	struct stats life, window;        /* since creation; since stats(true) */
	int64_t batch_now;                /* clock at the start of this dispatch */
	int64_t cb_start;                 /* coarse clock when the current callback began */
	uint64_t rng;                     /* jitter for periodic timeouts */
	struct hwt_link local;     /* taken from the worker, not yet run */
	struct hwt_link batch;     /* being run by the current dispatch */
	struct hwt_node *current;  /* the timeout whose callback runs now */
	struct hwt_link running;   /* taken by the host, not yet done: periodic, or reset */
	int64_t host_wake;         /* when the host plans to wake (ns); 0: awake or no hook */
	uint32_t *free_pins;       /* pin slots to reuse, a stack */
	uint32_t nfree, free_cap;
	lua_Integer pending;       /* scheduled, neither run nor cancelled (a series counts once) */
	lua_Integer runs_pending;  /* runs armed, neither fired nor cancelled */
	lua_Integer max_pending;   /* 0: no cap */
	lua_Integer budget;        /* callbacks the current dispatch may still run */
	uint32_t npins;            /* pin slots ever used: the array's length */
	unsigned long forkgen;     /* fork_generation when the timer was made */
	int stopped, dispatching, has_on_error;
	int wake;                  /* a deadline came before host_wake: call the hook */
	int take_only;             /* the host runs callbacks itself: no dispatch, no run */
	int has_wakeup;            /* a wakeup hook is set (uservalue 3) */
	int wake_new;              /* a wake socket opened, not yet paired (lwake.c); -1: none */
	unsigned ncancelled;       /* nodes in `cancelled` */
	/* Cancelled outside a dispatch, still linked where they were: unlinked
	 * together, under one lock round with their neighbours fetched at once,
	 * before the host next looks at due timeouts (larm.h) */
	struct hwt_node *cancelled[HWT_CANCEL_BATCH];
	char wake_token[17];       /* what the host sends it to pair: 16 hex digits */
};

/* The wheel node's two fields for its owner, named for what the binding keeps
 * there: how many arguments its callback takes, and its pin slot. */
#define NARGS(n) ((n)->owner_byte)
#define PIN(n) ((n)->owner_word)
/* Where the handle metatable keeps a pinned timeout's handle and its task. */
#define HANDLE_AT(n) ((lua_Integer)PIN(n) * 2)
#define TASK_AT(n) ((lua_Integer)PIN(n) * 2 + 1)

/* ---- small inline helpers (hot paths in several files) ------------------------ */

/* Bumped in a forked child (lbase.c): a timer made before it is unusable. */
extern volatile unsigned long lhwt_fork_generation;

static inline int state_of(const struct hwt_node *n) { return n->owner_flags & STATE_MASK; }
static inline int is_periodic(const struct hwt_node *n) { return n->owner_flags & PERIODIC; }
/* The task is a table, not the bare callback. */
static inline int task_packed(const struct hwt_node *n) { return is_periodic(n) || NARGS(n) > 0; }

static inline void set_state(struct hwt_node *n, int state)
{
	n->owner_flags = (uint8_t)((n->owner_flags & ~STATE_MASK) | state);
}

static inline double ns_to_s(int64_t ns)
{
	return (double)ns / 1e9;
}

static inline int forked(const struct timer *T)
{
	return T->forkgen != lhwt_fork_generation;
}

/* One more of `f`, over the timer's life and in the current window. */
#define COUNT(T, f) ((T)->life.f++, (T)->window.f++)

/* A run of `n` is armed (on the wheel or due, not yet fired): it is pending,
 * and not a periodic timeout whose run has fired and whose next run is not
 * armed yet (its callback runs, or the host took it), unless a t:reset from
 * there armed one. The stats count runs: every armed run ends as exactly one
 * fired or one cancelled, so scheduled = fired + cancelled + runs_pending. */
static inline int run_armed(const struct timer *T, const struct hwt_node *n)
{
	return state_of(n) == PENDING &&
	       ((n->owner_flags & REARMED) || (n != T->current && !(n->owner_flags & RUNNING)));
}

/* A run was armed: counted as scheduled. */
static inline void count_armed(struct timer *T)
{
	COUNT(T, scheduled);
	T->runs_pending++;
}

/* ---- argument checks, identity, fork detection (lbase.c) --------------------------- */

/* Register the fork handler, once per process (luaopen calls it). */
void lhwt_detect_forks(void);
/* A function, or a value whose metatable has __call. */
int lhwt_is_callable(lua_State *L, int idx);
/* Raise unless the value at idx is callable. */
void lhwt_check_callable(lua_State *L, int idx);
/* A finite number at idx, or raise. */
lua_Number lhwt_check_finite(lua_State *L, int idx);
/* Raise "<expected> expected, got <__name or type>" for argument idx. */
int lhwt_type_error(lua_State *L, int idx, const char *expected);
/* The timer at idx, whatever its state, or raise. */
struct timer *lhwt_to_timer(lua_State *L, int idx);
/* Raise the error lhwt_check_live found for the value at idx. */
struct timer *lhwt_live_error(lua_State *L, int idx);

/* The timer at idx, usable from this process and not stopped, or raise.
 * Inline: every schedule starts here. (Identity: see lhwt_timer_magic.) */
static inline struct timer *lhwt_check_live(lua_State *L, int idx)
{
	struct timer *T = (struct timer *)lua_touserdata(L, idx);
	if (T && hwt_rawlen(L, idx) == sizeof *T && T->magic == &lhwt_timer_magic && !forked(T) &&
	    !T->stopped)
		return T;
	return lhwt_live_error(L, idx);
}

HWT_HIDDEN_END

#endif
