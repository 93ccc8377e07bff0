-- run.lua: one workload on one Lua-side system, in this process; prints one
-- line of key=value figures. bench/bench.lua runs it many times.
--
-- usage: lua5.4 bench/run.lua SYSTEM WORKLOAD [scale]
--   SYSTEM   hwtimer | luv | heap
--   WORKLOAD w1 | w2b | w2c | w3 | w4
--   scale    1 for the full sizes, smaller for bench-quick (e.g. 0.1)
local hwtimer = require("hwtimer")
local clock = hwtimer.now -- the one clock of the harness, for every system

local SYSTEM, WORKLOAD = arg[1], arg[2]
local SCALE = tonumber(arg[3]) or 1
local SEED = 20261121

-- ---- process figures ----------------------------------------------------------

local function rss_bytes()
  local f = assert(io.open("/proc/self/statm"))
  local _, resident = f:read("n", "n")
  f:close()
  return resident * 4096
end

local function full_gc()
  collectgarbage()
  collectgarbage()
end

local function read_file(path)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s
end

-- The threads of this process, listed once (listing forks a process, which
-- would itself count as a wake-up inside the measured window).
local function thread_dirs()
  local pid = read_file("/proc/self/stat"):match("^(%d+)")
  local p = io.popen("ls /proc/" .. pid .. "/task")
  local dirs = {}
  for tid in p:read("*a"):gmatch("%d+") do dirs[#dirs + 1] = "/proc/" .. pid .. "/task/" .. tid end
  p:close()
  return dirs, pid
end

-- Voluntary context switches of every thread, and CPU seconds of the process.
local function wakeups_and_cpu(dirs, pid)
  local total = 0
  for _, d in ipairs(dirs) do
    total = total + tonumber(read_file(d .. "/status"):match("\nvoluntary_ctxt_switches:%s*(%d+)"))
  end
  local stat = read_file("/proc/" .. pid .. "/stat")
  local fields = {}
  for x in stat:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = x end
  return total, (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- utime, stime
end

-- ---- the systems ------------------------------------------------------------
-- Each system gives: schedule_range / cancel_range (tight native loops),
-- schedule(delay, cb) for the other workloads, loop(pred, max_secs) to run
-- its event loop until pred() holds, and idle(secs).

local systems = {}

function systems.hwtimer()
  local timer = hwtimer.new({ tick = 0.001 })
  local s = {}
  function s.schedule_range(delays, hs, cb, i, j)
    for k = i, j do hs[k] = timer:schedule(delays[k], cb) end
  end
  function s.cancel_range(hs, i, j)
    for k = i, j do hs[k]:cancel() end
  end
  function s.schedule(delay, cb) return timer:schedule(delay, cb) end
  function s.cancel(h) h:cancel() end
  function s.loop(pred, max_secs)
    local limit = clock() + max_secs
    while not pred() and clock() < limit do timer:run(0.05) end
  end
  function s.idle(secs) timer:run(secs) end
  return s
end

function systems.luv()
  local uv = require("luv")
  local s = {}
  local function fire(t) t:close() end
  function s.schedule_range(delays, hs, cb, i, j)
    for k = i, j do
      local t = uv.new_timer()
      t:start(math.ceil(delays[k] * 1000), 0, cb)
      hs[k] = t
    end
  end
  function s.cancel_range(hs, i, j)
    for k = i, j do local t = hs[k]; t:stop(); t:close() end
  end
  function s.schedule(delay, cb)
    local t = uv.new_timer()
    uv.update_time() -- luv measures from its cached loop time: keep it fresh
    -- (a delay gone negative, when scheduling ran late, is due now: luv takes
    -- its milliseconds unsigned, and -1 would never fire)
    t:start(math.max(0, math.ceil(delay * 1000)), 0, function() cb(t); fire(t) end)
    return t
  end
  function s.cancel(t) t:stop(); t:close() end
  function s.loop(pred, max_secs)
    local limit = clock() + max_secs
    while not pred() and clock() < limit do uv.run("once") end
  end
  function s.idle(secs)
    local stop = uv.new_timer()
    stop:start(math.floor(secs * 1000), 0, function() stop:close(); uv.stop() end)
    uv.run()
  end
  function s.settle() uv.run("nowait") end -- let closed handles be freed
  return s
end

function systems.heap()
  local Heap = dofile((arg[0]:match("^(.*)/") or ".") .. "/lheap.lua")
  local socket = require("socket")
  local h = Heap.new(clock)
  local s = {}
  function s.schedule_range(delays, hs, cb, i, j)
    for k = i, j do hs[k] = h:schedule(delays[k], cb) end
  end
  function s.cancel_range(hs, i, j)
    for k = i, j do h:cancel(hs[k]) end
  end
  function s.schedule(delay, cb) return h:schedule(delay, cb) end
  function s.cancel(e) h:cancel(e) end
  function s.loop(pred, max_secs)
    local limit = clock() + max_secs
    while not pred() and clock() < limit do
      h:dispatch()
      local t = h:timeout()
      if t and t > 0 then socket.sleep(math.min(t, 0.05)) end
    end
  end
  function s.idle(secs)
    local limit = clock() + secs
    while clock() < limit do
      h:dispatch()
      socket.sleep(math.min(h:timeout() or secs, limit - clock()))
    end
  end
  return s
end

-- ---- the workloads ------------------------------------------------------------

local function uniform_delays(n, lo, hi)
  math.randomseed(SEED)
  local d = {}
  for i = 1, n do d[i] = lo + math.random() * (hi - lo) end
  return d
end

local function noop() end

local workloads = {}

-- W1 churn: schedule N (delays uniform in [1, 60] s), then cancel them all.
-- Memory comes from the first round (the larger of the RSS's and the Lua
-- heap's growth after a full GC, the harness's own
-- handle array preallocated beforehand); times from a second round, so every
-- system runs on a warm allocator rather than on the kernel's page faults.
function workloads.w1(sys)
  local n = math.floor(1000000 * SCALE)
  local delays = uniform_delays(n, 1, 60)
  local hs = {}
  for i = 1, n do hs[i] = false end
  full_gc()
  local rss0, heap0 = rss_bytes(), collectgarbage("count") * 1024
  sys.schedule_range(delays, hs, noop, 1, n)
  full_gc()
  -- the larger of the RSS's growth and the Lua heap's (issue 43): memory
  -- the allocator kept from before counts in the heap, not in the RSS
  local bytes = math.max(rss_bytes() - rss0, collectgarbage("count") * 1024 - heap0) / n
  sys.cancel_range(hs, 1, n)
  if sys.settle then sys.settle() end
  for i = 1, n do hs[i] = false end
  full_gc()
  local t0 = clock()
  sys.schedule_range(delays, hs, noop, 1, n)
  local t1 = clock()
  full_gc()
  local t2 = clock()
  sys.cancel_range(hs, 1, n)
  local t3 = clock()
  return string.format("schedule_ns=%.1f cancel_ns=%.1f bytes=%.1f",
    (t1 - t0) / n * 1e9, (t3 - t2) / n * 1e9, bytes)
end

-- W1 cut after step HWT_W1_STEP, for bench/instructions.lua, which counts
-- each cut run's instructions: 0 is the set-up and a warm round, 1 adds the
-- n schedules, 2 a full collection, 3 the n cancels. A schedule is 1 - 0, a
-- cancel 3 - 2, the collector's incremental work during each loop included
-- (as in W1's times), the full collection between them in neither.
function workloads.w1cut(sys)
  local step = tonumber(os.getenv("HWT_W1_STEP")) or 3
  local n = math.floor(1000000 * SCALE)
  local delays = uniform_delays(n, 1, 60)
  local hs = {}
  for i = 1, n do hs[i] = false end
  sys.schedule_range(delays, hs, noop, 1, n)
  sys.cancel_range(hs, 1, n)
  if sys.settle then sys.settle() end
  for i = 1, n do hs[i] = false end
  full_gc()
  if step >= 1 then sys.schedule_range(delays, hs, noop, 1, n) end
  if step >= 2 then full_gc() end
  if step >= 3 then sys.cancel_range(hs, 1, n) end
  return string.format("step=%d n=%d", step, n)
end

-- Sorted lateness samples -> the figures, and a quantile file for the plot.
local function lateness_report(late, name)
  table.sort(late)
  local function q(p) return late[math.max(1, math.ceil(#late * p))] * 1000 end
  local out = os.getenv("HWT_BENCH_OUT")
  if out and name then
    local f = assert(io.open(out .. "/w2b_" .. name .. ".dat", "w"))
    for i = 0, 1000 do f:write(string.format("%.5f %.4f\n", q(i / 1000), i / 10)) end
    f:close()
  end
  return string.format("late_min_ms=%.3f late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f",
    q(0), q(0.5), q(0.99), q(1))
end

-- W2b lateness: N timeouts, delays uniform in [1, 2] s, run until all fired.
-- The intended deadline is read right before each schedule call, after the
-- harness has made its callback (making it may run a step of the GC).
function workloads.w2b(sys)
  local n = math.floor(200000 * SCALE)
  local delays = uniform_delays(n, 1, 2)
  local late, due, fired = {}, {}, 0
  for i = 1, n do late[i], due[i] = 0, 0 end -- preallocated: no growth in callbacks
  for i = 1, n do
    local cb = function()
      fired = fired + 1
      late[fired] = clock() - due[i]
    end
    due[i] = clock() + delays[i]
    sys.schedule(delays[i], cb)
  end
  sys.loop(function() return fired == n end, 30)
  assert(fired == n, "not every timeout fired")
  return lateness_report(late, SYSTEM)
end

-- W2c burst: N timeouts all due at one instant 0.5 s ahead; callbacks/second.
function workloads.w2c(sys)
  local n = math.floor(200000 * SCALE)
  local at = clock() + 0.5
  local fired, first, last = 0, nil, nil
  local function cb()
    fired = fired + 1
    if fired == 1 then first = clock() elseif fired == n then last = clock() end
  end
  for _ = 1, n do sys.schedule(at - clock(), cb) end
  sys.loop(function() return fired == n end, 30)
  assert(fired == n, "not every timeout fired")
  return string.format("callbacks_per_s=%.0f", (n - 1) / (last - first))
end

-- W3 idle: one timeout 60 s ahead and nothing else, for a window.
function workloads.w3(sys)
  local window = 5 * math.min(1, SCALE * 10)
  sys.schedule(60, noop)
  sys.idle(0.05)
  local dirs, pid = thread_dirs()
  local w0, c0 = wakeups_and_cpu(dirs, pid)
  local t0 = clock()
  sys.idle(window)
  local w1, c1 = wakeups_and_cpu(dirs, pid)
  local secs = clock() - t0
  -- the loop's own return at the end of the window is one wake-up: not counted
  return string.format("wakeups_per_s=%.2f cpu_pct=%.2f threads=%d",
    math.max(0, w1 - w0 - 1) / secs, (c1 - c0) / secs * 100, #dirs)
end

-- W4 growth: with P pending, the cost of one cancel (oldest) + schedule pair.
-- Two passes of pairs, one ring: the first on a heap still growing (every
-- system's new handles land on fresh pages, ~20 first-touch faults a 1,000
-- pairs, whose cost on this VM swings from process to process between ~1
-- and ~13 us each), reported apart as pair_cold_ns; then a full collection
-- frees that pass's cancelled handles, and the second pass, W4's figure,
-- runs on a warm allocator, as W1's second round does and as a server at a
-- steady P does.
function workloads.w4(sys)
  local sizes = SCALE >= 1 and { 1e3, 1e5, 1e6, 4e6 } or { 1e3, 1e4, 1e5 }
  local pairs_n = math.floor(200000 * math.min(1, SCALE * 5))
  local parts = {}
  for _, p in ipairs(sizes) do
    local total = p + 2 * pairs_n
    local delays = uniform_delays(total, 1, 60)
    local hs = {} -- preallocated, as in W1: no rehash of a 4M-slot array inside the loop
    for i = 1, total do hs[i] = false end
    sys.schedule_range(delays, hs, noop, 1, p)
    local function pass(from) -- a ring: the oldest is p behind the newest
      local t0 = clock()
      for k = from, from + pairs_n - 1 do
        sys.cancel_range(hs, k, k)
        sys.schedule_range(delays, hs, noop, p + k, p + k)
        hs[k] = false
      end
      return (clock() - t0) / pairs_n * 1e9
    end
    local cold = pass(1)
    if sys.settle then sys.settle() end
    full_gc()
    local warm = pass(pairs_n + 1)
    sys.cancel_range(hs, 2 * pairs_n + 1, total)
    if sys.settle then sys.settle() end
    hs = nil
    full_gc()
    parts[#parts + 1] = string.format("pair_ns_%d=%.1f pair_cold_ns_%d=%.1f", p, warm, p, cold)
  end
  return table.concat(parts, " ")
end

local make = assert(systems[SYSTEM], "unknown system " .. tostring(SYSTEM))
local work = assert(workloads[WORKLOAD], "unknown workload " .. tostring(WORKLOAD))
print(string.format("system=%s workload=%s %s", SYSTEM, WORKLOAD, work(make())))
os.exit(0) -- skip closing a large state: figures are already out
