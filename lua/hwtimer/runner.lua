--- hwtimer.runner: what the cqueues and copas glue share to run callbacks
-- in coroutines of their own, where a callback may yield to its host.
--
-- A runner is a plain coroutine (w.co, state in the table w) that takes due
-- timeouts (timer:take) and calls their callbacks until none is due or the
-- glue's batch is used up, then yields IDLE. A callback that yields
-- suspends the runner mid-callback: the glue hands it to its host, and once
-- that callback returns the runner yields FINISHED instead of taking more.
-- No pcall is involved (an error kills the runner, whose stack is kept for
-- the traceback), so a yield works on Lua 5.1 as on 5.4 and LuaJIT.
-- The glue's `self` holds timer, take, done, budget, on_error. gc_idle steps
-- the collector in a loop's idle gaps (the glue's gc_step option).
local yield = coroutine.yield
local traceback = debug.traceback

local R = {
  IDLE = {},      -- a runner found nothing more due, or used up the batch
  FINISHED = {},  -- a handed-over runner's callback returned
}

-- Call the callback of t in runner w; false when t is nil (nothing due).
local function call(self, w, t, fn, ...)
  if t == nil then return false end
  self.budget = self.budget - 1
  w.t = t
  fn(t, ...)
  w.t = nil
  self.done(self.timer, t)
  return true
end

--- The body of a runner: resume it with (self, w).
function R.body(self, w)
  local timer, take = self.timer, self.take
  while true do
    while self.budget > 0 do
      if not call(self, w, take(timer)) or w.handed then break end
    end
    yield(w.handed and R.FINISHED or R.IDLE)
  end
end

--- An error value as the C side shows it.
function R.message(err)
  local kind = type(err)
  if kind == "string" or kind == "number" then return tostring(err) end
  local mt = getmetatable(err)
  local ok, s = pcall(tostring, err)
  if ok and type(s) == "string" and type(mt) == "table" and mt.__tostring then return s end
  return "(error object is a " .. kind .. " value)"
end

--- The callback running in w raised err (w's coroutine is dead, its stack
-- kept): to self.on_error(err, t, traceback), or stderr; counted as an error.
function R.report(self, w, err)
  local trace = traceback(w.co, R.message(err))
  if self.on_error then
    local ok, e = pcall(self.on_error, err, w.t, trace)
    if not ok then io.stderr:write("hwtimer: error in on_error: ", R.message(e), "\n") end
  else
    io.stderr:write("hwtimer: error in timeout callback: ", trace, "\n")
  end
  self.timer:done(w.t, false)
end

--- Check a glue's opts table (on_error, batch, dispatch, gc_step), raising
-- as argument #3 of `fname` (or `argn`).
function R.check_opts(opts, fname, argn)
  for k, v in pairs(opts) do
    local expected = (k == "on_error" and "function expected")
      or (k == "batch" and "positive integer expected")
      or (k == "dispatch" and "boolean expected")
      or (k == "gc_step" and "boolean or seconds from 0 to 1 expected") or "unknown option"
    local mt = getmetatable(v)
    local ok = (k == "on_error" and (type(v) == "function" or (type(mt) == "table" and mt.__call)))
      or (k == "batch" and type(v) == "number" and v >= 1 and v == math.floor(v))
      or (k == "dispatch" and type(v) == "boolean")
      or (k == "gc_step" and (type(v) == "boolean" or (type(v) == "number" and v >= 0 and v <= 1)))
    if not ok then
      error(string.format("bad argument #%d to '%s' (option '%s': %s)", argn or 3, fname, tostring(k), expected), 3)
    end
  end
end

-- ---- the collector in idle gaps (the glue's gc_step) ---------------------------
-- What timer:run's gc_step does in C (csrc/ldispatch.c), for loops that
-- know their own gaps: steps, each as if 8 KB more had been allocated (what
-- the allocations owe is paid first), until the gap's end less 0.2 ms, the
-- budget or the end of a cycle; after a cycle, rest until the heap has grown
-- by half.
local now = require("hwtimer.core").now
local GC_MARGIN, GC_DEFAULT, GC_STEP_KB = 0.0002, 0.001, 8
local resting = setmetatable({}, { __mode = "k" }) -- timer -> heap KB to wait for

--- Seconds a gap may spend collecting for the option's value; nil when off.
function R.gc_budget(v)
  if v == true then return GC_DEFAULT end
  if type(v) == "number" and v > 0 then return v end
  return nil
end

--- Step the collector for at most `budget` seconds of a gap of `gap`
-- seconds (nil: nothing due ahead).
function R.gc_idle(timer, budget, gap)
  local rest = resting[timer]
  if rest then
    if collectgarbage("count") < rest then return end
    resting[timer] = nil
  end
  local span = budget
  if gap and gap - GC_MARGIN < span then span = gap - GC_MARGIN end
  if span <= 0 then return end
  local stop = now() + span
  repeat
    if collectgarbage("step", GC_STEP_KB) then
      resting[timer] = collectgarbage("count") * 1.5 + 1
      return
    end
  until now() >= stop
end

return R
