/*
 * lwatch.c: hwtimer.sqlite.watch(path): a descriptor that becomes readable
 * when the SQLite file at path, or its -wal, is written: by inotify on the
 * file's directory (the -wal is made and removed as connections come and
 * go; the directory stays). A plain Lua loop watches it so that a job
 * another process stores due now is polled for at once
 * (hwtimer.durable.sqlite_wake). Linux only: elsewhere watch() returns nil
 * and a message.
 *
 *   w = sqlite.watch(path)   -- or nil, message
 *   w:getfd()                -- readable once something was written
 *   n = w:drain()            -- the writes seen since the last drain (0: none)
 *   w:close()
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/inotify.h>
#endif

#include <lauxlib.h>
#include <lua.h>

#include "../compat.h"
#include "lwatch.h"

#define WATCH_NAME "hwtimer.sqlite.watch"
#define BASE_MAX 255

typedef struct {
	int fd;
	size_t len;
	char base[BASE_MAX + 1]; /* the file's name in its directory */
} lwatch;

static lwatch *check_watch(lua_State *L)
{
	lwatch *w = (lwatch *)luaL_checkudata(L, 1, WATCH_NAME);
	if (w->fd < 0)
		luaL_error(L, "attempt to use a closed watch");
	return w;
}

static int w_close(lua_State *L)
{
	lwatch *w = (lwatch *)luaL_checkudata(L, 1, WATCH_NAME);
	if (w->fd >= 0)
		(void)close(w->fd);
	w->fd = -1;
	return 0;
}

static int w_getfd(lua_State *L)
{
	lua_pushinteger(L, check_watch(L)->fd);
	return 1;
}

#if defined(__linux__)
/* Whether an event's name (len bytes, NUL-padded) is the file's or its
 * -wal's. */
static int ours(const lwatch *w, const char *name, uint32_t len)
{
	size_t n = len ? strnlen(name, len) : 0;
	if (n < w->len || memcmp(name, w->base, w->len) != 0)
		return 0;
	return n == w->len || (n == w->len + 4 && memcmp(name + w->len, "-wal", 4) == 0);
}

static int w_drain(lua_State *L)
{
	lwatch *w = check_watch(L);
	char buf[4096];
	lua_Integer seen = 0;
	for (;;) {
		ssize_t got = read(w->fd, buf, sizeof buf);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break; /* EAGAIN: all read (the descriptor is non-blocking) */
		for (size_t at = 0; at + sizeof(struct inotify_event) <= (size_t)got;) {
			struct inotify_event ev; /* (copied out: buf is not aligned for it) */
			memcpy(&ev, buf + at, sizeof ev);
			seen += ours(w, buf + at + sizeof ev, ev.len);
			at += sizeof ev + ev.len;
		}
	}
	lua_pushinteger(L, seen);
	return 1;
}

static int open_watch(lua_State *L, lwatch *w, const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	char dir[4096];
	size_t dlen = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
	if (strlen(base) == 0 || strlen(base) > BASE_MAX || dlen >= sizeof dir)
		return luaL_argerror(L, 1, "path of a file expected");
	memcpy(dir, !slash ? "." : slash == path ? "/" : path, dlen);
	dir[dlen] = '\0';
	w->len = strlen(base);
	memcpy(w->base, base, w->len + 1);
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0)
		return -1;
	if (inotify_add_watch(w->fd, dir, IN_MODIFY | IN_CREATE | IN_MOVED_TO) < 0) {
		int e = errno;
		(void)close(w->fd);
		w->fd = -1;
		errno = e;
		return -1;
	}
	return 0;
}
#else
static int w_drain(lua_State *L)
{
	(void)check_watch(L);
	lua_pushinteger(L, 0);
	return 1;
}

static int open_watch(lua_State *L, lwatch *w, const char *path)
{
	(void)L;
	(void)w;
	(void)path;
	errno = ENOSYS;
	return -1;
}
#endif

static int l_watch(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	lwatch *w = (lwatch *)lua_newuserdata(L, sizeof *w);
	w->fd = -1;
	luaL_getmetatable(L, WATCH_NAME);
	lua_setmetatable(L, -2);
	if (open_watch(L, w, path) < 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "cannot watch %s: %s", path, strerror(errno));
		return 2;
	}
	return 1;
}

static const luaL_Reg watch_methods[] = {
	{ "getfd", w_getfd },
	{ "drain", w_drain },
	{ "close", w_close },
	{ NULL, NULL }
};

static const luaL_Reg watch_metamethods[] = {
	{ "__gc", w_close },
	{ "__close", w_close },
	{ NULL, NULL }
};

void hwt_watch_register(lua_State *L)
{
	hwt_newmetatable(L, WATCH_NAME);
	luaL_setfuncs(L, watch_metamethods, 0);
	lua_newtable(L);
	luaL_setfuncs(L, watch_methods, 0);
	lua_setfield(L, -2, "__index");
	lua_pop(L, 1);
	lua_pushcfunction(L, l_watch);
	lua_setfield(L, -2, "watch");
}
