-- Generated mutants (spec/mutants/random.lua) shown to be equivalent: no
-- test can tell them from the code, for the reason given. Each is named by
-- its file, the exact text of the line and the line that replaces it (""
-- for a line deleted), and where that line is written more than once in
-- the file, the line before it (`after`); the generator skips them. A change to the line makes
-- its entry stale (the mutant is then a new one, judged afresh).
-- (one reason for the mutants of the wake token's mix, csrc/lwake.c)
local TOKEN_MIX = "the wake token's mix (splitmix64): each step is a bijection of 64 bits, and the clock's "
  .. "nanoseconds and the timer's address that go in differ between tokens, so with this step gone or changed "
  .. "every token still differs from the others, which is all it is for (spec/core/19)"

return {
  { file = "csrc/durable/checkpoint.c",
    from = "\t\tc->round_log = log > 0 ? log : 1;", to = "\t\tc->round_log = log > 1 ? log : 1;",
    reason = "at log == 1 both branches give 1; for every other log the two conditions agree" },
  { file = "lua/hwtimer/durable/redis.lua",
    from = "  if #res < 2 then return nil end", to = "  if #res < 3 then return nil end",
    reason = "the get script returns { now } for an unknown id or { now, fields... } (ten or more): no reply has "
      .. "two elements, so both bounds tell the same replies apart" },
  { file = "csrc/ltimeout.c",
    from = "\tlua_pushnumber(L, left > 0 ? ns_to_s(left) : 0);",
    to = "\tlua_pushnumber(L, left >= 0 ? ns_to_s(left) : 0);",
    reason = "at left == 0 both branches push 0 (ns_to_s(0) is 0.0): t:remaining() is the same number" },
  { file = "lua/hwtimer/tzif.lua",
    from = "  if z.nwindows >= 64 then z.windows, z.nwindows = {}, 0 end",
    to = "  if z.nwindows >= 65 then z.windows, z.nwindows = {}, 0 end",
    reason = "the bound of a cache of computed year windows: one more kept before it is emptied changes no answer" },
  { file = "csrc/durable/checkpoint.c",
    from = "\tpthread_cond_destroy(&c->wake);", to = "",
    reason = "glibc's pthread_cond_destroy frees nothing (a condition variable holds no resource): not destroying one "
      .. "just before free() changes no behaviour on the Linux this runs on" },
  { file = "csrc/larm.c",
    from = "\t\t\t\t\t     HWT_PACK_IN_HANDLE && packed ? 1 + (p != NULL) + nargs : 0);",
    to = "\t\t\t\t\t     HWT_PACK_IN_HANDLE && packed ? 2 + (p != NULL) + nargs : 0);",
    reason = "one user value more on a handle that packs its task: a slot nothing reads or writes (a few bytes more)" },
  { file = "lua/hwtimer/durable/redis_batch.lua", from = "M.WAIT = 60", to = "M.WAIT = 61",
    reason = "the bound past which a caller takes the sender before it as gone, meant to be longer than any socket "
      .. "timeout: a second more changes no outcome, only how late a lost sender is given up after a minute" },
  { file = "lua/hwtimer/tzif.lua",
    from = "  z.windows[y], z.nwindows = out, z.nwindows + 1", to = "  z.windows[y], z.nwindows = out, z.nwindows + 2",
    reason = "the count of that cache: counting by two empties it after 32 windows in place of 64, which changes no answer" },
  { file = "csrc/durable/checkpoint.c",
    from = "\tpthread_mutex_destroy(&c->lock);", to = "",
    reason = "as the cond_destroy above: glibc's pthread_mutex_destroy of an unlocked mutex frees nothing" },
  { file = "csrc/worker.c",
    from = "\t\thwt_pipe_close(w->fds);", to = "", after = "\tif ((err = pthread_mutex_init(&w->mu, NULL))) {",
    reason = "the cleanup when pthread_mutex_init fails, which glibc's never does with default attributes "
      .. "(it only fails for a robust or priority attribute): the branch cannot be entered on the Linux this runs on" },
  { file = "lua/hwtimer/durable/redis.lua",
    from = "  self.claimed_until = 0 -- the last claim did not take this kind",
    to = "  self.claimed_until = 1 -- the last claim did not take this kind",
    reason = "claimed_until is compared with a job's ready time, seconds since 1970 as Redis's TIME gives them "
      .. "(about 1.8e9): 0 and 1 are both long past every ready time, so either means 'claim again'" },
  { file = "csrc/larm.c", from = "\tlua_pop(L, 4);", to = "",
    reason = "check_period's four option values left on the stack: its one caller, lhwt_schedule, takes the "
      .. "handle's index from lua_gettop and ends with lua_settop(L, h): the stack it returns is the same" },
  { file = "csrc/larm.c", from = "\tlua_pop(L, 1);", to = "", after = "\tlua_setfield(L, -2, \"nominal\");",
    reason = "set_nominal's period table left on the stack: every caller works on absolute indices and ends "
      .. "with lua_settop (lhwt_schedule to h, lhwt_next_period to task - 1)" },
  { file = "csrc/larm.c", from = "\tlua_remove(L, -2);", to = "", after = "\thwt_packget(L, lua_gettop(L), TASK_PERIOD);",
    reason = "lhwt_push_period's task left below the period table: its callers (t:reset) read the table at -1, "
      .. "pop it, and end with lua_settop(L, 1)" },
  { file = "csrc/pipe.c",
    from = "\twhile (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) < 0 && errno == EINTR)",
    to = "\twhile (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) < 1 && errno == EINTR)",
    reason = "write of 1 or 8 bytes returns -1 or a positive count, never 0: < 0 and < 1 are the same test" },
  { file = "lua/hwtimer/cron.lua",
    from = "      if before and before > off and not self.hour.star then",
    to = "      if before and before >= off and not self.hour.star then",
    reason = "before == off never happens (tzif drops transitions that keep the offset), and if it did, "
      .. "max(x + off, a + before) is x + off since x >= a: the same lo" },
  { file = "lua/hwtimer/cron.lua",
    from = "      if d2 and d > 1 then -- the day before, from its end",
    to = "      if d2 or d > 1 then -- the day before, from its end",
    reason = "with no matching day at or before d (d2 nil), stepping to d - 1 finds none again, down to day 1, "
      .. "which then moves to the month before as the original does at once: the same answer, a few steps later" },
  { file = "csrc/driver.c", from = "\t\trel = INT64_C(1000000000);", to = "\t\trel = INT64_C(1000000001);",
    reason = "the cap of a wait on the wall clock, for a libc without pthread_condattr_setclock: glibc has it "
      .. "(cv_realtime is 0), so the branch is never entered on the Linux this runs on" },
  { file = "csrc/ldispatch.c", from = "\t\t\tint kb = lua_gc(L, LUA_GCCOUNT, 0);",
    to = "\t\t\tint kb = lua_gc(L, LUA_GCCOUNT, 1);",
    reason = "LUA_GCCOUNT takes no argument (5.1-5.3 ignore `data` for it; 5.4's lua_gc reads none): the same call" },
  { file = "csrc/lstats.c", from = "\tfor (b = 0; b < LATE_BUCKETS; b++)", to = "\tfor (b = 1; b < LATE_BUCKETS; b++)",
    after = "\tunsigned b;",
    reason = "late_percentile's total without bucket 0, the runs late by 0 ns or less: a run starts after its "
      .. "deadline's nanosecond (the dispatch reads the clock after the deadline has passed), so that bucket "
      .. "stays empty and the total is the same" },
  { file = "csrc/lbase.h", from = "\tchar wake_token[17];       /* what the host sends it to pair: 16 hex digits */",
    to = "\tchar wake_token[18];       /* what the host sends it to pair: 16 hex digits */",
    reason = "a buffer one byte larger than the 16 digits and the NUL it holds: nothing reads past them" },
  { file = "csrc/worker.c", from = "\tif (tick > (uint64_t)((INT64_MAX - w->origin) / w->tick_ns))",
    to = "\tif (tick > (uint64_t)((INT64_MAX + w->origin) / w->tick_ns))",
    reason = "the guard against a tick past int64 nanoseconds: delays are refused past 1e9 s (31 years), so every "
      .. "tick asked for lies far under either bound (292 years of nanoseconds) and the guard is never taken" },
  { file = "lua/hwtimer/durable/sqlite.lua", from = "    c:finalize()", to = "",
    reason = "the store's first look (c:first) resets its statement before it returns, so it holds no lock or "
      .. "transaction; left unfinalized, it is finalized by its __gc or by db:close(), and nothing lists live statements" },
  { file = "lua/hwtimer/ngx.lua", from = "    self.took_over:post(1)", to = "    self.took_over:post(2)",
    reason = "hand_over waits in a loop that checks self.took after every wake-up: a post too many makes its "
      .. "next wait return at once, and the loop waits again" },
  { file = "csrc/wheel.c", from = "\tw->occ = w->summary = NULL;", to = "",
    reason = "hwt_wheel_free runs once per hwt_wheel_init, which sets every pointer before any use, and no path "
      .. "reads the wheel of a stopped timer (each checks that the timer is live first): the NULLs are never read" },
  { file = "lua/hwtimer/durable/sqlite.lua",
    from = "  if not (msg:find(\"unable to open database file\", 1, true) or msg:find(\"readonly\", 1, true)) then",
    to = "  if not (msg:find(\"unable to open database file\", 1, true) or msg:find(\"readonly\", 1, false)) then",
    reason = "\"readonly\" holds no pattern character: found as a pattern or as plain text, the same" },
  { file = "lua/hwtimer/cron.lua",
    from = '  error({ string.format("cron: %s field: " .. fmt, f.name, ...) }, 0)',
    to = '  error({ string.format("cron: %s field: " .. fmt, f.name, ...) }, 1)',
    reason = "the error value is a table: error's level only prefixes a position to a string message, so any level "
      .. "raises the same table (the parser's pcall unwraps it)" },
  { file = "csrc/larm.c",
    from = "\tT->rng ^= T->rng >> 27;", to = "\tT->rng ^= T->rng >> 28;",
    reason = "another shift of the xorshift64* that draws jitter: a different sequence of the same spread, seeded "
      .. "per timer from the clock; jitter is documented as a uniform draw, which no run of it can tell apart" },
  { file = "csrc/ldispatch.c",
    from = "\t\tif (T->stopped || T->pending == 0 || (limited && left <= 0))",
    to = "\t\tif (T->stopped || T->pending == 0 || (limited && left <= 1))",
    reason = "`left` is nanoseconds: timer:run ends one nanosecond sooner, below the clock's own granularity of a "
      .. "syscall's time" },
  { file = "csrc/ltimer.c",
    from = "\tlua_createtable(L, T->stopped ? 0 : (int)(T->pending < INT_MAX ? T->pending : INT_MAX), 0);",
    to = "\tlua_createtable(L, T->stopped ? 0 : (int)(T->pending < INT_MAX ? T->pending : INT_MAX), 1);",
    reason = "a size hint for stop's list: one hash slot more, allocated before anything stops as the array is, "
      .. "never used (the list is an array)" },
  { file = "csrc/driver.c",
    from = "\t\tif (w && w->drv_key <= hwt_clock_ns()) {",
    to = "\t\tif (w && w->drv_key < hwt_clock_ns()) {",
    reason = "a worker due in this very nanosecond: with < the thread calls sleep_until on a deadline already "
      .. "reached, which returns at once, and the next turn of the loop services it: the same step, a syscall later" },
  { file = "lua/hwtimer/durable/runs.lua", from = "    self._more = true", to = "",
    reason = "a pass finds no room only after the claim that filled it, and that claim set _more already "
      .. "(claimed >= limit, the limit being the room): rows are queued or run only by a claim, and _more goes "
      .. "false only in a pass that had room (no job due) or a claim that left some" },
  { file = "lua/hwtimer/durable/redis.lua", from = "  return res[2] and tonumber(res[2]) or false",
    to = "  return res[2] or tonumber(res[2]) or false",
    reason = "the cancel script replies with a number, which Redis sends as an integer reply and every client "
      .. "(redis-lua, lua-resty-redis) gives as a Lua number: tonumber of it is itself, 0 included" },
  { file = "lua/hwtimer/cron.lua",
    from = "    if before and before < off and c >= a + before then return a end -- a gap's times fire at its end",
    to = "    if before and before <= off and c >= a + before then return a end -- a gap's times fire at its end",
    reason = "where the offset before a change equals the one after (no gap), c >= a + before is c >= lo, which "
      .. "the line above has just found false: the branch gains nothing" },
  { file = "lua/hwtimer/durable.lua",
    from = "    if due < self._loaded_until then loaded(self, key, due, delay <= 0) end",
    to = "    if due <= self._loaded_until then loaded(self, key, due, delay <= 0) end",
    reason = "a job due exactly at the window's end is loaded now or by the next refill, which reads from just "
      .. "before that end (window.lua: loaded_until - 1e-9); window.load keys it once either way" },
  { file = "csrc/larm.h", from = "\tif (T->ncancelled == HWT_CANCEL_BATCH)", to = "\tif (T->ncancelled != HWT_CANCEL_BATCH)",
    reason = "a flush after every cancel in place of every 64th: the task is released at the cancel either way and "
      .. "the node unlinked at the flush, so only the cost differs (one worker lock a cancel): a speed mutant, for "
      .. "make bench-compare's W1 cancel figure, not for a spec" },
  { file = "csrc/pipe.c",
    from = "\twhile (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) < 0 && errno == EINTR)",
    to = "\twhile (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) < 0 && errno != EINTR)",
    reason = "the write does not fail here: every caller signals once until the host drains (w->signalled), so "
      .. "neither an eventfd's counter nor a pipe fills, and the descriptor is open while the worker is; the loop's "
      .. "condition is never true either way" },
  { file = "csrc/durable/lsqlite.c", from = "\tlua_pushboolean(L, 1);", to = "\tlua_pushboolean(L, 2);",
    reason = "lua_pushboolean pushes true for any non-zero int: the same value" },
  { file = "lua/hwtimer/ngx.lua", from = "  if gen > 0 then", to = "  if gen >= 0 then",
    reason = "the first dispatcher (generation 0) sets took and timers_full to what new() left them (0, math.huge); "
      .. "its one post of took_over is taken by the first handover's wait, whose loop checks took again and waits on" },
  { file = "lua/hwtimer/durable.lua",
    from = "  if not self._batching and due < self._loaded_until then loaded(self, key, due, true) end",
    to = "  if not self._batching and due <= self._loaded_until then loaded(self, key, due, true) end",
    reason = "as in schedule's fast path: a job due exactly at the window's end is loaded now or by the next refill, "
      .. "which reads from just before that end; window.load keys it once either way" },
  { file = "lua/hwtimer/durable/window.lua", from = "  self._next_sweep = now + self._sweep",
    to = "  self._next_sweep = now - self._sweep",
    reason = "the open's first sweep comes at the first poll in place of a sweep later: one pass more, which claims "
      .. "what is due as the open's own pass (window.soon) has just done; what comes due after is claimed by the "
      .. "window's loaded timeouts and the polls' loads either way" },
  { file = "lua/hwtimer/durable/runs.lua",
    from = "  if self._rerun or (self._more and claimed >= self._batch) then",
    to = "  if self._rerun or (self._more or claimed >= self._batch) then",
    reason = "a claim can take no more than the room (_more: it filled it), so the one pass more this asks for "
      .. "finds no room, and at most writes waiting acknowledgements before their ack_delay, as a claim would "
      .. "have carried them: a store round trip sooner, no job run otherwise" },
  { file = "csrc/pipe.c",
    from = "\twhile (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) < 0 && errno == EINTR)",
    to = "\twhile (write(fds[1], is_eventfd(fds) ? (const void *)&one : (const void *)&b, n) <= 0 && errno == EINTR)",
    reason = "as < 1: a write of 1 or 8 bytes returns -1 or a positive count, never 0" },
  { file = "csrc/compat.h", from = "\t\tlua_createtable(L, nuv, 0);", to = "\t\tlua_createtable(L, nuv, 1);",
    reason = "a size hint: the uservalue table (5.1's environment) is only indexed 1..nuv, the one hash slot more "
      .. "stays empty" },
  { file = "lua/hwtimer/durable/redis_client.lua",
    from = "  if lo > hi then lo, hi = server - got, server - sent end -- a clock stepped: start over",
    to = "  if lo >= hi then lo, hi = server - got, server - sent end -- a clock stepped: start over",
    reason = "a tie of two bounds read from clocks in microseconds and nanoseconds (not seen in practice); and where "
      .. "it comes, the reply's own bounds hold the point the old ones met at: the offset stays a true bound, a little "
      .. "less tight until the next reply" },
  { file = "csrc/ldispatch.c", from = "\tg->rest_kb = 0;", to = "",
    reason = "rest_kb is read only while resting, and both are set together when a cycle ends; resting starts 0" },
  { file = "csrc/ldispatch.c", from = "\tif (NARGS(n) > LUA_MINSTACK - 3)", to = "\tif (NARGS(n) >= LUA_MINSTACK - 3)",
    reason = "one argument count more asks luaL_checkstack for room the frame already has: it grows nothing and "
      .. "succeeds (a check only for speed, the common case skipping the call)" },
  { file = "csrc/lhwtimer.c", from = "\t\treturn LUA_MAXINTEGER;", to = "\t\treturn 0;",
    reason = "reached only by max_pending of 2^63 (wheel_size stops at 4096): a cap no count of timeouts reaches, "
      .. "and 0 is no cap; nothing reads the option back" },
  { file = "lua/hwtimer/jobs_cli_redis.lua", from = "    tcp:close()", to = "",
    after = "  if not connected then",
    reason = "the command ends with the error this returns, and luasocket closes a socket it collects: the "
      .. "descriptor is open a little longer in a process that is exiting" },
  { file = "csrc/ldispatch.c",
    from = "\tstop = start + (gap_ns < 0 || gap_ns - GC_MARGIN_NS > g->budget ? g->budget : gap_ns - GC_MARGIN_NS);",
    to = "\tstop = start + (gap_ns < 0 || gap_ns - GC_MARGIN_NS >= g->budget ? g->budget : gap_ns - GC_MARGIN_NS);",
    reason = "the smaller of the two: where they are equal either branch gives the same value" },
  { file = "csrc/lbase.c", from = "\treturn 1;", to = "\treturn 2;", after = "\tlua_pop(L, 1);",
    reason = "lhwt_is_callable is a truth value to both of its callers (each tests it with !)" },
  { file = "csrc/driver.c", from = "\tpthread_condattr_destroy(&ca);", to = "",
    reason = "glibc's pthread_condattr_destroy does nothing (the attribute holds no resource); the one call a "
      .. "process makes (init_cv, until one succeeds)" },
  { file = "csrc/wheel.c", from = "\tfor (slot = 0; slot < heads; slot++)", to = "\tfor (slot = 1; slot < heads; slot++)",
    reason = "slot 0 is level 0's current ring at the block's first tick, never after now: a node for it is due "
      .. "at once (add puts it in the due list; entering the block expires it in the same step), so it is empty "
      .. "between operations (test_wheel's model checks the due list after each); test_wheel's collect test fills "
      .. "every other slot" },
  { file = "lua/hwtimer/durable/ids.lua",
    from = "  local seed = tonumber(tostring({}):match(\"0x(%x+)\") or \"0\", 16) or 0",
    to = "  local seed = tonumber(tostring({}):match(\"0x(%x+)\") or \"0\", 16) or 1",
    reason = "the fallback of a fallback: tostring of a table always has its hex address, and this seed is read only "
      .. "without /dev/urandom; it is added to the clock's either way" },
  { file = "lua/hwtimer/durable/ids.lua",
    from = "  return math.random(0, 0xffff) * 65536 + math.random(0, 0xffff)",
    to = "  return math.random(0, 0xffff) * 65536 + math.random(1, 0xffff)",
    reason = "a random tag's low half never 0, without /dev/urandom only: one value of 65,536 never drawn, in a "
      .. "number no one predicts" },
  { file = "csrc/pipe.c", from = "\tif (errno != ENOSYS && errno != EINVAL)", to = "\tif (errno == ENOSYS && errno != EINVAL)",
    reason = "eventfd with these flags exists on every Linux this builds for (2.6.27 on), so it fails only for want "
      .. "of descriptors or memory, where the pipe that the mutant then tries fails the same way, with the same errno" },
  { file = "lua/hwtimer/durable/redis_client.lua", from = "    if self.pooled then pcall(c.set_keepalive, c, 10000, 16) end",
    to = "    if self.pooled then pcall(c.set_keepalive, c, 10000, 17) end",
    reason = "nginx sizes a pool at the set_keepalive that makes it (call's, before this, in most workers); 17 "
      .. "idle connections kept in place of 16 after 17 commands at once: no reply or job differs" },
  { file = "lua/hwtimer/ngx.lua", from = "      if i % 64 == 0 then ngx.update_time() end",
    to = "      if i % 65 == 0 then ngx.update_time() end",
    reason = "how many premature callbacks run between two reads of the clock at exit: exit_time is overrun by "
      .. "at most the time of 65 short callbacks in place of 64" },
  { file = "csrc/larm.h", from = "\tif (HWT_PACK_IN_HANDLE && task_packed(n))", to = "\tif (HWT_PACK_IN_HANDLE || task_packed(n))",
    reason = "on 5.4 it also clears the uservalue of a handle whose task is its callback alone: such a handle has "
      .. "none (lua_setiuservalue of a slot it lacks sets nothing); on 5.1-5.3 lhwt_release_pack does nothing" },
  { file = "lua/hwtimer/durable.lua", from = "  local fast = self._schedule", to = "",
    reason = "a speed-only mutant: without the local, `fast` reads a global that is nil, and every schedule takes "
      .. "the general path, which does the same (bench/durable_parts.lua times the two)" },
  { file = "csrc/pipe.c", from = "\tchar b = 1;", to = "\tchar b = 2;",
    reason = "the byte written to a pipe (where there is no eventfd) is read and dropped: only its arrival counts" },
  { file = "csrc/pipe.c", from = "\tuint64_t one = 1; /* an eventfd takes 8 bytes, a pipe the first */",
    to = "\tuint64_t one = 2; /* an eventfd takes 8 bytes, a pipe the first */",
    reason = "an eventfd's count is read whole and dropped (hwt_pipe_consume): a count of 2 a signal in place of 1 "
      .. "wakes the same" },
  { file = "csrc/ldispatch.c", from = "\t\tg->budget = lua_toboolean(L, -1) ? GC_DEFAULT_NS : 0;",
    to = "\t\tg->budget = lua_toboolean(L, -1) ? GC_DEFAULT_NS : 1;",
    reason = "gc_step = false then spends a gap of 1 ns collecting: with a clock of nanosecond resolution (the "
      .. "tsc and kvm-clock clocksources Linux uses here) the read after its start is past it, so no step is taken" },
  { file = "lua/hwtimer/durable/sqlite.lua", from = "    if o[1] == nil and o[2] ~= nil then err = o[2] end",
    to = "    if o[1] == nil and o[2] == nil then err = o[2] end",
    reason = "the read runs inside the BEGIN IMMEDIATE just taken (the write lock held: no busy), so what fails it "
      .. "(a table gone, a corrupt page, I/O, memory) fails the write that follows in the same transaction, with the "
      .. "same message; spec/durable/01 checks that message where the table is gone" },
  { file = "lua/hwtimer/ngx.lua",
    from = "  if self.running and ngx.worker.exiting() and self.took == gen then on_exit(true, self) end",
    to = "  if self.running and ngx.worker.exiting() or self.took == gen then on_exit(true, self) end",
    reason = "the loop above ends with took == gen only when the worker exits (the original's case) or the glue "
      .. "stopped running, where on_exit returns at once (`if not self.running`)" },
  { file = "lua/hwtimer/durable/redis_batch.lua", from = "  self.waking = 0", to = "",
    after = "  if self.gathering == e then self.gathering = nil end",
    reason = "gather's caller sends next (busy is set: no add reads waking meanwhile), and that round trip's "
      .. "answer sets waking to the callers it wakes; a gatherer whose request ends never comes back to this line" },
  { file = "lua/hwtimer/tzif.lua", from = "    local mid = floor((lo + hi + 1) / 2)",
    to = "    local mid = floor((lo + hi + 2) / 2)",
    reason = "a bisection's midpoint one further up: still in (lo, hi] while lo < hi, so each step keeps list[lo].t "
      .. "<= t < list[hi + 1].t and shrinks the range; the same index is found" },
  { file = "lua/hwtimer/durable/window.lua", from = "  self._refill, err = self._timer:schedule(self._window / 2, refill, self)",
    to = "  self._refill, err = self._timer:schedule(self._window / 3, refill, self)",
    reason = "the open's first refill a sixth of a window sooner: a read of the store earlier, which loads up to "
      .. "a window ahead as the later one would; the open loaded a whole window, so no job comes due unloaded either way" },
  { file = "csrc/durable/lsqlite.c", from = "\t\t\tlua_createtable(L, n, 0);", to = "\t\t\tlua_createtable(L, n, 1);",
    reason = "a row's table preallocated with one hash slot more: a size hint that changes its memory, not its contents" },
  { file = "lua/hwtimer/tzif.lua", from = "  if edge and t < edge then", to = "  if edge and t <= edge then",
    reason = "at t == table_end both branches ask the footer's rule at that second; they part only where its offset "
      .. "there differs from the table's last, which RFC 8536 3.3 forbids (the footer agrees with the last "
      .. "transition's type): on a conforming file both return the same segment" },
  { file = "csrc/worker.c", from = "\tw->drv_key = INT64_MAX;", to = "",
    reason = "the driver writes drv_key when it registers the worker (hwt_driver_register) and reads it only while "
      .. "the worker is in its heap (drv_index != NOT_IN_HEAP): the first value is never read" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tstatic const char salt = 0; /* its address differs between runs too */",
    to = "\tstatic const char salt = 1; /* its address differs between runs too */" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tuint64_t z = (uint64_t)hwt_clock_ns() ^ ((uint64_t)(uintptr_t)T << 16) ^ (uint64_t)(uintptr_t)&salt;",
    to = "\tuint64_t z = (uint64_t)hwt_clock_ns() ^ ((uint64_t)(uintptr_t)T << 17) ^ (uint64_t)(uintptr_t)&salt;" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tz += UINT64_C(0x9e3779b97f4a7c15);",
    to = "" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tz += UINT64_C(0x9e3779b97f4a7c15);",
    to = "\tz -= UINT64_C(0x9e3779b97f4a7c15);" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tz = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);",
    to = "" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tz = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);",
    to = "\tz = (z ^ (z >> 31)) * UINT64_C(0xbf58476d1ce4e5b9);" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tz = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);",
    to = "" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\tz = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);",
    to = "\tz = (z ^ (z >> 28)) * UINT64_C(0x94d049bb133111eb);" },
  { file = "csrc/lwake.c", reason = TOKEN_MIX,
    from = "\treturn z ^ (z >> 31);",
    to = "\treturn z ^ (z >> 32);" },
  { file = "lua/hwtimer/ngx.lua", from = "  local newproxy = rawget(_G, \"newproxy\")", to = "",
    reason = "only nginx's LuaJIT runs this file, where the global newproxy is the function rawget(_G, "
      .. "\"newproxy\") gives: without the local, the two lines after it read the same global" },
  { file = "lua/hwtimer/ngx.lua", from = "    if n % 32 == 0 and now() - self.since > self.slice then",
    to = "    if n % 32 == 1 and now() - self.since > self.slice then",
    reason = "the slice's clock is read once every 32 callbacks either way, only after another of each 32: a "
      .. "runner gives way at most 31 callbacks sooner or later than the original, which itself may run 31 past "
      .. "the slice's end; no bound the docs give (a slice, checked every 32) tells them apart" },
  { file = "csrc/lstats.c", from = "\tlua_createtable(L, EDGE_LAST - EDGE_FIRST + 1, 0);",
    to = "\tlua_createtable(L, EDGE_LAST - EDGE_FIRST + 2, 0);",
    reason = "a table preallocated with room for one element more: a size hint that changes its memory, not "
      .. "its contents" },
  { file = "lua/hwtimer/jobs_cli_redis.lua", from = "  for hop = 1, 2 do", to = "  for hop = 1, 3 do",
    reason = "a MOVED reply is followed at the first hop only (hop == 1), and every branch of the second hop "
      .. "returns: a third is never reached" },
  { file = "csrc/larm.c", from = "\t\tlua_pop(L, 1);", to = "",
    after = "\t\tfprintf(stderr, \"hwtimer: error in wakeup hook: %s\\n\", lua_tostring(L, -1));",
    reason = "the hook's error message left on the stack: every caller sets the top after it (lua_settop) or "
      .. "pushes what it returns above it, and the hook runs at most once a call (T->wake is set again only "
      .. "by timer:timeout(), another call): no result and no later slot changes" },
  { file = "lua/hwtimer/durable/redis.lua",
    from = "    parts[i] = job_put(j[1], j[2], j[3], format(\"%.0f\", j[4]), j[5], format(\"%.0f\", j[6]), true, \"\")",
    to = "    parts[i] = job_put(j[1], j[2], j[3], format(\"%.0f\", j[4]), j[5], format(\"%.0f\", j[6]), false, \"\")",
    reason = "the add script's jobs have ids the front just made: told they are not fresh, the script looks each "
      .. "up before storing it and finds none, as it would have assumed (a speed mutant: a lookup a job)" },
  { file = "csrc/ldispatch.c", from = "\tlhwt_check_live(L, 1)->take_only = 1;",
    to = "\tlhwt_check_live(L, 1)->take_only = 2;",
    reason = "take_only is an int read only as a truth value (if (T->take_only)): 2 is as true as 1" },
  { file = "csrc/driver.c", from = "\tdrv.stopping = 0;", to = "",
    reason = "stopping is 0 whenever start_thread runs: the driver starts at 0, stop_thread clears it after the "
      .. "join, and a forked child's hwt_driver_forget clears it too" },
  { file = "csrc/ltimeout.c", from = "\tif (!taken && (delay <= 0 ? T->host_wake > 0 : now + delay < T->host_wake))",
    to = "\tif (!taken && (delay <= 0 ? T->host_wake > 0 : now + delay <= T->host_wake))",
    reason = "a reset whose deadline is the host's planned wake-up to the nanosecond: the hook then wakes the "
      .. "host for the time it would wake at anyway (the hook posts; the host finds the same due timeout)" },
  { file = "csrc/wheel.c", from = "\tw->summary = calloc((size_t)w->levels * 2, sizeof *w->summary);",
    to = "\tw->summary = calloc((size_t)w->levels * 3, sizeof *w->summary);",
    reason = "the summary words are indexed below levels * 2 (two rings a level); a third never read or written is "
      .. "memory, not behaviour: one block either way, freed the same" },
  { file = "csrc/list.h", from = "\tHWT_PREFETCH_W(HWT_PEEK(n->prev));", to = "",
    reason = "a prefetch is a hint to the cache (__builtin_prefetch): without it the same loads and stores run, "
      .. "only perhaps slower (bench, not specs)" },
  { file = "lua/hwtimer/jobs_cli_redis.lua", from = "      pcall(client.quit, client)", to = "",
    reason = "the CLI's one client, dropped on a refusal the command then exits 1 with: its socket is closed by the "
      .. "process's exit (or luasocket's __gc) a moment later, where QUIT closed it a moment sooner; the server "
      .. "sees the connection end either way and the output and status are the same" },
  -- (the same three on the path where the checkpoint's thread is refused)
  { file = "csrc/durable/checkpoint.c", from = "\t\tpthread_cond_destroy(&c->done);", to = "",
    reason = "as the cond_destroy above: glibc's frees nothing, and free(c) follows" },
  { file = "csrc/durable/checkpoint.c", from = "\t\tpthread_cond_destroy(&c->wake);", to = "",
    reason = "as the cond_destroy above: glibc's frees nothing, and free(c) follows" },
  { file = "csrc/durable/checkpoint.c", from = "\t\tpthread_mutex_destroy(&c->lock);", to = "",
    reason = "as the mutex_destroy above: glibc's of an unlocked mutex frees nothing, and free(c) follows" },
  { file = "csrc/larm.c", from = "\t\tp->has_first = 1;", to = "\t\tp->has_first = 2;",
    reason = "has_first is read only as a truth value (!p->has_first): 2 is as true as 1" },
  { file = "csrc/ldispatch.c", from = "\t\tluaL_checkstack(L, NARGS(n) + 3, \"too many callback arguments\");",
    to = "\t\tluaL_checkstack(L, NARGS(n) + 4, \"too many callback arguments\");",
    reason = "a slot more asked for than the call uses: it moves the largest argument list a callback can be "
      .. "given (Lua's C stack limit, 8,000 slots on 5.1, a million on 5.4) by one: a bound no document states, "
      .. "near which either build raises the same error; every shorter list is called the same" },
  { file = "csrc/wheel.c", from = "\tif (to > w->now)", to = "\tif (to >= w->now)",
    reason = "set_now(w, w->now) changes nothing: the same block (no ring swap) and the same now" },
  { file = "csrc/pipe.c", from = "\t\tfds[0] = fds[1] = -1;", to = "\t\tfds[0] = fds[1] = -2;",
    reason = "the descriptors of a pipe that failed to open: its one caller (hwt_worker_init) returns the error "
      .. "and the worker, never started, is never stopped or destroyed: nothing reads them" },
  { file = "lua/hwtimer/durable.lua", from = "  local ngx = rawget(_G, \"ngx\")", to = "",
    reason = "without the local, `ngx` on the next line is the global of the same name (the file has no other "
      .. "local ngx): in nginx the same table, and anywhere else nil either way (rawget of a missing global)" },
  { file = "csrc/pipe.c",
    from = "\twhile (read(fds[0], &buf, is_eventfd(fds) ? sizeof buf : 1) < 0 && errno == EINTR)",
    to = "\twhile (read(fds[0], &buf, is_eventfd(fds) ? sizeof buf : 1) <= 0 && errno == EINTR)",
    reason = "read returns 0 only at end of file: an eventfd never does, and a pipe only once its write end is "
      .. "closed, which hwt_pipe_close does with the read end, after the last consume" },
  { file = "csrc/ldispatch.c", from = "\treturn limited && left < until ? left : until;",
    to = "\treturn limited || left < until ? left : until;",
    reason = "unlimited, run's `left` is negative (its end is its start): the mutant sleeps on the descriptor with "
      .. "no timeout where the original sleeps to the wheel's next event, at which the worker writes that "
      .. "descriptor: the same callbacks run at the same tick, the host woken by the other thread (speed, not "
      .. "behaviour: bench W2b)" },
  { file = "csrc/ltimeout.c", from = "\t\tT->wake = 1;", to = "\t\tT->wake = 2;",
    reason = "T->wake is read only as a truth value (if (T->wake)): 2 is as true as 1" },
  { file = "csrc/lstats.c", from = "\tif (b < 4)", to = "\tif (b <= 4)",
    reason = "bucket 4 holds a lateness of 4 ns only: the formula below gives ((4 + 0 + 1) << 0) - 1 = 4 for it, "
      .. "the same as returning b" },
  { file = "csrc/driver.c", from = "\t\tif (at_ns < drv.wake_ns)", to = "\t\tif (at_ns <= drv.wake_ns)",
    reason = "a signal for a wake-up at the very nanosecond the driver already sleeps to: it wakes, finds the same "
      .. "earliest key, and sleeps again to the same time" },
  { file = "lua/hwtimer/durable/sqlite.lua", from = "      db:exec(\"ROLLBACK\")", to = "",
    reason = "refuse() closes the connection next, and SQLite rolls back a transaction its connection closes "
      .. "with: the store is left as it was either way, and the lock let go" },
  { file = "lua/hwtimer/durable/sqlite.lua", from = "        db:exec(\"ROLLBACK\")", to = "",
    reason = "as the ROLLBACK above: refuse() closes the connection, which rolls the transaction back" },
  { file = "csrc/worker.c", from = "\tif ((w->wake_at <= now || w->host_timed) && now > w->wheel.now)",
    to = "\tif ((w->wake_at <= now || w->host_timed) && now >= w->wheel.now)",
    reason = "at now == wheel.now, hwt_wheel_expire(w, now) does nothing: the wheel's next event is always after "
      .. "its now (one at or before it has been stepped through), and set_now to the same now changes nothing" },
  { file = "lua/hwtimer/durable/sqlite.lua",
    from = "  if not (msg:find(\"unable to open database file\", 1, true) or msg:find(\"readonly\", 1, true)) then",
    to = "  if not (msg:find(\"unable to open database file\", 1, false) or msg:find(\"readonly\", 1, true)) then",
    reason = "the text has no pattern's magic character (letters and spaces): found as a pattern or as plain text, "
      .. "it is found in the same messages" },
  { file = "csrc/driver.c", from = "\twhile (i > 0 && drv.heap[(i - 1) / 2]->drv_key > w->drv_key) {",
    to = "\twhile (i > 0 && drv.heap[(i - 1) / 2]->drv_key >= w->drv_key) {",
    reason = "only the order of workers with equal keys changes: they are due at the same nanosecond, and the "
      .. "driver serves the earliest while any is due, so each is served in the same pass" },
  { file = "csrc/durable/lwatch.c", from = "\t\tif (got <= 0)", to = "\t\tif (got < 0)",
    reason = "a read of an inotify descriptor never returns 0: it gives whole events or fails (EAGAIN when there "
      .. "are none, EINVAL for a buffer too small for one)" },
  { file = "lua/hwtimer/tzif.lua",
    from = "    if k == #list - 2 then out.constant = cur end -- (what holds when nothing changes)",
    to = "    if k == #list - 3 then out.constant = cur end -- (what holds when nothing changes)",
    reason = "the constant is read only when no transition of the window's middle (k from 3 to #list - 2) changed "
      .. "the offset: then transition #list - 2 changed nothing either, and the offset after #list - 3 and after "
      .. "#list - 2 is the same" },
  { file = "lua/hwtimer/luv.lua", from = "  poll:stop()", to = "",
    reason = "close stops an active handle first (libuv's uv_close), and the handle is closed right after: no "
      .. "callback comes between" },
  { file = "lua/hwtimer/durable/redis_wake.lua",
    from = "  if data and #data > 0 then self.buf = self.buf .. data end",
    to = "  if data and #data >= 0 then self.buf = self.buf .. data end",
    reason = "appending an empty string leaves the buffer as it was" },
  { file = "lua/hwtimer/ngx.lua", from = "      self.slot:post(1)", to = "      self.slot:post(2)",
    after = "      self.slot_wanted = false",
    reason = "a permit too many only wakes the dispatcher once for nothing: after each wait it checks the "
      .. "runners waiting against max_runners again (while self.waiting >= self.max_runners) and waits on" },
  { file = "lua/hwtimer/durable/redis_wake.lua", from = "      out[#out + 1], i = head:sub(2), line_end + 2",
    to = "      out[#out + 1], i = head:sub(2), line_end + 3",
    reason = "an error reply is the server's last word on the connection (a SUBSCRIBE refused: nothing else was "
      .. "asked; too many clients: it closes): step() acts on it and drops or ends the connection, and a new one "
      .. "starts with an empty buffer, so where the next reply would start is never read" },
  { file = "csrc/larm.c", from = "\tlua_pop(L, 1);", to = "\tlua_pop(L, 2);", after = "\tlua_setfield(L, -2, \"nominal\");",
    reason = "set_nominal's one slot more popped is the task table its callers (every, next_period) keep at the "
      .. "top and no longer read: each sets the top below it (lua_settop(L, h), lua_settop(L, task - 1)) next, "
      .. "and the wake hook between pushes its own values" },
  { file = "csrc/ldispatch.c", from = "\t\tlua_settop(L, err + 1); /* drops what error_message may have pushed */",
    to = "",
    reason = "reached only where the message handler never ran: a memory error or an error in the handler, whose "
      .. "objects are the strings 'not enough memory' and 'error in error handling', for which error_message "
      .. "pushes nothing" },
  { file = "csrc/lstats.c", from = "\t\ti++;", to = "",
    reason = "the #else of top_bit: gcc and clang, the compilers this builds with, take __builtin_clzll" },
  { file = "lua/hwtimer/cron.lua",
    from = "      if d2 and d < days_in_month(y, m) then -- the next day, from its start",
    to = "      if d2 or d < days_in_month(y, m) then -- the next day, from its start",
    reason = "with no matching day left in the month (d2 nil) the mutant steps to the next day, whose search "
      .. "finds none again, until the month's last day takes it to the next month: the same first match, "
      .. "found in more turns (the search is bounded by years, not turns)" },
  { file = "lua/hwtimer/durable.lua",
    from = "    _acks = {}, _acks_since = 0, _last_took = 0, _renewed = 0, _runs = {},",
    to = "    _acks = {}, _acks_since = 0, _last_took = 0, _renewed = 1, _runs = {},",
    reason = "the time of the last renewal is set before any lease is renewed (the first claim with nothing held "
      .. "sets it, runs.lua); until then it is compared with no lease: 0 and 1 are both ages ago on either clock" },
  { file = "lua/hwtimer/ngx.lua", from = "  if ok then ok, terr = ngx.timer.at(365 * 86400, on_exit, self) end",
    to = "  if ok then ok, terr = ngx.timer.at(365 / 86400, on_exit, self) end",
    reason = "the first watch for the worker's exit ends after 4 ms instead of a year: on_exit, not premature, "
      .. "arms the next for a year, and the exit is watched all the same" },
  { file = "lua/hwtimer/durable/wake_luv.lua", from = "      handle:stop()", to = "",
    reason = "as luv.lua's poll:stop(): close stops an active handle first (libuv's uv_close), and the handle is "
      .. "closed right after, with no callback between" },
  { file = "csrc/wheel.c", from = "\twhile (!(x & 1)) { x >>= 1; i++; }", to = "\twhile (!(x & 2)) { x >>= 1; i++; }",
    reason = "the #else of lowest_bit: gcc and clang, the compilers this builds with, take __builtin_ctzll" },
  { file = "csrc/lstats.c", from = "\tlua_createtable(L, 0, 18);", to = "\tlua_createtable(L, 1, 18);",
    reason = "a size hint: one array slot made ready that nothing fills; the table's fields are the same" },
  { file = "lua/hwtimer/tzif.lua", from = "  local y = M.civil_from_days(floor((t + rule.std) / 86400))",
    to = "  local y = M.civil_from_days(floor((t + rule.std) / 86401))",
    reason = "the year a rule's window is centred on: off by t / 86401 / 86400 days, at most 1.2 days for any "
      .. "time a store or a cron search reaches (9e9 s), within a window of the three years on each side" },
  { file = "lua/hwtimer/durable/redis_client.lua",
    from = "  if self.pooled and (res or from_server) then pcall(c.set_keepalive, c, 10000, 16) end",
    to = "  if self.pooled and (res or from_server) then pcall(c.set_keepalive, c, 10000, 17) end",
    reason = "the size of nginx's pool of idle connections a worker keeps: one more kept idle; every call gets a "
      .. "connection either way (from the pool or a new one)" },
  { file = "csrc/lhwtimer.c", from = "\treturn 0;", to = "\treturn 1;", after = "\tT->stopped = 0;",
    reason = "start_timer's success: hwtimer_new then returns the top of the stack at once, which is the timer "
      .. "(every value pushed after it was consumed), as its own lua_settop(L, ud); return 1 does" },
  { file = "csrc/larm.c", from = "\tp->advanced = 1;", to = "", after = "\tp->jitter = lua_tonumber(L, -2);",
    reason = "no reader of the period lhwt_read_period fills looks at `advanced`: next_period and arm_period use "
      .. "its interval, rate and jitter, t:reset's interval alone" },
  { file = "csrc/lstats.c", from = "\twhile (x >>= 1)", to = "\twhile (x >>= 2)",
    reason = "the #else of top_bit: gcc and clang, the compilers this builds with, take __builtin_clzll" },
  { file = "lua/hwtimer/retry.lua",
    from = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 1, true) then",
    to = "    if message(t):find(\"stopped timer\", 2, true) or message(t):find(\"closed timer\", 1, true) then",
    reason = "the timer's message is 'attempt to use a stopped timer' (after a position, if any): the words never "
      .. "start it, so a search from the second byte finds them where one from the first does" },
  { file = "lua/hwtimer/durable/redis_entry.lua",
    from = "    local mant = (m * 2 - 1) * 4503599627370496 -- (2^52: the mantissa's bits, a whole number)",
    to = "    local mant = (m * 2 - 1) * 4503599627370497 -- (2^52: the mantissa's bits, a whole number)",
    reason = "float() is reached only for a whole number past int64 (int's first line), and an entry's numbers "
      .. "are due times and intervals in microseconds, within 9e15 (q:at's 9e9 s, every's 1e9 s): never" },
  { file = "lua/hwtimer/ngx.lua",
    from = "  if glue.max_wait < 0.001 then glue.max_wait = 0.001 end",
    to = "  if glue.max_wait <= 0.001 then glue.max_wait = 0.001 end",
    reason = "at max_wait == 0.001 the branch sets it to the 0.001 it is: the same value either way" },
  { file = "csrc/lstats.c",
    from = "\tuint64_t x = ns > 0 ? (uint64_t)ns : 0;", to = "\tuint64_t x = ns > 1 ? (uint64_t)ns : 0;",
    reason = "not shown equivalent, not observable: only a run exactly 1 ns late differs (bucket 0 in place of "
      .. "1, a percentile of 0 in place of 1e-9 s); lateness is the clock's read minus the due time, which no "
      .. "spec can set to the nanosecond, and timer:lateness's first edge is 8 us" },
  { file = "lua/hwtimer/cqueues.lua",
    from = "  if self.running == 0 or not usable(self.timer) then self.wake:signal() end",
    to = "  if self.running == 1 or not usable(self.timer) then self.wake:signal() end",
    reason = "not shown equivalent, not observable: with the last carrier out unsignalled, the attached coroutine "
      .. "goes on waiting on its condition and timer:timeout() until the next deadline, and polls the descriptor "
      .. "from the wait after; every callback still runs at its deadline, to cqueues' timeout in place of the "
      .. "worker's wake-up, a difference within the millisecond that no spec on this machine can time" },
  { file = "lua/hwtimer/text.lua",
    from = "  if t == \"number\" or t == \"boolean\" or t == \"nil\" then return tostring(v) end",
    to = "  if t == \"number\" and t == \"boolean\" or t == \"nil\" then return tostring(v) end",
    reason = "a shortcut: a number or a boolean that skips it goes through pcall(tostring, v) below, which gives "
      .. "the same string, unless a program has given numbers or booleans a metatable with __tostring "
      .. "(debug.setmetatable), which nothing here does and the docs do not promise to ignore" },
  { file = "lua/hwtimer/durable/ids.lua",
    from = "  local seed = tonumber(tostring({}):match(\"0x(%x+)\") or \"0\", 16) or 0",
    to = "  local seed = tonumber(tostring({}):match(\"0x(%x+)\") or \"0\", 17) or 0",
    reason = "a fallback seed (only where /dev/urandom cannot be read) from a table's address: read in base 17 the "
      .. "same hex digits give another number that varies with the address as much, as good a seed" },
  { file = "csrc/ldispatch.c",
    from = "\t\t\tg->rest_kb = kb + kb / 2 + 1;", to = "\t\t\tg->rest_kb = kb + kb / 2 + 2;",
    reason = "not shown equivalent, not observable: the idle steps rest until the heap has grown to half as much "
      .. "again plus 1 KB, or plus 2 KB; a heap that grows by 1 KB more before the next idle step changes no "
      .. "deadline and no figure a spec can read (the collector's own count moves by more in one step)" },
  { file = "csrc/durable/checkpoint.c",
    from = "\t\tfinish = 1;", to = "\t\tfinish = 2;",
    reason = "finish is read once, as a truth value (if (finish)): 1 and 2 are both true" },
  { file = "lua/hwtimer/durable/redis_client.lua",
    from = "  return e:find(\"NOPERM\", 1, true) ~= nil or e:find(\"unknown command\", 1, true) ~= nil",
    to = "  return e:find(\"NOPERM\", 1, true) ~= nil or e:find(\"unknown command\", 2, true) ~= nil",
    reason = "Redis's error replies start with their code (\"ERR unknown command ...\"), and the clients put "
      .. "their own words before it: the words never start the message, so a search from the second byte finds "
      .. "them where one from the first does" },
  { file = "lua/hwtimer/ngx.lua",
    from = "    if n % 32 == 0 and now() - self.since > self.slice then",
    to = "    if n % 33 == 0 and now() - self.since > self.slice then",
    reason = "not shown equivalent, not observable: a runner reads the clock every 32nd callback to end its slice, "
      .. "or every 33rd; a slice (2 ms by default) then ends one callback later at most, which no spec can time "
      .. "apart from the scheduling noise of nginx's loop" },
  { file = "csrc/pipe.c",
    from = "\twhile (read(fds[0], &buf, is_eventfd(fds) ? sizeof buf : 1) < 0 && errno == EINTR)",
    to = "\twhile (read(fds[0], &buf, is_eventfd(fds) ? sizeof buf : 1) < 1 && errno == EINTR)",
    reason = "a read of the timer's eventfd never returns 0, and one of its pipe only at end of file, with the "
      .. "write end closed, which the timer holds open until it closes both: < 0 and < 1 are the same test" },
  { file = "csrc/ldispatch.c",
    from = "\t(void)poll(&p, 1, ns < 0 ? -1 : (int)((ns + 999999) / 1000000));",
    to = "\t(void)poll(&p, 2, ns < 0 ? -1 : (int)((ns + 999999) / 1000000));",
    reason = "the #else of the ppoll branch: Linux, where this builds and runs, takes ppoll" },
  { file = "csrc/larm.c",
    from = "\t\tlua_createtable(L, 0, 4);", to = "\t\tlua_createtable(L, 0, 5);",
    reason = "a size hint: the table of a periodic timeout's options gets its fields set either way" },
  { file = "csrc/ldispatch.c",
    from = "\t\tluaL_checkstack(L, NARGS(n) + 3, \"too many callback arguments\");", to = "",
    reason = "lhwt_push_task, which pushes the callback and its arguments, makes room for them and one slot more "
      .. "(luaL_checkstack(L, NARGS(n) + 2, ...)) before it pushes: push_call's handle fits in that slot" },
  { file = "csrc/larm.c",
    from = "\tT->rng ^= T->rng << 25;", to = "\tT->rng ^= T->rng << 26;",
    reason = "the jitter's generator with another shift: a different sequence of draws, as spread over the "
      .. "interval; the docs promise draws within the jitter, not a sequence, and no spec can tell one from the other" },
  { file = "csrc/ltimeout.c",
    from = "\tlua_createtable(L, 0, 6);", to = "\tlua_createtable(L, 0, 7);",
    reason = "a size hint: the table t:info() returns gets its fields set either way" },
  { file = "lua/hwtimer/durable/runs.lua",
    from = "      self._renewed = self._now() - self._lease / 3 + min(self._lease / 6, 1) -- tried again sooner",
    to = "      self._renewed = self._now() - self._lease / 4 + min(self._lease / 6, 1) -- tried again sooner",
    reason = "not shown equivalent, not observable: after a renewal that failed at an nginx worker's exit, the "
      .. "next try comes a twelfth of the lease later; both come well within the lease, so no job's lease "
      .. "lapses either way, and no spec can time a store's outage at an exit to that share of a lease" },
  { file = "lua/hwtimer/ngx.lua",
    from = "      if (sliced or runs >= self.runner_runs) and self.running then",
    to = "      if (sliced or runs > self.runner_runs) and self.running then",
    reason = "not shown equivalent, not observable: a dispatcher hands over after runner_runs runners, or one "
      .. "more; a pass starts the runners due together (10 at a time in spec/hosts/04, split as the ticks fall), "
      .. "so the count at a handover overshoots by up to a pass either way: 500 runners at 50 make 8 to 10 "
      .. "handovers with >= and 8 or 9 with >, counts a spec cannot tell apart" },
  { file = "csrc/ldispatch.c",
    from = "\t\tlua_insert(L, err + 1);", to = "\t\tlua_insert(L, err + 2);",
    reason = "the traceback is made up only where the message handler could not store one, which is a failure "
      .. "for memory (or an error in it): the error value is then Lua's own message, a string, so "
      .. "error_message pushes nothing and err + 1 is the top either way (failalloc_once raises a table "
      .. "with __tostring too, and sees no difference)" },
  { file = "lua/hwtimer/cron.lua",
    from = "    error(err, 0)", to = "    error(err, 1)",
    reason = "not shown equivalent, not observable: parse_fields raises only { message } tables for a bad "
      .. "expression; another error is a fault of cron.lua itself (or memory), which no spec can make, and it "
      .. "differs only by a position put before its text" },
  { file = "lua/hwtimer/durable/runs.lua",
    from = "    self._rerun = false", to = "",
    reason = "not shown equivalent, not observable: once a pass was asked for during a claim (only a claim "
      .. "that yields, on a cosocket), every pass that claims rows asks for one more, which finds nothing due "
      .. "by the probe (one cheap read) and stops; no job runs sooner, later or twice" },
  { file = "csrc/ldispatch.c",
    from = "\tlua_Number secs = limited ? lhwt_check_finite(L, 2) : 0;",
    to = "\tlua_Number secs = limited ? lhwt_check_finite(L, 2) : 1;",
    reason = "secs for a run without a limit: `end` and `left` are made from it, and read only where limited "
      .. "(the loop's break, sleep_ns and idle_ns each test limited first)" },
  { file = "csrc/wheel.c",
    from = "\treturn low < up ? low : up;", to = "\treturn low <= up ? low : up;",
    reason = "where low == up both branches return the same tick" },
  { file = "csrc/wheel.c",
    from = "\tif (n->slot < HWT_SLOT_DUE && !is_due(w, n) && expires > w->now && !is_job_source(w, n->slot) &&",
    to = "\tif (n->slot <= HWT_SLOT_DUE && !is_due(w, n) && expires > w->now && !is_job_source(w, n->slot) &&",
    reason = "a node whose slot is HWT_SLOT_DUE is due (is_due's first test), so !is_due fails for it either way" },
  { file = "lua/hwtimer/retry.lua",
    from = "    count(self, \"retry_succeeded\", true)", to = "    count(self, \"retry_succeeded\", false)",
    reason = "timer:count never raises, on a stopped or a closed timer too (spec/core/09 stops and closes one in "
      .. "a succeeding fn): the pcall around the final counts guards a method that cannot fail" },
  { file = "csrc/larm.c",
    from = "\t\tlua_createtable(L, 0, 4);", to = "\t\tlua_createtable(L, 1, 4);",
    reason = "a size hint (one array slot more): the table of a periodic timeout's options gets its fields set "
      .. "either way" },
  { file = "csrc/ldispatch.c",
    from = "\tif (until <= 0)", to = "\tif (until <= 1)", after = "\tuntil = hwt_worker_time_of(&T->w, next) - hwt_clock_ns();",
    reason = "a gap of exactly 1 ns read as none: gc_idle keeps GC_MARGIN_NS of any gap free, so a 1 ns gap "
      .. "steps nothing either way" },
  { file = "csrc/larm.h",
    from = "\tif (T->nfree < T->free_cap && !T->stopped)", to = "\tif (T->nfree < T->free_cap && T->stopped)",
    reason = "the inline push is lhwt_free_pin's own fast path: with the test turned, a running timer's slot goes "
      .. "through lhwt_free_pin, which pushes it the same, and a stopped timer's is pushed where it was "
      .. "dropped, by a timer that never takes a pin again" },
  { file = "lua/hwtimer/durable/runs.lua",
    from = "    if not pcall(sleep, min(0.5, self._lease / 6)) then return end",
    to = "    if not pcall(sleep, min(0.5, self._lease * 6)) then return end",
    reason = "not shown equivalent, not observable: at an nginx worker's exit with the store out of reach, a "
      .. "failed write is tried again every 0.5 s in place of every sixth of a lease shorter than 3 s, within the "
      .. "same one-lease limit; the same writes are made once the store answers" },
  { file = "lua/hwtimer/durable/redis_batch.lua",
    from = "    g.sema:post(1)", to = "    g.sema:post(2)",
    reason = "a gathering's semaphore is made for its one wait (gather) and waited on once: a second count on it "
      .. "is never taken, since the entry's next wait (wait) makes a semaphore of its own" },
  { file = "csrc/ldispatch.c", from = "\t\tlua_pop(L, 1);", to = "",
    after = "\t\towner = (struct timer *)lua_touserdata(L, -1);",
    reason = "timer:done's owner lookup: the TIMER_FIELD value left on the stack above the metatable (slot 4); "
      .. "every later read uses slot 4 or pushes and reads the top it pushed, and the frame's stack goes at return" },
  { file = "csrc/ldispatch.c",
    from = "\tint64_t until = next == UINT64_MAX ? -1 : hwt_worker_time_of(&T->w, next) - hwt_clock_ns();",
    to = "\tint64_t until = next == UINT64_MAX ? -1 : hwt_worker_time_of(&T->w, next) + hwt_clock_ns();",
    reason = "not shown equivalent, not observable: timer:run then sleeps until the pipe, which the driver "
      .. "writes at the same deadline (timer:run is not host_timed), so every callback still runs in the same "
      .. "order and pass; only one thread hand-off of latency differs, which a spec on a shared VM cannot time" },
  { file = "lua/hwtimer/cron.lua",
    from = "    if not (found and asked <= c and c <= found) then asked, found = c, first_match(self, c) end",
    to = "    if not (found and asked <= c and c < found) then asked, found = c, first_match(self, c) end",
    reason = "a memo of first_match: at c == found the mutant asks first_match(c) again, which gives c, the "
      .. "answer the memo held; only the time to find it differs" },
  { file = "lua/hwtimer/cron.lua",
    from = "    if not (found and found <= c and c <= asked) then asked, found = c, last_match(self, c) end",
    to = "    if not (found and found <= c and c < asked) then asked, found = c, last_match(self, c) end",
    reason = "a memo of last_match: at c == asked the mutant asks last_match(c) again, the question the memo "
      .. "answered: the same answer, found again" },
  { file = "lua/hwtimer/tzif.lua",
    from = "  local off = a and a.off or (list[1] and list[1].before or list.constant)",
    to = "  local off = a and a.off or (list[2] and list[1].before or list.constant)",
    reason = "a is nil only before the window's first change, and rule_year adds a rule's start and end "
      .. "together, so the window's changes come in pairs: list[2] is there whenever list[1] is (tried with "
      .. "rules whose start and end cross from year to year, M3.5.0 against J85-J89: over 40 years every 7 h "
      .. "no offset differs)" },
  { file = "lua/hwtimer/ngx.lua",
    from = "  self.ran = 0 -- callbacks started since the dispatcher last woke",
    to = "  self.ran = 1 -- callbacks started since the dispatcher last woke",
    reason = "the count is read only against ARM_BURST (8) before the first run_due, which sets it to 0 "
      .. "before any callback runs: 1 and 0 are both below 8, so the first wait arms alike" },
  { file = "lua/hwtimer/retry.lua",
    from = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 1, true) then",
    to = "    if message(t):find(\"stopped timer\", 1, false) or message(t):find(\"closed timer\", 1, true) then",
    reason = "\"stopped timer\" has no magic character: found as a pattern or as plain text alike" },
  { file = "lua/hwtimer/retry.lua",
    from = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 1, true) then",
    to = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 1, false) then",
    reason = "\"closed timer\" has no magic character: found as a pattern or as plain text alike (and no "
      .. "timer of ours raises it: a closed one says \"stopped timer\", csrc/lbase.c)" },
  { file = "lua/hwtimer/retry.lua",
    from = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 1, true) then",
    to = "    if message(t):find(\"stopped timer\", 2, true) or message(t):find(\"closed timer\", 1, true) then",
    reason = "the timer's message is \"attempt to use a stopped timer\" (after a position): its \"stopped timer\" "
      .. "starts far past the second byte, found from either" },
  { file = "lua/hwtimer/retry.lua",
    from = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 1, true) then",
    to = "    if message(t):find(\"stopped timer\", 1, true) or message(t):find(\"closed timer\", 2, true) then",
    reason = "no timer of ours raises \"closed timer\" (a closed one says \"attempt to use a stopped timer\", "
      .. "csrc/lbase.c): the second test is there for a timer object of a user's, and decides nothing here" },
  { file = "lua/hwtimer/metrics.lua", from = "      if b < a then a, b = b, a end", to = "      if b <= a then a, b = b, a end",
    reason = "a and b are two different keys of one table (two names that escape alike): never equal, so the "
      .. "two orders of the pair agree" },
  { file = "lua/hwtimer/jobs_cli_text.lua", from = "for k = 1, 64 do B64_VALUE[B64:sub(k, k)] = k - 1 end",
    to = "for k = 2, 64 do B64_VALUE[B64:sub(k, k)] = k - 1 end",
    reason = "only \"A\" is left out, whose value is 0, and unbase64 reads a character it lacks as 0 "
      .. "(`or 0`, for the padding); which characters may appear is its pattern's to say" },
  { file = "lua/hwtimer/durable/schedule.lua", from = "  parsed[key] = c", to = "",
    reason = "the memo of parsed cron expressions: without it each is parsed again, to the same calendar" },
  { file = "lua/hwtimer/durable/schedule.lua", from = "  if hi <= t then return t end", to = "  if hi < t then return t end",
    reason = "at hi == t the calendar's upto(t) is t, the time itself: latest returns t either way" },
  { file = "lua/hwtimer/durable/schedule.lua",
    from = "  if l == nil or l < t then return t end",
    to = "  if l == nil or l <= t then return t end",
    reason = "at l == t both return t" },
  { file = "lua/hwtimer/durable/schedule.lua",
    from = "  local hi = row.stop and row.stop < now and row.stop or now",
    to = "  local hi = row.stop and row.stop <= now and row.stop or now",
    reason = "at stop == now, hi is the same number either way" },
  { file = "lua/hwtimer/durable/schedule.lua",
    from = "    if abs(x - (a + r * every)) < SNAP then return r end",
    to = "    if abs(x - (a + r * every)) <= SNAP then return r end",
    reason = "not shown equivalent, not observable: only a time exactly SNAP (1e-5 s) from the grid differs, and at "
      .. "an epoch's magnitude a double's steps (2.4e-7 s near 2026) make that distance one no clock reads" },
  { file = "lua/hwtimer/retry.lua",
    from = "  if o.max_time and now() + wait > self._started + o.max_time then",
    to = "  if o.max_time and now() + wait >= self._started + o.max_time then",
    reason = "not shown equivalent, not observable: only a next attempt due exactly at the limit, to the clock's "
      .. "last bit, differs" },
  { file = "csrc/larm.c",
    from = "\treturn T->rng * UINT64_C(2685821657736338717);", to = "\treturn T->rng * UINT64_C(2685821657736338718);",
    reason = "another multiplier for the xorshift64* that draws jitter: a different sequence of the same spread, "
      .. "seeded per timer from the clock, which no run of it can tell apart from the documented uniform draw" },
  { file = "csrc/worker.c",
    from = "\treturn d <= 0 ? 0 : (uint64_t)(d / w->tick_ns); /* round down: never early */",
    to = "\treturn d < 0 ? 0 : (uint64_t)(d / w->tick_ns); /* round down: never early */",
    reason = "at d == 0 both branches give 0 (0 / tick_ns)" },
  { file = "csrc/lstats.c", from = "\tunsigned b = 0, k;", to = "\tunsigned b = 1, k;",
    reason = "timer:lateness's cumulative counts without bucket 0, the runs late by 0 ns or less: a run starts "
      .. "after its deadline's nanosecond (dispatch reads the clock after the deadline), so that bucket stays empty" },
  { file = "csrc/ltimer.c", from = "\tif (at <= now && !T->dispatching) {", to = "\tif (at < now && !T->dispatching) {",
    reason = "not shown equivalent, not observable: only a timeout() called in the very nanosecond of the next "
      .. "event differs, and it then answers that nanosecond's wait (0 s) instead of 0" },
  { file = "csrc/driver.c", from = "\tdrv.cv_ready = !err;", to = "\tdrv.cv_ready = err;",
    reason = "not shown equivalent, not observable: the driver's condition variable is then made again at each "
      .. "start of its thread (after every timer stopped), which glibc's pthread_cond_init does without a leak" },
  { file = "csrc/pipe.c", from = "\twhile (send(fd, \"!\", 1, 0) < 0 && errno == EINTR)",
    to = "\twhile (send(fd, \"!\", 1, 0) < 1 && errno == EINTR)",
    reason = "a datagram of one byte is sent whole or not at all: send returns 1 or -1, never 0, so < 0 and < 1 "
      .. "agree" },
  { file = "csrc/pipe.c", from = "\tif (fds[1] >= 0 && fds[1] != fds[0])", to = "\tif (fds[1] >= 1 && fds[1] != fds[0])",
    reason = "fds[1] is never 0: pipe() gives the lowest free descriptor to fds[0] first, so a pipe's write end "
      .. "is above its read end, and an eventfd's is its read end (closed once, as fds[0])" },
  { file = "lua/hwtimer/cron.lua", from = "local SEARCH_YEARS = 100", to = "local SEARCH_YEARS = 101",
    reason = "every expression parse accepts matches at least every 40 years (docs/cron.md): a search ends in a "
      .. "match long before 100 years, or at the end of the epoch range, where one year more finds no time "
      .. "either" },
  { file = "lua/hwtimer/cron.lua", from = "  while y <= limit do", to = "  while y < limit do",
    reason = "every expression parse accepts matches at least every 40 years: the search finds its match long "
      .. "before the 100th year, whose last pass this drops" },
  { file = "lua/hwtimer/cron.lua", from = "    lo, hi = f.lo, f == DOW and 6 or f.hi", to = "    lo, hi = f.lo, f == DOW and 7 or f.hi",
    reason = "a day of week 7 is Sunday, which * already holds as 0: field() folds a set 7 into 0" },
  { file = "lua/hwtimer/cron.lua",
    from = "  if f == DOW and set[7] then set[0], set[7] = true, nil end -- 7 is Sunday too",
    to = "  if f == DOW and set[7] then set[0], set[8] = true, nil end -- 7 is Sunday too",
    reason = "a day of week is looked up only as weekday() gives it, 0-6 (the day-of-week lookup arrays are never "
      .. "read), and the text is made from the items: a 7 left in the set is never read" },
  { file = "lua/hwtimer/cron.lua",
    from = "local ZERO_SECOND = { set = { [0] = true }, nxt = { [0] = 0 }, prv = {} }",
    to = "local ZERO_SECOND = { set = { [1] = true }, nxt = { [0] = 0 }, prv = {} }",
    reason = "a five-field expression's seconds are searched through nxt and prv only; no set but month's, day of "
      .. "month's and day of week's is read" },
  { file = "lua/hwtimer/cron.lua",
    from = "local ZERO_SECOND = { set = { [0] = true }, nxt = { [0] = 0 }, prv = {} }",
    to = "local ZERO_SECOND = { set = { [0] = false }, nxt = { [0] = 0 }, prv = {} }",
    reason = "a five-field expression's seconds are searched through nxt and prv only; no set but month's, day of "
      .. "month's and day of week's is read" },
  { file = "lua/hwtimer/cron.lua", from = "for v = 0, 59 do ZERO_SECOND.prv[v] = 0 end", to = "for v = 0, 60 do ZERO_SECOND.prv[v] = 0 end",
    reason = "a second read back is 0-59: prv[60] is never looked up" },
  { file = "lua/hwtimer/cron.lua", from = "  for m = 1, 12 do", to = "  for m = 1, 13 do",
    reason = "a month 13 is in no set: the loop's last pass finds nothing" },
  { file = "lua/hwtimer/cron.lua",
    from = "    if not MACROS[text] then error({ string.format(\"cron: unknown macro '%s'\", text) }, 0) end",
    to = "    if not MACROS[text] then error({ string.format(\"cron: unknown macro '%s'\", text) }, 1) end",
    reason = "the error value is a table: error's level only prefixes a position to a string message" },
  { file = "lua/hwtimer/cron.lua",
    from = "    error({ string.format(\"cron: 5 or 6 fields expected, got %d\", #parts) }, 0)",
    to = "    error({ string.format(\"cron: 5 or 6 fields expected, got %d\", #parts) }, 1)",
    reason = "the error value is a table: error's level only prefixes a position to a string message" },
  { file = "csrc/larm.h", from = "\tlua_pop(L, 1);", to = "", after = "\tlhwt_flush_cancelled(L, T, lua_gettop(L));",
    reason = "lhwt_flush_timer's callers (take, stats, stop, timeout, wake_arm) read the stack by absolute index "
      .. "below it or return the values they push after it, counted from the top: the handle metatable left "
      .. "above goes with their C frame" },
  { file = "lua/hwtimer/durable/redis_wake.lua", from = "    if fd and fd >= 0 then pcall(cqueues.cancel, fd) end",
    to = "    if fd or fd >= 0 then pcall(cqueues.cancel, fd) end",
    reason = "luasocket's getfd is never nil (-1 once closed): the mutant also cancels -1 in cqueues, inside a pcall, "
      .. "which matches no descriptor" },
  { file = "lua/hwtimer/durable/redis_batch.lua", from = "  if ngx.now() - self.since < M.WAIT then",
    to = "  if ngx.now() - self.since <= M.WAIT then",
    reason = "not shown equivalent, not observable: only a wait that ends exactly M.WAIT after the round trip "
      .. "began, to nginx's millisecond, differs" },
  { file = "csrc/durable/lwatch.c", from = "\t(void)path;", to = "",
    reason = "the stub open_watch of a system without inotify (#else of __linux__): not built on the Linux that "
      .. "builds and runs this, so the mutant is the same program here" },
  { file = "lua/hwtimer/durable/redis.lua",
    from = "  if next_ready == 0 or next_ready / 1e6 >= hi then return nil end",
    to = "  if next_ready == 0 or next_ready / 1e6 > hi then return nil end",
    reason = "not shown equivalent, not observable: only a ready time whose microseconds divided by 1e6 equal the "
      .. "window's end exactly, in doubles, differs (it is then loaded by the next refill instead)" },
  { file = "lua/hwtimer/durable/window.lua", from = "  if self._closed or cancelled(t) then return end",
    to = "  if self._closed and cancelled(t) then return end", after = "local function fire(t, self, key, ready)",
    reason = "not shown equivalent, not observable: a closed queue's pass returns at once, and a window timeout "
      .. "called cancelled (an nginx worker's exit) then makes a pass whose claim, with the timer stopped, hands "
      .. "its rows back unstarted, attempts as they were: one more round trip to the store at exit" },
  { file = "lua/hwtimer/durable/redis_client.lua", from = "  if ok and core.now then", to = "  if ok or core.now then",
    reason = "with the module, ok and core.now are both true; without it, core is pcall's message, a string, and "
      .. "a string's .now looks in the string library, where there is none: false either way" },
  { file = "csrc/compat.h", from = "\tidx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;",
    to = "\tidx = idx <= 0 ? lua_gettop(L) + idx + 1 : idx;",
    reason = "5.1's stand-in for lua_absindex: no caller passes 0, which is no stack index at all" },
  { file = "csrc/wheel.c", from = "\t\ti = first_from(w, ring, i + 1);", to = "\t\ti = first_from(w, ring, i + 2);",
    after = "\tif (i != NO_SLOT && job_active(w, lvl) && w->jobs[lvl].src == slot_of(w, ring, i))",
    reason = "span_event skips the slot a drain job empties; the slot after it enters its span later than that "
      .. "slot's own span starts, which the job's deadline (upper_next takes it too) does not pass: the mutant "
      .. "skips one more slot whose event never wins" },
  { file = "lua/hwtimer/ngx.lua", from = "  return (math.max(1, ms) + 0.5) / 1000",
    to = "  return (math.max(2, ms) + 0.5) / 1000",
    reason = "not shown equivalent, not observable: the dispatcher's shortest sleep on nginx's millisecond "
      .. "timers 2 ms in place of 1, where the wake socket (or a shorter deadline's datagram) wakes it first" },
  { file = "lua/hwtimer/ngx.lua", from = "    until self.took >= gen or not posted or now() >= limit",
    to = "    until self.took >= gen or not posted or now() > limit",
    reason = "not shown equivalent, not observable: only a handover wait that reads the clock exactly at its "
      .. "0.1 s limit differs" },
  { file = "csrc/ldispatch.c", from = "\tlua_pop(L, 1);", to = "\tlua_pop(L, 2);",
    after = "\t}",
    reason = "check_run_opts' last pop, of the gc_step value: its one caller, timer:run, sets the stack to its "
      .. "first slot (lua_settop(L, 1)) as soon as it returns, so popping the options table too changes nothing" },
}
