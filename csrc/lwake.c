/*
 * lwake.c: the wake socket, for a host that cannot poll the timer's
 * descriptor but can wait on a UDP socket it opens itself: nginx, whose Lua
 * code waits on cosockets and on timers that count whole milliseconds from a
 * clock the event loop reads between events. Paired with the host's socket,
 * the timer's UDP socket gets one datagram from the driver thread when a
 * waiting host has something due, at the driver's own (sub-millisecond)
 * time, and one when the timer stops:
 *
 *   local port, token = timer:wake_socket()
 *   local udp = ngx.socket.udp()
 *   udp:setpeername("127.0.0.1", port); udp:send(token)
 *   assert(timer:wake_pair())
 *   ...
 *   if not timer:wake_arm() then udp:receive() end -- wait unless due already
 *
 * A datagram is a hint, never a count: a host reads at most one stale one
 * after a wait it ended on its own timeout, and checks what is due anyway.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "clock.h"
#include "larm.h"
#include "lwake.h"
#include "pipe.h"

/* 64 bits from the clock, the timer's address and a counter, mixed
 * (splitmix64): the token only keeps another local sender's datagrams from
 * pairing by accident, which would cost wake-ups, never a timeout. */
static uint64_t token_bits(const struct timer *T)
{
	static const char salt = 0; /* its address differs between runs too */
	uint64_t z = (uint64_t)hwt_clock_ns() ^ ((uint64_t)(uintptr_t)T << 16) ^ (uint64_t)(uintptr_t)&salt;
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* port, token = timer:wake_socket(): a fresh UDP socket on 127.0.0.1 (one
 * opened before and not paired is closed) and what the host must send it,
 * from the socket it will wait on, before wake_pair. nil, message on failure. */
static int timer_wake_socket(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	int fd, port, err;
	if (T->wake_new >= 0)
		close(T->wake_new);
	T->wake_new = -1;
	if ((err = hwt_wake_open(&fd, &port)) != 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "hwtimer: cannot open a wake socket: %s", strerror(err));
		return 2;
	}
	T->wake_new = fd;
	snprintf(T->wake_token, sizeof T->wake_token, "%016llx", (unsigned long long)token_bits(T));
	lua_pushinteger(L, port);
	lua_pushstring(L, T->wake_token);
	return 2;
}

/* true = timer:wake_pair(): the token came; from now on the socket it came
 * from is the one woken (a socket paired before is closed). nil, message when
 * it has not come or the socket fails. */
static int timer_wake_pair(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	int err;
	if (T->wake_new < 0) {
		lua_pushnil(L);
		lua_pushliteral(L, "hwtimer: no wake socket to pair (call timer:wake_socket() first)");
		return 2;
	}
	if ((err = hwt_wake_pair(T->wake_new, T->wake_token, 16)) != 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "hwtimer: cannot pair the wake socket: %s",
				err == EAGAIN ? "its token has not come" : strerror(err));
		return 2;
	}
	err = hwt_worker_wake_use(&T->w, T->wake_new);
	T->wake_new = -1;
	if (err >= 0)
		close(err);
	lua_pushboolean(L, 1);
	return 1;
}

/* due = timer:wake_arm([crowded_only]): true when timeouts are due now
 * (take them: do not wait); false when the paired socket gets one datagram
 * once they are. Without a paired socket, false and no datagram; with
 * crowded_only, also when the next deadline is one timeout's alone at the
 * wheel's lowest level (a datagram and a wake-up of its own for one
 * callback: the host's timer serves it as well). (Stopping the timer sends
 * one, armed or not.) */
static int timer_wake_arm(lua_State *L)
{
	struct timer *T = lhwt_check_live(L, 1);
	int crowded_only = lua_toboolean(L, 2);
	lhwt_flush_timer(L, T, 1); /* the due list holds no cancelled timeout */
	lua_pushboolean(L, !hwt_list_empty(&T->local) || hwt_worker_wake_arm(&T->w, crowded_only));
	return 1;
}

/* timer:host_timed(): the host wakes at timer:timeout() on its own clock
 * from now on, and its take expires what is due (hwtimer.ngx, on nginx's
 * timers): the driver thread no longer wakes at each deadline for it, only
 * while the host waits armed (wake_arm) and for the wheel's own work. */
static int timer_host_timed(lua_State *L)
{
	hwt_worker_host_timed(&lhwt_check_live(L, 1)->w);
	return 0;
}

const luaL_Reg lhwt_wake_timer_methods[] = {
	{ "host_timed", timer_host_timed },
	{ "wake_socket", timer_wake_socket },
	{ "wake_pair", timer_wake_pair },
	{ "wake_arm", timer_wake_arm },
	{ NULL, NULL }
};
