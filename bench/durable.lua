-- bench/durable.lua: what hwtimer.durable (SQLite engine) costs, one line per figure.
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

local scale = tonumber(mode or "1")
local dir = arg[2] or "build/c"
os.execute("mkdir -p '" .. dir .. "'")
local n_one, n_batch = math.floor(20000 * scale), math.floor(200000 * scale)
local n_late, n_far, n_over = math.floor(20000 * scale), math.floor(1000000 * scale), math.floor(100000 * scale)

local f = assert(io.open(dir .. "/durable_schema.sql", "w"))
f:write(durable.SCHEMA)
f:close()

local function fresh(name)
  local path = dir .. "/" .. name
  for _, suffix in ipairs({ "", "-wal", "-shm" }) do os.remove(path .. suffix) end
  return path
end

local function pct(sorted, p)
  return sorted[math.max(1, math.ceil(#sorted * p))]
end

local lua = _VERSION .. (jit and " (" .. jit.version .. ")" or "")
print(string.format("== hwtimer.durable on %s, SQLite %s", lua, sqlite.sqlite_version))

-- Schedules per second: one commit each, then all in one batch.
do
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
do
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { path = fresh("bench_late.db") }))
  local late = {}
  q:handle("soon", function(job) late[#late + 1] = wall() - job.due end)
  assert(q:batch(function(b)
    for i = 1, n_late do b:schedule("soon", 1 + i / n_late) end
  end))
  local limit = hwtimer.now() + 10
  while #late < n_late and hwtimer.now() < limit do timer:run(0.05) end
  table.sort(late)
  print(string.format("durable lateness of %d jobs due in 1-2 s: p50 %.2f ms, p99 %.2f ms, max %.2f ms, early %d",
    #late, pct(late, 0.5) * 1e3, pct(late, 0.99) * 1e3, late[#late] * 1e3, late[1] < 0 and 1 or 0))
  q:close()
  timer:close()
end

-- RSS of a process that opens a store of 10^6 jobs due over a year.
do
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
do
  local timer = hwtimer.new()
  local path = fresh("bench_over.db")
  local q = assert(durable.open(timer, { path = path }))
  local now = wall()
  assert(q:batch(function(b)
    for i = 1, n_over do b:at("over", now - 3600 + i * 0.001) end
  end))
  q:close()
  local ran, gap, last = 0, 0, nil
  local beat = timer:every(0.001, function()
    local t = hwtimer.now()
    if last and t - last > gap then gap = t - last end
    last = t
  end)
  local t0 = hwtimer.now()
  q = assert(durable.open(timer, { path = path }))
  q:handle("over", function() ran = ran + 1 end)
  while q:pending() > 0 and hwtimer.now() - t0 < 60 do timer:run(0.01) end
  local secs = hwtimer.now() - t0
  beat:cancel()
  print(string.format("durable catch-up after a restart: %.0f jobs/s (%d overdue jobs in %.2f s; longest gap of a 1 ms beat %.1f ms)",
    ran / secs, ran, secs, gap * 1e3))
  q:close()
  timer:close()
end

for _, name in ipairs({ "bench_schedule.db", "bench_late.db", "bench_far.db", "bench_over.db" }) do fresh(name) end
