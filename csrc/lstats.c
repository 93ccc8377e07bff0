/*
 * lstats.c: what timer:stats reports: counts of runs (bumped where they
 * happen, with COUNT; see run_armed in lbase.h), callback time, a
 * log-linear histogram of lateness; timer:count for the retry helper.
 */
#include <math.h>
#include <string.h>
#include "larm.h"
#include "lstats.h"

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

void lhwt_record_fired(struct timer *T, int64_t late)
{
	unsigned b = late_bucket(late);
	COUNT(T, fired);
	T->runs_pending--;
	T->life.late[b]++;
	T->window.late[b]++;
	T->life.late_sum += (double)late * 1e-9;
	T->window.late_sum += (double)late * 1e-9;
	if (late > T->life.late_max) T->life.late_max = late;
	if (late > T->window.late_max) T->window.late_max = late;
}

void lhwt_record_cb_time(struct timer *T, int64_t ns)
{
	T->life.cb_time += ns;
	T->window.cb_time += ns;
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

static void set_integer(lua_State *L, const char *k, lua_Integer v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, k);
}

static lua_Integer list_length(const struct hwt_link *head)
{
	lua_Integer n = 0;
	const struct hwt_link *l;
	for (l = head->next; l != head; l = l->next)
		n++;
	return n;
}

/* Timeouts due and not yet run: on the worker's due list, taken by a
 * dispatch that has not got to them (local, batch). Walks the lists. */
static lua_Integer count_due(struct timer *T)
{
	if (T->stopped || forked(T)) /* nothing pending; a child must not lock */
		return 0;
	return (lua_Integer)hwt_worker_count_due(&T->w) + list_length(&T->local) +
	       list_length(&T->batch);
}

/* timer:stats([since_last]): counts and lateness over the timer's life, or
 * since the previous stats(true): one window per timer, whoever asks. */
static int timer_stats(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	int since_last = lua_toboolean(L, 2);
	if (!T->stopped)
		lhwt_flush_timer(L, T, 1); /* `due` counts no cancelled timeout */
	struct stats *st = since_last ? &T->window : &T->life;
	lua_createtable(L, 0, 18);
	set_integer(L, "scheduled", st->scheduled);
	set_integer(L, "fired", st->fired);
	set_integer(L, "cancelled", st->cancelled);
	set_integer(L, "pending", T->runs_pending);
	set_integer(L, "errors", st->errors);
	set_integer(L, "skipped", st->skipped);
	set_integer(L, "due", count_due(T));
	set_number(L, "cb_time", ns_to_s(st->cb_time));
	set_number(L, "cb_max", ns_to_s(st->cb_max));
	set_integer(L, "retry_started", st->retry_started);
	set_integer(L, "retry_succeeded", st->retry_succeeded);
	set_integer(L, "retry_failed", st->retry_failed);
	set_number(L, "late_p50", late_percentile(st, 0.5));
	set_number(L, "late_p99", late_percentile(st, 0.99));
	set_number(L, "late_max", ns_to_s(st->late_max));
	set_number(L, "late_sum", st->late_sum);
	if (since_last)
		memset(&T->window, 0, sizeof T->window);
	return 1;
}

/* The lateness histogram's bounds for timer:lateness: every power of two
 * of ns from 2^13 (8 us) to 2^35 (34 s). Each is the top of a bucket of the
 * log-linear histogram (4 per power of two), so the counts are exact. */
#define EDGE_FIRST 13
#define EDGE_LAST 35

/* buckets, sum, count = timer:lateness(): over the timer's life, the runs
 * that fired at most buckets[i][1] seconds late (cumulative) in
 * buckets[i][2]; the sum of their lateness (seconds) and their number. */
static int timer_lateness(lua_State *L)
{
	struct timer *T = lhwt_to_timer(L, 1);
	const struct stats *st = &T->life;
	uint64_t seen = 0;
	unsigned b = 0, k;
	lua_createtable(L, EDGE_LAST - EDGE_FIRST + 1, 0);
	for (k = EDGE_FIRST; k <= EDGE_LAST; k++) {
		unsigned top = 4 * (k - 2) + 3; /* the bucket whose top is 2^k - 1 ns */
		for (; b <= top; b++)
			seen += st->late[b];
		lua_createtable(L, 2, 0);
		lua_pushnumber(L, ns_to_s(bucket_top(top)));
		lua_rawseti(L, -2, 1);
		lua_pushinteger(L, (lua_Integer)seen);
		lua_rawseti(L, -2, 2);
		lua_rawseti(L, -2, (int)(k - EDGE_FIRST + 1));
	}
	for (; b < LATE_BUCKETS; b++)
		seen += st->late[b];
	lua_pushnumber(L, st->late_sum);
	lua_pushinteger(L, (lua_Integer)seen);
	return 3;
}

/* timer:count(name): one more retry_started, retry_succeeded or retry_failed
 * (the retry helper's counts, kept with the timer's). */
static int timer_count(lua_State *L)
{
	static const char *const names[] = { "retry_started", "retry_succeeded", "retry_failed", NULL };
	struct timer *T = lhwt_to_timer(L, 1);
	switch (luaL_checkoption(L, 2, NULL, names)) {
	case 0: COUNT(T, retry_started); break;
	case 1: COUNT(T, retry_succeeded); break;
	default: COUNT(T, retry_failed); break;
	}
	return 0;
}

const luaL_Reg lhwt_stats_timer_methods[] = {
	{ "stats", timer_stats },
	{ "count", timer_count },
	{ "lateness", timer_lateness },
	{ NULL, NULL }
};
