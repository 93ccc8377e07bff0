/*
 * checkpoint.c: WAL checkpoints off the host's thread.
 *
 * In WAL mode a commit appends to the -wal file; a checkpoint copies those
 * pages back into the database and fsyncs it. SQLite runs one inline after
 * the commit that takes the WAL past 1,000 pages, on the committing thread:
 * a stall long enough to be the whole of a durable queue's lateness tail
 * (docs/internals.md, "Measurements behind the code").
 *
 * So the commit hook asks this thread, which checkpoints PASSIVE (never
 * blocking a writer or a reader). That copies the bulk. But the WAL only
 * starts over from its beginning when a write begins with every frame
 * copied, and a host that commits without pause always appends a few
 * frames while the thread copies: the WAL would grow without end. A host
 * that pauses (a loop that
 * claims every few ms) lets a round catch up and the WAL start over; one
 * that never does takes the WAL to FINISH_FACTOR times the mark, and then
 * the hook checkpoints inline, the frames since the last round only, but
 * with its fsync: a stall many times rarer than SQLite's own. The bound is a
 * bound: a commit that reaches it while the thread's round runs waits for
 * that round to end first (one checkpoint runs at a time); otherwise a slow
 * disk would let the host append for as long as the round lasts.
 */
#include <pthread.h>
#include <stdlib.h>

#include "checkpoint.h"

#define FINISH_FACTOR 16 /* the WAL's bound: 16 x 1,000 pages (64 MB) */

struct hwt_checkpointer {
	sqlite3 *watched;  /* the host's connection: its commits signal */
	sqlite3 *own;      /* this thread's connection to the same file */
	int pages;         /* checkpoint once the WAL holds this many */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_cond_t done; /* a round ended */
	int due, stop;     /* under lock: a round asked for; stop the thread */
	int round_log;     /* under lock: WAL frames at the last round (0: none since the WAL was short) */
	int short_seen;    /* the hook's own: the WAL was below the mark at a commit */
	long rounds;       /* under lock: checkpoints this thread ran */
	long finishes;     /* the hook's own: checkpoints it ran inline */
};

/* The watched connection's commit hook (its thread, after each commit);
 * `pages` is how many frames the WAL holds. */
static int on_commit(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct hwt_checkpointer *c = (struct hwt_checkpointer *)arg;
	int finish = 0;
	(void)name;
	if (pages < c->pages) {
		if (!c->short_seen) { /* the WAL started over: next time, a round first */
			c->short_seen = 1;
			pthread_mutex_lock(&c->lock);
			c->round_log = 0;
			pthread_mutex_unlock(&c->lock);
		}
		return SQLITE_OK;
	}
	c->short_seen = 0;
	pthread_mutex_lock(&c->lock);
	if (pages >= c->pages * FINISH_FACTOR && (c->due || c->round_log > 0)) {
		while (c->due) /* the thread's round first: then ours is short */
			pthread_cond_wait(&c->done, &c->lock);
		finish = 1;
		c->round_log = 0;
	} else if (!c->due && (c->round_log == 0 || pages >= c->round_log + c->pages / 2)) {
		c->due = 1;
		pthread_cond_signal(&c->wake);
	}
	pthread_mutex_unlock(&c->lock);
	if (finish) {
		c->finishes++;
		sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	}
	return SQLITE_OK;
}

static void *run(void *arg)
{
	struct hwt_checkpointer *c = (struct hwt_checkpointer *)arg;
	int log;
	pthread_mutex_lock(&c->lock);
	for (;;) {
		while (!c->due && !c->stop)
			pthread_cond_wait(&c->wake, &c->lock);
		if (c->stop)
			break;
		pthread_mutex_unlock(&c->lock);
		/* SQLITE_BUSY (another process's checkpoint runs) is fine: the
		 * next commit past the mark asks again. */
		log = 0;
		sqlite3_wal_checkpoint_v2(c->own, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, NULL);
		pthread_mutex_lock(&c->lock);
		c->round_log = log > 0 ? log : 1;
		c->rounds++;
		c->due = 0;
		pthread_cond_signal(&c->done);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

struct hwt_checkpointer *hwt_checkpointer_start(sqlite3 *db, int pages, const char **err)
{
	struct hwt_checkpointer *c;
	const char *path = sqlite3_db_filename(db, "main");
	if (!sqlite3_threadsafe()) {
		*err = "SQLite is built without threads";
		return NULL;
	}
	if (!path || !*path) {
		*err = "no file to checkpoint";
		return NULL;
	}
	c = (struct hwt_checkpointer *)calloc(1, sizeof *c);
	if (!c) {
		*err = "out of memory";
		return NULL;
	}
	c->watched = db;
	c->pages = pages > 0 ? pages : 1;
	if (sqlite3_open_v2(path, &c->own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		*err = "cannot open the checkpoint's connection";
		goto fail;
	}
	/* A connection opens the WAL at its first read: until then a
	 * checkpoint of it does nothing. */
	if (sqlite3_exec(c->own, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) != SQLITE_OK) {
		*err = "cannot read the database from the checkpoint's connection";
		goto fail;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->wake, NULL);
	pthread_cond_init(&c->done, NULL);
	if (pthread_create(&c->thread, NULL, run, c) != 0) {
		*err = "cannot start the checkpoint's thread";
		pthread_cond_destroy(&c->done);
		pthread_cond_destroy(&c->wake);
		pthread_mutex_destroy(&c->lock);
		goto fail;
	}
	/* Replaces SQLite's own autocheckpoint hook (the same slot). */
	sqlite3_wal_hook(db, on_commit, c);
	return c;
fail:
	sqlite3_close(c->own); /* a failed open hands back a handle too, or NULL */
	free(c);
	return NULL;
}

void hwt_checkpointer_counts(struct hwt_checkpointer *c, long *rounds, long *finishes)
{
	pthread_mutex_lock(&c->lock);
	*rounds = c->rounds;
	pthread_mutex_unlock(&c->lock);
	*finishes = c->finishes;
}

void hwt_checkpointer_stop(struct hwt_checkpointer *c)
{
	sqlite3_wal_hook(c->watched, NULL, NULL);
	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_cond_signal(&c->wake);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->thread, NULL);
	pthread_cond_destroy(&c->done);
	pthread_cond_destroy(&c->wake);
	pthread_mutex_destroy(&c->lock);
	sqlite3_close(c->own);
	free(c);
}
