-- w5.lua: W5, lateness of a server-like load with the collector running.
-- The demo's load (examples/demo.lua): CONNS connections on one timer with a
-- 1 ms tick; each sends a heartbeat every second and requests, each guarded
-- by a 200 ms timeout that the response (5-105 ms later, 98 %) cancels; 5 %
-- of responses are errors, retried with exponential backoff. Every request
-- makes what a server's would (a table, a closure, a string); nothing here
-- stops or tunes the collector except the mode asked for.
--
-- usage: lua bench/w5.lua MODE [scale]
--   MODE   default      the Lua's own collector settings
--          advised      collectgarbage("incremental", 200, 10, 8) (5.4) and
--                       timer:run{ gc_step = true }: what docs/performance.md
--                       advises and the demo takes
--          inc          collectgarbage("incremental", 150, 200, 8)    (5.4, the advice before)
--          steps10      collectgarbage("incremental", 0, 0, 10): only the step size (1 KB)
--          gen          collectgarbage("generational")                (5.4)
--          gc_step      default settings, timer:run{ gc_step = true }
--          inc_gc_step  both
--          stop         the collector stopped: what is left is the machine and hwtimer
--   scale  1: 5,000 connections for 6 s; bench-quick: 0.1 (1,000 for 2 s)
-- Prints one line of key=value figures (bench/bench.lua reads it).
local hwtimer = require("hwtimer")
local now = hwtimer.now

local MODE = arg[1] or "default"
local SCALE = tonumber(arg[2]) or 1
local CONNS = math.max(1000, math.floor(5000 * SCALE))
local SECONDS = SCALE >= 1 and 6 or 2
local REQUEST_TIMEOUT, LOST, FAILED, MAX_ATTEMPTS, BACKOFF = 0.2, 0.02, 0.05, 4, 0.05

local run_opts
if MODE == "advised" then
  if _VERSION == "Lua 5.4" then collectgarbage("incremental", 200, 10, 8) end
  run_opts = { gc_step = true }
elseif MODE == "inc" or MODE == "inc_gc_step" then
  assert(collectgarbage("incremental", 150, 200, 8), "this Lua has no collectgarbage('incremental')")
elseif MODE == "steps10" then
  assert(collectgarbage("incremental", 0, 0, 10), "this Lua has no collectgarbage('incremental')")
elseif MODE == "gen" then
  assert(collectgarbage("generational"), "this Lua has no generational mode")
elseif MODE == "stop" then
  collectgarbage("stop")
elseif MODE ~= "default" and MODE ~= "gc_step" and MODE ~= "advised" then
  error("unknown mode " .. MODE)
end
if MODE:find("gc_step", 1, true) then run_opts = { gc_step = true } end

math.randomseed(20261122)
local random = math.random
local timer = hwtimer.new({ tick = 0.001 })

-- Lateness histogram: 10 us buckets up to 100 ms, preallocated (no growth
-- while measuring), and the exact maximum.
local BUCKET, NB = 1e-5, 10000
local hist, fired, late_max, early, peak_kb = {}, 0, 0, 0, 0
for i = 0, NB do hist[i] = 0 end
local measuring = false

local function record(due)
  if not measuring then return end
  local late = now() - due
  if late < 0 then early = early + 1; late = 0 end
  if late > late_max then late_max = late end
  local kb = collectgarbage("count") -- the heap's peak, sampled at each callback
  if kb > peak_kb then peak_kb = kb end
  local b = math.floor(late / BUCKET)
  if b > NB then b = NB end
  hist[b] = hist[b] + 1
  fired = fired + 1
end

local function schedule(delay, fn, ...)
  return assert(timer:schedule(delay, fn, now() + delay, ...))
end

local send_request

local function next_request(conn)
  schedule(0.1 + random() * 0.4, function(_, due) record(due); send_request(conn, 1) end)
end

local function on_response(_, due, conn, req)
  record(due)
  if req.done then return end
  req.done = true
  req.guard:cancel()
  conn.answered = conn.answered + 1
  if random() < FAILED and req.attempt < MAX_ATTEMPTS then
    local backoff = BACKOFF * 2 ^ (req.attempt - 1) * (0.5 + random())
    schedule(backoff, function(_, d) record(d); send_request(conn, req.attempt + 1) end)
  else
    next_request(conn)
  end
end

local function on_request_timeout(_, due, conn, req)
  record(due)
  req.done = true
  next_request(conn)
end

function send_request(conn, attempt)
  local req = { attempt = attempt, line = string.format("GET /item/%d?try=%d", conn.id, attempt) }
  req.guard = schedule(REQUEST_TIMEOUT, on_request_timeout, conn, req)
  if random() >= LOST then
    schedule(0.005 + random() * 0.1, on_response, conn, req)
  end
end

local function heartbeat(_, conn)
  record(conn.beat_due)
  conn.beat_due = conn.beat_due + 1.0
end

for i = 1, CONNS do
  local conn = { id = i, answered = 0 }
  local first = random()
  conn.beat_due = now() + first
  timer:every({ interval = 1.0, rate = true, first = first }, heartbeat, conn)
  next_request(conn)
end

-- One second of warm-up (the request pattern settles), then the window.
timer:run(1, run_opts)
timer:stats(true) -- a fresh window: cb_max is then the window's longest callback
measuring = true
local t0, kb0 = now(), collectgarbage("count")
local stop = t0 + SECONDS
while now() < stop do timer:run(stop - now(), run_opts) end
local secs = now() - t0

local function q(p)
  local want, seen = math.max(1, math.ceil(fired * p)), 0
  for b = 0, NB do
    seen = seen + hist[b]
    if seen >= want then return (b + 1) * BUCKET * 1000 end
  end
end
local lua = jit and "jit" or _VERSION:match("%d+%.%d+")
-- cb_max: the longest callback, a collector step inside it included (the
-- callbacks themselves take microseconds)
print(string.format("system=hwtimer workload=w5 lua=%s mode=%s late_p50_ms=%.3f late_p99_ms=%.3f late_max_ms=%.3f"
  .. " early=%d callbacks_per_s=%.0f heap_kb=%.0f peak_kb=%.0f cb_max_ms=%.3f", lua, MODE, q(0.5), q(0.99),
  late_max * 1000, early, fired / secs, (kb0 + collectgarbage("count")) / 2, peak_kb, timer:stats().cb_max * 1000))
os.exit(0)
