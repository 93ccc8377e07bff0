/*
 * test_checkpoint.c: the SQLite store's checkpoint thread (csrc/durable/
 * checkpoint.c) on its own: it checkpoints a WAL past its mark, and gives
 * back every block it took when stopped, and when it cannot start (no file,
 * a thread refused), and never unlocks a mutex it does not hold. The
 * allocator (count_blocks.h), pthread_create and the mutex calls are this
 * program's own, so that a test can count the blocks, refuse a thread and
 * match each unlock with a lock.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../durable/checkpoint.h"

static int passed;

static void fail(const char *what)
{
	fprintf(stderr, "test_checkpoint: FAIL: %s\n", what);
	exit(1);
}

/* ---- the blocks held, and a thread refused on demand --------------------- */

#include "count_blocks.h"

static int refuse_threads;

int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
	typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
	static create_fn real;
	if (refuse_threads)
		return EAGAIN;
	if (!real) {
		void *sym = dlsym(RTLD_NEXT, "pthread_create");
		memcpy(&real, &sym, sizeof real); /* (a data pointer to a function pointer, as POSIX allows) */
	}
	return real(t, a, fn, arg);
}

/* ---- every unlock matches a lock ------------------------------------------ */

#include "held_mutexes.h"

/* ---- a store ------------------------------------------------------------- */

static char path[64];

static sqlite3 *open_wal(void)
{
	sqlite3 *db;
	if (sqlite3_open(path, &db) != SQLITE_OK)
		fail("open");
	if (sqlite3_exec(db, "PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS t (x BLOB)", NULL, NULL, NULL))
		fail("WAL and a table");
	return db;
}

static void commit_pages(sqlite3 *db, int n)
{
	int i;
	for (i = 0; i < n; i++)
		if (sqlite3_exec(db, "INSERT INTO t VALUES (zeroblob(4000))", NULL, NULL, NULL) != SQLITE_OK)
			fail("insert");
}

/* Start and stop give back every block start took, with rounds run
 * between: the thread checkpoints once the WAL passes its mark. */
static void test_start_stop_frees_all(void)
{
	sqlite3 *db;
	const char *err = NULL;
	long before, rounds = 0, finishes = 0;
	struct hwt_checkpointer *c;
	int i;
	before = blocks_held();
	db = open_wal();
	if (!(c = hwt_checkpointer_start(db, 8, &err)))
		fail(err);
	for (i = 0; i < 200 && rounds == 0; i++) {
		commit_pages(db, 4);
		usleep(2000);
		hwt_checkpointer_counts(c, &rounds, &finishes);
	}
	if (rounds == 0)
		fail("no checkpoint round after 800 pages committed past a mark of 8");
	for (i = 0; i < 20; i++) { /* and a WAL begun again: commits short of the mark */
		commit_pages(db, 1);
		usleep(1000);
	}
	hwt_checkpointer_stop(c);
	sqlite3_close(db);
	if (blocks_held() != before) {
		fprintf(stderr, "test_checkpoint: FAIL: %ld blocks not given back by start and stop\n", blocks_held() - before);
		exit(1);
	}
	passed++;
}

/* A start that cannot (a thread refused, no memory, no file): NULL, why,
 * and nothing kept. */
static void test_refusals_keep_nothing(void)
{
	sqlite3 *db, *mem;
	const char *err = NULL;
	long before;
	before = blocks_held();
	db = open_wal();
	refuse_threads = 1;
	if (hwt_checkpointer_start(db, 8, &err) || !err || strcmp(err, "cannot start the checkpoint's thread"))
		fail("a refused thread: NULL and why");
	refuse_threads = 0;
	err = NULL;
	fail_alloc_at = 1; /* (the checkpointer's own block: start's first allocation) */
	if (hwt_checkpointer_start(db, 8, &err) || !err || strcmp(err, "out of memory"))
		fail("no memory for the checkpointer: NULL and why");
	fail_alloc_at = 0;
	sqlite3_close(db);
	if (blocks_held() != before) {
		fprintf(stderr, "test_checkpoint: FAIL: a refused thread left %ld blocks\n", blocks_held() - before);
		exit(1);
	}
	if (sqlite3_open(":memory:", &mem) != SQLITE_OK)
		fail("open :memory:");
	before = blocks_held();
	err = NULL;
	if (hwt_checkpointer_start(mem, 8, &err) || !err || strcmp(err, "no file to checkpoint"))
		fail("no file: NULL and why");
	if (blocks_held() != before)
		fail("a start without a file kept blocks");
	sqlite3_close(mem);
	passed++;
}

int main(void)
{
	char wal[80], shm[80];
	snprintf(path, sizeof path, "/tmp/hwt-test-checkpoint-%ld.db", (long)getpid());
	snprintf(wal, sizeof wal, "%s-wal", path);
	snprintf(shm, sizeof shm, "%s-shm", path);
	/* (what SQLite's first open and the C library's first thread keep for
	 * the process is not counted: one start and stop before) */
	{
		sqlite3 *db = open_wal();
		const char *err = NULL;
		struct hwt_checkpointer *c = hwt_checkpointer_start(db, 8, &err);
		if (!c)
			fail(err);
		hwt_checkpointer_stop(c);
		sqlite3_close(db);
	}
	test_start_stop_frees_all();
	test_refusals_keep_nothing();
	if (unheld_unlocks) {
		fprintf(stderr, "test_checkpoint: FAIL: %ld unlocks of a mutex not held\n", unheld_unlocks);
		exit(1);
	}
	unlink(path);
	unlink(wal);
	unlink(shm);
	printf("test_checkpoint: the SQLite store's checkpoint thread, its start, stop and refusals\n");
	printf("%d passed, 0 failed\n", passed);
	return 0;
}
