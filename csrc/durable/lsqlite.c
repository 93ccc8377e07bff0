/*
 * lsqlite.c: hwtimer.sqlite, the small SQLite binding under hwtimer.durable.
 *
 * Only what the durable store needs: a connection (open, exec, prepare,
 * busy_timeout, changes, close) and prepared statements (bind, step, column,
 * reset, and run/first/rows, which bind, step and reset in one call so that a
 * schedule costs one crossing from Lua into C). A refusal of SQLite's comes
 * back as nil, message; a wrong argument raises. Lua 5.1-5.4 and LuaJIT
 * through ../compat.h.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sqlite3.h>

#include "../compat.h"
#include "checkpoint.h"
#include "lwatch.h"

#define DB_NAME "hwtimer.sqlite.db"
#define STMT_NAME "hwtimer.sqlite.stmt"

typedef struct {
	sqlite3 *db; /* NULL once closed */
	struct hwt_checkpointer *ckpt; /* db:checkpoint_in_background's, or NULL */
} ldb;

typedef struct {
	sqlite3_stmt *s; /* NULL once finalized */
	ldb *owner;      /* anchored in the uservalue, so alive while we are */
} lstmt;

/* ---- errors ------------------------------------------------------------ */

/* nil, message: SQLite refused. */
static int fail(lua_State *L, sqlite3 *db)
{
	lua_pushnil(L);
	lua_pushstring(L, db ? sqlite3_errmsg(db) : "out of memory");
	return 2;
}

/* luaL_setmetatable, which Lua 5.1 lacks. */
static void set_meta(lua_State *L, const char *name)
{
	luaL_getmetatable(L, name);
	lua_setmetatable(L, -2);
}

static ldb *check_db(lua_State *L, int idx)
{
	ldb *d = (ldb *)luaL_checkudata(L, idx, DB_NAME);
	if (!d->db)
		luaL_error(L, "attempt to use a closed database");
	return d;
}

static lstmt *check_stmt(lua_State *L, int idx)
{
	lstmt *st = (lstmt *)luaL_checkudata(L, idx, STMT_NAME);
	if (!st->owner->db)
		luaL_error(L, "attempt to use a closed database");
	if (!st->s)
		luaL_error(L, "attempt to use a finalized statement");
	return st;
}

/* ---- the connection -------------------------------------------------------- */

/* What a file of mode m is, where it is not a regular file: "a FIFO", ... */
static const char *file_type(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	return "not a regular file";
}

/*
 * Why `path` cannot be a store, or NULL: what is not a regular file (SQLite
 * gives "disk I/O error" for a FIFO, "unable to open database file" for a
 * directory, and takes /dev/null for an empty database), or, `existing`, a
 * file that is not there. stat(), not open(): an open of a FIFO for
 * reading waits for a writer. The names SQLite gives a meaning to (":memory:",
 * "", URIs "file:...") are left to it.
 */
static const char *not_a_store(lua_State *L, const char *path, int existing)
{
	struct stat st;
	if (path[0] == '\0' || strcmp(path, ":memory:") == 0 || strncmp(path, "file:", 5) == 0)
		return NULL;
	if (stat(path, &st) != 0)
		return existing || errno != ENOENT ? strerror(errno) : NULL;
	if (S_ISREG(st.st_mode))
		return NULL;
	return lua_pushfstring(L, "not a regular file (%s)", file_type(st.st_mode));
}

/*
 * sqlite.open(path [, existing]): a connection (read-write; created if
 * missing, unless `existing`) or nil, message. What is not a regular file
 * (a FIFO, a directory, a device, a socket) is refused before SQLite opens it.
 */
static int l_open(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	int existing = lua_toboolean(L, 2);
	const char *why = not_a_store(L, path, existing);
	ldb *d;
	int rc;
	if (why) {
		lua_pushnil(L);
		lua_pushstring(L, why);
		return 2;
	}
	d = (ldb *)hwt_newuserdata(L, sizeof *d, 0);
	d->db = NULL;
	d->ckpt = NULL;
	set_meta(L, DB_NAME);
	rc = sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READWRITE | (existing ? 0 : SQLITE_OPEN_CREATE) |
	                     SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		lua_pushnil(L);
		lua_pushstring(L, d->db ? sqlite3_errmsg(d->db) : sqlite3_errstr(rc));
		sqlite3_close(d->db);
		d->db = NULL;
		return 2;
	}
	sqlite3_extended_result_codes(d->db, 0);
	return 1;
}

/* db:close(): finalizes every statement first; safe to call twice. */
static int db_close(lua_State *L)
{
	ldb *d = (ldb *)luaL_checkudata(L, 1, DB_NAME);
	sqlite3_stmt *s;
	if (!d->db)
		return 0;
	if (d->ckpt) {
		hwt_checkpointer_stop(d->ckpt);
		d->ckpt = NULL;
	}
	while ((s = sqlite3_next_stmt(d->db, NULL)) != NULL)
		sqlite3_finalize(s);
	sqlite3_close(d->db);
	d->db = NULL;
	return 0;
}

/* db:exec(sql): true, or nil, message. */
static int db_exec(lua_State *L)
{
	ldb *d = check_db(L, 1);
	const char *sql = luaL_checkstring(L, 2);
	if (sqlite3_exec(d->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return fail(L, d->db);
	lua_pushboolean(L, 1);
	return 1;
}

/* db:checkpoint_in_background(pages): WAL checkpoints on a thread of their
 * own once the WAL holds `pages` pages (checkpoint.c); true, or nil, message
 * (the connection then checkpoints inline as before). */
static int db_checkpoint_in_background(lua_State *L)
{
	ldb *d = check_db(L, 1);
	lua_Integer pages = luaL_checkinteger(L, 2);
	const char *err = NULL;
	luaL_argcheck(L, pages > 0 && pages <= 1000000000, 2, "page count from 1 to 1e9 expected");
	if (!d->ckpt)
		d->ckpt = hwt_checkpointer_start(d->db, (int)pages, &err);
	if (!d->ckpt) {
		lua_pushnil(L);
		lua_pushstring(L, err);
		return 2;
	}
	lua_pushboolean(L, 1);
	return 1;
}

/* db:checkpoints(): the background checkpointer's rounds and the inline
 * checkpoints its hook ran (nil without one). */
static int db_checkpoints(lua_State *L)
{
	ldb *d = check_db(L, 1);
	long rounds, finishes;
	if (!d->ckpt)
		return 0;
	hwt_checkpointer_counts(d->ckpt, &rounds, &finishes);
	lua_pushinteger(L, (lua_Integer)rounds);
	lua_pushinteger(L, (lua_Integer)finishes);
	return 2;
}

/* db:prepare(sql): a statement, or nil, message. */
static int db_prepare(lua_State *L)
{
	ldb *d = check_db(L, 1);
	size_t len;
	const char *sql = luaL_checklstring(L, 2, &len);
	lstmt *st = (lstmt *)hwt_newuserdata(L, sizeof *st, 1);
	st->s = NULL;
	st->owner = d;
	set_meta(L, STMT_NAME);
	lua_pushvalue(L, 1);
	hwt_setuv(L, -2, 1);
	if (sqlite3_prepare_v2(d->db, sql, (int)len, &st->s, NULL) != SQLITE_OK)
		return fail(L, d->db);
	if (!st->s) {
		lua_pushnil(L);
		lua_pushliteral(L, "no statement in the text");
		return 2;
	}
	return 1;
}

/* db:busy_timeout(seconds): how long a write waits for another's lock. */
static int db_busy_timeout(lua_State *L)
{
	ldb *d = check_db(L, 1);
	lua_Number secs = luaL_checknumber(L, 2);
	luaL_argcheck(L, secs >= 0 && secs <= 86400, 2, "number of seconds from 0 to 86400 expected");
	sqlite3_busy_timeout(d->db, (int)(secs * 1000 + 0.5));
	return 0;
}

static int db_changes(lua_State *L)
{
	lua_pushinteger(L, sqlite3_changes(check_db(L, 1)->db));
	return 1;
}

static int db_last_insert_rowid(lua_State *L)
{
#if LUA_VERSION_NUM >= 503
	lua_pushinteger(L, (lua_Integer)sqlite3_last_insert_rowid(check_db(L, 1)->db));
#else
	lua_pushnumber(L, (lua_Number)sqlite3_last_insert_rowid(check_db(L, 1)->db));
#endif
	return 1;
}

/* db:autocommit(): true outside an explicit transaction. */
static int db_autocommit(lua_State *L)
{
	lua_pushboolean(L, sqlite3_get_autocommit(check_db(L, 1)->db));
	return 1;
}

static int db_errmsg(lua_State *L)
{
	lua_pushstring(L, sqlite3_errmsg(check_db(L, 1)->db));
	return 1;
}

/* db:durable(): true when the main database lives in a file that outlives
 * the connection; false otherwise (":memory:", a URI with mode=memory, the
 * memdb VFS, a temporary database: SQLite gives such a one no file name or
 * its memdb VFS), whatever spelling of the name brought it. */
static int db_durable(lua_State *L)
{
	ldb *d = check_db(L, 1);
	const char *file = sqlite3_db_filename(d->db, "main");
	char *vfs = NULL;
	int durable = file != NULL && *file != '\0';
	if (durable && sqlite3_file_control(d->db, "main", SQLITE_FCNTL_VFSNAME, &vfs) == SQLITE_OK && vfs) {
		durable = strstr(vfs, "memdb") == NULL;
		sqlite3_free(vfs);
	}
	lua_pushboolean(L, durable);
	return 1;
}

static int db_tostring(lua_State *L)
{
	ldb *d = (ldb *)luaL_checkudata(L, 1, DB_NAME);
	const char *file = d->db ? sqlite3_db_filename(d->db, "main") : NULL;
	if (d->db)
		lua_pushfstring(L, DB_NAME " (%s)", file && *file ? file : ":memory:");
	else
		lua_pushliteral(L, DB_NAME " (closed)");
	return 1;
}

/* ---- statements -------------------------------------------------------------- */

/* Bind the value at stack index idx to parameter i. `keep` (SQLITE_STATIC or
 * SQLITE_TRANSIENT) says whether SQLite may point into a Lua string or must
 * copy it: static only where the string stays on the stack until the
 * statement is reset (run, first, rows: one call binds, steps and resets). */
static int bind_one(lua_State *L, sqlite3_stmt *s, int i, int idx, sqlite3_destructor_type keep)
{
	size_t len;
	const char *p;
	switch (lua_type(L, idx)) {
	case LUA_TNIL:
		return sqlite3_bind_null(s, i);
	case LUA_TBOOLEAN:
		return sqlite3_bind_int(s, i, lua_toboolean(L, idx));
	case LUA_TNUMBER: {
		lua_Number n;
#if LUA_VERSION_NUM >= 503
		if (lua_isinteger(L, idx))
			return sqlite3_bind_int64(s, i, (sqlite3_int64)lua_tointeger(L, idx));
#endif
		n = lua_tonumber(L, idx);
		if (n > -9e15 && n < 9e15 && n == (lua_Number)(sqlite3_int64)n) /* (range first: the cast) */
			return sqlite3_bind_int64(s, i, (sqlite3_int64)n);
		return sqlite3_bind_double(s, i, n);
	}
	case LUA_TSTRING:
		p = lua_tolstring(L, idx, &len);
		/* 64-bit length: past INT_MAX an int would wrap (SQLITE_TOOBIG instead) */
		return sqlite3_bind_text64(s, i, p, (sqlite3_uint64)len, keep, SQLITE_UTF8);
	default:
		sqlite3_clear_bindings(s); /* none may point into a string that goes with the error */
		return luaL_argerror(L, idx, lua_pushfstring(L, "nil, boolean, number or string expected, got %s",
		                                             luaL_typename(L, idx)));
	}
}

/* Bind arguments first..top to parameters 1..n (strings not copied: for
 * run, first and rows, which reset the statement before they return). */
static int bind_from(lua_State *L, lstmt *st, int first)
{
	int i, top = lua_gettop(L), rc;
	if (top - first + 1 > sqlite3_bind_parameter_count(st->s))
		luaL_error(L, "too many values to bind (%d for %d parameters)", top - first + 1,
		           sqlite3_bind_parameter_count(st->s));
	for (i = first; i <= top; i++) {
		rc = bind_one(L, st->s, i - first + 1, i, SQLITE_STATIC);
		if (rc != SQLITE_OK)
			return rc;
	}
	return SQLITE_OK;
}

static void push_column(lua_State *L, sqlite3_stmt *s, int i)
{
	switch (sqlite3_column_type(s, i)) {
	case SQLITE_INTEGER:
#if LUA_VERSION_NUM >= 503
		lua_pushinteger(L, (lua_Integer)sqlite3_column_int64(s, i));
#else
		lua_pushnumber(L, (lua_Number)sqlite3_column_int64(s, i));
#endif
		break;
	case SQLITE_FLOAT:
		lua_pushnumber(L, sqlite3_column_double(s, i));
		break;
	case SQLITE_NULL:
		lua_pushnil(L);
		break;
	default: /* text, blob: both come back as strings */
		lua_pushlstring(L, (const char *)sqlite3_column_blob(s, i), (size_t)sqlite3_column_bytes(s, i));
	}
}

/* nil, message after a failed step; the statement is reset for reuse. */
static int step_fail(lua_State *L, lstmt *st)
{
	sqlite3 *db = st->owner->db;
	int n;
	sqlite3_reset(st->s); /* the error of the step is kept by the connection */
	n = fail(L, db);
	sqlite3_clear_bindings(st->s);
	return n;
}

/* stmt:bind(i, value): true, or nil, message. */
static int st_bind(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	int i = (int)luaL_checkinteger(L, 2);
	luaL_argcheck(L, i >= 1 && i <= sqlite3_bind_parameter_count(st->s), 2, "parameter index out of range");
	luaL_checkany(L, 3);
	if (bind_one(L, st->s, i, 3, SQLITE_TRANSIENT) != SQLITE_OK)
		return fail(L, st->owner->db);
	lua_pushboolean(L, 1);
	return 1;
}

/* stmt:step(): true with a row, false when done, or nil, message. */
static int st_step(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	int rc = sqlite3_step(st->s);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		lua_pushboolean(L, rc == SQLITE_ROW);
		return 1;
	}
	return step_fail(L, st);
}

/* stmt:column(i): the value of column i (1-based) of the current row. */
static int st_column(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	int i = (int)luaL_checkinteger(L, 2);
	luaL_argcheck(L, i >= 1 && i <= sqlite3_column_count(st->s), 2, "column index out of range");
	push_column(L, st->s, i - 1);
	return 1;
}

/* stmt:reset(): ready to step again; bindings cleared. */
static int st_reset(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	sqlite3_reset(st->s);
	sqlite3_clear_bindings(st->s);
	return 0;
}

/* stmt:run(...): bind, step to the end, reset: the rows changed and the
 * connection's last inserted rowid, or nil, message. */
static int st_run(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	int rc = bind_from(L, st, 2);
	if (rc == SQLITE_OK)
		while ((rc = sqlite3_step(st->s)) == SQLITE_ROW)
			;
	if (rc != SQLITE_DONE && rc != SQLITE_OK)
		return step_fail(L, st);
	sqlite3_reset(st->s);
	sqlite3_clear_bindings(st->s);
	lua_pushinteger(L, sqlite3_changes(st->owner->db));
	lua_pushinteger(L, (lua_Integer)sqlite3_last_insert_rowid(st->owner->db));
	return 2;
}

/* stmt:first(...): bind, step once, reset: the first row's columns, or
 * nothing when there is no row, or nil, message. */
static int st_first(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	int i, n = 0, rc = bind_from(L, st, 2);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st->s);
	if (rc == SQLITE_ROW) {
		n = sqlite3_column_count(st->s);
		luaL_checkstack(L, n, "too many columns");
		for (i = 0; i < n; i++)
			push_column(L, st->s, i);
	} else if (rc != SQLITE_DONE) {
		return step_fail(L, st);
	}
	sqlite3_reset(st->s);
	sqlite3_clear_bindings(st->s);
	return n;
}

/* stmt:rows(...): bind, step to the end, reset: an array of rows (each an
 * array of columns) and its length, or nil, message. */
static int st_rows(lua_State *L)
{
	lstmt *st = check_stmt(L, 1);
	int i, n, rc = bind_from(L, st, 2), count = 0;
	lua_newtable(L);
	if (rc == SQLITE_OK) {
		n = sqlite3_column_count(st->s);
		while ((rc = sqlite3_step(st->s)) == SQLITE_ROW) {
			lua_createtable(L, n, 0);
			for (i = 0; i < n; i++) {
				push_column(L, st->s, i);
				lua_rawseti(L, -2, i + 1);
			}
			lua_rawseti(L, -2, ++count);
		}
	}
	if (rc != SQLITE_DONE && rc != SQLITE_OK)
		return step_fail(L, st);
	sqlite3_reset(st->s);
	sqlite3_clear_bindings(st->s);
	lua_pushinteger(L, count);
	return 2;
}

/* stmt:finalize(): also its __gc and __close; safe to call twice. */
static int st_finalize(lua_State *L)
{
	lstmt *st = (lstmt *)luaL_checkudata(L, 1, STMT_NAME);
	if (st->s && st->owner->db)
		sqlite3_finalize(st->s);
	st->s = NULL;
	return 0;
}

static int st_tostring(lua_State *L)
{
	lstmt *st = (lstmt *)luaL_checkudata(L, 1, STMT_NAME);
	if (st->s && st->owner->db)
		lua_pushfstring(L, STMT_NAME " (%s)", sqlite3_sql(st->s));
	else
		lua_pushliteral(L, STMT_NAME " (finalized)");
	return 1;
}

/* ---- module functions ------------------------------------------------------------ */

/* sqlite.now(): the wall clock, epoch seconds with a fraction. */
static int l_now(lua_State *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
	return 1;
}

/* db:filename(): the main database's file, as SQLite resolved it (a
 * file: URI's path), for hwtimer.sqlite.watch. */
static int db_filename(lua_State *L)
{
	const char *f = sqlite3_db_filename(check_db(L, 1)->db, "main");
	lua_pushstring(L, f ? f : "");
	return 1;
}

static const luaL_Reg db_methods[] = {
	{ "exec", db_exec },
	{ "filename", db_filename },
	{ "prepare", db_prepare },
	{ "busy_timeout", db_busy_timeout },
	{ "changes", db_changes },
	{ "last_insert_rowid", db_last_insert_rowid },
	{ "autocommit", db_autocommit },
	{ "errmsg", db_errmsg },
	{ "durable", db_durable },
	{ "checkpoint_in_background", db_checkpoint_in_background },
	{ "checkpoints", db_checkpoints },
	{ "close", db_close },
	{ NULL, NULL }
};

static const luaL_Reg db_metamethods[] = {
	{ "__gc", db_close },
	{ "__close", db_close },
	{ "__tostring", db_tostring },
	{ NULL, NULL }
};

static const luaL_Reg stmt_methods[] = {
	{ "bind", st_bind },
	{ "step", st_step },
	{ "column", st_column },
	{ "reset", st_reset },
	{ "run", st_run },
	{ "first", st_first },
	{ "rows", st_rows },
	{ "finalize", st_finalize },
	{ NULL, NULL }
};

static const luaL_Reg stmt_metamethods[] = {
	{ "__gc", st_finalize },
	{ "__close", st_finalize },
	{ "__tostring", st_tostring },
	{ NULL, NULL }
};

static const luaL_Reg module_functions[] = {
	{ "open", l_open },
	{ "now", l_now },
	{ NULL, NULL }
};

static void new_type(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta)
{
	hwt_newmetatable(L, name);
	luaL_setfuncs(L, meta, 0);
	lua_newtable(L);
	luaL_setfuncs(L, methods, 0);
	lua_setfield(L, -2, "__index");
	lua_pop(L, 1);
}

int luaopen_hwtimer_sqlite(lua_State *L);

int luaopen_hwtimer_sqlite(lua_State *L)
{
	new_type(L, DB_NAME, db_methods, db_metamethods);
	new_type(L, STMT_NAME, stmt_methods, stmt_metamethods);
	luaL_newlib(L, module_functions);
	hwt_watch_register(L);
	lua_pushstring(L, sqlite3_libversion());
	lua_setfield(L, -2, "sqlite_version");
	return 1;
}
