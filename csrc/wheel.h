/*
 * wheel.h: a hierarchical hashed timing wheel over integer ticks.
 *
 * The wheel never reads a clock and takes no lock: its owner feeds it ticks
 * and serialises access. Level l has 2^bits slots of 2^(l*bits) ticks each;
 * a node sits at the level of the highest digit where its expiry differs from
 * the wheel's current tick, so a far deadline is touched once per level on
 * its way down, never once per revolution as in a single-level wheel.
 * Occupancy bitmaps find the next due slot without scanning empty ones.
 * Nodes whose expiry has been reached move, in expiry order, to `due`.
 */
#ifndef HWT_WHEEL_H
#define HWT_WHEEL_H

#include <stdint.h>
#include "list.h"

#define HWT_WHEEL_MAX_BITS 12 /* 4096 slots: one 64-bit summary word per level */
#define HWT_SLOT_NONE UINT32_MAX
#define HWT_SLOT_DUE (UINT32_MAX - 1)
#define HWT_TICK_MAX (UINT64_C(1) << 62) /* beyond any deadline we accept */

struct hwt_node {
	struct hwt_link link;
	uint64_t expires; /* tick at which the node is due */
	uint32_t slot;    /* level * size + index, HWT_SLOT_DUE or HWT_SLOT_NONE */
};

struct hwt_wheel {
	uint64_t now;           /* every node with expires <= now is in `due` */
	unsigned bits, levels;  /* slots per level = 1 << bits */
	unsigned words;         /* 64-bit occupancy words per level */
	struct hwt_link *slots; /* levels << bits list heads */
	uint64_t *occ;          /* levels * words: bit set = slot non-empty */
	uint64_t *summary;      /* levels: bit w set = occ word w non-zero */
	struct hwt_link due;    /* expired nodes, oldest first */
	uint64_t count;         /* nodes in slots (not counting `due`) */
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
/* Remove `n` from the wheel's slots or its due list; no-op for a detached node. */
void hwt_wheel_del(struct hwt_wheel *w, struct hwt_node *n);
/* Move the wheel to tick `to` (>= now), moving every node due by then to `due`. */
void hwt_wheel_advance(struct hwt_wheel *w, uint64_t to);
/* Earliest tick at which advance() has work (an expiry or a cascade); UINT64_MAX if none. */
uint64_t hwt_wheel_next(const struct hwt_wheel *w);
/* Move every node (slots, then due) to the tail of `into`, detached from the wheel. */
void hwt_wheel_collect(struct hwt_wheel *w, struct hwt_link *into);
/* Walk the whole structure; returns NULL if consistent, else what is broken. */
const char *hwt_wheel_check(const struct hwt_wheel *w);

#endif
