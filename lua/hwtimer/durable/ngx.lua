--- hwtimer.durable.ngx: a durable queue in every nginx worker, and requests
-- that wait for it.
--
--   init_worker_by_lua_block {
--     local timer = assert(require("hwtimer.ngx").new())
--     require("hwtimer.durable.ngx").open("orders", timer, { redis = connect }, function(q)
--       q:handle("close_order", close_order)
--     end)
--   }
--   -- in a request:
--   local q, err = require("hwtimer.durable.ngx").get("orders")
--   if not q then ngx.status = 503 ngx.say(err) return end
--
-- Cosockets are off in init_worker, and the store may be out of reach when
-- a worker starts: the queue opens in a 0 s timer, and a failed open is
-- logged and tried again after a backoff (0.05 s doubling up to 5 s) until
-- it opens or the worker exits. Until then get() waits for it (where the
-- request may yield) and answers nil and why.
local durable = require("hwtimer.durable")
local check = require("hwtimer.check")
local text = require("hwtimer.text")
local message, log_safe = text.message, text.log_safe
local semaphore = require("ngx.semaphore")
local wake_ups = require("hwtimer.durable.ngx_wake")

local M = {}

-- name -> { q = queue or nil, err = why not yet, tries =, sema = waiters,
-- final = true where no later try can open it }.
-- Module state on purpose: each worker has its own Lua state, and this is
-- its table of queues, as package.loaded is.
local queues = {}

local RETRY_FIRST, RETRY_MAX = 0.05, 5

local function wake(entry)
  local waiting = -entry.sema:count()
  if waiting > 0 then entry.sema:post(waiting) end
end

local function try_open(premature, name, entry, timer, opts, setup, step)
  if premature then
    entry.err = "the worker is exiting"
    return wake(entry)
  end
  local opened, q, err = pcall(durable.open, timer, opts)
  if not opened then -- (bad options: no later try can open it, and the requests waiting are told now)
    entry.err, entry.final = "durable.open raised: " .. message(q), true
    ngx.log(ngx.ERR, "hwtimer.durable: queue '", name, "' cannot open: ", log_safe(entry.err))
    return wake(entry)
  end
  if q and setup then
    local ok, e = pcall(setup, q)
    if not ok then
      q:close()
      q, err = nil, "the setup function raised: " .. message(e)
    end
  end
  if q then
    entry.q, entry.err = q, nil
    local listening, lerr = wake_ups.start(q, durable.engine(q))
    if listening == nil then
      ngx.log(ngx.ERR, "hwtimer.durable: queue '", name, "' cannot listen for wake-ups: ", log_safe(lerr))
    end
    return wake(entry)
  end
  entry.tries, entry.err = entry.tries + 1, message(err)
  step = step and math.min(RETRY_MAX, step * 2) or RETRY_FIRST
  ngx.log(ngx.ERR, "hwtimer.durable: queue '", name, "' did not open (try ", entry.tries, ", next in ",
          step, " s): ", log_safe(entry.err))
  local ok, terr = ngx.timer.at(step, try_open, name, entry, timer, opts, setup, step)
  if not ok then
    entry.err = entry.err .. "; cannot try again: " .. tostring(terr)
    wake(entry)
  end
end

--- ok = open(name, timer, opts, [setup]): open durable.open(timer, opts) in
-- this worker, as soon as it can; setup(q) then runs (q:handle ...) before
-- any request gets it. Raises on bad arguments and on a name opened twice.
function M.open(name, timer, opts, setup)
  if type(name) ~= "string" or name == "" then
    check.argerror(1, "open", "non-empty string expected, got " .. check.type_name(name), 2)
  end
  if type(opts) ~= "table" then
    check.argerror(3, "open", "table expected, got " .. check.type_name(opts), 2)
  end
  if setup ~= nil and not check.callable(setup) then
    check.argerror(4, "open", "function expected, got " .. check.type_name(setup), 2)
  end
  if queues[name] then error("hwtimer.durable.ngx: queue '" .. name .. "' is opened already in this worker", 2) end
  local entry = { err = "opening", tries = 0, sema = semaphore.new() }
  queues[name] = entry
  local ok, err = ngx.timer.at(0, try_open, name, entry, timer, opts, setup)
  if not ok then
    queues[name] = nil
    error("hwtimer.durable.ngx: cannot start opening queue '" .. name .. "': " .. tostring(err), 2)
  end
  return true
end

--- q, err = get(name, [wait]): the queue once open. Until then it waits up
-- to `wait` seconds (default 1; 0 does not wait; only where the request may
-- yield: rewrite, access, content, timers), then returns nil and a message
-- saying why it is not open (the last error of the store).
function M.get(name, wait)
  local entry = queues[name]
  if not entry then
    return nil, "hwtimer.durable.ngx: no queue '" .. tostring(name)
      .. "' in this worker (open it in init_worker_by_lua)"
  end
  if entry.q then return entry.q end
  wait = wait or 1
  if type(wait) ~= "number" or wait ~= wait or wait < 0 then
    check.argerror(2, "get", "non-negative number of seconds expected, got " .. check.type_name(wait), 2)
  end
  if wait > 0 and not entry.final then pcall(entry.sema.wait, entry.sema, wait) end
  if entry.q then return entry.q end
  return nil, "hwtimer.durable.ngx: queue '" .. name .. "' is not open yet in this worker (" .. entry.err .. ")"
end

return M
