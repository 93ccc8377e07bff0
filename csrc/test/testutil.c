/*
 * testutil.c: module "hwtimer_testutil", process tools the specs need and
 * that Debian's Lua 5.4 has no package for. Built for the tests only.
 */
#include <poll.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../compat.h"

static int tu_fork(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)fork());
	return 1;
}

/* wait(pid) -> exit status, or -signal when killed */
static int tu_wait(lua_State *L)
{
	int status = 0;
	pid_t pid = (pid_t)luaL_checkinteger(L, 1);
	if (waitpid(pid, &status, 0) < 0)
		return luaL_error(L, "waitpid failed");
	lua_pushinteger(L, WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
	return 1;
}

/* readable(fd, seconds) -> true when fd became readable within the time */
static int tu_readable(lua_State *L)
{
	struct pollfd p;
	p.fd = (int)luaL_checkinteger(L, 1);
	p.events = POLLIN;
	p.revents = 0;
	lua_pushboolean(L, poll(&p, 1, (int)(luaL_checknumber(L, 2) * 1000)) == 1);
	return 1;
}

/* sleep(seconds): let other threads run (valgrind runs one at a time) */
static int tu_sleep(lua_State *L)
{
	lua_Number secs = luaL_checknumber(L, 1);
	struct timespec ts;
	ts.tv_sec = (time_t)secs;
	ts.tv_nsec = (long)((secs - (lua_Number)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) != 0)
		;
	return 0;
}

static int tu_exit(lua_State *L)
{
	_exit((int)luaL_checkinteger(L, 1));
	return 0;
}

static int tu_close(lua_State *L)
{
	lua_pushboolean(L, close((int)luaL_checkinteger(L, 1)) == 0);
	return 1;
}

static const luaL_Reg functions[] = {
	{ "fork", tu_fork },
	{ "wait", tu_wait },
	{ "_exit", tu_exit },
	{ "readable", tu_readable },
	{ "sleep", tu_sleep },
	{ "close", tu_close },
	{ NULL, NULL }
};

int luaopen_hwtimer_testutil(lua_State *L);

int luaopen_hwtimer_testutil(lua_State *L)
{
	lua_newtable(L);
	luaL_setfuncs(L, functions, 0);
	return 1;
}
