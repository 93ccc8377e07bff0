/*
 * count_blocks.h: a test program's own allocator (glibc's underneath) that
 * counts the blocks it holds, so that a test can see a structure give back
 * all it took: blocks_held() before and after; and refuses one on demand
 * (fail_alloc_at = n: the n-th allocation from then on returns NULL, as out
 * of memory would). Included once, by a test's main file; elsewhere
 * blocks_held() is 0 (nothing is counted) and nothing is refused.
 */
#ifndef HWT_COUNT_BLOCKS_H
#define HWT_COUNT_BLOCKS_H

#include <pthread.h>
#include <stddef.h>

#if defined(__GLIBC__)
extern void *__libc_malloc(size_t), *__libc_calloc(size_t, size_t), *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
/* (the program's threads allocate too, the checkpoint's: one lock) */
static long live_blocks;
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static int fail_alloc_at; /* (set by a test's own thread while no other allocates) */
static void count_blocks(long d)
{
	pthread_mutex_lock(&live_lock);
	live_blocks += d;
	pthread_mutex_unlock(&live_lock);
}
static int refused(void)
{
	return fail_alloc_at > 0 && --fail_alloc_at == 0;
}
void *malloc(size_t n)
{
	void *p = refused() ? NULL : __libc_malloc(n);
	if (p)
		count_blocks(1);
	return p;
}
void *calloc(size_t k, size_t n)
{
	void *p = refused() ? NULL : __libc_calloc(k, n);
	if (p)
		count_blocks(1);
	return p;
}
void *realloc(void *q, size_t n)
{
	void *p = refused() ? NULL : __libc_realloc(q, n);
	if (!q && p)
		count_blocks(1);
	return p;
}
void free(void *p)
{
	if (p)
		count_blocks(-1);
	__libc_free(p);
}
static long blocks_held(void)
{
	long n;
	pthread_mutex_lock(&live_lock);
	n = live_blocks;
	pthread_mutex_unlock(&live_lock);
	return n;
}
#else
static int fail_alloc_at; /* (nothing is refused here) */
static long blocks_held(void) { return 0; }
#endif

#endif
