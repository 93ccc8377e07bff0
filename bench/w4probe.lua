-- w4probe.lua: where W4's cost at millions pending comes from. One W4 round
-- (P pending, then cancel-oldest + schedule pairs) with two things W4 itself
-- cannot separate switched on or off: the collector (kept running or stopped
-- before the timed loop) and the worker's work during it (delays from 1 s, so
-- timeouts expire and levels drain while the pairs run, or from 1000 s, so
-- nothing does). Also counts page faults and the Lua thread's sleeps on the
-- lock (voluntary context switches) inside the timed loop.
--
-- usage: lua5.4 bench/w4probe.lua P [pairs] [gc: run|stop] [first delay s: 1|1000]
local hwtimer = require("hwtimer")
local clock = hwtimer.now

local P = assert(tonumber(arg[1]), "usage: w4probe.lua P [pairs] [run|stop] [1|1000]")
local PAIRS = tonumber(arg[2]) or 200000
local GC = arg[3] or "run"
local FIRST = tonumber(arg[4]) or 1

local function proc(path, pattern)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s:match(pattern)
end

local function counters()
  local stat = proc("/proc/self/stat", "%) (.*)")
  local fields = {}
  for x in stat:gmatch("%S+") do fields[#fields + 1] = x end
  return tonumber(fields[8]), -- minor faults
    tonumber(proc("/proc/thread-self/status", "\nvoluntary_ctxt_switches:%s*(%d+)"))
end

local timer = hwtimer.new({ tick = 0.001 })
math.randomseed(20261121)
local delays, hs = {}, {}
for i = 1, P + PAIRS do delays[i] = FIRST + math.random() * 59; hs[i] = false end
local function noop() end
for i = 1, P do hs[i] = timer:schedule(delays[i], noop) end
if GC == "stop" then collectgarbage("stop") end
local f0, s0 = counters()
local t0 = clock()
for k = 1, PAIRS do
  hs[k]:cancel()
  hs[P + k] = timer:schedule(delays[P + k], noop)
  hs[k] = false
end
local t1 = clock()
local f1, s1 = counters()
print(string.format("P=%d gc=%s first=%gs pair_ns=%.1f faults_per_1k=%.1f lock_sleeps=%d",
  P, GC, FIRST, (t1 - t0) / PAIRS * 1e9, (f1 - f0) / PAIRS * 1000, s1 - s0))
os.exit(0) -- skip closing a large state
