/*
 * list.h: intrusive circular doubly linked lists.
 *
 * A list is a sentinel link whose next/prev point at itself when empty.
 * Nodes embed a link, so linking and unlinking never allocate: this is what
 * lets schedule and cancel run without malloc.
 */
#ifndef HWT_LIST_H
#define HWT_LIST_H

#include <stddef.h>

struct hwt_link {
	struct hwt_link *next, *prev;
};

/* Every write to a link is a relaxed atomic store (a plain store on x86 and
 * ARM), so that hwt_list_prefetch_neighbours may read a link without the
 * lock: a stale pointer only prefetches the wrong line. */
#if defined(__GNUC__) || defined(__clang__)
#define HWT_SET(field, value) __atomic_store_n(&(field), (value), __ATOMIC_RELAXED)
#define HWT_PEEK(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)
#define HWT_PREFETCH_W(p) __builtin_prefetch((p), 1)
#else
#define HWT_SET(field, value) ((field) = (value))
#define HWT_PEEK(field) (field)
#define HWT_PREFETCH_W(p) ((void)(p))
#endif

/* Make `l` an empty list (or a detached node). */
static inline void hwt_list_init(struct hwt_link *l)
{
	HWT_SET(l->next, l);
	HWT_SET(l->prev, l);
}

/* True when the list `l` holds no node. */
static inline int hwt_list_empty(const struct hwt_link *l)
{
	return l->next == l;
}

/* Append node `n` at the tail of list `l`. */
static inline void hwt_list_push(struct hwt_link *l, struct hwt_link *n)
{
	HWT_SET(n->prev, l->prev);
	HWT_SET(n->next, l);
	HWT_SET(l->prev->next, n);
	HWT_SET(l->prev, n);
}

/* Remove `n` from whatever list holds it; `n` becomes detached. */
static inline void hwt_list_unlink(struct hwt_link *n)
{
	HWT_SET(n->prev->next, n->next);
	HWT_SET(n->next->prev, n->prev);
	hwt_list_init(n);
}

/* Start fetching, for writing, the two neighbours an unlink of `n` writes.
 * Safe without the lock that guards the list (see HWT_SET). */
static inline void hwt_list_prefetch_neighbours(struct hwt_link *n)
{
	HWT_PREFETCH_W(HWT_PEEK(n->next));
	HWT_PREFETCH_W(HWT_PEEK(n->prev));
}

/* Move every node of `from` to the tail of `to`, in order; `from` ends empty. */
static inline void hwt_list_splice(struct hwt_link *to, struct hwt_link *from)
{
	if (hwt_list_empty(from))
		return;
	HWT_SET(from->next->prev, to->prev);
	HWT_SET(to->prev->next, from->next);
	HWT_SET(from->prev->next, to);
	HWT_SET(to->prev, from->prev);
	hwt_list_init(from);
}

/* Move every node of `from` to the head of `to`, in order; `from` ends empty. */
static inline void hwt_list_splice_front(struct hwt_link *to, struct hwt_link *from)
{
	if (hwt_list_empty(from))
		return;
	HWT_SET(from->prev->next, to->next);
	HWT_SET(to->next->prev, from->prev);
	HWT_SET(from->next->prev, to);
	HWT_SET(to->next, from->next);
	hwt_list_init(from);
}

#define hwt_container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

#endif
