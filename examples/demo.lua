-- demo.lua: what a server does with hwtimer, live, for about ten seconds.
--
-- CONNS simulated connections share one timer, driven by a poll loop
-- (timer:run with a time limit). Each connection
--   * sends a heartbeat every second (timer:every, started at a random phase),
--   * sends requests, each guarded by a request timeout that is cancelled when
--     the (simulated) response arrives first, as almost always,
--   * retries failed requests with exponential backoff and jitter.
-- Every callback records how late it ran: its time minus (schedule time +
-- delay). A line of counts is printed each second, and a summary at the end.
--
-- usage: lua demo.lua [connections] [seconds]

local hwtimer = require("hwtimer")

local CONNS = tonumber(arg and arg[1]) or 5000
local SECONDS = tonumber(arg and arg[2]) or 10
local REQUEST_TIMEOUT = 0.2   -- seconds
local LOST = 0.02             -- share of responses that never arrive
local FAILED = 0.05           -- share of responses that are errors
local MAX_ATTEMPTS = 4
local BACKOFF = 0.05          -- first retry delay; doubles each attempt

math.randomseed(42)
-- The collector is the host's, and this demo is a host: it takes what
-- docs/performance.md "Tuning the collector for latency" advises. On Lua 5.4
-- small steps that pay little for each byte allocated (the collector keeps
-- running, slowly, inside callbacks), and on every Lua timer:run's gc_step,
-- which does the rest of the collector's work while the loop would sleep.
-- 5.4's defaults sweep ~100,000 objects in one step, 10-20 ms, and every
-- callback due meanwhile waits. Run with HWT_DEMO_GC=default to see the
-- difference.
local gc_setting, run_opts = "default", nil
if os.getenv("HWT_DEMO_GC") ~= "default" then
  run_opts, gc_setting = { gc_step = true }, "default, timer:run's gc_step"
  if _VERSION == "Lua 5.4" then
    collectgarbage("incremental", 200, 10, 8)
    gc_setting = "incremental 200, 10, 8, timer:run's gc_step"
  end
end
local timer = hwtimer.new({ tick = 0.001 })
local now = hwtimer.now

-- ---- counting ---------------------------------------------------------------

local count = { scheduled = 0, fired = 0, cancelled = 0, requests = 0, responses = 0,
                timeouts = 0, retries = 0, gave_up = 0, heartbeats = 0 }

-- Lateness histogram in 10 microsecond buckets, overall and per second.
-- A callback's lateness is its time minus when it was meant to run (the
-- schedule's time plus the delay), which the objects it serves keep: the
-- closure, the request, the connection. (A table from each handle to its
-- time, written at every schedule and cleared at every run and cancel,
-- made the p99 it measures 0.3-1.1 ms worse.)
local BUCKET = 1e-5
local hist_all, hist_sec = {}, {}

local early = 0 -- must stay 0: the summary says so and the exit status fails otherwise

local function record(due)
  local b = math.floor((now() - due) / BUCKET)
  if b < 0 then early, b = early + 1, 0 end
  hist_all[b] = (hist_all[b] or 0) + 1
  hist_sec[b] = (hist_sec[b] or 0) + 1
  count.fired = count.fired + 1
end

local function percentile(hist, p)
  local keys, total = {}, 0
  for k, n in pairs(hist) do keys[#keys + 1] = k; total = total + n end
  if total == 0 then return 0 end
  table.sort(keys)
  local want, seen = math.ceil(total * p), 0
  for _, k in ipairs(keys) do
    seen = seen + hist[k]
    if seen >= want then return (k + 1) * BUCKET * 1000 end -- ms, bucket's upper edge
  end
end

local function schedule(delay, fn, ...)
  count.scheduled = count.scheduled + 1
  return assert(timer:schedule(delay, fn, ...))
end

local function cancel(t)
  if t:cancel() then count.cancelled = count.cancelled + 1 end
end

-- ---- the simulated protocol -------------------------------------------------

local send_request

local function next_request(conn)
  local delay = 0.1 + math.random() * 0.4
  local due = now() + delay
  schedule(delay, function() record(due); send_request(conn, 1) end)
end

local function on_response(_, conn, req)
  record(req.response_due)
  if req.done then return end -- the request timed out before this arrived
  req.done = true
  cancel(req.guard)
  count.responses = count.responses + 1
  if math.random() < FAILED then
    if req.attempt >= MAX_ATTEMPTS then
      count.gave_up = count.gave_up + 1
      return next_request(conn)
    end
    count.retries = count.retries + 1
    local backoff = BACKOFF * 2 ^ (req.attempt - 1) * (0.5 + math.random())
    local due = now() + backoff
    schedule(backoff, function() record(due); send_request(conn, req.attempt + 1) end)
  else
    next_request(conn)
  end
end

local function on_request_timeout(_, conn, req)
  record(req.guard_due)
  req.done = true
  count.timeouts = count.timeouts + 1
  next_request(conn)
end

function send_request(conn, attempt)
  local req = { attempt = attempt, done = false, guard = false, guard_due = now() + REQUEST_TIMEOUT,
                response_due = false }
  count.requests = count.requests + 1
  req.guard = schedule(REQUEST_TIMEOUT, on_request_timeout, conn, req)
  if math.random() >= LOST then
    local delay = 0.005 + math.random() * 0.1
    req.response_due = now() + delay
    schedule(delay, on_response, conn, req)
  end
end

local function heartbeat(_, conn)
  record(conn.beat_due)
  count.heartbeats = count.heartbeats + 1
  conn.beat_due = now() + 1.0 -- the series re-arms when this returns
end

for i = 1, CONNS do
  local conn = { id = i, heartbeat = false, beat_due = false }
  local first = math.random()
  local due = now() + first
  schedule(first, function()
    record(due)
    count.scheduled = count.scheduled + 1
    conn.beat_due = now() + 1.0
    conn.heartbeat = timer:every(1.0, heartbeat, conn)
  end)
  next_request(conn)
end

-- ---- the poll loop ----------------------------------------------------------

print(string.format("hwtimer %s demo: %d connections, %d s, tick 1 ms, one timer",
  hwtimer._VERSION, CONNS, SECONDS))
print(" sec   pending  scheduled      fired  cancelled  requests  timeouts  retries  late p50/p99 ms")
local start = now()
for sec = 1, SECONDS do
  hist_sec = {}
  timer:run(math.max(0, start + sec - now()), run_opts)
  print(string.format("%4d %9d %10d %10d %10d %9d %9d %8d   %.3f / %.3f",
    sec, timer:pending(), count.scheduled, count.fired, count.cancelled, count.requests,
    count.timeouts, count.retries, percentile(hist_sec, 0.5), percentile(hist_sec, 0.99)))
end

local left = timer:stop()
-- A heartbeat series is scheduled once, fires once per beat and is still
-- pending at stop: its beats are fired without a schedule of their own.
local balance = count.scheduled + count.heartbeats - count.fired - count.cancelled - #left
print(string.format([[

summary
  scheduled   %d (%d heartbeat series)
  fired       %d (%d heartbeats)
  cancelled   %d
  left at stop %d
  requests    %d: %d answered, %d timed out, %d retried, %d gave up
  lateness    p50 %.3f ms, p99 %.3f ms, max %.3f ms (%s)
  collector   %s (%s)
  accounting  scheduled = fired + cancelled + left: %s]],
  count.scheduled, CONNS, count.fired, count.heartbeats, count.cancelled, #left,
  count.requests, count.responses, count.timeouts, count.retries, count.gave_up,
  percentile(hist_all, 0.5), percentile(hist_all, 0.99), percentile(hist_all, 1.0),
  early == 0 and "never early" or (early .. " EARLY"),
  gc_setting, _VERSION .. (jit and " / " .. jit.version or ""),
  balance == 0 and "ok" or ("OFF BY " .. balance)))
if balance ~= 0 or early > 0 then os.exit(1) end
