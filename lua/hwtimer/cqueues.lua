--- hwtimer.cqueues: drive a timer from a cqueues controller. Callbacks may
-- use cqueues sockets, sleeps and conditions.
--
--   local cq = cqueues.new()
--   local attached = require("hwtimer.cqueues").attach(timer, cq, { on_error = fn })
--   cq:loop()               -- returns once detached (or the timer closed) and nothing else runs
--   attached.detach()       -- from anywhere, e.g. a callback
--
-- A coroutine on the controller waits with cqueues.poll(timer, wake): the
-- timer is pollable (pollfd, events, timeout), and wake is a condition the
-- timer signals through timer:wakeup when something is scheduled sooner than
-- that wait. Then it takes the due timeouts one at a time (timer:take) and
-- runs each callback in a plain coroutine from a small pool:
-- - a callback that returns without yielding is done there and then
--   (timer:done), and its coroutine goes back to the pool: nothing is
--   created or attached on this fast path;
-- - a callback that yields (a socket that would block, cqueues.sleep,
--   cqueues.poll) is handed to the controller: a forwarder coroutine passes
--   its yields up to cqueues and what cqueues resumes it with back down until
--   it finishes, while the other due callbacks go on. A periodic timeout's
--   next period starts when its callback finishes, so runs never overlap.
-- An error ends the callback's coroutine: it goes to opts.on_error(err, t,
-- traceback), or by default to stderr with the traceback as the timer's own
-- default prints it, and counts in the timer's errors (timer:done(t, false)).
-- The timer's own on_error (hwtimer.new's option) is not called.
--
-- opts.dispatch = true runs the callbacks with timer:dispatch() instead:
-- faster for many tiny callbacks, but a callback that yields gets an error.
local cqueues = require("cqueues")
local condition = require("cqueues.condition")

local create, resume, yield = coroutine.create, coroutine.resume, coroutine.yield
local traceback = debug.traceback

local DONE = {}     -- what a pooled coroutine yields when its callback returned
local POOL_MAX = 16 -- idle coroutines kept for reuse

local M = {}

-- The body of a pooled coroutine: call a callback, say DONE, wait for the next.
local function body(t, fn, ...)
  fn(t, ...)
  return body(yield(DONE))
end

-- An error value as the C side shows it.
local function message(err)
  local kind = type(err)
  if kind == "string" or kind == "number" then return tostring(err) end
  local ok, s = pcall(tostring, err)
  if ok and type(s) == "string" and getmetatable(err) and getmetatable(err).__tostring then
    return s
  end
  return "(error object is a " .. kind .. " value)"
end

-- The callback of t raised err in coroutine co (now dead, its stack kept).
local function report(self, co, t, err)
  local trace = traceback(co, message(err))
  if self.on_error then
    local ok, e = pcall(self.on_error, err, t, trace)
    if not ok then io.stderr:write("hwtimer: error in on_error: ", message(e), "\n") end
  else
    io.stderr:write("hwtimer: error in timeout callback: ", trace, "\n")
  end
  self.timer:done(t, false)
end

-- After a resume of co, which runs the callback of t: true if the callback
-- finished (returned or raised), false if it yielded.
local function finished(self, co, t, ok, first)
  if ok and first == DONE then
    self.timer:done(t)
    local pool = self.pool
    if #pool < POOL_MAX then pool[#pool + 1] = co end
    return true
  elseif not ok then
    report(self, co, t, first)
    return true
  end
  return false
end

-- A coroutine of the controller: co's yields go up to cqueues, and what
-- cqueues resumes with goes back down, until the callback finishes. A
-- callback that closed the timer wakes the attached coroutine so it leaves.
local function forward(self, co, t, ok, ...)
  if finished(self, co, t, ok, ...) then
    self.running = self.running - 1
    if not pcall(self.timer.events, self.timer) then self.wake:signal() end
    return
  end
  return forward(self, co, t, resume(co, yield(...)))
end

local function hand_over(self, co, t, ...)
  return forward(self, co, t, resume(co, yield(...)))
end

-- After the first resume of co: the fast path, or a hand-over to the controller.
local function launched(self, co, t, ok, first, ...)
  if ok and first == DONE then
    self.timer:done(t)
    local pool = self.pool
    pool[#pool + 1] = co -- it came from the pool, or the pool was empty
  elseif not finished(self, co, t, ok, first) then
    self.running = self.running + 1
    self.cq:wrap(hand_over, self, co, t, first, ...)
  end
end

-- Start the callback of t in a pooled coroutine; false when t is nil
-- (timer:take found nothing due).
local function start(self, t, fn, ...)
  if t == nil then return false end
  local pool = self.pool
  local n = #pool
  local co = pool[n]
  if co then pool[n] = nil else co = create(body) end
  launched(self, co, t, resume(co, t, fn, ...))
  return true
end

-- Run at most self.batch due callbacks (protected: take raises once a
-- callback closed the timer).
local function run_due(self)
  local timer = self.timer
  for _ = 1, self.batch do
    if not start(self, timer:take()) then return end
  end
end

local function usable(timer)
  return (pcall(timer.events, timer))
end

-- The attached coroutine: wait until something is due, run it, again, until
-- detached or the timer is stopped or closed.
local function serve(self)
  local timer = self.timer
  while not self.detached and usable(timer) do
    cqueues.poll(timer, self.wake)
    if self.detached then break end
    local ok, err = pcall(self.run, self)
    if not ok and usable(timer) then error(err, 0) end
  end
  if usable(timer) then timer:wakeup(nil) end
end

local function run_dispatch(self)
  self.timer:dispatch(self.batch)
end

local function check_opts(opts)
  for k, v in pairs(opts) do
    local ok = (k == "on_error" and (type(v) == "function" or (getmetatable(v) or {}).__call))
      or (k == "batch" and type(v) == "number" and v >= 1 and v == math.floor(v))
      or (k == "dispatch" and type(v) == "boolean")
    if not ok then
      error(string.format("bad argument #3 to 'attach' (option '%s': %s)", tostring(k),
        k == "on_error" and "function expected" or k == "batch" and "positive integer expected"
        or k == "dispatch" and "boolean expected" or "unknown option"), 3)
    end
  end
end

--- attach(timer, [cq], [opts]): run the timer's callbacks on the controller
-- cq (a new one if not given). opts: on_error(err, t, traceback); batch
-- (callbacks run before other coroutines get a turn, default 1000);
-- dispatch (true: timer:dispatch(), no yields). Returns the handle (with
-- detach() and running(): callbacks suspended in the controller) and cq.
function M.attach(timer, cq, opts)
  opts = opts or {}
  check_opts(opts)
  cq = cq or cqueues.new()
  local self = { timer = timer, cq = cq, wake = condition.new(), pool = {}, running = 0,
                 detached = false, on_error = opts.on_error, batch = opts.batch or 1000,
                 run = opts.dispatch and run_dispatch or run_due }
  local wake = self.wake
  timer:wakeup(function() wake:signal() end)
  local attached = {}
  function attached.detach()
    self.detached = true
    wake:signal()
  end
  function attached.running() return self.running end
  cq:wrap(serve, self)
  return attached, cq
end

return M
