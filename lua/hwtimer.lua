--- hwtimer: a hashed timing wheel timer for Lua.
-- The wheel, its worker thread and the wake-up pipe live in C (hwtimer.core);
-- this module is the public face and the home of helpers better written in Lua.
local core = require("hwtimer.core")

local hwtimer = {
  _VERSION = core._VERSION,
  now = core.now,
  new = core.new,
}

local function check_opt(opts, name, default, ok, expected)
  local v = opts[name]
  if v == nil then return default end
  if not ok(v) then
    error(string.format("bad argument #3 to 'retry' (option '%s': %s expected)", name, expected), 3)
  end
  return v
end

local function positive(v) return type(v) == "number" and v > 0 and v < math.huge end
local function non_negative(v) return type(v) == "number" and v >= 0 and v < math.huge end
local function fraction(v) return type(v) == "number" and v >= 0 and v <= 1 end
local function callable(v)
  local mt = getmetatable(v)
  return type(v) == "function" or (type(mt) == "table" and mt.__call ~= nil)
end
local function whole(v) return positive(v) and v == math.floor(v) end

local Retry = {}
Retry.__index = Retry

--- Stop retrying; true if it was still trying.
function Retry:cancel()
  if self._state ~= "running" then return false end
  self._state = "cancelled"
  if self._timeout then self._timeout:cancel() end
  return true
end

--- "running", "succeeded", "failed" (attempts used up) or "cancelled".
function Retry:state() return self._state end

--- How many attempts have run so far.
function Retry:attempts() return self._attempts end

-- The wait before attempt n+1: delay * factor^(n-1), capped, less up to `jitter` of it.
local function wait_after(self, n)
  local o = self._opts
  local wait = math.min(o.max_delay, o.delay * o.factor ^ (n - 1))
  return wait * (1 - o.jitter * math.random())
end

local function attempt(_, self) -- a timer callback: (timeout, self)
  self._timeout = nil
  if self._state ~= "running" then return end
  self._attempts = self._attempts + 1
  local n = self._attempts
  local ok, value, err = pcall(self._fn, n)
  if ok and value then
    self._state = "succeeded"
    if self._opts.on_success then self._opts.on_success(value, n) end
    return
  end
  if ok then err = err or "failed" else err = value end
  local last = n >= self._opts.attempts
  if self._opts.on_failure then self._opts.on_failure(err, n, last) end
  if self._state ~= "running" then return end -- cancelled by on_failure
  if last then
    self._state = "failed"
    return
  end
  self._timeout = assert(self._timer:schedule(wait_after(self, n), attempt, self))
end

--- hwtimer.retry(timer, fn, [opts]): call fn(attempt) on the timer's loop
-- until it returns a true value without raising, with exponential backoff
-- between attempts, as Dubbo's failback retries do on a wheel. The first
-- attempt runs at the next dispatch. Returns a handle (cancel, state,
-- attempts). opts: attempts (5), delay (0.1 s before the 2nd attempt),
-- factor (2), max_delay (30 s), jitter (0.1: each wait is shortened by a
-- random share of up to 10%), on_success(value, attempt),
-- on_failure(err, attempt, last).
function hwtimer.retry(timer, fn, opts)
  if not callable(fn) then
    error("bad argument #2 to 'retry' (function or callable object expected, got " .. type(fn) .. ")", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #3 to 'retry' (table expected, got " .. type(opts) .. ")", 2)
  end
  opts = opts or {}
  local o = {
    attempts = check_opt(opts, "attempts", 5, whole, "positive integer"),
    delay = check_opt(opts, "delay", 0.1, non_negative, "non-negative number of seconds"),
    factor = check_opt(opts, "factor", 2, positive, "positive number"),
    max_delay = check_opt(opts, "max_delay", 30, non_negative, "non-negative number of seconds"),
    jitter = check_opt(opts, "jitter", 0.1, fraction, "number from 0 to 1"),
    on_success = check_opt(opts, "on_success", nil, callable, "function"),
    on_failure = check_opt(opts, "on_failure", nil, callable, "function"),
  }
  local self = setmetatable({ _timer = timer, _fn = fn, _opts = o, _attempts = 0,
                              _state = "running" }, Retry)
  local t, err = timer:schedule(0, attempt, self)
  if not t then return nil, err end
  self._timeout = t
  return self
end

return hwtimer
