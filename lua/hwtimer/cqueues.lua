--- hwtimer.cqueues: drive a timer from a cqueues controller. Callbacks may
-- use cqueues sockets, sleeps and conditions.
--
--   local cq = cqueues.new()
--   local attached = require("hwtimer.cqueues").attach(timer, cq, { on_error = fn })
--   cq:loop()               -- returns once detached (or the timer closed) and nothing else runs
--   attached.detach()       -- from anywhere, e.g. a callback (the callbacks due with
--                           -- it then wait for the next attachment)
--
-- A coroutine on the controller (the attached coroutine) waits with
-- cqueues.poll(timer, wake): the timer is pollable (pollfd, events, timeout),
-- and wake is a condition the timer signals through timer:wakeup when
-- something is scheduled sooner than that wait. Then the driver of
-- hwtimer.runner runs the due callbacks in runners (plain coroutines, kept in
-- a small pool), reporting each with timer:done:
-- - callbacks that return without yielding all run in one resume of one
--   runner: nothing is created or attached on this fast path;
-- - a callback that yields (a socket that would block, cqueues.sleep,
--   cqueues.poll) suspends its runner, which is handed to the controller: a
--   coroutine of the controller carries it, passing its yields up to cqueues
--   and what cqueues resumes it with back down until that callback returns;
--   meanwhile another runner goes on with the rest. A periodic timeout's
--   next period starts when its callback returns, so its runs never overlap.
-- An error ends the runner: it goes to opts.on_error(err, t, traceback), or
-- by default to stderr with the traceback as the timer's own default prints
-- it, and counts in the timer's errors (timer:done(t, false)). The timer's
-- own on_error (hwtimer.new's option) is not called: Lua cannot reach it.
--
-- Close the timer from one of its callbacks, or detach() first: the
-- controller must not be left polling a descriptor the timer closed.
--
-- opts.dispatch = true runs the callbacks with timer:dispatch() instead:
-- faster for callbacks that never yield, but one that yields gets an error.
local cqueues = require("cqueues")
local condition = require("cqueues.condition")
local runner = require("hwtimer.runner")
local check = require("hwtimer.check")

local usable = runner.usable

local M = {}
local current = setmetatable({}, { __mode = "k" }) -- timer -> its attachment's state

-- A coroutine of the controller, carrying runner w until its callback
-- returns. The last one out lets the attached coroutine wait on the
-- descriptor again; one that closed the timer lets it leave.
local function carried(self, w, ...)
  self.handoff:signal() -- (the attached coroutine resumes once this one yields)
  runner.carry(self, w, ...)
  self.running = self.running - 1
  if self.running == 0 or not usable(self.timer) then self.wake:signal() end
end

-- Whether a callback's yield (cqueues.poll's objects) waits on a condition,
-- itself or as a promise's pollfd: a condition keeps no signal that comes
-- before its waiter is registered. Sockets and sleeps lose nothing.
local function on_condition(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if condition.type(v) then return true end
    if type(v) == "table" or type(v) == "userdata" then
      local ok, fd = pcall(function() return v:pollfd() end)
      if ok and condition.type(fd) then return true end
    end
  end
  return false
end

-- The driver's hand: runner w's callback yielded (...); the controller owns it
-- now. What it waits for is registered only when its carrier yields it up.
-- For a condition that must come before the batch goes on (a callback due
-- with it may signal it): the batch ends here (self.paused), and the attached
-- coroutine waits for the carrier to start before the next one (a 0 s wait
-- would not do: cqueues resumes that first); it resumes once the carrier
-- has yielded. For sockets and sleeps, the batch goes on at once.
local function hand(self, w, ...)
  self.running = self.running + 1
  self.cq:wrap(carried, self, w, ...)
  if on_condition(...) then self.paused = true end
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
    if self.gc then runner.gc_idle(timer, self.gc, timer:timeout()) end
    wait(self, timer)
    if self.detached then break end
    local ok, err = pcall(self.run, self)
    if not ok and usable(timer) then error(err, 0) end
    if self.paused then -- (outside pcall: Lua 5.1's cannot be yielded across)
      self.paused = false
      self.handoff:wait(1)
    end
  end
  -- The hook goes with the last attachment only: after detach() the timer
  -- may be attached again before this coroutine gets here.
  if usable(timer) and current[timer] == self then
    timer:wakeup(nil)
    current[timer] = nil
  end
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
-- Returns the handle (with detach() and running(): callbacks suspended in
-- the controller) and cq.
function M.attach(timer, cq, opts)
  runner.check_timer(timer, "attach", 2)
  if cq ~= nil and cqueues.type(cq) ~= "controller" then
    error("bad argument #2 to 'attach' (cqueues controller expected, got " .. check.type_name(cq) .. ")", 2)
  end
  local o = runner.options(opts, runner.OPTIONS, 3, "attach")
  cq = cq or cqueues.new()
  local self = runner.new(timer, o, hand)
  self.cq, self.fd, self.wake, self.running, self.detached = cq, timer:getfd(), condition.new(), 0, false
  self.handoff = condition.new()
  self.run = o.dispatch and run_dispatch or runner.run_due
  self.gc = runner.gc_budget(o.gc_step)
  local wake = self.wake
  timer:wakeup(function() wake:signal() end)
  current[timer] = self
  local attached = {}
  function attached.detach() -- before the timer closes its descriptor, if it is still open
    self.detached = true
    self.budget = 0 -- from a callback: the rest of its batch waits for the next attachment
    if usable(timer) then cq:cancel(self.fd) end
    wake:signal()
  end
  function attached.running() return self.running end
  cq:wrap(serve, self)
  return attached, cq
end

return M
