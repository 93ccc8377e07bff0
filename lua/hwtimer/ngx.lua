--- hwtimer.ngx: hwtimer inside an nginx worker (OpenResty, ngx_http_lua).
--
--   init_worker_by_lua_block {
--     package.loaded.timer = assert(require("hwtimer.ngx").new())
--   }
--   -- any handler of that worker:
--   local t = package.loaded.timer:schedule(0.5, function(t, id)
--     local sock = ngx.socket.tcp()          -- callbacks may yield: cosockets,
--     ...                                    -- ngx.sleep, semaphores, threads
--   end, 42)
--   t:cancel()
--
-- nginx's Lua cannot poll a descriptor, and nothing yieldable may run below
-- a C call: a cosocket that yields inside timer:dispatch() fails, and the
-- failed yield leaves the coroutine's state in ngx_http_lua corrupt (the
-- worker crashes at its next wait). So the timer here is take_only: Lua
-- code takes its due timeouts and calls their callbacks, where they may
-- yield like ngx.timer callbacks.
--
-- One dispatcher (an ngx.timer) sleeps on a semaphore until the wheel's next
-- event; the timer's wakeup hook posts it when anything (schedule, every,
-- reset, retry, a periodic run) becomes due before that. When timeouts are
-- due it starts a runner, a light thread (ngx.thread.spawn) that calls due
-- callbacks one after another. spawn returns to the dispatcher as soon as
-- the runner yields, which a runner does only inside a callback that waits
-- (a cosocket, ngx.sleep): that runner is left to its callback, and the
-- dispatcher starts another for the rest at once. So a callback that does
-- not wait never queues behind callbacks that do, a callback costs a light
-- thread only when it waits, and max_runners (none by default) bounds the
-- callbacks in progress at once for users who want that.
--
-- After `slice` seconds of callbacks in a row, and after runner_runs
-- callbacks, the dispatcher hands over to a fresh ngx.timer: a 0 ms timer
-- runs after the events already pending, so nginx serves requests during a
-- burst, and a timer context keeps what its cosockets and light threads
-- allocated until it ends (it ends once its waiting runners have).
--
-- At worker exit (nginx -s quit / reload), a pending ngx.timer kept for the
-- purpose runs with premature = true: the timer stops, and the callbacks of
-- the timeouts that never ran are called once more, with the timeout
-- "cancelled" and ngx.worker.exiting() true, at most exit_max of them within
-- exit_time seconds; the rest are dropped with one log line.
local hwtimer = require("hwtimer")
local check = require("hwtimer.check")
local driver = require("hwtimer.runner")
local port = require("hwtimer.ngx_port")
local semaphore = require("ngx.semaphore")
local spawn, reap = ngx.thread.spawn, ngx.thread.wait
local unpack = table.unpack or unpack

local now = hwtimer.now
local ceil = math.ceil
local M = {}

local HERE = debug.getinfo(1, "S").short_src -- (this file, as error messages name it)
local NgxTimer = {}
NgxTimer.__index = NgxTimer

local function non_negative(v) return type(v) == "number" and v >= 0 and v < math.huge end
local function positive_integer(v) return type(v) == "number" and v >= 1 and v == math.floor(v) end

-- The glue's own options, as hwtimer.check.options reads them; hwtimer.new
-- checks the rest. max_runners has no default: no bound.
local GLUE_OPTIONS = { max_runners = { nil, positive_integer, "positive integer" } }
GLUE_OPTIONS.wake_socket = { true, function(v) return type(v) == "boolean" end, "boolean" }
for k, default in pairs({ runner_runs = 1000, slice = 0.002, max_wait = 1, exit_max = 10000, exit_time = 1 }) do
  GLUE_OPTIONS[k] = { default, non_negative, "non-negative number" }
end

-- The default on_error. The timeout's name ends the line: nginx's error log
-- mixes every worker's and request's lines.
local function log_error(err, t, traceback)
  ngx.log(ngx.ERR, driver.callback_error(err, traceback), " (", tostring(t), ")")
end

-- Split opts into the timer's and the glue's (checked here); the max_wait
-- argument, checked by new, counts where opts has none.
local function split_options(opts, max_wait)
  local timer_opts, given = {}, {}
  for k, v in pairs(opts) do
    if GLUE_OPTIONS[k] ~= nil then given[k] = v else timer_opts[k] = v end
  end
  local glue, err = check.options(given, GLUE_OPTIONS)
  if not glue then check.argerror(1, "new", err, 3) end
  if max_wait ~= nil and given.max_wait == nil then glue.max_wait = max_wait end
  if glue.max_wait < 0.001 then glue.max_wait = 0.001 end
  glue.max_runners = glue.max_runners or math.huge
  return timer_opts, glue
end

-- ---- runners ---------------------------------------------------------------

-- Call cb(t, ...) protected, keeping a traceback for on_error. xpcall passes
-- arguments on 5.2+ and LuaJIT, which is what nginx runs; LuaJIT's xpcall is
-- yieldable, so the callback may use cosockets. At worker exit (premature)
-- the timer is stopped: there is no done to report.
local function call(self, premature, t, cb, ...)
  local ok, err = xpcall(cb, self.handler, t, ...)
  if not ok then
    local ok2, err2 = pcall(self.on_error, err, t, self.traceback)
    if not ok2 then ngx.log(ngx.ERR, driver.on_error_error(err2)) end
  end
  if not premature then self.timer:done(t, ok) end
end

-- w.t: the timeout whose callback the runner w calls (read at worker exit).
local function run_one(self, w, premature, t, ...)
  if not t then return false end
  self.ran = self.ran + 1
  w.t = t
  call(self, premature, t, ...)
  w.t = nil
  return true
end

-- A runner's work: call the callback of the timeout it was started with
-- (t, cb, ...), then those `next_due(self)` gives until it gives none, the
-- slice is used up (w.sliced) or a callback waited: the dispatcher set
-- w.waited when this thread yielded and went on without it, so it ends
-- once that callback returns.
local function drain(self, w, next_due, premature, ...)
  local n = 0
  local more = run_one(self, w, premature, ...)
  while more do
    if w.waited then return end
    n = n + 1
    if n % 32 == 0 and now() - self.since > self.slice then
      w.sliced = true
      return
    end
    more = run_one(self, w, premature, next_due(self))
  end
end

local function take_due(self)
  if self.running then return self.timer:take() end
end

-- A take or done that raised. A timer closed or stopped behind the glue's
-- back makes take raise: the glue stops quietly. On a timer that still
-- works, it raised for a passing reason (out of memory): the dispatcher
-- logs it, and the due callbacks wait for its next turn.
local function fault(self, err, t, premature)
  if driver.usable(self.timer) then
    self.fault = err
    if t and not premature then self.undone[t] = true end -- done raised: again at the next turn
  else
    self.running = false
  end
end

-- The body of a runner (a light thread).
local function runner(self, w, next_due, premature, ...)
  local ok, err = pcall(drain, self, w, next_due, premature, ...)
  if not ok then fault(self, err, w.t, premature) end
  w.done = true
  if w.waited then
    self.waiting = self.waiting - 1
    self.waiters[w] = nil
    if self.slot_wanted then
      self.slot_wanted = false
      self.slot:post(1)
    end
  end
end

-- A runner for the timeout next_due gave (ok, t, cb, ...: pcall's), when
-- it gave one: the runner, its thread. (Taken here, not by the runner: a
-- runner spawned to find nothing due cost a light thread every wake-up.)
local function start(self, next_due, premature, ok, t, ...)
  if not ok then
    fault(self, t)
    return nil
  end
  if not t then return nil end
  local w = {}
  return w, spawn(runner, self, w, next_due, premature, t, ...)
end

-- Run due callbacks in runners until none is due: a runner whose callback
-- waits is left to it and the next one goes on. Returns how many runners
-- started and true when the slice is used up. With max_runners callbacks
-- waiting, wait for one to end; the dispatcher of generation `gen` leaves
-- if a fresh one took over meanwhile (hand_over), passing on the slot.
local function run_due(self, next_due, premature, gen)
  local started = 0
  next_due = next_due or take_due
  self.since = now()
  while self.running or premature do
    while self.waiting >= self.max_runners do
      self.slot_wanted = true
      local got = self.slot:wait(premature and 0.01 or self.max_wait)
      if not (self.running or premature) then return started, false end
      if gen and self.took ~= gen then -- a fresh dispatcher took over meanwhile: the slot is its
        if got then self.slot:post(1) end
        return started, false
      end
      if premature then -- at worker exit, not past exit_time
        ngx.update_time()
        if ngx.now() >= self.exit_deadline then return started, false end
      end
    end
    local w, co = start(self, next_due, premature, pcall(next_due, self))
    if not w then return started, false end
    started = started + 1
    if w.done then
      reap(co) -- it ended inside spawn: free it now, not at the context's end
      return started, w.sliced
    end
    w.waited = true
    self.waiters[w] = true
    self.waiting = self.waiting + 1
    if self.waiting > self.peak then self.peak = self.waiting end
    if now() - self.since > self.slice then return started, true end
  end
  return started, false
end

-- ---- the dispatcher ------------------------------------------------------------

local dispatcher, on_exit

-- Hand over to a dispatcher in a fresh ngx.timer; true once it has started.
-- nginx may accept the timer and not run it: when it fires with
-- lua_max_running_timers running (every handed-over context whose callbacks
-- still wait is one), or with no free connection for its context, nginx
-- logs an alert and drops it. So this one waits 2 ms for it to start (with
-- Debian's nginx a 0 ms timer fires before a 2 ms one set in the same pass;
-- with OpenResty's, whose 0 ms timers wait for the end of the loop's pass,
-- it may start later), then goes on in place. It stays the fresh one's
-- generation: if it starts later, it takes over, and this one leaves at its
-- next turn (dispatcher's loop). self.took is the generation of the newest
-- dispatcher that started; at or past gen, the fresh one ran: a chain of
-- them may start and hand over in one pass of nginx's loop (each one's 0 ms
-- timer is due at once) before this wait ends.
--
-- The count of running timers at a handover that did not start is kept as
-- the bound for a second, or until a fresh one starts: until fewer run, no
-- handover is tried (nginx's alert and the 2 ms each) and the dispatcher
-- yields to nginx's loop in place (a 1 ms sleep) instead. A bound that was
-- never one (other timers ended meanwhile) thus holds the context for a
-- second at most; a context keeps what its light threads allocated until
-- it ends.
local running_count = ngx.timer.running_count
local HANDOVER_WAIT, FULL_FOR = 0.002, 1

local function hand_over(self)
  local running = running_count and running_count()
  if running and running >= self.timers_full and now() < self.full_until then
    ngx.sleep(0.001) -- (0 logs a warning where nginx lacks OpenResty's delayed-events patch)
    return false
  end
  local gen = self.gen + 1
  local ok, err = ngx.timer.at(0, dispatcher, self, gen)
  if ok then
    self.gen = gen
    local limit = now() + 0.1
    repeat
      local posted = self.took_over:wait(HANDOVER_WAIT)
    until self.took >= gen or not posted or now() >= limit
    if self.took >= gen then
      self.handovers = self.handovers + 1
      return true
    end
    err = "it did not start within 2 ms, " .. tostring(running) ..
          " timers running (lua_max_running_timers?); tried again once fewer run"
    self.timers_full, self.full_until = running or math.huge, now() + FULL_FOR
  end
  if not self.handover_failed then
    self.handover_failed = true
    ngx.log(ngx.WARN, "hwtimer: cannot hand over to a fresh dispatcher (this one goes on): ", tostring(err))
  end
  return false
end

-- nginx's timer clock: ngx_current_msec, CLOCK_MONOTONIC in whole ms as the
-- event loop last read it (the clock hwtimer.now reads, in seconds). A
-- function returning it, or nil where the binary does not export it.
local function ngx_msec_reader()
  local ok, ffi = pcall(require, "ffi")
  if not ok then return nil end
  ok = pcall(ffi.cdef, "extern volatile uintptr_t ngx_current_msec;")
  local C = ffi.C
  if not (ok and pcall(function() return C.ngx_current_msec end)) then return nil end
  return function() return tonumber(C.ngx_current_msec) end
end
local ngx_msec = ngx_msec_reader()

-- The sleep that ends at the first millisecond of nginx's clock at or after
-- `wait` seconds from now, in whole milliseconds, at least one (a 0 ms wait
-- does not yield). nginx's timer fires once its clock, which lags while the
-- loop works, reaches the key it set from that lagging clock: counted from
-- hwtimer.now, the sleep could end up to a millisecond or more early, and
-- the dispatcher would find nothing due and sleep another millisecond.
-- (+ 0.5: ngx.semaphore truncates seconds * 1000 to whole ms, and
-- 0.05 * 1000 may be 49.99...)
local function sleep_for(wait)
  local ms
  if ngx_msec then
    ms = ceil((now() + wait) * 1000) - ngx_msec()
  else
    ms = ceil(wait * 1000)
  end
  return (math.max(1, ms) + 0.5) / 1000
end

-- When the dispatcher asks the driver thread for a datagram at the
-- deadline (wake_arm): after a wake-up that ran ARM_BURST callbacks or
-- more, and before a wait of ARM_MIN or more unless the deadline it waits
-- for is one timeout's alone (wake_arm's crowded_only). Otherwise it sleeps
-- on nginx's own millisecond timer, up to a millisecond after the deadline,
-- as an ngx.timer would, and the driver does not wake for it
-- (timer:host_timed). A datagram for one callback costs two wake-ups in
-- series: health checks spread over 0.5 s, one due every 0.5 ms (each wait
-- under ARM_MIN) or every 50 ms (each deadline alone), cost up to twice the
-- CPU of ngx.timer.every's own timers that way (docs/performance.md,
-- "Health checks"). A burst (a thousand scheduled in a loop, their
-- deadlines spread over the loop's few milliseconds, several at each tick)
-- shares each datagram among many callbacks, and a millisecond late would
-- be most of its lateness.
local ARM_MIN, ARM_BURST = 0.002, 8

-- Seconds to sleep until the next deadline (sleep_for); 0 when timeouts
-- are due. Sets self.sleep, self.arm (whether to ask for a datagram) and
-- self.crowded_only (only if the deadline is not one timeout's alone).
local function wait_ms(self)
  local wait = self.timer:timeout() -- also the planned wake-up the hook compares with
  if wait == 0 then return 0 end
  if wait == nil or wait > self.max_wait then wait = self.max_wait end
  self.crowded_only = self.ran < ARM_BURST
  self.arm = wait >= ARM_MIN or not self.crowded_only
  self.sleep = sleep_for(wait)
  return self.sleep
end

-- Posts left on the dispatcher's semaphore from before its plan: a
-- datagram read, or the hook called, in the loop turn where its sleep had
-- already ended. The plan (wait_ms, just made, with no yield since) took
-- account of whatever they announced; waited on, each would wake it for
-- nothing.
local function drain_posts(sema)
  while sema:count() > 0 do sema:wait(0) end
end

function dispatcher(premature, self, gen)
  if premature or gen ~= self.gen then return end -- (the exit timer handles the worker's exit)
  if gen > 0 then
    self.took, self.timers_full = gen, math.huge
    self.took_over:post(1)
  end
  local runs = 0
  -- (until a fresh one it handed over to starts late: hand_over)
  while self.running and not ngx.worker.exiting() and self.took == gen do
    local ok, wait = pcall(wait_ms, self)
    if ok and wait > 0 then
      if self.arm then ok, wait = pcall(self.timer.wake_arm, self.timer, self.crowded_only) else wait = false end
    end
    if not ok then -- the timer was closed behind the glue's back: leave quietly
      self.running = false
      break
    end
    if wait == false then -- not due already (wake_arm): the waker posts when due
      if self.slept then self.empty_wakeups = self.empty_wakeups + 1 end
      self.wakeups, self.slept = self.wakeups + 1, true
      drain_posts(self.wake)
      local woken = self.wake:wait(self.sleep)
      if woken and self.took ~= gen then -- the wake-up is the fresh one's
        self.wake:post(1)
        return
      end
    else
      self.ran, self.slept = 0, false -- (ran: counted by run_one, ARM_BURST)
      local started, sliced = run_due(self, nil, nil, gen)
      if self.took ~= gen then return end -- (taken over while it waited for a slot)
      runs = runs + started
      if self.fault then
        ngx.log(ngx.ERR, "hwtimer: ", tostring(self.fault), " (the due callbacks wait for the next turn)")
        self.fault = nil
        ngx.sleep(0.001) -- (the next turn: not at once, as a fault that lasts would spin)
        for t in pairs(self.undone) do -- a periodic one's next run, a finished one's pins
          if pcall(self.timer.done, self.timer, t) then self.undone[t] = nil end
        end
      end
      if (sliced or runs >= self.runner_runs) and self.running then
        if hand_over(self) then return end
        runs = 0
      end
    end
  end
  -- The worker exits and the exit timer has not run: nginx drops a timer it
  -- cannot start, the premature ones at exit too, once lua_max_running_timers
  -- are running (contexts whose callbacks still wait count). Its work is done
  -- here, or the pending callbacks would never be called and the waker would
  -- hold the worker back.
  if self.running and ngx.worker.exiting() and self.took == gen then on_exit(true, self) end
end

-- ---- the waker --------------------------------------------------------------------

-- The waker: an ngx.timer of its own (a cosocket serves the context that
-- made it, and dispatchers hand over) that waits on a UDP cosocket paired
-- with the timer's wake socket (lwake.c) and posts the dispatcher's
-- semaphore for each datagram: the driver thread sends one when timeouts
-- fall due while the dispatcher sleeps, at its own sub-millisecond time, and
-- one when the timer stops. The dispatcher's sleep on nginx's millisecond
-- timers only backs it up. Without it (it cannot pair: said once in the
-- log) the dispatcher wakes on those timers alone, up to a millisecond
-- later.
local FOREVER = 2 ^ 40 -- ms: a read that never times out (nginx logs a timed-out read as an error)

local function pair(self)
  local timer = self.timer
  local udp = ngx.socket.udp()
  local ok, err
  local wake_port, token = timer:wake_socket()
  if wake_port then
    ok, err = udp:setpeername("127.0.0.1", wake_port)
    if ok then ok, err = udp:send(token) end
    if ok then ok, err = timer:wake_pair() end
  else
    err = token
  end
  if ok then return udp end
  udp:close()
  ngx.log(ngx.WARN, "hwtimer: no wake socket, waking on nginx's millisecond timers: ", tostring(err))
end

-- Whether the glue still runs its timer (the timer may have been closed behind its back).
local function live(self)
  return self.running and not ngx.worker.exiting() and pcall(self.timer.pending, self.timer)
end

local function waker(premature, self)
  if premature or not self.running then return end
  local ok, udp = pcall(pair, self)
  if not (ok and udp) then return end
  udp:settimeout(FOREVER)
  self.paired = true
  while live(self) do
    local data, err = udp:receive()
    if not data then
      ngx.log(ngx.WARN, "hwtimer: wake socket failed, waking on nginx's millisecond timers: ", err)
      break
    end
    self.wake:post(1)
  end
  self.paired = false
  udp:close()
end

-- ---- worker exit ---------------------------------------------------------------

-- Run the callbacks of timeouts that never ran, once, with the worker exiting,
-- in runners as at any time (one that waits holds back none of the others).
-- stop() also hands back the timeouts whose callback is still running in a
-- runner that waits (a periodic one, or one its callback reset): their run
-- goes on, and they are not called a second time beside it.
local function run_premature(self, list)
  local deadline, i, last = ngx.now() + self.exit_time, 0, math.min(#list, self.exit_max)
  self.exit_deadline = deadline
  local busy = {}
  for w in pairs(self.waiters) do
    if not w.done then busy[w.t] = true end
  end
  local function next_due()
    local t
    repeat
      if i >= last then return nil end
      if i % 64 == 0 then ngx.update_time() end
      if ngx.now() >= deadline then return nil end
      i = i + 1
      t = list[i]
    until not busy[t]
    return t, t:task()
  end
  self.slice = math.huge -- the exit timer has nothing to hand over to
  run_due(self, next_due, true)
  if i < #list then
    ngx.log(ngx.WARN, "hwtimer: worker exiting: ", #list - i,
            " pending timeouts dropped (exit_max ", self.exit_max, ", exit_time ", self.exit_time, " s)")
  end
end

-- An exit function's light thread: fn(...) protected, its error logged.
local function exit_thread(self, h)
  local ok, err = xpcall(h.fn, self.handler, unpack(h.args, 1, h.args.n))
  if not ok then ngx.log(ngx.ERR, "hwtimer.ngx: error in an exit function: ", self.traceback or tostring(err)) end
end

-- Start the exit functions (d:at_exit), in the order they were given, each
-- in a light thread of its own: one that waits holds back none of the
-- others, nor the premature callbacks. Neither exit_max nor max_runners
-- counts them: they are the exit work of what runs on this timer (a
-- durable queue keeping the leases of its handlers still waiting).
local function run_exit_functions(self)
  local list = {}
  for h in pairs(self.exit_functions) do list[#list + 1] = h end
  table.sort(list, function(a, b) return a.seq < b.seq end)
  self.exit_functions = {}
  for _, h in ipairs(list) do
    local co = spawn(exit_thread, self, h)
    if coroutine.status(co) == "dead" then reap(co) end
  end
end

function on_exit(premature, self)
  if not premature then -- a year passed: keep watching
    ngx.timer.at(365 * 86400, on_exit, self)
    return
  end
  if not self.running then return end
  self.running = false
  self.wake:post(1)
  self.slot:post(1)
  local list = self.timer:stop()
  run_exit_functions(self)
  run_premature(self, list)
  -- Posted here, on the worker's way out, the wake-ups wait for nginx's next
  -- timer event: without one, the dispatcher's own (up to max_wait) would
  -- hold the worker back. A 1 ms sleep is that event.
  ngx.sleep(0.001)
end

-- nginx -s stop closes the Lua state without running a timer callback: the
-- timer's own warning for the timeouts it drops (csrc/ltimer.c) would reach
-- error.log as a bare stderr line among nginx's. A finalizer newer than the
-- timer (at a state's close finalizers run newest first) says it through
-- ngx.log, with the worker's pid and nginx's format, and closes the timer
-- quietly. (LuaJIT calls __gc on userdata only: newproxy makes one.)
local function at_state_close(self)
  local newproxy = rawget(_G, "newproxy")
  if not newproxy then return end
  local p = newproxy(true)
  getmetatable(p).__gc = function()
    if not self.running then return end
    self.running = false
    local ok, n = pcall(self.timer.pending, self.timer)
    if ok and n > 0 then
      pcall(function()
        ngx.log(ngx.WARN, "hwtimer.ngx: the worker stopped (nginx -s stop or the Lua state's end) with ",
                n, " pending timeouts; they never run (nginx -s quit or reload runs them, see exit_max)")
      end)
    end
    pcall(self.timer.close, self.timer)
  end
  self.state_close = p
end

-- ---- the object --------------------------------------------------------------

--- new([opts], [max_wait]): a timer for this worker, with its dispatcher and
-- runners. opts: hwtimer.new's, plus max_runners, runner_runs, slice,
-- max_wait, exit_max, exit_time (see docs/hosts.md).
function M.new(opts, max_wait)
  if opts ~= nil and type(opts) ~= "table" then
    check.argerror(1, "new", "table expected, got " .. check.type_name(opts), 2)
  end
  if max_wait ~= nil and (type(max_wait) ~= "number" or not (max_wait > 0)) then -- luacheck: ignore 581 (rejects NaN)
    check.argerror(2, "new", "positive number of seconds expected", 2)
  end
  local timer_opts, self = split_options(opts or {}, max_wait)
  -- nginx's sleeps count whole milliseconds from a millisecond clock; a
  -- wheel ticking at 1 ms would round every deadline up by as much again
  if timer_opts.tick == nil then timer_opts.tick = 0.0001 end
  self.on_error = timer_opts.on_error or log_error
  timer_opts.on_error = self.on_error
  -- (hwtimer.new's argument errors would name this file's line: raised
  -- again without it, they name the caller's, as every other of new's)
  local made, timer, err = pcall(function()
    local t, e = hwtimer.new(timer_opts)
    return t, e
  end)
  if not made then error((tostring(timer):gsub("^" .. HERE:gsub("%p", "%%%0") .. ":%d+: ", "")), 2) end
  if not timer then return nil, err end
  self.timer, self.running = timer, true
  self.wake, self.slot, self.took_over = semaphore.new(), semaphore.new(), semaphore.new()
  self.waiting, self.peak, self.handovers, self.since, self.gen, self.took = 0, 0, 0, 0, 0, 0
  self.wakeups, self.empty_wakeups = 0, 0
  self.ran = 0 -- callbacks started since the dispatcher last woke
  self.timers_full, self.full_until = math.huge, 0 -- (hand_over)
  self.waiters = {} -- the runners left waiting in a callback (w -> true)
  self.undone = {} -- taken timeouts whose timer:done raised (t -> true): done again
  self.exit_functions, self.exit_seq = {}, 0 -- d:at_exit's (handle -> true)
  self.ported = port.looker() -- callbacks ported from ngx.timer as they are (hwtimer.ngx_port)
  self.handler = function(e)
    self.traceback = debug.traceback(driver.message(e), 2)
    return e
  end
  setmetatable(self, NgxTimer)
  at_state_close(self)
  timer:take_only()
  timer:host_timed() -- (the dispatcher wakes on nginx's timers, or a datagram it arms)
  local wake = self.wake
  timer:wakeup(function() wake:post(1) end)
  local ok, terr = ngx.timer.at(0, dispatcher, self, 0)
  if ok then ok, terr = ngx.timer.at(365 * 86400, on_exit, self) end
  if ok and self.wake_socket then ok, terr = ngx.timer.at(0, waker, self) end
  if not ok then
    self.running = false
    timer:close()
    return nil, "hwtimer.ngx: cannot start the dispatcher: " .. tostring(terr)
  end
  return self
end

-- The timer's whole API on the object: d:schedule(...) is timer:schedule(...).
for _, name in ipairs({ "pending", "timeout", "getfd", "take", "done", "count" }) do
  NgxTimer[name] = function(self, ...)
    local timer = self.timer
    return timer[name](timer, ...)
  end
end

-- schedule and every refuse a callback ported from ngx.timer as it is
-- (hwtimer.ngx_port), which would never run its body.
function NgxTimer:schedule(delay, cb, ...)
  if self.ported(cb) then port.refuse("schedule", 2) end
  return self.timer:schedule(delay, cb, ...)
end

function NgxTimer:every(interval, cb, ...)
  if self.ported(cb) then port.refuse("every", 2) end
  return self.timer:every(interval, cb, ...)
end

--- d:ngx_timer(): { at = ..., every = ... } with ngx.timer.at's and
-- ngx.timer.every's arguments and callbacks, fn(premature, ...), on this
-- timer (hwtimer.ngx_port), for code ported from ngx.timer.
function NgxTimer:ngx_timer()
  self.port_functions = self.port_functions or port.functions(self)
  return self.port_functions
end

local function host_runs(name)
  return function()
    error("hwtimer.ngx: " .. name .. " is not available: the dispatcher and its runners run " ..
          "the callbacks (so that they may yield)", 2)
  end
end
NgxTimer.dispatch = host_runs("dispatch")
NgxTimer.run = host_runs("run")

--- d:stats([since_last]): the timer's stats plus the runners': runners
-- (callbacks waiting in theirs now), runners_peak (the most at once, since
-- the last stats(true)), runners_max (math.huge: no bound), handovers
-- (fresh dispatchers started).
function NgxTimer:stats(since_last)
  local s = self.timer:stats(since_last)
  s.runners, s.runners_peak, s.runners_max, s.handovers, s.wake_socket =
    self.waiting, self.peak, self.max_runners, self.handovers, self.paired == true
  s.wakeups, s.empty_wakeups = self.wakeups, self.empty_wakeups
  if since_last then self.peak = self.waiting end
  return s
end

-- A handle of d:at_exit.
local ExitFunction = {}
ExitFunction.__index = ExitFunction

--- h:cancel(): the function is not called at exit; true if it was still to be.
function ExitFunction:cancel()
  local set = self.owner.exit_functions
  if not set[self] then return false end
  set[self] = nil
  return true
end

function ExitFunction:__tostring()
  return "hwtimer.ngx exit function (" .. (self.owner.exit_functions[self] and "pending" or "done or cancelled") .. ")"
end

--- h = d:at_exit(fn, ...): at this worker's exit (nginx -s quit, reload),
-- once the timer has stopped and before the callbacks of the timeouts that
-- never ran, fn(...) is called once, in a light thread of its own where it
-- may yield; exit_max, exit_time and max_runners do not count it. An error
-- is logged. h:cancel() takes it back. Not called when the timer was
-- stopped before the exit (d:stop()): whoever stopped it took over.
function NgxTimer:at_exit(fn, ...)
  if not check.callable(fn) then
    check.argerror(1, "at_exit", "function expected, got " .. check.type_name(fn), 2)
  end
  if not self.running then error("hwtimer.ngx: at_exit on a stopped timer", 2) end
  self.exit_seq = self.exit_seq + 1
  local h = setmetatable({ owner = self, fn = fn, seq = self.exit_seq,
                           args = { n = select("#", ...), ... } }, ExitFunction)
  self.exit_functions[h] = true
  return h
end

--- Stop the dispatcher, the runners and the timer; returns the timeouts that never ran.
function NgxTimer:stop()
  if not self.running then return self.timer:stop() end
  self.running = false
  self.wake:post(1)
  self.slot:post(1)
  return self.timer:stop()
end

--- d:close(): d:stop() without the list.
function NgxTimer:close()
  self:stop()
end

function NgxTimer:__tostring()
  return ("hwtimer.ngx (%s, %d pending, %d runners)"):format(
    self.running and "running" or "stopped", self.timer:pending(), self.waiting)
end

return M
