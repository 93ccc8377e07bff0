--- hwtimer.durable.ngx_wake: in each nginx worker, a connection to Redis
-- subscribed to a queue's wake-ups (BASE:wake, published by
-- hwtimer.durable.redis for a job due now that the publishing process does
-- not run itself): the queue polls at once instead of at its next poll.
--
-- It costs one connection per queue per worker, held for the worker's life
-- by one ngx.timer (a running timer, counted by lua_max_running_timers).
-- Pub/sub keeps no message: one published while the connection is down is
-- lost, so the queue polls after each subscribe, and the poll every `poll`
-- seconds stays what finds a job whatever happened to its wake-up.
local text = require("hwtimer.text")
local log_safe = text.log_safe
local store_up = require("hwtimer.durable").store_up

local M = {}

-- How long a read waits before it looks at the worker's exit: a reload
-- waits at most this for the listener to end.
local READ_MS = 500
local RETRY_FIRST, RETRY_MAX = 0.05, 1

local function close(red) pcall(red.close, red) end

-- A refusal of the server (an ACL without the channel, SUBSCRIBE renamed)
-- is for good; a connection that failed, or a refusal that passes (too
-- many clients), is tried again.
local refused = require("hwtimer.durable.redis_client").refused_for_good

-- One subscription, until the worker exits, the queue closes or the
-- connection fails: true, or nil, why, refused (for good), subscribed.
local function session(q, engine, connect, channel)
  local ok, red, err = pcall(connect)
  if not ok or not red then return nil, "cannot connect: " .. tostring(ok and err or red) end
  pcall(red.set_timeout, red, READ_MS)
  local res, serr = red:subscribe(channel)
  if not res then
    close(red)
    return nil, "SUBSCRIBE " .. channel .. ": " .. tostring(serr), refused(serr)
  end
  q:wake() -- (what was published while no connection listened)
  local subscribed = true
  while not (ngx.worker.exiting() or engine.closed) do
    local msg, rerr = red:read_reply()
    if msg then
      local kind = msg[1] == "message" and msg[3]
      if kind and (kind == "" or engine.handled[kind]) then q:wake() end
    elseif rerr ~= "timeout" then
      close(red)
      return nil, "wake-ups: " .. tostring(rerr), false, subscribed
    end
  end
  close(red)
  return true
end

-- A try of a new connection, or while the queue's own calls hold the store
-- to be down, a look again after the step (their tries are the outage's
-- only connection attempts; the listener's come once they succeed).
-- `warned`: this outage was logged (one warning an outage, not one a step).
local function listen(premature, q, engine, connect, channel, step, warned)
  if premature or engine.closed then return end
  local done, err, final, subscribed
  if store_up(q) then
    done, err, final, subscribed = session(q, engine, connect, channel)
    if done then return end
    if final then
      ngx.log(ngx.WARN, "hwtimer.durable: no wake-ups for ", log_safe(channel), " (", log_safe(err),
              "): jobs other processes make due now wait for the poll")
      return
    end
    if subscribed then step, warned = nil, nil end
  end
  step = step and math.min(RETRY_MAX, step * 2) or RETRY_FIRST
  if err and not warned then
    warned = true
    ngx.log(ngx.WARN, "hwtimer.durable: ", log_safe(err), "; listening again once the store answers")
  end
  local ok, terr = ngx.timer.at(step, listen, q, engine, connect, channel, step, warned)
  if not ok then ngx.log(ngx.ERR, "hwtimer.durable: cannot listen for wake-ups again: ", tostring(terr)) end
end

--- ok, err = start(q, engine): listen for q's wake-ups on a connection of
-- its own, made by the queue's opts.redis function. Returns false where
-- there is none to listen to (SQLite, wake = false) or no function to
-- connect with (a client object is the queue's own).
function M.start(q, engine)
  local channel = type(engine.wake_channel) == "function" and engine:wake_channel()
  local connect = engine.connect
  if not (channel and connect) then return false end
  return ngx.timer.at(0, listen, q, engine, connect, channel)
end

return M
