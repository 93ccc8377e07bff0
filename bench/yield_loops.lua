-- Callbacks per second for callbacks that do not yield: plain timer:dispatch()
-- beside the cqueues glue (hwtimer.cqueues: take, a pooled coroutine, done)
-- and its dispatch option, N timeouts due at once, one run each.
--
--   LUA_PATH='lua/?.lua;;' LUA_CPATH='build/5.4/?.so;;' lua5.4 bench/yield_loops.lua [N] [runs]
--
-- Modes run interleaved, a fresh timer each run; prints each run and the
-- median. The clock starts once every timeout is scheduled and due.
local hwtimer = require("hwtimer")
local cqueues = require("cqueues")
local glue = require("hwtimer.cqueues")

local N = tonumber(arg[1]) or 200000
local RUNS = tonumber(arg[2]) or 3
local now = hwtimer.now

-- Schedule N timeouts with delay 0 on a fresh timer; returns it and the
-- counter the callbacks bump.
local function fill(on_last)
  local timer = hwtimer.new()
  local count = { n = 0 }
  local function cb()
    local n = count.n + 1
    count.n = n
    if n == N and on_last then on_last() end
  end
  for _ = 1, N do timer:schedule(0, cb) end
  while timer:timeout() ~= 0 do end -- due for sure (the delay rounds up to a tick)
  return timer, count
end

local modes = {}

function modes.dispatch()
  local timer, count = fill()
  local t0 = now()
  while count.n < N do timer:dispatch() end
  local dt = now() - t0
  timer:close()
  return dt
end

-- take + call + done from plain Lua, no coroutine: the binding's hand-off alone
function modes.take_loop()
  local timer, count = fill()
  local t0 = now()
  while count.n < N do
    local t, fn = timer:take()
    if t then
      fn(t)
      timer:done(t)
    end
  end
  local dt = now() - t0
  timer:close()
  return dt
end

local function through_glue(opts)
  local attached
  local timer, count = fill(function() attached.detach() end)
  local cq = cqueues.new()
  attached = glue.attach(timer, cq, opts)
  local t0 = now()
  assert(cq:loop())
  local dt = now() - t0
  assert(count.n == N)
  timer:close()
  return dt
end

function modes.cqueues_glue() return through_glue() end
function modes.cqueues_glue_dispatch() return through_glue({ dispatch = true }) end

local order = { "dispatch", "take_loop", "cqueues_glue", "cqueues_glue_dispatch" }
local times = {}
for _, m in ipairs(order) do times[m] = {} end
for run = 1, RUNS do
  for _, m in ipairs(order) do
    collectgarbage()
    collectgarbage()
    local dt = modes[m]()
    table.insert(times[m], dt)
    io.write(string.format("run %d %-22s %8.1f ms  %6.2f M/s\n", run, m, dt * 1e3, N / dt / 1e6))
  end
end
print(string.format("%s, %d timeouts due at once, median of %d", jit and jit.version or _VERSION, N, RUNS))
local base
for _, m in ipairs(order) do
  table.sort(times[m])
  local med = times[m][math.floor((#times[m] + 1) / 2)]
  local rate = N / med
  base = base or rate
  print(string.format("%-22s %6.2f M callbacks/s  (%.0f ns each, %.2fx dispatch)",
    m, rate / 1e6, med / N * 1e9, rate / base))
end
