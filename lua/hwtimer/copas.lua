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
-- Callbacks run as in hwtimer.cqueues, by the driver of hwtimer.runner: a
-- callback that yields to copas (a socket that would block) leaves its
-- runner to a copas thread that carries it, passing its yields up to copas
-- and copas's resumes back down until it finishes, and another runner goes
-- on with the rest. No pcall is involved, so this works on Lua 5.1 without
-- coxpcall. An error goes to opts.on_error(err, t, traceback), or by default
-- to stderr with the traceback, and counts in the timer's errors. The socket
-- a callback used is not closed when it returns (copas's autoclose is for
-- server handlers). Each step has a driver of its own: nothing kept between
-- steps holds on to the timer.
--
-- opts.dispatch = true runs the callbacks with timer:dispatch() instead:
-- faster for many tiny callbacks, but a callback that yields gets an error.
local copas = require("copas")
local runner = require("hwtimer.runner")

local yield = coroutine.yield
local usable = runner.usable
-- A copas queue that keeps nothing: a finished carrier yields itself into
-- it, so copas forgets the thread instead of seeing it end (and closing,
-- with autoclose, the socket that woke it last).
local NOWHERE = { insert = function() end, push = function() end }

local M = {}

-- A copas thread carrying runner w until its callback finishes.
local function carried(_, self, w, ...) -- copas.addthread passes nil first
  runner.carry(self, w, ...)
  yield(NOWHERE, NOWHERE)
end

-- The driver's hand: runner w's callback yielded (...); copas owns it now.
local function hand(self, w, ...)
  copas.addthread(carried, self, w, ...)
end

-- One step with checked options o.
local function step(timer, max_wait, o)
  if not usable(timer) then return 0 end
  max_wait = max_wait or 0.05
  local gc = runner.gc_budget(o.gc_step)
  if gc then runner.gc_idle(timer, gc, math.min(timer:timeout() or max_wait, max_wait)) end
  local wait = timer:timeout()
  if not wait or wait > max_wait then wait = max_wait end
  copas.step(wait)
  if not usable(timer) then return 0 end -- closed by a copas thread
  if o.dispatch then return timer:dispatch(o.batch) end
  local ok, n = pcall(runner.run_due, runner.new(timer, o, hand))
  if ok then return n end
  if usable(timer) then error(n, 0) end
  return 0 -- a callback closed the timer
end

--- step(timer, [max_wait], [opts]): one copas.step bounded by the timer's
-- next event and max_wait (default 0.05 s), then the due callbacks. Returns
-- how many callbacks started (0 once the timer is stopped or closed). opts:
-- on_error(err, t, traceback), batch (most callbacks a step, default 1000),
-- dispatch (true: timer:dispatch(), no yields), gc_step (as timer:run's:
-- step the collector before copas waits, within the timer's next deadline
-- and max_wait; a socket that becomes ready meanwhile waits as long).
-- step's and loop's first two arguments, checked (raising at their caller's).
local function check_args(timer, max_wait, fname)
  runner.check_timer(timer, fname, 3)
  if max_wait ~= nil and not (type(max_wait) == "number" and max_wait >= 0 and max_wait < math.huge) then
    error(string.format("bad argument #2 to '%s' (non-negative number of seconds expected)", fname), 3)
  end
end

function M.step(timer, max_wait, opts)
  check_args(timer, max_wait, "step")
  return step(timer, max_wait, runner.options(opts, runner.OPTIONS, 3, "step"))
end

--- loop(timer, [max_wait], [opts]): step until the timer is stopped or closed.
function M.loop(timer, max_wait, opts)
  check_args(timer, max_wait, "loop")
  local o = runner.options(opts, runner.OPTIONS, 3, "loop")
  while usable(timer) do
    step(timer, max_wait, o)
  end
end

return M
