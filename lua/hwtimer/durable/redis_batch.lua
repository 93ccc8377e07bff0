--- hwtimer.durable.redis_batch: in nginx, the schedules that requests of
-- one worker make at once share round trips to Redis.
--
-- lua-resty-redis gives each command its own round trip, and has no
-- pipelining several coroutines can share. Here the first schedule to come
-- sends its job at once; those that come while its round trip is in flight
-- wait (an ngx.semaphore each) and go together in the next one: a single
-- RPUSH of one entry that stores them all (all or none). Whoever
-- is first in line when a round trip ends sends the next, so no caller
-- waits for more than the round trip in flight and its own.
--
-- A round trip that ends wakes the callers it carried, who often schedule
-- again at once (a request that schedules several jobs, a worker's
-- callers under load). A schedule that comes before they have all woken
-- does not send at once, alone: it waits until the last of them has woken
-- (or GATHER has passed), so that their next jobs go with it. Without
-- this, the caller that sent a round trip, answered first as it needs no
-- wake-up, sent its next job alone, and round trips alternated one job and
-- all the others (32.5 jobs a trip with 64 callers, measured).
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

-- The longest a schedule waits for the callers of the round trip that has
-- just ended to wake (one of them may never: its request was ended).
M.GATHER = 0.002

local Batch = {}
Batch.__index = Batch

--- b = redis_batch.new(send): send(jobs) makes one round trip with the
-- jobs (a list of the engine's jobs, each as it gave it to b:add) and
-- returns the reply, or nil and a message.
function M.new(send)
  return setmetatable({ send = send, line = {}, busy = false, since = 0, trips = 0, waking = 0 }, Batch)
end

-- Answer the callers of a round trip: its reply, or its error. Those who
-- wait are woken (counted in `waking` until they have).
local function answer(self, entries, res, err)
  local waking = 0
  for i = 1, #entries do
    local e = entries[i]
    e.done, e.res, e.err = true, res, err
    if e.sema then
      e.trip, waking = self.trips, waking + 1
      e.sema:post(1)
    end
  end
  self.waking = waking
end

-- A caller of the last round trip has woken: the last of them lets the
-- schedule that waits for them (if any) send.
local function woken(self, e)
  if e.trip ~= self.trips then return end
  self.waking = self.waking - 1
  local g = self.gathering
  if self.waking == 0 and g then
    self.gathering = nil
    g.sema:post(1)
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
  answer(self, entries, res, err)
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
  if e.done then woken(self, e) end
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
  return true
end

-- e waits for the callers of the round trip that has just ended to wake
-- (at most GATHER), then sends with theirs. Where it cannot wait, it sends.
local function gather(self, e)
  e.sema = semaphore.new()
  self.gathering, self.since = e, ngx.now() -- (if e's request ends here, as a sender's)
  pcall(e.sema.wait, e.sema, M.GATHER)
  if self.gathering == e then self.gathering = nil end
  self.waking = 0
end

--- res, err = b:add(job): store `job` with those of the other callers
-- waiting now; returns send's reply for its round trip (or nil and its
-- message).
function Batch:add(job)
  local e = { job = job }
  local line = self.line
  line[#line + 1] = e
  if not self.busy and self.waking > 0 then
    self.busy = true -- those who come meanwhile join the line behind e
    gather(self, e)
  elseif self.busy then
    local ok, err = wait(self, e)
    if not ok then return nil, err end
    if e.done then return e.res, e.err end
  end
  e.sema = nil -- (e is answered by its own round trip, not woken)
  trip(self) -- e's turn: its round trip, then the next sender's
  hand_on(self)
  return e.res, e.err
end

return M
