--- hwtimer.cqueues: drive a timer from a cqueues controller. Callbacks may
-- use cqueues sockets, sleeps and conditions.
--
--   local cq = cqueues.new()
--   local attached = require("hwtimer.cqueues").attach(timer, cq, { on_error = fn })
--   cq:loop()               -- returns once detached (or the timer closed) and nothing else runs
--   attached.detach()       -- from anywhere, e.g. a callback
--
-- A coroutine on the controller (the attached coroutine) waits with
-- cqueues.poll(timer, wake): the timer is pollable (pollfd, events, timeout),
-- and wake is a condition the timer signals through timer:wakeup when
-- something is scheduled sooner than that wait. Then a runner, a plain
-- coroutine from a small pool, takes the due timeouts one at a time
-- (timer:take) and calls their callbacks, reporting each with timer:done:
-- - callbacks that return without yielding all run in one resume of one
--   runner: nothing is created or attached on this fast path;
-- - a callback that yields (a socket that would block, cqueues.sleep,
--   cqueues.poll) suspends its runner, which is handed to the controller: a
--   forwarder coroutine passes its yields up to cqueues and what cqueues
--   resumes it with back down until that callback returns; meanwhile another
--   runner goes on with the rest. A periodic timeout's next period starts
--   when its callback returns, so its runs never overlap.
-- No pcall is involved, so this works on Lua 5.1 as on 5.4 and LuaJIT. An
-- error ends the runner: it goes to opts.on_error(err, t, traceback), or by
-- default to stderr with the traceback as the timer's own default prints it,
-- and counts in the timer's errors (timer:done(t, false)). The timer's own
-- on_error (hwtimer.new's option) is not called: Lua cannot reach it.
--
-- Close the timer from one of its callbacks, or detach() first: the
-- controller must not be left polling a descriptor the timer closed.
--
-- opts.dispatch = true runs the callbacks with timer:dispatch() instead
-- (3-4x the callbacks per second, bench/yield_loops.lua), but a callback
-- that yields gets an error.
local cqueues = require("cqueues")
local condition = require("cqueues.condition")
local R = require("hwtimer.runner")

local create, resume, yield = coroutine.create, coroutine.resume, coroutine.yield
local IDLE, FINISHED, report = R.IDLE, R.FINISHED, R.report
local POOL_MAX = 16  -- idle runners kept for reuse

local M = {}

local function usable(timer)
  return (pcall(timer.events, timer))
end

-- A coroutine of the controller: the runner's yields go up to cqueues, and
-- what cqueues resumes with goes back down, until its callback finishes.
local function forward(self, w, ok, first, ...)
  if ok and first == FINISHED then
    w.handed = false
    if #self.pool < POOL_MAX then self.pool[#self.pool + 1] = w end
  elseif not ok then
    report(self, w, first)
  else
    return forward(self, w, resume(w.co, yield(first, ...)))
  end
  self.running = self.running - 1
  -- the last one out lets the attached coroutine wait on the descriptor
  -- again; one that closed the timer lets it leave
  if self.running == 0 or not usable(self.timer) then self.wake:signal() end
end

local function hand_over(self, w, ...)
  return forward(self, w, resume(w.co, yield(...)))
end

-- After the attached coroutine resumed runner w: true to go on with another
-- runner, false once w is idle. A runner that failed outside a callback
-- (take, once a callback closed the timer) raises here.
local function resumed(self, w, ok, first, ...)
  if ok and first == IDLE then
    local pool = self.pool
    pool[#pool + 1] = w
    return false
  elseif not ok then
    if w.t == nil then error(first, 0) end
    report(self, w, first)
  else -- its callback yielded: the controller owns it now
    w.handed = true
    self.running = self.running + 1
    self.cq:wrap(hand_over, self, w, first, ...)
  end
  return true
end

-- Run at most self.batch due callbacks, in as many runners as yield.
local function run_due(self)
  local pool = self.pool
  self.budget = self.batch
  repeat
    local n = #pool
    local w = pool[n]
    if w then
      pool[n] = nil
    else
      w = { co = create(R.body), handed = false }
    end
  until not resumed(self, w, resume(w.co, self, w))
end

-- The controller must never hold the timer's descriptor in its pollset when
-- the timer closes it: cqueues would fail on its next update of that
-- descriptor ("unable to update event disposition: Bad file descriptor"),
-- ending cq:loop() with an error. So the descriptor leaves the pollset
-- (cancel, while it is still open) before any callback runs, and while
-- callbacks are suspended in the controller (any of them may close the timer)
-- the wait is on the wake condition and timer:timeout() alone, to the
-- controller's millisecond instead of the worker's wake-up.
local function wait(self, timer)
  if self.running == 0 then
    cqueues.poll(timer, self.wake)
    self.cq:cancel(self.fd)
  else
    cqueues.poll(self.wake, timer:timeout())
  end
end

-- The attached coroutine: wait until something is due, run it, again, until
-- detached or the timer is stopped or closed.
local function serve(self)
  local timer = self.timer
  while not self.detached and usable(timer) do
    if self.gc then R.gc_idle(timer, self.gc, timer:timeout()) end
    wait(self, timer)
    if self.detached then break end
    local ok, err = pcall(self.run, self)
    if not ok and usable(timer) then error(err, 0) end
  end
  if usable(timer) then timer:wakeup(nil) end
end

local function run_dispatch(self)
  self.timer:dispatch(self.batch)
end

--- attach(timer, [cq], [opts]): run the timer's callbacks on the controller
-- cq (a new one if not given). opts: on_error(err, t, traceback); batch
-- (callbacks run before other coroutines get a turn, default 1000);
-- dispatch (true: timer:dispatch(), no yields); gc_step (as timer:run's:
-- step the collector before the attached coroutine waits, within the
-- timer's next deadline; the controller's other coroutines wait as long).
-- Returns the handle (with
-- detach() and running(): callbacks suspended in the controller) and cq.
function M.attach(timer, cq, opts)
  opts = opts or {}
  R.check_opts(opts, "attach")
  cq = cq or cqueues.new()
  local self = { timer = timer, take = timer.take, done = timer.done, fd = timer:getfd(),
                 cq = cq, wake = condition.new(), pool = {}, running = 0, budget = 0,
                 detached = false, on_error = opts.on_error, batch = opts.batch or 1000,
                 run = opts.dispatch and run_dispatch or run_due, gc = R.gc_budget(opts.gc_step) }
  local wake = self.wake
  timer:wakeup(function() wake:signal() end)
  local attached = {}
  function attached.detach() -- before the timer closes its descriptor, if it is still open
    self.detached = true
    if usable(timer) then cq:cancel(self.fd) end
    wake:signal()
  end
  function attached.running() return self.running end
  cq:wrap(serve, self)
  return attached, cq
end

return M
