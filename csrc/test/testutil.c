/*
 * testutil.c: module "hwtimer_testutil", process tools the specs need and
 * that Debian's Lua 5.4 has no package for. Built for the tests only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
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

/* is_open(fd): the descriptor is open in this process (a close that never
 * came leaves it so) */
static int tu_is_open(lua_State *L)
{
	lua_pushboolean(L, fcntl((int)luaL_checkinteger(L, 1), F_GETFD) != -1);
	return 1;
}

/* monotonic(): CLOCK_MONOTONIC in seconds, read here, apart from hwtimer's
 * own reading of it */
static int tu_monotonic(lua_State *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
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

/* hold_threads() / release_threads(): every other thread of the process
 * (the worker's driver) stopped where it is, in a signal handler that blocks
 * on a pipe, so that a spec can act at a deadline before the worker can
 * (Linux: the threads are read from /proc/self/task). The pipes are global:
 * a signal handler reaches nothing else. Hold only a thread that sleeps (one
 * stopped holding a timer's lock would stop the spec too). */
static int held_pipe[2] = { -1, -1 }, ack_pipe[2] = { -1, -1 };
static int held;

static void on_hold(int sig)
{
	int saved = errno;
	char c = 'h';
	(void)sig;
	while (write(ack_pipe[1], &c, 1) < 0 && errno == EINTR)
		;
	while (read(held_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
	errno = saved;
}

static int signal_others(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	long self = syscall(SYS_gettid);
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		long tid = strtol(e->d_name, NULL, 10);
		if (tid > 0 && tid != self && syscall(SYS_tgkill, (long)getpid(), tid, SIGUSR2) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* release_threads(): each held thread goes on */
static int release(lua_State *L)
{
	char c = 'r';
	for (; held > 0; held--)
		if (write(held_pipe[1], &c, 1) != 1)
			return luaL_error(L, "could not release a held thread");
	return 0;
}

/* hold_threads() -> how many threads it stopped (each one has answered) */
static int tu_hold_threads(lua_State *L)
{
	struct sigaction sa;
	struct pollfd p;
	int n, got = 0;
	char c;
	if (held)
		return luaL_error(L, "threads are held already");
	if (held_pipe[0] < 0 && (pipe(held_pipe) != 0 || pipe(ack_pipe) != 0))
		return luaL_error(L, "pipe failed");
	sa.sa_handler = on_hold;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR2, &sa, NULL) != 0 || (n = signal_others()) < 0)
		return luaL_error(L, "could not signal the other threads");
	p.fd = ack_pipe[0];
	p.events = POLLIN;
	while (got < n) {
		if (poll(&p, 1, 30000) != 1 || read(ack_pipe[0], &c, 1) != 1) {
			held = n; /* those that stop late find their release waiting */
			release(L);
			return luaL_error(L, "%d of %d threads did not stop", n - got, n);
		}
		got++;
	}
	held = n;
	lua_pushinteger(L, n);
	return 1;
}

/* ---- a watchdog for one test ------------------------------------------------ */

/* What the alarm writes before the process exits: set by watchdog(), read
 * by the handler (a signal handler may only write and _exit). Process state
 * on purpose: one alarm per process. */
static char hang_line[1024];
static size_t hang_len;

static void on_hang(int sig)
{
	ssize_t w;
	(void)sig;
	w = write(2, hang_line, hang_len);
	(void)w;
	_exit(124);
}

/* watchdog(seconds, message): unless watchdog is called again within
 * `seconds`, the process writes message to stderr and exits with 124;
 * watchdog(0) disarms it. A test that hangs in C (a wheel that never
 * delivers, timer:run waiting for good) is ended in seconds, by name. */
static int tu_watchdog(lua_State *L)
{
	lua_Number secs = luaL_checknumber(L, 1);
	size_t len = 0;
	const char *msg = luaL_optlstring(L, 2, "", &len);
	struct sigaction sa;
	if (len > sizeof hang_line)
		len = sizeof hang_line;
	alarm(0);
	memcpy(hang_line, msg, len);
	hang_len = len;
	if (secs <= 0)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_hang;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) != 0)
		return luaL_error(L, "sigaction failed");
	alarm(secs < 1 ? 1u : (unsigned)secs);
	return 0;
}

static const luaL_Reg functions[] = {
	{ "watchdog", tu_watchdog },
	{ "hold_threads", tu_hold_threads },
	{ "release_threads", release },
	{ "fork", tu_fork },
	{ "wait", tu_wait },
	{ "_exit", tu_exit },
	{ "readable", tu_readable },
	{ "is_open", tu_is_open },
	{ "monotonic", tu_monotonic },
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
