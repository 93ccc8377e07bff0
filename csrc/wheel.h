/*
 * wheel.h: a hierarchical hashed timing wheel over integer ticks.
 *
 * The wheel never reads a clock and takes no lock: its owner feeds it ticks
 * and serialises access. Level l has slots of U(l) = 2^(l*bits) ticks; its
 * 2^bits slots cover one block of U(l+1) ticks. Each level keeps two rings:
 * the current block and the next one. A node sits at the lowest level whose
 * current or next block holds its expiry, so a far deadline is touched once
 * per level on its way down, never once per revolution.
 *
 * Moving a span's nodes down a level happens ahead of time, in bounded steps:
 * when time enters a level-l span, a "drain job" moves the nodes of the
 * following span into level l-1's next ring, and has most of a span to do it
 * (hwt_wheel_work). hwt_wheel_advance finishes a job itself if its deadline
 * comes first, so correctness never depends on the owner calling work.
 * At a block boundary the two rings of a level swap in O(1); level 0's swap
 * is done on the way to the next expiry, not as an event of its own.
 *
 * Occupancy bitmaps (a summary word per ring over words of 64 slots) find the
 * next occupied slot without scanning empty ones. Nodes whose expiry has been
 * reached move, in expiry order, to `due`.
 */
#ifndef HWT_WHEEL_H
#define HWT_WHEEL_H

#include <stdint.h>
#include "list.h"

/* Internal to the module (see worker.h). */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

#define HWT_WHEEL_MAX_BITS 12 /* 4096 slots: one 64-bit summary word per ring */
#define HWT_SLOT_NONE UINT16_MAX
#define HWT_SLOT_DUE (UINT16_MAX - 1)
#define HWT_TICK_MAX (UINT64_C(1) << 62) /* beyond any deadline we accept */

struct hwt_node {
	struct hwt_link link;
	uint64_t expires; /* tick at which the node is due */
	/* ring << bits | index (< 2^16 - 2), HWT_SLOT_DUE or HWT_SLOT_NONE; a node
	 * whose expiry has been reached is due whatever slot it names */
	uint16_t slot;
	/* Never touched by the wheel: its owner's, so that a node together with
	 * the owner's bookkeeping fits in 32 bytes. */
	uint8_t owner_flags, owner_byte;
	uint32_t owner_word;
};

/* A pending move of one slot's nodes down a level. */
struct hwt_job {
	uint32_t src;      /* slot id being drained, or UINT32_MAX (none) */
	uint64_t deadline; /* tick by which the slot must be empty */
};

struct hwt_wheel {
	uint64_t now;           /* every node with expires <= now is in `due` */
	unsigned bits, levels;  /* slots per ring = 1 << bits */
	unsigned words;         /* 64-bit occupancy words per ring */
	struct hwt_link *slots; /* (levels * 2 rings) << bits list heads */
	/* Per slot above level 0 (index: slot - (2 << bits)): no node there
	 * expires sooner; exact but for nodes that left since (a lower bound
	 * then), UINT64_MAX while the slot is empty. Lets a host sleep to a far
	 * deadline rather than to its slot's start (hwt_wheel_next_expiry). */
	uint64_t *least;
	uint64_t *occ;          /* per ring, `words` words: bit set = slot non-empty */
	uint64_t *summary;      /* per ring: bit w set = occupancy word w non-zero */
	uint8_t *cur;           /* per level: which of its two rings is current */
	struct hwt_job *jobs;   /* per level l >= 1: draining level l into l-1 */
	struct hwt_link due;    /* expired nodes, oldest first */
};

/* Smallest `bits` whose 2^bits >= size (at least 1); 0 if size is out of range. */
unsigned hwt_wheel_bits_for(uint64_t size);
/* Set up an empty wheel at tick 0; returns 0 or ENOMEM. */
int hwt_wheel_init(struct hwt_wheel *w, unsigned bits);
/* Free the wheel's arrays; the nodes are the caller's and are left as they are. */
void hwt_wheel_free(struct hwt_wheel *w);
/* Detached node, owned by no list. */
void hwt_node_init(struct hwt_node *n);
/* Add `n` to expire at tick `expires` (<= HWT_TICK_MAX); due at once if expires <= now. */
void hwt_wheel_add(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires);
/* Append `n` to the due list whatever its expiry (for "run at the next dispatch"). */
void hwt_wheel_add_due(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires);
/* Make `n` (anywhere or detached) expire at `expires` instead; when it would
 * stay in the same slot only its expiry changes. Returns 1 in that case. */
int hwt_wheel_move(struct hwt_wheel *w, struct hwt_node *n, uint64_t expires);
/* Remove `n` from the wheel's slots or its due list; no-op for a detached node. */
void hwt_wheel_del(struct hwt_wheel *w, struct hwt_node *n);
/* For a node just added to a slot: a tick at or before the wheel's first work for it. */
uint64_t hwt_wheel_alert(const struct hwt_wheel *w, const struct hwt_node *n);
/* Move the wheel to tick `to` (>= now): every node due by then goes to `due`. */
void hwt_wheel_advance(struct hwt_wheel *w, uint64_t to);
/* advance(), but only through events that expire level-0 slots (and swap
 * level 0's rings): it stops before starting or finishing a drain job
 * (work of unbounded size, left to the wheel's driver) and before a level
 * above 1 enters a span. Returns 1 if it reached `to`, else 0. */
int hwt_wheel_expire(struct hwt_wheel *w, uint64_t to);
/* Earliest tick at which advance() has work to do; UINT64_MAX if none. */
uint64_t hwt_wheel_next(const struct hwt_wheel *w);
/* A tick at or before the earliest expiry, UINT64_MAX if none: exact, but
 * for a node above level 0 that left (or moved later in) a slot still
 * holding others. What a host waits for: hwt_wheel_next also names the
 * moves down, which are the driver's and make nothing due. */
uint64_t hwt_wheel_next_expiry(const struct hwt_wheel *w);
/* 1 if the earliest expiry is one node's alone, at level 0 (no other node
 * shares its tick), else 0: a host's wake-up then serves one callback. */
int hwt_wheel_next_lone(const struct hwt_wheel *w);
/* A tick at or before the first event hwt_wheel_expire would stop before
 * (the work a host does not do); UINT64_MAX if none. */
uint64_t hwt_wheel_next_hard(const struct hwt_wheel *w);
/* Do up to `budget` node moves of pending drain jobs; returns 1 if any remain. */
int hwt_wheel_work(struct hwt_wheel *w, unsigned budget);
/* Move every node (slots, then due) to the tail of `into`, detached from the wheel. */
void hwt_wheel_collect(struct hwt_wheel *w, struct hwt_link *into);
/* Walk the whole structure; returns NULL if consistent, else what is broken. */
const char *hwt_wheel_check(const struct hwt_wheel *w);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
