--- hwtimer.durable.redis_batch: in nginx, the schedules that requests of
-- one worker make at once share round trips to Redis.
--
-- lua-resty-redis gives each command its own round trip, and has no
-- pipelining several coroutines can share. Here the first schedule to come
-- sends its job at once; those that come while its round trip is in flight
-- wait (an ngx.semaphore each) and go together in the next one: a single
-- `add` script call that stores them all (one RPUSH, all or none). Whoever
-- is first in line when a round trip ends sends the next, so no caller
-- waits for more than the round trip in flight and its own.
--
-- Each caller gets its own answer, only once its job is stored: the due
-- time, or nil and the message of the failed round trip (which failed
-- exactly the jobs it carried, and no other). A caller whose job was never
-- sent (it could not wait) is taken out of the line and answered nil,
-- message; one whose job was sent waits for its round trip's end, as a
-- single schedule does, up to WAIT: past it, its sender is gone (nginx ended
-- that request mid-round trip), and it is answered nil and a message that
-- says the job may be stored (as a single schedule's socket timeout would).
local semaphore = require("ngx.semaphore")

local M = {}

-- The most jobs one round trip carries (a caller past it waits for the
-- next): a bound on the script's arguments and on the time it holds Redis.
M.MAX = 256

-- How long a caller waits for the round trips before its own, and for its
-- own: longer than any socket timeout a client sets. Past it, with the
-- round trip before still unanswered, its sender is taken as gone (its
-- request ended while it waited) and the first in line sends the next.
M.WAIT = 60

local Batch = {}
Batch.__index = Batch

--- b = redis_batch.new(send): send(jobs) makes one round trip with the
-- jobs (a list of the engine's `add` arguments) and returns the reply, or
-- nil and a message.
function M.new(send)
  return setmetatable({ send = send, line = {}, busy = false, since = 0, trips = 0 }, Batch)
end

-- Answer the callers of a round trip: its reply, or its error.
local function answer(entries, res, err)
  for i = 1, #entries do
    local e = entries[i]
    e.done, e.res, e.err = true, res, err
    if e.sema then e.sema:post(1) end
  end
end

-- One round trip: up to MAX of the line, first come first.
local function trip(self)
  local line = self.line
  local n = math.min(#line, M.MAX)
  local entries, jobs = {}, {}
  for i = 1, n do
    entries[i], jobs[i] = line[i], line[i].job
    line[i].sent = true
  end
  local rest = {} -- (not unpack: it fails past a few thousand waiting)
  for i = n + 1, #line do rest[i - n] = line[i] end
  self.line = rest
  self.busy, self.since, self.trips = true, ngx.now(), self.trips + 1
  local ok, res, err = pcall(self.send, jobs)
  if not ok then res, err = nil, tostring(res) end
  answer(entries, res, err)
end

-- After a round trip: the first in line (if any) sends the next.
local function hand_on(self)
  local first = self.line[1]
  if first then
    first.lead = true
    first.sema:post(1)
  else
    self.busy = false
  end
end

local function leave_line(self, e)
  local line = self.line
  for i = 1, #line do
    if line[i] == e then return table.remove(line, i) end
  end
end

-- Wait for a round trip that carries e, or for e's turn to send one (a
-- post comes for nothing else). Returns true, or nil and a message.
local function wait(self, e)
  e.sema = semaphore.new()
  local ok, err = pcall(e.sema.wait, e.sema, M.WAIT)
  if not ok then -- a context that cannot wait (its job cannot go in a cosocket either)
    leave_line(self, e)
    return nil, "cannot wait for the round trip in flight here: " .. tostring(err)
  end
  if e.done or e.lead then return true end
  if e.sent then -- its sender's request ended in the round trip (killed)
    return nil, "no answer from Redis in " .. M.WAIT .. " s (the job may be stored)"
  end
  leave_line(self, e)
  if ngx.now() - self.since < M.WAIT then
    return nil, "no round trip to Redis ended in " .. M.WAIT .. " s"
  end
  -- the sender of the round trip before is gone: e sends next
  table.insert(self.line, 1, e)
  e.lead = true
  return true
end

--- res, err = b:add(job): store `job` with those of the other callers
-- waiting now; returns send's reply for its round trip (or nil and its
-- message).
function Batch:add(job)
  local e = { job = job }
  local line = self.line
  line[#line + 1] = e
  if self.busy then
    local ok, err = wait(self, e)
    if not ok then return nil, err end
    if e.done then return e.res, e.err end
  end
  trip(self) -- e's turn: its round trip, then the next sender's
  hand_on(self)
  return e.res, e.err
end

return M
