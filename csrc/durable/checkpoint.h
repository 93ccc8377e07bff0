/*
 * checkpoint.h: a thread that checkpoints an SQLite connection's WAL, so
 * that the connection's own thread (the host's Lua loop) never does.
 */
#ifndef HWT_CHECKPOINT_H
#define HWT_CHECKPOINT_H

#include <sqlite3.h>

struct hwt_checkpointer;

/* Start checkpointing db's WAL on a thread of its own, with a connection of
 * its own, once db's commits have left `pages` pages in it; turns db's own
 * (inline) autocheckpoint off. NULL with *err set when it cannot: db then
 * keeps checkpointing inline as before. */
struct hwt_checkpointer *hwt_checkpointer_start(sqlite3 *db, int pages, const char **err);

/* Checkpoints so far: run by the thread, and inline by the commit hook
 * (on db's thread: call this there). */
void hwt_checkpointer_counts(struct hwt_checkpointer *c, long *rounds, long *finishes);

/* Stop the thread and close its connection (before db is closed). */
void hwt_checkpointer_stop(struct hwt_checkpointer *c);

#endif
