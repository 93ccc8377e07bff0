/*
 * failalloc.c: a Lua 5.4 host whose allocator fails on the N-th allocation,
 * for every N along a script that exercises hwtimer. Each run must end with
 * a Lua error or success - never a crash, a hang or a lost timeout - and
 * lua_close must free every block that was allocated (no leak).
 *
 * usage: failalloc SCRIPT [max-N] [once]   (LUA_PATH/LUA_CPATH find the module)
 *
 * With "once" only the N-th allocation fails (with Lua's retry of it), as a
 * passing shortage would:
 * the script catches what it can and goes on, and must then complete, its
 * own checks passing, unless the failure hit outside its protected calls.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

struct budget {
	long allocs;  /* allocations so far */
	long fail_at; /* fail this allocation (and every later one until reset); 0: never */
	long live;    /* blocks not yet freed */
	int once;     /* fail only allocation fail_at */
	int failed;   /* an allocation was failed */
};

static void *failing_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct budget *b = ud;
	void *p;
	if (nsize == 0) {
		if (ptr)
			b->live--;
		free(ptr);
		return NULL;
	}
	/* (once: that one and the next, which is Lua's retry of it after an
	 * emergency collection: the first alone never reaches the script) */
	if (b->fail_at && nsize > osize &&
	    (b->once ? ++b->allocs - b->fail_at == 0 || b->allocs - b->fail_at == 1 : ++b->allocs >= b->fail_at)) {
		b->failed = 1;
		return NULL;
	}
	p = realloc(ptr, nsize);
	if (p && !ptr)
		b->live++;
	return p;
}

/* Protected: load and run the script (its name a light userdata at 1). */
static int run_script(lua_State *L)
{
	const char *script = lua_touserdata(L, 1);
	if (luaL_loadfile(L, script) != LUA_OK)
		return lua_error(L);
	lua_call(L, 0, 0);
	return 0;
}

/* Run the script with allocation number `fail_at` failing (that one alone
 * when once); 1 if it ended cleanly. *completed: the script ran to its end;
 * *hit: the allocation was failed at all. */
static int run_once(const char *script, long fail_at, int once, int *completed, int *hit)
{
	struct budget b = { 0, 0, 0, 0, 0 };
	lua_State *L = lua_newstate(failing_alloc, &b);
	int status;
	if (!L)
		return 0;
	luaL_openlibs(L);
	lua_pushcfunction(L, run_script); /* neither push allocates */
	lua_pushlightuserdata(L, (void *)script);
	b.fail_at = fail_at; /* the libraries load first, the script then runs short */
	b.once = once;
	status = lua_pcall(L, 1, 0, 0);
	*completed = status == LUA_OK;
	*hit = b.failed;
	if (once && status != LUA_OK) {
		/* only a memory error outside the script's protected calls may end it:
		 * its own checks say "failalloc-check" */
		const char *msg = lua_tostring(L, -1);
		if (status != LUA_ERRMEM && !(msg && strstr(msg, "not enough memory"))) {
			fprintf(stderr, "failalloc: allocation %ld failing once: %s\n", fail_at, msg ? msg : "(no message)");
			b.fail_at = 0;
			lua_close(L);
			return 0;
		}
	}
	b.fail_at = 0;       /* let closing allocate if it must */
	lua_close(L);
	if (b.live != 0) {
		fprintf(stderr, "failalloc: %ld blocks leaked with allocation %ld failing\n", b.live, fail_at);
		return 0;
	}
	return 1;
}

int main(int argc, char **argv)
{
	long n, max = argc > 2 ? atol(argv[2]) : 3000, completed_at = 0, failed = 0;
	int completed = 0, hit = 1, once = argc > 3 && strcmp(argv[3], "once") == 0;
	if (argc < 2) {
		fprintf(stderr, "usage: failalloc SCRIPT [max-N] [once]\n");
		return 2;
	}
	if (once) { /* every allocation of the script in turn, until one past its last */
		long faults = 0, ended = 0;
		for (n = 1; n <= max; n++) {
			if (!run_once(argv[1], n, 1, &completed, &hit))
				return 1;
			if (!hit)
				break; /* past the script's last allocation */
			faults++;
			ended += completed;
		}
		if (hit) {
			fprintf(stderr, "failalloc: the script still allocates past %ld allocations\n", max);
			return 1;
		}
		printf("failalloc: each of %ld allocations failed once: the script completed, its checks passing, "
		       "%ld times (the other times a failure outside its protected calls ended it)\n", faults, ended);
		printf("1 passed, 0 failed\n");
		return 0;
	}
	for (n = 1; n <= max && !completed; n++) {
		if (!run_once(argv[1], n, 0, &completed, &hit))
			return 1;
		if (completed)
			completed_at = n;
		else
			failed++;
	}
	if (!completed) {
		fprintf(stderr, "failalloc: the script never completed within %ld allocations\n", max);
		return 1;
	}
	printf("failalloc: %ld runs failed cleanly on an allocation, then it completed (from allocation %ld on)\n",
	       failed, completed_at);
	printf("1 passed, 0 failed\n");
	return 0;
}
