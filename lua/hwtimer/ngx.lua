--- hwtimer.ngx: hwtimer inside an nginx worker (OpenResty, ngx_http_lua).
--
--   init_worker_by_lua_block {
--     package.loaded.timer = assert(require("hwtimer.ngx").new({ tick = 0.001 }))
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
-- worker crashes at its next wait). So the timer here is take_only: its
-- callbacks are taken from it by Lua code and run by a pool of runners, each
-- its own ngx.timer context, where they may yield like ngx.timer callbacks.
--
-- One dispatcher (an ngx.timer) sleeps on a semaphore until the wheel's next
-- event; the timer's wakeup hook posts it when anything (schedule, every,
-- reset, retry, a periodic run) becomes due before that. When timeouts are
-- due it wakes an idle runner, or starts one when every runner is stuck on
-- I/O, up to max_runners. Runners run callbacks one after another, letting
-- nginx serve requests after every `slice` seconds of them during a burst;
-- an idle runner beyond min_runners
-- exits after runner_idle seconds, and each runner hands over to a fresh
-- ngx.timer after runner_runs callbacks (a long-lived timer context keeps
-- what cosockets allocated in it until it ends).
--
-- At worker exit (nginx -s quit / reload), a pending ngx.timer kept for the
-- purpose runs with premature = true: the timer stops, and the callbacks of
-- the timeouts that never ran are called once more, with the timeout
-- "cancelled" and ngx.worker.exiting() true, at most exit_max of them within
-- exit_time seconds; the rest are dropped with one log line.
local hwtimer = require("hwtimer")
local check = require("hwtimer.check")
local driver = require("hwtimer.runner")
local semaphore = require("ngx.semaphore")

local now = hwtimer.now
local M = {}
local NgxTimer = {}
NgxTimer.__index = NgxTimer

local function non_negative(v) return type(v) == "number" and v >= 0 and v < math.huge end

-- The glue's own options, as hwtimer.check.options reads them; hwtimer.new
-- checks the rest.
local GLUE_OPTIONS = {}
for k, default in pairs({ min_runners = 1, max_runners = 64, runner_idle = 10, runner_runs = 1000,
                          slice = 0.002, max_wait = 1, exit_max = 10000, exit_time = 1 }) do
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
  if glue.max_runners < 1 or glue.max_runners < glue.min_runners then
    check.argerror(1, "new", "option 'max_runners': at least 1 and min_runners expected", 3)
  end
  if glue.max_wait < 0.001 then glue.max_wait = 0.001 end
  if glue.runner_idle < 0.001 then glue.runner_idle = 0.001 end
  return timer_opts, glue
end

-- ---- runners ---------------------------------------------------------------

local spawn_runner

-- Call cb(t, ...) protected, keeping a traceback for on_error. xpcall passes
-- arguments on 5.2+ and LuaJIT, which is what nginx runs; LuaJIT's xpcall is
-- yieldable, so the callback may use cosockets. At worker exit (premature)
-- the timer is stopped: there is no done to report and no pool to grow.
local function call(self, premature, t, cb, ...)
  if not premature and self.idle == 0 and not self.poked then
    -- should this callback wait on I/O, the dispatcher looks at the pool as
    -- soon as it yields, not at its next 1 ms look (once per look)
    self.poked = true
    self.wake:post(1)
  end
  self.inside = self.inside + 1
  local ok, err = xpcall(cb, self.handler, t, ...)
  self.inside = self.inside - 1
  if not ok then
    local ok2, err2 = pcall(self.on_error, err, t, self.traceback)
    if not ok2 then ngx.log(ngx.ERR, driver.on_error_error(err2)) end
  end
  if premature then return end
  self.timer:done(t, ok)
end

local function run_one(self, t, ...)
  if not t then return false end
  call(self, false, t, ...)
  return true
end

-- Run due callbacks until none is due; returns how many, and true when the
-- runner handed over to a fresh one. After `slice` seconds of callbacks in a
-- row it does that, so that nginx serves the requests waiting meanwhile: a
-- 0 ms ngx.timer runs after the events already pending. (ngx.sleep(0) would
-- do too, but without OpenResty's "delayed events" patch, as in Debian's
-- nginx, each one logs a warning; ngx.sleep(0.001) costs a millisecond.)
local function drain(self)
  local timer, n, since = self.timer, 0, now()
  while self.running and run_one(self, timer:take()) do
    n = n + 1
    if n % 32 == 0 and now() - since > self.slice then
      if spawn_runner(self, true) then return n, true end
      ngx.sleep(0.001)
      since = now()
    end
  end
  return n, false
end

local function runner(premature, self)
  if premature then
    self.runners = self.runners - 1
    return
  end
  local runs = 0
  while self.running and not ngx.worker.exiting() do
    -- one protected call per drain: a timer closed behind the glue's back
    -- (d.timer:close()) ends the runner quietly
    local ok, n, handed = pcall(drain, self)
    if not ok then self.running = false break end
    if handed then return end
    runs = runs + n
    -- (a worker exiting posted only the runners idle then: one busy at that
    -- moment looks again here, or it would wait runner_idle seconds more)
    if not self.running or ngx.worker.exiting() then break end
    if runs >= self.runner_runs and spawn_runner(self, true) then return end
    self.idle = self.idle + 1
    local ok = self.work:wait(self.runner_idle)
    self.idle = self.idle - 1
    if not ok and self.runners > self.min_runners then break end
  end
  self.runners = self.runners - 1
end

-- Start a runner; `handover`: it replaces the calling one (counted once).
function spawn_runner(self, handover)
  local ok, err = ngx.timer.at(0, runner, self)
  if not ok then
    if not self.spawn_failed then
      self.spawn_failed = true
      ngx.log(ngx.WARN, "hwtimer: cannot start a runner: ", tostring(err))
    end
    return false
  end
  if handover then
    self.handovers = self.handovers + 1
  else
    self.runners = self.runners + 1
  end
  return true
end

-- Timeouts are due: wake the idle runners, or add runners when every one is
-- inside a callback. The dispatcher runs only while all the others are
-- suspended, so a runner inside a callback now is one waiting on I/O (or
-- ngx.sleep): the pool grows fourfold, up to max_runners (a burst of I/O
-- callbacks reaches 64 runners in three of the dispatcher's 1 ms looks).
local function feed(self)
  if self.idle > 0 then
    self.work:post(self.idle)
  elseif self.inside >= self.runners then
    for _ = 1, math.min(self.max_runners - self.runners, math.max(1, 3 * self.runners)) do
      if not spawn_runner(self) then break end
    end
  end
end

-- ---- the dispatcher ------------------------------------------------------------

-- Sleep until the wheel's next event, in whole milliseconds, at least one:
-- nginx's timers count milliseconds, and a 0 ms wait does not yield.
local function wait_ms(self)
  local wait = self.timer:timeout() -- also the planned wake-up the hook compares with
  if wait == 0 then
    feed(self)
    return 0.001
  end
  if wait == nil or wait > self.max_wait then wait = self.max_wait end
  return math.max(1, math.ceil(wait * 1000)) / 1000
end

local function dispatcher(premature, self)
  if premature then return end -- the exit timer handles the worker's exit
  while self.running and not ngx.worker.exiting() do
    local ok, wait = pcall(wait_ms, self)
    if not ok then -- the timer was closed behind the glue's back: leave quietly
      self.running = false
      if self.idle > 0 then self.work:post(self.idle) end
      break
    end
    self.wake:wait(wait)
    self.poked = false
  end
end

-- ---- worker exit ---------------------------------------------------------------

-- Run the callbacks of timeouts that never ran, once, with the worker exiting.
local function run_premature(self, list)
  local deadline, ran = ngx.now() + self.exit_time, 0
  for i = 1, math.min(#list, self.exit_max) do
    if ngx.now() >= deadline then break end
    local t = list[i]
    call(self, true, t, t:task())
    ran = ran + 1
    if ran % 64 == 0 then ngx.update_time() end
  end
  if ran < #list then
    ngx.log(ngx.WARN, "hwtimer: worker exiting: ", #list - ran,
            " pending timeouts dropped (exit_max ", self.exit_max, ", exit_time ", self.exit_time, " s)")
  end
end

local function on_exit(premature, self)
  if not premature then -- a year passed: keep watching
    ngx.timer.at(365 * 86400, on_exit, self)
    return
  end
  if not self.running then return end
  self.running = false
  self.wake:post(1)
  if self.idle > 0 then self.work:post(self.idle) end
  run_premature(self, self.timer:stop())
  -- Posted here, on the worker's way out, the wake-ups wait for nginx's next
  -- timer event: without one, the dispatcher's own (up to max_wait) would
  -- hold the worker back. A 1 ms sleep is that event.
  ngx.sleep(0.001)
end

-- ---- the object --------------------------------------------------------------

--- new([opts], [max_wait]): a timer for this worker, with its dispatcher and
-- runners. opts: hwtimer.new's, plus min_runners, max_runners, runner_idle,
-- runner_runs, slice, max_wait, exit_max, exit_time (see docs/hosts.md).
function M.new(opts, max_wait)
  if opts ~= nil and type(opts) ~= "table" then
    check.argerror(1, "new", "table expected, got " .. check.type_name(opts), 2)
  end
  if max_wait ~= nil and (type(max_wait) ~= "number" or not (max_wait > 0)) then
    check.argerror(2, "new", "positive number of seconds expected", 2)
  end
  local timer_opts, self = split_options(opts or {}, max_wait)
  self.on_error = timer_opts.on_error or log_error
  timer_opts.on_error = self.on_error
  local timer, err = hwtimer.new(timer_opts)
  if not timer then return nil, err end
  self.timer, self.running = timer, true
  self.wake, self.work = semaphore.new(), semaphore.new()
  self.runners, self.idle, self.inside, self.handovers = 0, 0, 0, 0
  self.handler = function(e)
    self.traceback = debug.traceback(driver.message(e), 2)
    return e
  end
  setmetatable(self, NgxTimer)
  timer:take_only()
  local wake = self.wake
  timer:wakeup(function() wake:post(1) end)
  local ok, terr = ngx.timer.at(0, dispatcher, self)
  if ok then ok, terr = ngx.timer.at(365 * 86400, on_exit, self) end
  for _ = 1, self.min_runners do
    if ok then ok, terr = spawn_runner(self), "lua_max_pending_timers reached" end
  end
  if not ok then
    self.running = false
    timer:close()
    return nil, "hwtimer.ngx: cannot start the dispatcher: " .. tostring(terr)
  end
  return self
end

-- The timer's whole API on the object: d:schedule(...) is timer:schedule(...).
for _, name in ipairs({ "schedule", "every", "pending", "timeout", "getfd", "take", "done", "count" }) do
  NgxTimer[name] = function(self, ...)
    local timer = self.timer
    return timer[name](timer, ...)
  end
end

local function host_runs(name)
  return function()
    error("hwtimer.ngx: " .. name .. " is not available: the dispatcher and its runners run " ..
          "the callbacks (so that they may yield)", 2)
  end
end
NgxTimer.dispatch = host_runs("dispatch")
NgxTimer.run = host_runs("run")

--- d:stats([since_last]): the timer's stats plus the runner pool's:
-- runners, runners_idle, runners_max, handovers.
function NgxTimer:stats(since_last)
  local s = self.timer:stats(since_last)
  s.runners, s.runners_idle, s.runners_max, s.handovers =
    self.runners, self.idle, self.max_runners, self.handovers
  return s
end

--- Stop the dispatcher, the runners and the timer; returns the timeouts that never ran.
function NgxTimer:stop()
  if not self.running then return self.timer:stop() end
  self.running = false
  self.wake:post(1)
  if self.idle > 0 then self.work:post(self.idle) end
  return self.timer:stop()
end

--- d:close(): d:stop() without the list.
function NgxTimer:close()
  self:stop()
end

function NgxTimer:__tostring()
  return ("hwtimer.ngx (%s, %d pending, %d runners)"):format(
    self.running and "running" or "stopped", self.timer:pending(), self.runners)
end

return M
