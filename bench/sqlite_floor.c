/*
 * sqlite_floor.c: the floor under hwtimer.durable's schedule rate. A bare C
 * loop of prepared INSERT OR REPLACE statements into the store's own schema
 * (hwtimer.durable.SCHEMA, passed in by bench/durable.lua), WAL, one commit
 * per row and then all rows in one transaction.
 *   sqlite_floor DIR SCHEMA_FILE ROWS_ONE_BY_ONE ROWS_IN_ONE sync(NORMAL|FULL)
 * prints two lines: "floor one commit per row: N rows/s" and
 * "floor one transaction: N rows/s".
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

int main(int argc, char **argv)
{
	char path[4096], pragma[64];
	sqlite3 *db;
	sqlite3_stmt *st;
	int one, many;
	double t0, base = (double)time(NULL);
	if (argc != 6) {
		fprintf(stderr, "usage: sqlite_floor DIR SCHEMA_FILE ROWS_ONE_BY_ONE ROWS_IN_ONE NORMAL|FULL\n");
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
		"INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, every) "
		"VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)", -1, &st, NULL), "prepare");
	t0 = now();
	insert(db, st, 0, one, base);
	printf("floor one commit per row (C, sync %s): %.0f rows/s\n", argv[5], one / (now() - t0));
	t0 = now();
	check(db, sqlite3_exec(db, "BEGIN", NULL, NULL, NULL), "begin");
	insert(db, st, one, many, base);
	check(db, sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), "commit");
	printf("floor one transaction (C): %.0f rows/s\n", many / (now() - t0));
	sqlite3_finalize(st);
	sqlite3_close(db);
	remove(path);
	return 0;
}
