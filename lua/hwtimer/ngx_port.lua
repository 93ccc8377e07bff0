--- hwtimer.ngx_port: code ported from ngx.timer, on an hwtimer.ngx timer.
--
-- hwtimer passes a callback its timeout handle first; ngx.timer passes
-- `premature`. A callback ported as it is, `function(premature, target) if
-- premature then return end ... end`, would get the handle (truthy) and
-- return at once, every time, silently. Two answers, both here:
--
--   local timer = d:ngx_timer()        -- ngx.timer's convention, on d
--   local ok, err = timer.at(delay, check, target)
--   local ok, err = timer.every(0.5, check, target)
--   -- check(premature, target): premature is false, or true when called
--   -- at the worker's exit for a timeout that never ran
--
-- and d:schedule / d:every refuse, with an argument error, a Lua function
-- whose first parameter is named `premature` (the first 4,096 distinct
-- callbacks a timer is given are looked at; a port's mistake shows in its
-- first runs, and a callback made afresh for each schedule does not pay for
-- the look after that).
local check = require("hwtimer.check")

local M = {}

-- Callbacks looked at for a `premature` first parameter, a timer.
local LOOKS = 4096

--- A looker for one timer: looks(cb) is true when cb is a Lua function whose
-- first parameter is named `premature` (LuaJIT and Lua 5.2+ name a
-- function's parameters; on 5.1 nothing is looked at).
function M.looker()
  local seen = setmetatable({}, { __mode = "k" })
  local left = LOOKS
  local getlocal = debug.getlocal
  if not pcall(getlocal, print, 1) then return function() return false end end
  return function(cb)
    if left <= 0 or type(cb) ~= "function" then return false end
    local v = seen[cb]
    if v == nil then
      left = left - 1
      v = getlocal(cb, 1) == "premature"
      seen[cb] = v
    end
    return v
  end
end

--- Raise, as argument #2 of `fname`, the error for a callback ported from
-- ngx.timer as it is; `level` as error()'s, counted from the caller.
function M.refuse(fname, level)
  check.argerror(2, fname, "the callback's first parameter is named 'premature', as an ngx.timer " ..
    "callback's: hwtimer.ngx passes the timeout handle there, so 'if premature then return end' " ..
    "would always return; use d:ngx_timer()." .. (fname == "every" and "every" or "at") ..
    " for ngx.timer's arguments, or name the parameter otherwise", level + 1)
end

-- The callback of a ported timeout: fn(premature, ...), premature true when
-- the glue calls it at the worker's exit (the timeout stopped, never run).
local function trampoline(t, fn, ...)
  return fn(t:state() == "cancelled" and ngx.worker.exiting(), ...)
end

local function positive(v) return type(v) == "number" and v > 0 and v < math.huge end

--- The ngx.timer-like functions of timer d (an hwtimer.ngx object).
--   at(delay, fn, ...)        as ngx.timer.at: fn(premature, ...) once
--   every(interval, fn, ...)  as ngx.timer.every: fn(premature, ...) every
--                             interval, at a fixed rate (each run one interval
--                             after the last was due) and never beside itself
--                             (ngx.timer.every may overlap a slow run)
-- Both return the timeout handle (true to ngx.timer's callers; t:cancel()
-- works), or nil and the message of a refusal (max_pending).
function M.functions(d)
  local at = function(delay, fn, ...)
    if not (type(delay) == "number" and delay >= 0 and delay < math.huge) then
      check.argerror(1, "at", "non-negative number of seconds expected", 2)
    end
    if not check.callable(fn) then
      check.argerror(2, "at", "function expected, got " .. check.type_name(fn), 2)
    end
    return d.timer:schedule(delay, trampoline, fn, ...)
  end
  local every = function(interval, fn, ...)
    if not positive(interval) then
      check.argerror(1, "every", "positive number of seconds expected", 2)
    end
    if not check.callable(fn) then
      check.argerror(2, "every", "function expected, got " .. check.type_name(fn), 2)
    end
    return d.timer:every({ interval = interval, rate = true }, trampoline, fn, ...)
  end
  return { at = at, every = every }
end

return M
