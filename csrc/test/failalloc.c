/*
 * failalloc.c: a Lua 5.4 host whose allocator fails on the N-th allocation,
 * for every N along a script that exercises hwtimer. Each run must end with
 * a Lua error or success - never a crash, a hang or a lost timeout - and
 * lua_close must free every block that was allocated (no leak).
 *
 * usage: failalloc SCRIPT [max-N]   (LUA_PATH/LUA_CPATH find the module)
 */
#include <stdio.h>
#include <stdlib.h>
#include "lua.h"
#include "lauxlib.h"
#include "lualib.h"

struct budget {
	long allocs;  /* allocations so far */
	long fail_at; /* fail this allocation (and every later one until reset); 0: never */
	long live;    /* blocks not yet freed */
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
	if (b->fail_at && ++b->allocs >= b->fail_at && nsize > osize)
		return NULL;
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

/* Run the script with allocation number `fail_at` failing; 1 if it ended cleanly. */
static int run_once(const char *script, long fail_at, int *completed)
{
	struct budget b = { 0, 0, 0 };
	lua_State *L = lua_newstate(failing_alloc, &b);
	int status;
	if (!L)
		return 0;
	luaL_openlibs(L);
	lua_pushcfunction(L, run_script); /* neither push allocates */
	lua_pushlightuserdata(L, (void *)script);
	b.fail_at = fail_at; /* the libraries load first, the script then runs short */
	status = lua_pcall(L, 1, 0, 0);
	*completed = status == LUA_OK;
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
	int completed = 0;
	if (argc < 2) {
		fprintf(stderr, "usage: failalloc SCRIPT [max-N]\n");
		return 2;
	}
	for (n = 1; n <= max && !completed; n++) {
		if (!run_once(argv[1], n, &completed))
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
