--- hwtimer.ngx: hwtimer inside an nginx worker (OpenResty, ngx_http_lua).
--
--   init_worker_by_lua_block {
--     package.loaded.my_timer = assert(require("hwtimer.ngx").new({ tick = 0.001 }))
--   }
--   -- any handler of that worker:
--   local t = package.loaded.my_timer:schedule(0.5, function(t, id) ... end, 42)
--   t:cancel()
--
-- nginx's Lua cannot poll a file descriptor, so one dispatcher runs as a
-- single ngx.timer (whatever the number of timeouts: lua_max_pending_timers
-- is not spent per timeout). It sleeps on an ngx.semaphore until the wheel's
-- next event and is woken early when a handler schedules something sooner.
-- Callbacks run in the dispatcher's timer context, like ngx.timer callbacks;
-- they must not yield (no cosocket, no ngx.sleep): start that work with
-- ngx.timer.at(0, ...) from the callback. Errors go to on_error, by default
-- ngx.log(ngx.ERR, ...).
local hwtimer = require("hwtimer")
local semaphore = require("ngx.semaphore")

local now = hwtimer.now
local M = {}
local Dispatcher = {}
Dispatcher.__index = Dispatcher

local function log_error(err, t)
  ngx.log(ngx.ERR, "hwtimer: error in timeout callback: ", tostring(err), " (", tostring(t), ")")
end

-- The dispatcher: dispatch, then sleep until the wheel's next event (at most
-- max_wait, so that a worker shutting down is noticed). It yields to nginx on
-- every pass: when nothing ran and the worker thread is a moment behind an
-- event (timeout() says 0), it sleeps min_wait rather than spin.
local function run(premature, self)
  local timer = self.timer
  while not premature and self.running and not ngx.worker.exiting() do
    local ran = timer:dispatch()
    local wait = timer:timeout() or self.max_wait
    if wait > self.max_wait then wait = self.max_wait end
    if ran == 0 and wait < self.min_wait then wait = self.min_wait end
    if wait > 0 then
      self.wake_at = now() + wait
      self.sema:wait(wait)
    else
      ngx.sleep(0) -- more is due: let nginx serve others first
    end
    self.wake_at = 0 -- awake: nobody needs to post
  end
  timer:close() -- idempotent; also when the worker exits
end

--- new([opts], [max_wait]): a timer with its dispatcher, for this worker.
-- opts as hwtimer.new; max_wait (seconds, default 1) bounds each sleep.
function M.new(opts, max_wait)
  opts = opts or {}
  if opts.on_error == nil then
    local copy = {}
    for k, v in pairs(opts) do copy[k] = v end
    copy.on_error = log_error
    opts = copy
  end
  local timer, err = hwtimer.new(opts)
  if not timer then return nil, err end
  local self = setmetatable({ timer = timer, sema = semaphore.new(), running = true,
                              wake_at = 0, max_wait = max_wait or 1, min_wait = 0.0005 }, Dispatcher)
  local ok, terr = ngx.timer.at(0, run, self)
  if not ok then
    timer:close()
    return nil, "hwtimer.ngx: cannot start the dispatcher: " .. tostring(terr)
  end
  return self
end

-- Wake the dispatcher if it sleeps past `delay` from now.
local function nudge(self, delay)
  if now() + delay < self.wake_at then
    self.wake_at = 0
    self.sema:post(1)
  end
end

--- As timer:schedule, waking the dispatcher when needed.
function Dispatcher:schedule(delay, callback, ...)
  local t, err = self.timer:schedule(delay, callback, ...)
  if t then nudge(self, delay) end
  return t, err
end

--- As timer:every (a number or { interval = ..., rate = ..., jitter = ... }),
-- waking the dispatcher when needed.
function Dispatcher:every(interval, callback, ...)
  local t, err = self.timer:every(interval, callback, ...)
  if t then nudge(self, type(interval) == "table" and interval.interval or interval) end
  return t, err
end

function Dispatcher:pending()
  return self.timer:pending()
end

--- Stop the dispatcher and the timer; returns the timeouts that never ran.
function Dispatcher:stop()
  self.running = false
  self.sema:post(1)
  return self.timer:stop()
end

return M
