/*
 * lstats.c: what timer:stats reports: the counts (bumped where they happen,
 * with COUNT) and a log-linear histogram of lateness.
 */
#include <math.h>
#include <string.h>
#include "lhwtimer.h"

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

void lhwt_record_late(struct timer *T, int64_t late)
{
	unsigned b = late_bucket(late);
	T->life.late[b]++;
	T->window.late[b]++;
	if (late > T->life.late_max) T->life.late_max = late;
	if (late > T->window.late_max) T->window.late_max = late;
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
	struct timer *T = lhwt_to_timer(L, 1);
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


const luaL_Reg lhwt_stats_timer_methods[] = {
	{ "stats", timer_stats },
	{ NULL, NULL }
};
