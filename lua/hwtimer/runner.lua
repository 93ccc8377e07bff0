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
-- The glue's `self` holds timer, take, done, budget, on_error.
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

--- Check a glue's opts table (on_error, batch, dispatch), raising as
-- argument #3 of `fname`.
function R.check_opts(opts, fname)
  for k, v in pairs(opts) do
    local expected = (k == "on_error" and "function expected")
      or (k == "batch" and "positive integer expected")
      or (k == "dispatch" and "boolean expected") or "unknown option"
    local mt = getmetatable(v)
    local ok = (k == "on_error" and (type(v) == "function" or (type(mt) == "table" and mt.__call)))
      or (k == "batch" and type(v) == "number" and v >= 1 and v == math.floor(v))
      or (k == "dispatch" and type(v) == "boolean")
    if not ok then
      error(string.format("bad argument #3 to '%s' (option '%s': %s)", fname, tostring(k), expected), 3)
    end
  end
end

return R
