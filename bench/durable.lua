-- bench/durable.lua: what hwtimer.durable costs, one line per figure (SQLite, then Redis).
--   lua bench/durable.lua [scale] [dir]
-- scale 1 (default): 20,000 schedules one at a time, 200,000 in one batch,
-- 20,000 jobs due in 1-2 s for lateness, 10^6 stored far jobs for RSS, 10^5
-- overdue jobs for the catch-up. It writes the store's schema to
-- DIR/durable_schema.sql for bench/sqlite_floor.c (the Makefile runs it next).
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local sqlite = require("hwtimer.sqlite")

local wall = sqlite.now
local mode = arg[1]

local function rss_kb()
  local f = io.open("/proc/self/status")
  local kb = f:read("*a"):match("VmRSS:%s*(%d+)")
  f:close()
  return tonumber(kb)
end

-- A child of this script: open a store of far jobs and report the RSS it cost.
if mode == "rss" then
  local timer = hwtimer.new()
  collectgarbage()
  collectgarbage()
  local before = rss_kb()
  local q = assert(durable.open(timer, { path = arg[2] }))
  q:handle("far", function() end)
  timer:run(0.5)
  collectgarbage()
  print(rss_kb() - before, q:pending(), timer:pending())
  q:close()
  return
end

-- A child of this script: a process that runs the queue `prefix` (it
-- polls every 10 ms, moving the intake in) for `secs` seconds.
if mode == "poller" then
  local redis = require("spec.nginx").redis_lua()
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { redis = redis.connect("127.0.0.1", tonumber(arg[2])), prefix = arg[3],
    poll = 0.01 }))
  q:handle("far", function() end)
  io.stdout:write("polling\n")
  io.stdout:flush()
  timer:run(tonumber(arg[4]))
  q:close()
  return
end

local scale = tonumber(mode or "1")
local dir = arg[2] or "build/c"
os.execute("mkdir -p '" .. dir .. "'")
local n_one, n_batch = math.floor(20000 * scale), math.floor(200000 * scale)
local n_late, n_far, n_over = math.floor(20000 * scale), math.floor(1000000 * scale), math.floor(100000 * scale)

local schema = assert(io.open(dir .. "/durable_schema.sql", "w"))
schema:write(require("hwtimer.durable.sqlite").SCHEMA)
schema:close()

local function fresh(name)
  local path = dir .. "/" .. name
  for _, suffix in ipairs({ "", "-wal", "-shm" }) do os.remove(path .. suffix) end
  return path
end

local function pct(sorted, p)
  return sorted[math.max(1, math.ceil(#sorted * p))]
end

-- One line of lateness figures (samples in seconds, sorted here).
local function lateness_line(label, late)
  table.sort(late)
  print(string.format("%s lateness of %d jobs due in 1-2 s: p50 %.2f ms, p99 %.2f ms, max %.2f ms, early %d",
    label, #late, pct(late, 0.5) * 1e3, pct(late, 0.99) * 1e3, late[#late] * 1e3, late[1] < 0 and 1 or 0))
end

-- The catch-up after a restart: reopen() opens the queue that holds n
-- overdue jobs of kind "over" on `timer`; they all run with a 1 ms beat
-- beside them (its longest gap is the loop's longest pause). Returns the
-- queue, still open.
local function catch_up(label, timer, reopen, n)
  local ran, gap, last = 0, 0, nil
  local beat = timer:every(0.001, function()
    local t = hwtimer.now()
    if last and t - last > gap then gap = t - last end
    last = t
  end)
  local t0 = hwtimer.now()
  local q = reopen()
  q:handle("over", function() ran = ran + 1 end)
  -- Counted by the handler, not by q:pending() each turn: with SQLite that
  -- is a count(*) over the rows left, a large part of the loop at 10^5.
  while ran < n and hwtimer.now() - t0 < 60 do timer:run(0.01) end
  local secs = hwtimer.now() - t0
  beat:cancel()
  print(string.format("%s catch-up after a restart: %.0f jobs/s (%d overdue jobs in %.2f s, %d left stored; " ..
    "longest gap of a 1 ms beat %.1f ms)", label, ran / secs, ran, secs, q:pending(), gap * 1e3))
  return q
end

local lua = _VERSION .. (jit and " (" .. jit.version .. ")" or "")
print(string.format("== hwtimer.durable on %s, SQLite %s", lua, sqlite.sqlite_version))

-- HWT_BENCH_ONLY=redis: the Redis rows alone.
local sqlite_rows = os.getenv("HWT_BENCH_ONLY") ~= "redis"

-- Schedules per second: one commit each, then all in one batch.
if sqlite_rows then
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { path = fresh("bench_schedule.db") }))
  local t0 = hwtimer.now()
  for _ = 1, n_one do assert(q:schedule("far", 3600)) end
  local one = n_one / (hwtimer.now() - t0)
  print(string.format("durable schedules one at a time (a commit each, sync normal): %.0f /s  (%d jobs)", one, n_one))
  t0 = hwtimer.now()
  assert(q:batch(function(b)
    for _ = 1, n_batch do b:schedule("far", 3600) end
  end))
  print(string.format("durable schedules batched (q:batch, one commit): %.0f /s  (%d jobs)", n_batch / (hwtimer.now() - t0), n_batch))
  q:close()
  timer:close()
end

-- Lateness of jobs due in 1-2 s, from the due time (wall clock) to the handler.
if sqlite_rows then
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { path = fresh("bench_late.db") }))
  local late = {}
  q:handle("soon", function(job) late[#late + 1] = wall() - job.due end)
  assert(q:batch(function(b)
    for i = 1, n_late do b:schedule("soon", 1 + i / n_late) end
  end))
  local limit = hwtimer.now() + 10
  while #late < n_late and hwtimer.now() < limit do timer:run(0.05) end
  lateness_line("durable", late)
  q:close()
  timer:close()
end

-- RSS of a process that opens a store of 10^6 jobs due over a year.
if sqlite_rows then
  local timer = hwtimer.new()
  local path = fresh("bench_far.db")
  local q = assert(durable.open(timer, { path = path }))
  local now = wall()
  local year = 365 * 86400
  assert(q:batch(function(b)
    for i = 1, n_far do b:at("far", now + 3600 + i * year / n_far) end
  end))
  q:close()
  timer:close()
  local lua_bin = os.getenv("HWT_LUA") or "lua5.4"
  local p = io.popen(string.format("%s bench/durable.lua rss '%s'", lua_bin, path))
  local out = p:read("*a")
  p:close()
  local growth, pending, wheel = out:match("(%-?%d+)%s+(%d+)%s+(%d+)")
  local size = io.open(path):seek("end")
  print(string.format("durable RSS growth opening %s stored far jobs: %.1f MB (%s timeouts in the wheel; file %.0f MB)",
    pending, tonumber(growth) / 1024, wheel, size / 1048576))
end

-- Catch-up: open a store with 10^5 overdue jobs and run them all.
if sqlite_rows then
  local timer = hwtimer.new()
  local path = fresh("bench_over.db")
  local q = assert(durable.open(timer, { path = path }))
  local now = wall()
  assert(q:batch(function(b)
    for i = 1, n_over do b:at("over", now - 3600 + i * 0.001) end
  end))
  q:close()
  -- (SQLite's floor under the catch-up is bench/sqlite_floor.c's last line.)
  q = catch_up("durable", timer, function() return assert(durable.open(timer, { path = path })) end, n_over)
  q:close()
  timer:close()
end

for _, name in ipairs({ "bench_schedule.db", "bench_late.db", "bench_far.db", "bench_over.db" }) do fresh(name) end

---------------------------------------------------------------------------
-- The Redis engine, on a redis-server of its own (loopback, no persistence,
-- stopped by its pid), through redis-lua: the same rows, plus Redis's memory
-- per job and the pickup of a job another process scheduled.
---------------------------------------------------------------------------

local have_N, N = pcall(require, "spec.nginx")
local redis = have_N and N.redis_lua()
if not (redis and os.execute("command -v redis-server >/dev/null 2>&1")) then
  print("durable (Redis): skipped, needs redis-server, luasocket and redis-lua (Debian lua-redis)")
  return
end

local server = N.start_redis()
local function connect() return redis.connect("127.0.0.1", server.port) end
local function connect_unix() return redis.connect("unix://" .. server.socket) end
local ok, err = pcall(function()
  local admin = connect()
  local version = admin:info("server").server.redis_version
  print(string.format("== hwtimer.durable (Redis engine) on %s, Redis %s, redis-lua, loopback", lua, version))

  local function used_memory() return tonumber(admin:info("memory").memory.used_memory) end
  local function ready_wait(timer, done, secs)
    local limit = hwtimer.now() + secs
    while not done() and hwtimer.now() < limit do timer:run(0.02) end
  end

  -- Schedules per second: a call each (an RPUSH to the intake), then q:batch of 1,000 (one
  -- call each). One at a time, beside its floor: round trips of the same
  -- client with the least a script can do (read TIME); over loopback TCP,
  -- then over the server's unix socket. The two alternate, ten rounds of
  -- a tenth each (the machine is shared and noisy): medians, their ratio.
  -- The schedules' figure includes moving the intake into the buckets and
  -- slots (no other process polls this queue: the scheduler does it, once
  -- in INTAKE_MAX schedules).
  local function median(t)
    table.sort(t)
    return #t % 2 == 1 and t[(#t + 1) / 2] or (t[#t / 2] + t[#t / 2 + 1]) / 2
  end
  -- `rounds` rounds of `per` schedules on q and as many bare round trips
  -- on its client c, alternated: the medians of each (per second).
  local function alternated(q, c, rounds, per)
    local sha = c:script("load", "return redis.call('TIME')")
    local ours, floor_ = {}, {}
    for r = 1, rounds do
      local t0 = hwtimer.now()
      for _ = 1, per do assert(q:schedule("far", 3600)) end
      ours[r] = per / (hwtimer.now() - t0)
      t0 = hwtimer.now()
      for _ = 1, per do c:evalsha(sha, 0) end
      floor_[r] = per / (hwtimer.now() - t0)
    end
    return median(ours), median(floor_)
  end
  do
    local timer = hwtimer.new()
    local q
    local rounds, per = 10, math.floor(n_one / 10)
    for _, via in ipairs({ { "TCP", connect }, { "unix socket", connect_unix } }) do
      local c = via[2]()
      q = assert(durable.open(timer, { redis = c, prefix = "bench_schedule" }))
      local o, f = alternated(q, c, rounds, per)
      print(string.format("durable (Redis) schedules one at a time (an RPUSH each, %s): %.0f /s  (%d jobs)",
        via[1], o, rounds * per))
      print(string.format("floor (Redis): round trips of redis-lua, EVALSHA of a script that reads TIME, one at a time, %s: %.0f /s",
        via[1], f))
      print(string.format("durable (Redis) one at a time vs its floor, %s: %.0f %% (medians of %d alternated rounds; " ..
        "target 90 %%: %s)", via[1], 100 * o / f, rounds, o >= 0.9 * f and "met" or "missed"))
      q:close()
    end
    -- The same over TCP with another process polling the queue (as its
    -- workers do), which moves the intake in: the scheduler's round trip
    -- alone beside its floor.
    do
      local c = connect()
      q = assert(durable.open(timer, { redis = c, prefix = "bench_polled" }))
      local lua_bin = os.getenv("HWT_LUA") or "lua5.4"
      local poller = io.popen(string.format("%s bench/durable.lua poller %d bench_polled %d", lua_bin, server.port,
        math.ceil(n_one / 2000) + 5))
      assert(poller:read("*l") == "polling")
      local o, f = alternated(q, c, rounds, per)
      print(string.format("durable (Redis) schedules one at a time, another process polling the queue (TCP): %.0f /s " ..
        "beside its floor %.0f /s: %.0f %% (target 90 %%: %s)", o, f, 100 * o / f, o >= 0.9 * f and "met" or "missed"))
      q:close()
      poller:close()
    end
    q = assert(durable.open(timer, { redis = connect(), prefix = "bench_schedule" }))
    local t0 = hwtimer.now()
    for _ = 1, n_batch / 1000 do
      assert(q:batch(function(b)
        for _ = 1, 1000 do b:schedule("far", 3600) end
      end))
    end
    print(string.format("durable (Redis) schedules batched (q:batch of 1,000, one script call each): %.0f /s  (%d jobs)",
      n_batch / (hwtimer.now() - t0), n_batch))
    q:close()
    timer:close()
    admin:flushall()
  end

  -- Lateness of jobs due in 1-2 s: from the due time (the server's clock,
  -- as the engine tracks it) to the handler.
  do
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = connect(), prefix = "bench_late" }))
    local engine, late = durable.engine(q), {}
    q:handle("soon", function(job) late[#late + 1] = engine:now() - job.due end)
    for c = 0, n_late / 1000 - 1 do
      assert(q:batch(function(b)
        for i = c * 1000 + 1, c * 1000 + 1000 do b:schedule("soon", 1 + i / n_late) end
      end))
    end
    ready_wait(timer, function() return #late >= n_late end, 10)
    lateness_line("durable (Redis)", late)
    q:close()
    timer:close()
    admin:flushall()
  end

  -- Redis's memory per stored job: 10^5 far jobs with a 10-byte payload.
  do
    local n = math.floor(100000 * scale)
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = connect(), prefix = "bench_mem" }))
    local before = used_memory()
    for c = 0, n / 1000 - 1 do
      assert(q:batch(function(b)
        for i = c * 1000 + 1, c * 1000 + 1000 do b:schedule("far", 3600 + i, "order-" .. (1000 + i % 9000)) end
      end))
    end
    local after = used_memory()
    -- MEMORY USAGE of the keys: the jobs' buckets, the kind's slots and index
    local function usage(pattern)
      return admin:eval([[
        local n, keys = 0, 0
        for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
          n, keys = n + redis.call('MEMORY', 'USAGE', k, 'SAMPLES', 0), keys + 1
        end
        return { n, keys }]], 0, pattern)
    end
    local buckets, slots = usage("{bench_mem:default}9:j:*"), usage("{bench_mem:default}9:r:*")
    print(string.format("durable (Redis) memory per stored job (%d jobs, ids it made, 10-byte payloads): " ..
      "%.0f B by INFO used_memory (MEMORY USAGE: %.0f B in %d job buckets and blocks + %.0f B in %d slots of the kind)",
      n, (after - before) / n, buckets[1] / n, buckets[2], slots[1] / n, slots[2]))
    q:close()
    timer:close()
    admin:flushall()
  end

  -- Catch-up: open a queue with 10^5 overdue jobs and run them all.
  do
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = connect(), prefix = "bench_over" }))
    local now = durable.engine(q):now()
    for c = 0, n_over / 1000 - 1 do
      assert(q:batch(function(b)
        for i = c * 1000 + 1, c * 1000 + 1000 do b:at("over", now - 3600 + i * 0.001) end
      end))
    end
    q:close()
    q = catch_up("durable (Redis)", timer, function()
      return assert(durable.open(timer, { redis = connect(), prefix = "bench_over" }))
    end, n_over)
    q:close()
    timer:close()
    admin:flushall()
  end

  -- Pickup: jobs another process schedules (its own client, its own queue
  -- object), due in 0.2 s (inside the window) and due at once (delay 0).
  do
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = connect(), prefix = "bench_pick" }))
    local other = assert(durable.open(timer, { redis = connect(), prefix = "bench_pick" }))
    local engine = durable.engine(q)
    local function run(delay, count)
      local late = {}
      q:handle("pick", function(job) late[#late + 1] = engine:now() - job.due end)
      for i = 1, count do
        other:schedule("pick", delay)
        ready_wait(timer, function() return #late >= i end, 2)
        timer:run(0.003 * (i % 7)) -- scheduled at a random point of the poll's period
      end
      table.sort(late)
      return late
    end
    local soon = run(0.2, 100)
    local now = run(0, 200)
    print(string.format("durable (Redis) pickup of another process's jobs (poll 0.05 s): due in 0.2 s late p50 %.2f ms, " ..
      "p99 %.2f ms; due at once late p50 %.1f ms, p99 %.1f ms, max %.1f ms", pct(soon, 0.5) * 1e3,
      pct(soon, 0.99) * 1e3, pct(now, 0.5) * 1e3, pct(now, 0.99) * 1e3, now[#now] * 1e3))
    q:close()
    other:close()
    timer:close()
  end
end)
server.stop()
if not ok then error(err, 0) end
