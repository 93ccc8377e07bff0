/*
 * sqlite_floor.c: the floor under hwtimer.durable's schedule rate. A bare C
 * loop of prepared INSERT OR REPLACE statements into the store's own schema
 * (hwtimer.durable.SCHEMA, passed in by bench/durable.lua), WAL, one commit
 * per row and then all rows in one transaction. With ROWS_OVERDUE, also the
 * floor under the catch-up: that many overdue rows claimed 500 at a time with
 * durable's own claim statement (the lease) and deleted one by one in the
 * next claim's transaction (the acknowledgement), as hwtimer.durable does,
 * with no handler and no Lua.
 *   sqlite_floor DIR SCHEMA_FILE ROWS_ONE_BY_ONE ROWS_IN_ONE sync(NORMAL|FULL) [ROWS_OVERDUE]
 * prints "floor one commit per row: N rows/s", "floor one transaction:
 * N rows/s" and, with ROWS_OVERDUE, "floor catch-up: N rows/s".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(sqlite3 *db, int rc, const char *what)
{
	if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
		fprintf(stderr, "sqlite_floor: %s: %s\n", what, sqlite3_errmsg(db));
		exit(1);
	}
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	long n;
	char *s;
	if (!f) {
		perror(path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	s = malloc((size_t)n + 1);
	if (!s || fread(s, 1, (size_t)n, f) != (size_t)n)
		exit(1);
	s[n] = 0;
	fclose(f);
	return s;
}

/* Insert rows [first, first + n) with the same statement and binds as q:schedule. */
static void insert(sqlite3 *db, sqlite3_stmt *st, int first, int n, double base)
{
	char id[32];
	int i;
	for (i = first; i < first + n; i++) {
		snprintf(id, sizeof id, "%024d", i);
		sqlite3_bind_text(st, 1, "default", -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, id, -1, SQLITE_TRANSIENT);
		sqlite3_bind_text(st, 3, "far", -1, SQLITE_STATIC);
		sqlite3_bind_null(st, 4);
		sqlite3_bind_double(st, 5, base + 3600 + i * 0.001);
		sqlite3_bind_null(st, 6);
		check(db, sqlite3_step(st), "insert");
		sqlite3_reset(st);
	}
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st;
	check(db, sqlite3_prepare_v2(db, sql, -1, &st, NULL), sql);
	return st;
}

/* Claim and acknowledge `n` overdue rows as hwtimer.durable's SQLite engine
 * does (the statements are its own); returns rows per second. */
static double catch_up(sqlite3 *db, sqlite3_stmt *ins, int n, double base)
{
	enum { BATCH = 500 };
	sqlite3_int64 seqs[BATCH];
	int i, got = 0, done = 0;
	double t0;
	sqlite3_stmt *claim, *del;
	check(db, sqlite3_exec(db, "DELETE FROM hwtimer_jobs; CREATE TEMP TABLE hwtimer_handled "
		"(kind TEXT PRIMARY KEY); INSERT INTO temp.hwtimer_handled VALUES ('far'); BEGIN",
		NULL, NULL, NULL), "setup");
	claim = prepare(db,
		"UPDATE hwtimer_jobs SET ready = ?3, owner = ?4, attempt = attempt + 1 "
		"WHERE seq IN (SELECT seq FROM hwtimer_jobs WHERE queue = ?1 AND dead = 0 AND ready <= ?2 "
		"AND kind IN (SELECT kind FROM temp.hwtimer_handled) ORDER BY ready LIMIT ?5) "
		"RETURNING seq, id, kind, payload, due, attempt, period");
	del = prepare(db, "DELETE FROM hwtimer_jobs WHERE seq = ?1 AND owner = ?2");
	insert(db, ins, 0, n, base - 7200); /* due an hour ago and earlier */
	check(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
	t0 = now();
	do {
		check(db, sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), "begin");
		for (i = 0; i < got; i++) {
			sqlite3_bind_int64(del, 1, seqs[i]);
			sqlite3_bind_text(del, 2, "owner", -1, SQLITE_STATIC);
			check(db, sqlite3_step(del), "delete");
			sqlite3_reset(del);
		}
		sqlite3_bind_text(claim, 1, "default", -1, SQLITE_STATIC);
		sqlite3_bind_double(claim, 2, base);
		sqlite3_bind_double(claim, 3, base + 30);
		sqlite3_bind_text(claim, 4, "owner", -1, SQLITE_STATIC);
		sqlite3_bind_int(claim, 5, BATCH);
		for (got = 0; sqlite3_step(claim) == SQLITE_ROW; got++)
			seqs[got] = sqlite3_column_int64(claim, 0);
		check(db, sqlite3_reset(claim), "claim");
		check(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
		done += got;
	} while (got > 0);
	t0 = now() - t0;
	sqlite3_finalize(claim);
	sqlite3_finalize(del);
	return done / t0;
}

int main(int argc, char **argv)
{
	char path[4096], pragma[64];
	sqlite3 *db;
	sqlite3_stmt *st;
	int one, many;
	double t0, base = (double)time(NULL);
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: sqlite_floor DIR SCHEMA_FILE ROWS_ONE_BY_ONE ROWS_IN_ONE NORMAL|FULL [ROWS_OVERDUE]\n");
		return 2;
	}
	one = atoi(argv[3]);
	many = atoi(argv[4]);
	snprintf(path, sizeof path, "%s/floor.db", argv[1]);
	remove(path);
	check(NULL, sqlite3_open(path, &db), "open");
	check(db, sqlite3_exec(db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL), "wal");
	snprintf(pragma, sizeof pragma, "PRAGMA synchronous = %s", argv[5]);
	check(db, sqlite3_exec(db, pragma, NULL, NULL, NULL), "synchronous");
	check(db, sqlite3_exec(db, slurp(argv[2]), NULL, NULL, NULL), "schema");
	check(db, sqlite3_prepare_v2(db,
		"INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, period) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)", -1, &st, NULL), "prepare");
	t0 = now();
	insert(db, st, 0, one, base);
	printf("floor one commit per row (C, sync %s): %.0f rows/s\n", argv[5], one / (now() - t0));
	/* The commit alone: no checkpoint in the loop (hwtimer.durable's run on a
	 * thread of their own), then the WAL emptied for what follows. */
	check(db, sqlite3_exec(db, "PRAGMA wal_autocheckpoint = 0", NULL, NULL, NULL), "autocheckpoint");
	t0 = now();
	insert(db, st, one, one, base);
	printf("floor one commit per row, no checkpoint in the loop (C, sync %s): %.0f rows/s\n", argv[5],
	       one / (now() - t0));
	check(db, sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA wal_autocheckpoint = 1000",
	                       NULL, NULL, NULL), "checkpoint");
	t0 = now();
	check(db, sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), "begin");
	insert(db, st, 2 * one, many, base);
	check(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
	printf("floor one transaction (C): %.0f rows/s\n", many / (now() - t0));
	if (argc == 7)
		printf("floor catch-up (C, durable's claim of 500 + a delete each): %.0f rows/s\n",
		       catch_up(db, st, atoi(argv[6]), base));
	sqlite3_finalize(st);
	sqlite3_close(db);
	remove(path);
	return 0;
}
