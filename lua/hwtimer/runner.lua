--- hwtimer.runner: the driver of the coroutine hosts (hwtimer.cqueues,
-- hwtimer.copas), and what every loop glue shares: its options, the words of
-- a callback's error, the collector in the loop's idle gaps.
--
-- The driver runs callbacks in coroutines of their own, where a callback may
-- yield to its host. A runner is a plain coroutine (w.co, its state in the
-- table w) that takes due timeouts (timer:take) and calls their callbacks
-- until none is due or the batch is used up, then yields IDLE. A callback
-- that yields suspends its runner mid-callback: the host carries it (a
-- thread of the host's scheduler running runner.carry) and another runner goes on
-- with the rest; once that callback returns, its runner yields FINISHED
-- instead of taking more. No pcall is involved (an error kills the runner,
-- whose stack is kept for the traceback), so a yield works on Lua 5.1 as on
-- 5.4 and LuaJIT.
--
-- A host keeps only its own part: how it waits, and hand(self, w, ...),
-- which starts a thread of its scheduler that calls runner.carry(self, w, ...).
local check = require("hwtimer.check")
local now = require("hwtimer.core").now

local create, resume, yield = coroutine.create, coroutine.resume, coroutine.yield
local traceback = debug.traceback

local runner = {}
local IDLE = {}      -- a runner found nothing more due, or used up the batch
local FINISHED = {}  -- a carried runner's callback returned
local POOL_MAX = 16  -- idle runners a driver keeps for reuse

-- ---- the words of an error ---------------------------------------------------

--- An error value as the C side shows it (csrc/ldispatch.c).
function runner.message(err)
  local kind = type(err)
  if kind == "string" or kind == "number" then return tostring(err) end
  local mt = getmetatable(err)
  local ok, s = pcall(tostring, err)
  if ok and type(s) == "string" and type(mt) == "table" and mt.__tostring then return s end
  return "(error object is a " .. kind .. " value)"
end

--- The line a callback's error is reported with when no on_error takes it,
-- as timer:dispatch() writes it: its traceback, or the error alone.
function runner.callback_error(err, trace)
  return "hwtimer: error in timeout callback: " .. (trace or runner.message(err))
end

--- The line for an on_error that raised in turn.
function runner.on_error_error(err)
  return "hwtimer: error in on_error: " .. runner.message(err)
end

-- ---- options -------------------------------------------------------------------

-- (below 9e15, as timer:dispatch's count: math.huge would pass here and fail there)
local whole = check.count_to(9e15 - 1)
local function boolean(v) return type(v) == "boolean" end
local function gc_step(v) return type(v) == "boolean" or (type(v) == "number" and v >= 0 and v <= 1) end

--- The options of the loop glue, as hwtimer.check.options reads them. batch
-- has no default here: a host says what none means (hwtimer.copas with
-- dispatch = true runs all that is due, as timer:dispatch() does).
runner.OPTIONS = {
  on_error = { nil, check.callable, "function" },
  batch = { nil, whole, "positive integer" },
  dispatch = { nil, boolean, "boolean" },
  gc_step = { nil, gc_step, "boolean or seconds from 0 to 1" },
}

--- The glue function fname's first argument is a timer; raises as the
-- binding does otherwise, at `level` counted from check_timer's caller (as
-- error()'s: 2 is that caller's caller).
function runner.check_timer(timer, fname, level)
  if not check.is_timer(timer) then
    check.argerror(1, fname, "hwtimer.timer expected, got " .. check.type_name(timer), level + 1)
  end
end

--- Argument #n of the glue function fname: nil or a table of options from
-- `spec` (runner.OPTIONS or some of them). Returns them checked, or raises as
-- hwtimer.new does, pointing at fname's caller.
function runner.options(opts, spec, n, fname)
  local o = check.arg_options(opts, spec, n, fname, 3)
  return o -- (not a tail call: its frame is one of the 3 levels)
end

-- ---- the driver ------------------------------------------------------------------

--- The timer still works: neither stopped nor closed (a callback may do either).
function runner.usable(timer)
  return (pcall(timer.events, timer))
end

--- A driver's state for `timer`, options `o` (runner.options'), and the host's
-- hand(self, w, ...). The host may add fields of its own.
function runner.new(timer, o, hand)
  return { timer = timer, take = timer.take, done = timer.done, on_error = o.on_error,
           batch = o.batch or 1000, budget = 0, pool = {}, hand = hand }
end

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

-- The body of a runner: resume it with (self, w).
local function body(self, w)
  local timer, take = self.timer, self.take
  while true do
    while self.budget > 0 do
      if not call(self, w, take(timer)) or w.handed then break end
    end
    yield(w.handed and FINISHED or IDLE)
  end
end

-- The callback running in w raised err (w's coroutine is dead, its stack
-- kept): to self.on_error(err, t, traceback), or stderr; counted as an error.
local function report(self, w, err)
  local trace = traceback(w.co, runner.message(err))
  if self.on_error then
    local ok, e = pcall(self.on_error, err, w.t, trace)
    if not ok then io.stderr:write(runner.on_error_error(e), "\n") end
  else
    io.stderr:write(runner.callback_error(err, trace), "\n")
  end
  self.timer:done(w.t, false)
end

-- After runner w was resumed: true to go on with another runner, false once
-- w is idle. A runner that failed outside a callback (take, once a callback
-- closed the timer) raises here.
local function resumed(self, w, ok, first, ...)
  if ok and first == IDLE then
    local pool = self.pool
    pool[#pool + 1] = w
    return false
  elseif not ok then
    if w.t == nil then error(first, 0) end
    report(self, w, first)
  else -- its callback yielded: the host carries it from here
    w.handed = true
    self.hand(self, w, first, ...)
  end
  return true
end

--- Run at most self.batch due callbacks, in as many runners as yield;
-- returns how many started. A host's hand may end the batch early by
-- setting self.paused (its own to clear).
function runner.run_due(self)
  local pool = self.pool
  self.budget = self.batch
  repeat
    local n = #pool
    local w = pool[n]
    if w then
      pool[n] = nil
    else
      w = { co = create(body), handed = false }
    end
  until not resumed(self, w, resume(w.co, self, w)) or self.paused
  return self.batch - self.budget
end

local function carry(self, w, ok, first, ...)
  if ok and first ~= FINISHED then
    return carry(self, w, resume(w.co, yield(first, ...)))
  end
  if ok then
    w.handed = false
    local pool = self.pool
    if #pool < POOL_MAX then pool[#pool + 1] = w end
  else
    report(self, w, first)
  end
end

--- In a thread of the host (started by its hand): pass what runner w's
-- callback yields up to the host (first `...`, what it yielded when handed)
-- and what the host resumes with back down. Returns once that callback has
-- returned (w back in the pool) or failed (reported).
function runner.carry(self, w, ...)
  return carry(self, w, resume(w.co, yield(...)))
end

-- ---- the collector in idle gaps (the glue's gc_step) ---------------------------
-- What timer:run's gc_step does in C (csrc/ldispatch.c), for loops that
-- know their own gaps: steps, each as if 8 KB more had been allocated (what
-- the allocations owe is paid first), until the gap's end less 0.2 ms, the
-- budget or the end of a cycle; after a cycle, rest until the heap has grown
-- by half.
local GC_MARGIN, GC_DEFAULT, GC_STEP_KB = 0.0002, 0.001, 8
local resting = setmetatable({}, { __mode = "k" }) -- timer -> heap KB to wait for

--- Seconds a gap may spend collecting for the option's value; nil when off.
function runner.gc_budget(v)
  if v == true then return GC_DEFAULT end
  if type(v) == "number" and v > 0 then return v end
  return nil
end

--- Step the collector for at most `budget` seconds of a gap of `gap`
-- seconds (nil: nothing due ahead).
function runner.gc_idle(timer, budget, gap)
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

return runner
