--- hwtimer.copas: run a timer alongside copas. Callbacks may use copas
-- sockets (copas.connect, and send/receive on copas.wrap'ed sockets).
--
--   require("hwtimer.copas").loop(timer)        -- instead of copas.loop()
--   require("hwtimer.copas").step(timer)        -- instead of copas.step()
--
-- Copas (1.x, as Debian ships it, for Lua 5.1 and 5.2) keeps its select set
-- to itself and cannot wait on another file descriptor, so the timer cannot
-- wake it directly. Instead each step lets copas wait at most until the
-- timer's next event (timer:timeout()), then runs what is due. A timeout
-- scheduled while copas waits is seen after that wait: max_wait (seconds,
-- default 0.05) bounds how long that can be.
--
-- Callbacks run as in hwtimer.cqueues: a runner (a plain coroutine, one a step)
-- takes the due timeouts (timer:take) and calls their callbacks; a callback
-- that yields to copas (a socket that would block) leaves its runner to a
-- copas thread that passes its yields up to copas and copas's resumes back
-- down until it finishes, and another runner goes on with the rest. No
-- pcall is involved, so this works on Lua 5.1 without coxpcall. An error
-- goes to opts.on_error(err, t, traceback), or by default to stderr with the
-- traceback, and counts in the timer's errors. The socket a callback used is
-- not closed when it returns (copas's autoclose is for server handlers).
--
-- opts.dispatch = true runs the callbacks with timer:dispatch() instead:
-- faster for many tiny callbacks, but a callback that yields gets an error.
local copas = require("copas")
local R = require("hwtimer.runner")

local create, resume, yield = coroutine.create, coroutine.resume, coroutine.yield
local IDLE, FINISHED, report = R.IDLE, R.FINISHED, R.report
-- A copas queue that keeps nothing: a finished forwarder yields itself into
-- it, so copas forgets the thread instead of seeing it end (and closing,
-- with autoclose, the socket that woke it last).
local NOWHERE = { insert = function() end, push = function() end }

local M = {}

-- A copas thread: the runner's yields go up to copas, and what copas
-- resumes with goes back down, until its callback finishes.
local function forward(self, w, ok, first, ...)
  if ok and first ~= FINISHED then
    return forward(self, w, resume(w.co, yield(first, ...)))
  end
  if not ok then report(self, w, first) end
  yield(NOWHERE, NOWHERE)
end

local function hand_over(_, self, w, ...) -- copas.addthread passes nil first
  return forward(self, w, resume(w.co, yield(...)))
end

-- After runner w was resumed: true to go on with another runner, false
-- once w is idle. A runner that failed outside a callback raises here.
local function resumed(self, w, ok, first, ...)
  if ok and first == IDLE then
    return false
  elseif not ok then
    if w.t == nil then error(first, 0) end
    report(self, w, first)
  else -- its callback yielded: copas owns it now
    w.handed = true
    copas.addthread(hand_over, self, w, first, ...)
  end
  return true
end

-- Run at most self.batch due callbacks, in as many runners as yield;
-- returns how many started. Runners live for one step (or until their
-- callback returns): nothing kept between steps holds on to the timer.
local function run_due(self)
  self.budget = self.batch
  repeat
    local w = { co = create(R.body), handed = false }
  until not resumed(self, w, resume(w.co, self, w))
  return self.batch - self.budget
end

local function usable(timer)
  return (pcall(timer.events, timer))
end

--- step(timer, [max_wait], [opts]): one copas.step bounded by the timer's
-- next event and max_wait (default 0.05 s), then the due callbacks. Returns
-- how many callbacks started (0 once the timer is stopped or closed). opts:
-- on_error(err, t, traceback), batch (most callbacks a step, default 1000),
-- dispatch (true: timer:dispatch(), no yields), gc_step (as timer:run's:
-- step the collector before copas waits, within the timer's next deadline
-- and max_wait; a socket that becomes ready meanwhile waits as long).
function M.step(timer, max_wait, opts)
  if opts then R.check_opts(opts, "step") else opts = {} end
  if not usable(timer) then return 0 end
  max_wait = max_wait or 0.05
  local gc = R.gc_budget(opts.gc_step)
  if gc then R.gc_idle(timer, gc, math.min(timer:timeout() or max_wait, max_wait)) end
  local wait = timer:timeout()
  if not wait or wait > max_wait then wait = max_wait end
  copas.step(wait)
  if not usable(timer) then return 0 end -- closed by a copas thread
  if opts.dispatch then return timer:dispatch(opts.batch) end
  local self = { timer = timer, take = timer.take, done = timer.done,
                 on_error = opts.on_error, batch = opts.batch or 1000, budget = 0 }
  local ok, n = pcall(run_due, self)
  if ok then return n end
  if usable(timer) then error(n, 0) end
  return 0 -- a callback closed the timer
end

--- loop(timer, [max_wait], [opts]): step until the timer is stopped or closed.
function M.loop(timer, max_wait, opts)
  if opts then R.check_opts(opts, "loop") end
  while usable(timer) do
    M.step(timer, max_wait, opts)
  end
end

return M
