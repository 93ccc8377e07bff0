--- hwtimer.retry: call a function on a timer's loop until it succeeds, with
-- exponential backoff between attempts (Dubbo's failback retry on its wheel).
--
--   local r = hwtimer.retry(timer, fn, opts)   -- the public entry (lua/hwtimer.lua)
--
-- It uses only the timer's public API (schedule, and count when it exists), so
-- `timer` may be a hwtimer timer or any object with the same methods, such as
-- the OpenResty glue's dispatcher. Every retry ends in "succeeded", "failed"
-- or "cancelled", and r:state() says which and why.
local core = require("hwtimer.core")
local check = require("hwtimer.check")
local type_name, callable, is_timer = check.type_name, check.callable, check.is_timer
local message = require("hwtimer.text").message
local now = core.now

local M = {}

---------------------------------------------------------------------------
-- Arguments and options
---------------------------------------------------------------------------


local function argerror(n, msg) -- (hwtimer.retry's own: the name in every message)
  check.argerror(n, "retry", msg, 3)
end



local positive, seconds, whole = check.positive, check.seconds, check.whole
local function fraction(v) return type(v) == "number" and v >= 0 and v <= 1 end

-- name = { default, check, what is expected }
local OPTIONS = {
  attempts = { 5, whole, "positive integer" },
  delay = { 0.1, seconds, "number of seconds from 0 to 1e9" },
  factor = { 2, positive, "positive number" },
  max_delay = { 30, seconds, "number of seconds from 0 to 1e9" },
  jitter = { 0.1, fraction, "number from 0 to 1" },
  max_time = { nil, seconds, "number of seconds from 0 to 1e9" },
  retry_if = { nil, callable, "function" },
  on_success = { nil, callable, "function" },
  on_failure = { nil, callable, "function" },
  on_error = { nil, callable, "function" },
}

---------------------------------------------------------------------------
-- The retry handle
---------------------------------------------------------------------------

local Retry = {}
Retry.__index = Retry

-- Bump one of the timer's retry counters when it has them (timer:count).
-- The final counts are protected: fn may have stopped the timer, whose
-- methods then raise, and a count must not turn a settled retry into an error.
local function count(self, name, protected)
  local timer = self._timer
  local c = timer.count
  if not c then return end
  if protected then pcall(c, timer, name) else c(timer, name) end
end

-- Enter a final state. `reason` says why (see docs/api.md: r:state()).
local function finish(self, state, reason)
  self._state, self._reason, self._timeout, self._due = state, reason, nil, nil
  if state == "succeeded" then
    count(self, "retry_succeeded", true)
  elseif state == "failed" then
    count(self, "retry_failed", true)
  end
end

-- A stopped or closed timer cancels the pending attempt and runs nothing
-- more, so no callback can tell the retry: every method looks here first.
local function refresh(self)
  local t = self._timeout
  if self._state == "running" and t then
    local ok, state = pcall(t.state, t)
    if not ok or state == "cancelled" then finish(self, "cancelled", "timer stopped") end
  end
end

--- Stop retrying; true if it was still trying.
function Retry:cancel()
  refresh(self)
  if self._state ~= "running" then return false end
  local t = self._timeout
  finish(self, "cancelled", "cancelled")
  if t then pcall(t.cancel, t) end
  return true
end

--- state, reason: "running", "succeeded", "failed" or "cancelled", and for the
-- last two why it ended.
function Retry:state()
  refresh(self)
  return self._state, self._reason
end

--- How many attempts have started so far.
function Retry:attempts() return self._attempts end

--- The error of the last failed attempt (nil before any failed).
function Retry:last_error() return self._last_error end

--- When the next attempt is due, in hwtimer.now() seconds; nil when none is
-- scheduled (the retry has ended, or an attempt is running).
function Retry:next_attempt()
  refresh(self)
  return self._due
end

function Retry:__tostring()
  local state, reason = self:state()
  local s = string.format("hwtimer.retry (%s", state)
  if reason and reason ~= state then s = s .. ": " .. message(reason) end
  s = s .. string.format(", %d attempt%s", self._attempts, self._attempts == 1 and "" or "s")
  if self._due then s = s .. string.format(", next in %.3f s", math.max(0, self._due - now())) end
  if self._last_error ~= nil then s = s .. ", last error: " .. message(self._last_error) end
  return s .. ")"
end

---------------------------------------------------------------------------
-- Attempts
---------------------------------------------------------------------------

-- The wait before attempt n+1: delay * factor^(n-1), capped, less up to `jitter` of it.
local function wait_after(self, n)
  local o = self._opts
  local wait = math.min(o.max_delay, o.delay * o.factor ^ (n - 1))
  return wait * (1 - o.jitter * math.random())
end

-- Hooks run protected, so that the retry's state is settled whatever they do.
local function hook(news, f, ...)
  if not f then return end
  local ok, err = pcall(f, ...)
  if not ok then news[#news + 1] = err end
end

-- What the timer's loop learnt that no hook was told (a refusal, a raising
-- hook) goes to on_error(err, r), or without one is raised to the timer,
-- whose on_error reports it (the first of them).
local function report(self, news)
  if #news == 0 then return end
  local on_error = self._opts.on_error
  if not on_error then error(news[1], 0) end
  local raised = {}
  for i = 1, #news do hook(raised, on_error, news[i], self) end
  if #raised > 0 then error(raised[1], 0) end
end

local attempt

-- When t, scheduled `wait` seconds from now, is due: its deadline(), or for
-- a proxy's handle without one, now + wait.
local function due_of(t, wait)
  local ok, due = pcall(t.deadline, t)
  if ok and due then return due end
  return now() + wait
end

-- After attempt n failed with err: schedule attempt n+1, or return the final
-- state, its reason, and whether the reason is news (for on_error).
local function schedule_next(self, n, err)
  local o = self._opts
  if n >= o.attempts then return "failed", "attempts used up" end
  if o.retry_if then
    local ok, yes = pcall(o.retry_if, err, n)
    if not ok then return "failed", yes, true end
    if not yes then return "failed", "not retryable" end
  end
  local wait = wait_after(self, n)
  if o.max_time and now() + wait > self._started + o.max_time then
    return "failed", "time limit"
  end
  local timer = self._timer
  local ok, t, msg = pcall(timer.schedule, timer, wait, attempt, self)
  if not ok then -- fn stopped or closed the timer, or the object is broken
    if message(t):find("stopped timer", 1, true) or message(t):find("closed timer", 1, true) then
      return "cancelled", "timer stopped"
    end
    return "failed", t, true
  end
  if not t then return "failed", msg, true end -- refused: max_pending
  self._timeout = t
  self._due = due_of(t, wait)
  return nil
end

-- The timer callback: (timeout, self). fn is called with pcall only (no C
-- function in between), so that it may yield where the host allows it.
function attempt(_, self)
  self._timeout, self._due = nil, nil
  if self._state ~= "running" then return end
  self._attempts = self._attempts + 1
  local n = self._attempts
  local ok, value, err = pcall(self._fn, n)
  if self._state ~= "running" then return end -- cancelled while it ran
  local o, news = self._opts, {}
  if ok and value then
    finish(self, "succeeded", nil)
    hook(news, o.on_success, value, n)
    return report(self, news)
  end
  if ok then err = err == nil and "failed" or err else err = value end
  self._last_error = err
  local state, reason, unexpected = schedule_next(self, n, err)
  if state then finish(self, state, reason) end
  if unexpected then news[1] = reason end
  hook(news, o.on_failure, err, n, state ~= nil)
  return report(self, news)
end

--- hwtimer.retry(timer, fn, [opts]): see docs/api.md, "Retry".
function M.retry(timer, fn, opts)
  if not is_timer(timer) then argerror(1, "hwtimer.timer expected, got " .. type_name(timer)) end
  if not callable(fn) then
    argerror(2, "function or callable object expected, got " .. type_name(fn))
  end
  local o = check.arg_options(opts, OPTIONS, 3, "retry", 2)
  local self = setmetatable({ _timer = timer, _fn = fn, _opts = o, _attempts = 0,
                              _state = "running", _started = now() }, Retry)
  local t, err = timer:schedule(0, attempt, self)
  if not t then return nil, err end
  self._timeout = t
  self._due = due_of(t, 0)
  count(self, "retry_started")
  return self
end


return M
