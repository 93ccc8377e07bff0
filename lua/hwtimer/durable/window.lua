--- hwtimer.durable.window: a queue's timeouts. The jobs due within `window`
-- seconds are held as ordinary timeouts of the timer, one per key the engine
-- gives (SQLite: the row's seq; Redis: its ready time); when one fires, the
-- queue's pass (self._pass, hwtimer.durable.runs) claims what is due. A
-- refill every window/2 loads what came inside the window, a poll every
-- `poll` seconds what other processes wrote, and a sweep every `sweep`
-- seconds looks for what no timeout holds (an expired lease of a process
-- that died, a job the timer refused).
--
-- Also what every part of a queue shares: scheduling on the timer without
-- raising (later), the reports to on_error, and who owns an open q:batch.
-- The timer is used only through the API a user has (timer:schedule,
-- timer:every, t:cancel, t:state), so it may be hwtimer.ngx's object.
local max = math.max
local text = require("hwtimer.text")
local message, log_safe = text.message, text.log_safe

local window = {}

---------------------------------------------------------------------------
-- What the parts of a queue share
---------------------------------------------------------------------------

-- At an nginx worker's exit hwtimer.ngx stops the timer and calls the
-- callbacks of the pending timeouts once more, each cancelled: nothing is
-- claimed then (the jobs stay in the store for the next process).
function window.cancelled(t)
  if t == nil then return false end
  local ok, state = pcall(t.state, t)
  return ok and state == "cancelled"
end

--- timer:schedule that never raises: the timeout; nil where the timer
-- refuses (max_pending); nil, true where it is stopped (an nginx worker
-- exiting, its timer stopped while a callback of ours waited on a cosocket),
-- noted in self._stopped. Every caller has a way on without it.
function window.later(self, delay, fn, ...)
  local ok, t = pcall(self._timer.schedule, self._timer, delay, fn, ...)
  if ok then return t end
  self._stopped = true -- (a stopped timer is never started again)
  return nil, true
end

--- The default on_error: nginx's error log with a level where there is one
-- (stderr would land there without time or level), else stderr.
function window.default_on_error(err, job)
  local line = "hwtimer.durable: " ..
    (job and ("job " .. log_safe(job.id) .. " (" .. log_safe(job.kind) .. "): ") or "") .. log_safe(err)
  local ngx = rawget(_G, "ngx")
  if type(ngx) == "table" and type(ngx.log) == "function" and ngx.ERR then
    ngx.log(ngx.ERR, line)
  else
    io.stderr:write(line, "\n")
  end
end

-- Report an error to on_error, never letting it unwind us. The store's own
-- errors (no job) come from a poll every `poll` seconds and a retry every
-- 0.05 s while the store is down: at most one a second reaches on_error,
-- with the count of those held back since.
local STORE_ERRORS_EVERY = 1
local mono = require("hwtimer.core").now
function window.report(self, err, job)
  if not job then
    local now = mono()
    if now < self._quiet_until then
      self._held_back = self._held_back + 1
      return
    end
    if self._held_back > 0 then
      err = message(err) .. " (and " .. self._held_back .. " store errors in the last " ..
        STORE_ERRORS_EVERY .. " s)"
    end
    self._quiet_until, self._held_back = now + STORE_ERRORS_EVERY, 0
  end
  local ok, e = pcall(self._on_error, err, job)
  if not ok then window.default_on_error("on_error raised: " .. message(e), job) end
end

-- A store that failed (out of reach, locked, full) is tried again by the
-- queue's own calls (poll, sweep, pass, refill, acknowledgements) once per
-- step of a backoff from 0.05 s, doubling up to 1 s: not by every poll of
-- every worker, hundreds of connection attempts a second. A user's calls
-- (schedule, cancel ...) always try.
local RETRY_FIRST, RETRY_MAX = 0.05, 1

--- The store failed: the seconds until the queue's own calls try it again.
function window.failed(self)
  local step = self._retry_step
  step = step and math.min(RETRY_MAX, step * 2) or RETRY_FIRST
  self._retry_step, self._retry_at = step, mono() + step
  return step
end

function window.succeeded(self) self._retry_step, self._retry_at = nil, nil end

--- Seconds until the next try while the store is held to be down; nil
-- when the caller may call it: the store is up, or this is the step's one
-- try (the others wait for the step to end, or for its success).
function window.down(self)
  local at = self._retry_at
  if at == nil then return nil end
  local now = mono()
  if now < at then return at - now end
  self._retry_at = now + self._retry_step
  return nil
end

-- q:batch's function may yield (a cosocket in nginx, a cqueues or copas
-- socket). Until it returns the open batch belongs to its coroutine: a write
-- from another coroutine would fall into it, and out with it if it is rolled
-- back, after its caller was told the job was stored. Such writes are refused
-- (nil, message), and a claim pass waits for the batch to end.
local MAIN = {} -- coroutine.running() is nil on the main thread of 5.1 and LuaJIT
function window.current() return coroutine.running() or MAIN end
function window.other_batch(self) return self._batching ~= nil and self._batching ~= window.current() end

---------------------------------------------------------------------------
-- The window
---------------------------------------------------------------------------

local later, cancelled, report = window.later, window.cancelled, window.report

-- A key's timeout: the pass claims whatever is due by its ready time.
local function fire(t, self, key, ready)
  if self._closed or cancelled(t) then return end
  self._loaded[key] = nil
  self._pass(self, ready)
end

--- Hold `key` in the wheel until `ready` (epoch seconds on the store's
-- clock). A timer that refuses (max_pending) leaves the job to the sweep.
-- `now` is read for each job: loading a large window takes long enough that
-- a `now` read once before it made the last ones late by as much.
function window.load(self, key, ready)
  if self._loaded[key] then return end
  local t = later(self, max(0, ready - self._now()), fire, self, key, ready)
  if t then self._loaded[key] = t end
end

function window.unload(self, key)
  local t = self._loaded[key]
  if t then
    self._loaded[key] = nil
    t:cancel()
  end
end

--- Run a pass soon (next dispatch), at most one queued at a time.
function window.soon(self, delay)
  if self._soon or self._closed then return end
  self._soon = later(self, delay or 0, function(t)
    self._soon = nil
    if not cancelled(t) then self._pass(self) end
  end)
end

--- Load marks { key, ready }; a pass soon if one is due already.
function window.load_all(self, marks, n)
  local now, overdue = self._now(), false
  for i = 1, n or #marks do
    local r = marks[i]
    if r[2] <= now then overdue = true else window.load(self, r[1], r[2]) end
  end
  if overdue then window.soon(self) end
end

-- The refill: every window/2, load what came inside the window.
local function refill(t, self)
  if self._closed or cancelled(t) then return end
  local horizon = self._now() + self._window
  local marks, n = self._engine:range(self._loaded_until - 1e-9, horizon)
  if not marks then
    window.failed(self)
    report(self, "refill: " .. tostring(n))
  else
    window.succeeded(self)
    self._loaded_until = horizon
    window.load_all(self, marks, n)
  end
  self._refill = later(self, self._window / 2, refill, self)
end

-- Every `poll` seconds: what did other processes write (the engine knows
-- how to tell)? Every `sweep` seconds: is anything due that no timeout of
-- ours holds?
local function poll_once(self)
  if self._closed or window.down(self) then return end
  local marks, n = self._engine:changes(self._loaded_until)
  if not marks and n then
    window.failed(self)
    return report(self, "poll: " .. tostring(n))
  end
  window.succeeded(self)
  if marks then window.load_all(self, marks, n) end
  -- (a refill whose next turn a full timer refused: again, now it has room;
  -- the poll is periodic, so it keeps its place on the timer)
  if not self._refill then self._refill = later(self, self._window / 2, refill, self) end
  local now = self._now()
  if now >= self._next_sweep then
    self._next_sweep = now + self._sweep
    self._pass(self)
  end
end

-- One poll at a time: in nginx a wake-up's and the period's may meet,
-- each yielding on its cosocket; one asked for meanwhile runs after.
local function poll(self)
  if self._polling then
    self._poll_again = true
    return
  end
  self._polling = true
  repeat
    self._poll_again = false
    local ok, err = pcall(poll_once, self)
    if not ok then
      self._polling = false
      error(err, 0)
    end
  until not self._poll_again
  self._polling = false
end

--- Another process says a job is due now (hwtimer.durable.ngx's listener
-- heard its wake-up): poll at once, in a timeout of the timer (where the
-- queue's calls run), one however many say so before it runs.
function window.wake(self)
  if self._closed or self._waking then return end
  self._waking = later(self, 0, function(t)
    self._waking = nil
    if not cancelled(t) then poll(self) end
  end)
end

--- Open the window: load what is due within it, start the refill and the
-- poll, and a pass for what came due while no process ran. nil, message
-- when the store cannot be read.
function window.open(self)
  local now = self._now()
  local marks, n = self._engine:range(now, now + self._window)
  if not marks then return nil, n end
  self._loaded_until = now + self._window
  window.load_all(self, marks, n)
  self._next_sweep = now + self._sweep
  -- (the refill and the poll keep the queue going: a timer that refuses
  -- them, at its max_pending, refuses the queue, which would never run a job)
  local err
  self._refill, err = self._timer:schedule(self._window / 2, refill, self)
  if self._refill then
    self._poll, err = self._timer:every(self._poll_every, function(t) if not cancelled(t) then poll(self) end end)
  end
  if not self._poll then
    window.close(self)
    return nil, "the timer refused the queue's timeouts: " .. tostring(err)
  end
  window.soon(self)
  return true
end

--- Cancel every timeout of the queue's window.
function window.close(self)
  for _, t in pairs(self._loaded) do t:cancel() end
  self._loaded = {}
  for _, t in ipairs({ self._refill or false, self._poll or false, self._soon or false, self._waking or false }) do
    if t then pcall(t.cancel, t) end
  end
end

return window
