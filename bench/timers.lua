-- bench/timers.lua: what the number of timers in a process costs (issue 12,
-- item 5: one driver thread for all of them). One line per timer count K:
-- threads and descriptors the K timers add, driver wake-ups in one idle
-- second (each timer holds one timeout a minute ahead), memory per timer, and
-- schedule + cancel of 200,000 timeouts spread round-robin over the K timers
-- against the same on one timer, in the same run.
--   lua bench/timers.lua [scale]
local hwtimer = require("hwtimer")
local clock = hwtimer.now

local SCALE = tonumber(arg[1]) or 1
local N = math.floor(200000 * SCALE)
local COUNTS = SCALE >= 1 and { 1, 10, 100, 1000 } or { 1, 10, 100 }

local function read_file(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function pid()
  return read_file("/proc/self/stat"):match("^(%d+)")
end

-- Listing a directory runs a process: done outside any measured window.
local function list(dir)
  local p = io.popen("ls " .. dir)
  local names = {}
  for name in p:read("*a"):gmatch("%S+") do names[#names + 1] = name end
  p:close()
  return names
end

local function threads() return #list("/proc/" .. pid() .. "/task") end
local function fds() return #list("/proc/" .. pid() .. "/fd") end

-- Voluntary context switches of every thread but the main one.
local function switches(paths)
  local total = 0
  for _, path in ipairs(paths) do
    local s = read_file(path)
    if s then total = total + tonumber(s:match("\nvoluntary_ctxt_switches:%s*(%d+)")) end
  end
  return total
end

local function other_thread_status()
  local me = pid()
  local paths = {}
  for _, tid in ipairs(list("/proc/" .. me .. "/task")) do
    if tid ~= me then paths[#paths + 1] = "/proc/" .. me .. "/task/" .. tid .. "/status" end
  end
  return paths
end

local function gc()
  collectgarbage()
  collectgarbage()
end

-- ns per schedule and per cancel of N timeouts over `timers`, round-robin.
local function schedule_cancel(timers)
  local k, hs, noop = #timers, {}, function() end
  for i = 1, N do hs[i] = false end
  gc()
  local t0 = clock()
  for i = 1, N do hs[i] = timers[i % k + 1]:schedule(60 + i % 1000, noop) end
  local t1 = clock()
  for i = 1, N do hs[i]:cancel() end
  local t2 = clock()
  return (t1 - t0) / N * 1e9, (t2 - t1) / N * 1e9
end

local lua = _VERSION .. (jit and " (" .. jit.version .. ")" or "")
print(string.format("== timers in one process, %s", lua))
local base_threads, base_fds = threads(), fds()
for _, k in ipairs(COUNTS) do
  gc()
  local kb0 = collectgarbage("count")
  local timers = {}
  for i = 1, k do
    timers[i] = assert(hwtimer.new())
    timers[i]:schedule(60, function() end)
  end
  local kb1 = collectgarbage("count")
  local th, fd = threads() - base_threads, fds() - base_fds
  local paths = other_thread_status()
  local before = switches(paths)
  timers[1]:run(1) -- sleeps a second on the host's side (nothing is due); no fork
  local wakeups = switches(paths) - before
  schedule_cancel({ timers[1] }) -- warm-up: the tables grow here, not in a measured pass
  local s1, c1 = schedule_cancel({ timers[1] })
  local sk, ck = schedule_cancel(timers)
  print(string.format("timers=%d threads=+%d fds=+%d idle_wakeups_1s=%d lua_kb_per_timer=%.1f "
    .. "schedule_ns=%.1f cancel_ns=%.1f schedule_ns_one_timer=%.1f cancel_ns_one_timer=%.1f",
    k, th, fd, wakeups, (kb1 - kb0) / k, sk, ck, s1, c1))
  for i = 1, k do timers[i]:close() end
end
