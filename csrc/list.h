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

/* Make `l` an empty list (or a detached node). */
static inline void hwt_list_init(struct hwt_link *l)
{
	l->next = l->prev = l;
}

/* True when the list `l` holds no node. */
static inline int hwt_list_empty(const struct hwt_link *l)
{
	return l->next == l;
}

/* Append node `n` at the tail of list `l`. */
static inline void hwt_list_push(struct hwt_link *l, struct hwt_link *n)
{
	n->prev = l->prev;
	n->next = l;
	l->prev->next = n;
	l->prev = n;
}

/* Remove `n` from whatever list holds it; `n` becomes detached. */
static inline void hwt_list_unlink(struct hwt_link *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->next = n->prev = n;
}

/* Move every node of `from` to the tail of `to`, in order; `from` ends empty. */
static inline void hwt_list_splice(struct hwt_link *to, struct hwt_link *from)
{
	if (hwt_list_empty(from))
		return;
	from->next->prev = to->prev;
	to->prev->next = from->next;
	from->prev->next = to;
	to->prev = from->prev;
	hwt_list_init(from);
}

/* Move every node of `from` to the head of `to`, in order; `from` ends empty. */
static inline void hwt_list_splice_front(struct hwt_link *to, struct hwt_link *from)
{
	if (hwt_list_empty(from))
		return;
	from->prev->next = to->next;
	to->next->prev = from->prev;
	from->next->prev = to;
	to->next = from->next;
	hwt_list_init(from);
}

#define hwt_container_of(p, type, member) \
	((type *)(void *)((char *)(p) - offsetof(type, member)))

#endif
