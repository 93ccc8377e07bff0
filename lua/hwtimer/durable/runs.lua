--- hwtimer.durable.runs: claim, run, acknowledge. A job run the store
-- leased to this process (a row) is held from its claim until its
-- acknowledgement is written: queued first (in due order), then running in
-- a worker, then ran, its acknowledgement waiting in self._acks for at most
-- `ack_delay`.
--
-- Workers are timeouts of the timer, at most `concurrency` of them, each
-- taking queued rows until none is left. Where the host lets a callback
-- wait (hwtimer.ngx's runners, cqueues, copas), a handler waiting on I/O
-- lets the next worker start the next job; a plain loop runs them one after
-- another. A pass claims only what the free workers can start now: a
-- process never holds due jobs that another could be running.
local window = require("hwtimer.durable.window")
local schedule = require("hwtimer.durable.schedule")
local message = require("hwtimer.text").message

local later, cancelled, report = window.later, window.cancelled, window.report
local soon, unload, load_all, other_batch = window.soon, window.unload, window.load_all, window.other_batch
local max, min = math.max, math.min

local runs = {}

---------------------------------------------------------------------------
-- The rows held, the queue of those not started
---------------------------------------------------------------------------

local function hold(self, row)
  self._held[row] = true
  self._n_held = self._n_held + 1
end

local function let_go(self, row)
  if self._held[row] then
    self._held[row] = nil
    self._n_held = self._n_held - 1
  end
end

local function enqueue(self, row)
  local tail = self._qtail + 1
  self._queued[tail], self._qtail = row, tail
end

local function n_queued(self) return self._qtail - self._qhead + 1 end

-- The next queued row to start, or nil.
local function dequeue(self)
  local q, head = self._queued, self._qhead
  while head <= self._qtail do
    local row = q[head]
    q[head], head = nil, head + 1
    self._qhead = head
    if not row.lost then return row end
  end
  return nil
end

--- A cancelled job the queue holds and has not started is not started:
-- a cancel that returned true holds (one running now finishes its run).
-- So is one the claim under way brings (where a claim yields, as with
-- Redis in nginx: the store leased it to this process, then the cancel
-- deleted it, and the claim's reply comes after the cancel's).
function runs.skip(self, id)
  if self._claiming then
    self._cancelled_in_claim = self._cancelled_in_claim or {}
    self._cancelled_in_claim[id] = true
  end
  local q = self._queued
  for i = self._qhead, self._qtail do
    local row = q[i]
    if row and row.id == id then
      row.lost = true
      let_go(self, row)
    end
  end
end

---------------------------------------------------------------------------
-- Acknowledgements
---------------------------------------------------------------------------

local function backoff(self, attempt)
  local b = self._backoff
  return min(b.max_delay, b.delay * b.factor ^ (attempt - 1))
end

-- What the handler's outcome asks the engine to write, with the time the
-- run ended (the engine may prefer its own clock): an acknowledgement as
-- hwtimer.durable.engine describes it. A schedule's run (`at`: the calendar
-- time it stood for, `late`) acknowledges its next time, computed here
-- once (hwtimer.durable.schedule), or its end; its retries keep `at`.
local function outcome(self, row, ok, err, at, late)
  local now = self._now()
  if ok then
    if not at then return { what = "done", row = row, now = now } end
    local ack, why = schedule.next(row, at, now)
    if not ack then -- (its zone is gone from this machine: dead, saying why)
      return { what = "bury", row = row, arg = tostring(why), now = now, at = at, late = late }
    end
    ack.row, ack.now = row, now
    return ack
  end
  if row.attempt >= self._attempts then
    return { what = "bury", row = row, arg = message(err), now = now, at = at, late = late }
  end
  return { what = "retry", row = row, arg = backoff(self, row.attempt), now = now, at = at, late = late }
end

local function add_ack(self, ack)
  local acks = self._acks
  if #acks == 0 then self._acks_since = self._now() end
  acks[#acks + 1] = ack
end

-- Take the pending acknowledgements for a write to the store; give them
-- back (before any made meanwhile) when it failed; let go of their rows
-- once written. Taken before the call: with Redis in nginx the call
-- yields, and jobs end meanwhile.
local function take_acks(self)
  local acks = self._acks
  self._acks = {}
  return acks
end

local function give_back(self, acks)
  local newer = self._acks
  for i = 1, #newer do acks[#acks + 1] = newer[i] end
  self._acks = acks
end

local function written(self, acks)
  for i = 1, #acks do let_go(self, acks[i].row) end
end

--- Write the pending acknowledgements now; nil when the store failed (they
-- stay pending, and a pass tries again after the backoff's step).
function runs.flush(self)
  if #self._acks == 0 then return true end
  local acks = take_acks(self)
  local marks, err = self._engine:ack(acks, self._loaded_until)
  if not marks then
    give_back(self, acks)
    report(self, "acknowledge: " .. tostring(err))
    soon(self, window.failed(self))
    return nil
  end
  window.succeeded(self)
  written(self, acks)
  load_all(self, marks)
  return true
end

--- Write them unless an open q:batch holds the store (the batch's
-- transaction is not ours to write into): its end comes first.
function runs.settle(self)
  if #self._acks > 0 and not self._batching then runs.flush(self) end
end

-- A job's acknowledgement waits up to `ack_delay` for a claim, which writes
-- it in its own transaction or script call (one store round trip instead of
-- two while jobs come due every few milliseconds), then is written on its
-- own. Until written the job stays leased, in flight: a crash then runs it
-- again. At an nginx worker's exit this timeout is called cancelled, and
-- still writes them; with the timer stopped they are written at once.
local function acks_later(self)
  if self._flush then
    if not cancelled(self._flush) then return end
    self._flush = nil -- the timer was stopped: that timeout never runs
  end
  if self._ack_delay == 0 then return runs.flush(self) end
  self._flush = later(self, self._ack_delay, function(t)
    self._flush = nil
    if self._gone then return end
    if self._batching then return acks_later(self) end -- a yielded q:batch: after it
    -- (the store held to be down: a pass after the backoff's step writes
    -- them; not at a worker's exit, the last chance)
    if not cancelled(t) and window.down(self) then return soon(self, window.down(self)) end
    runs.settle(self)
  end)
  if not self._flush then runs.flush(self) end -- the timer refused or is stopped: now
end

--- Hand the rows not started back to the store, due as they were, their
-- attempt not counted (an nginx worker exiting, a queue closed).
function runs.release(self)
  local now = self._now()
  while true do
    local row = dequeue(self)
    if not row then break end
    add_ack(self, { what = "release", row = row, now = now })
  end
  return runs.flush(self)
end

---------------------------------------------------------------------------
-- Leases
---------------------------------------------------------------------------

-- Extend the lease of every row held (queued, running, or ran with its
-- acknowledgement not written yet) to `lease` seconds from now, so that no
-- other process takes one while this one still means to run it or to
-- acknowledge it. A row no longer ours (its lease ran out: another process
-- may run it; cancelled; replaced) is let go, and not started if queued.
-- false when the store cannot be reached.
local function renew(self)
  self._renewed = self._now()
  local rows = {}
  for row in pairs(self._held) do rows[#rows + 1] = row end
  if #rows == 0 then return true end
  local kept, err = self._engine:renew(rows, self._lease)
  if not kept then
    window.failed(self)
    report(self, "renew: " .. tostring(err))
    return false
  end
  window.succeeded(self)
  for i = 1, #rows do
    local row = rows[i]
    if not kept[row.id] then
      row.lost = true
      let_go(self, row)
    end
  end
  return true
end

-- While handlers wait on I/O the loop runs other callbacks: this one, every
-- third of the lease while rows are held, renews them once a third of the
-- lease has passed. One timeout a queue, armed by a claim when none is and
-- left to lapse once nothing is held. A renewal that failed (the store out
-- of reach) is tried again sooner. (A handler that blocks the loop longer
-- than the lease cannot be helped: its job may run a second time elsewhere.)
local function renew_tick(t, self)
  self._renewer = nil
  -- (called cancelled: the timer stopped; at an nginx worker's exit
  -- runs.exit keeps the leases. Once closed, while handlers still run:
  -- their jobs stay leased until they return, or another process would
  -- run them beside them)
  if self._gone or self._n_held == 0 or cancelled(t) then return end
  if self._closed and self._running_jobs == 0 then return end
  local delay = self._lease / 3
  if self._now() - self._renewed >= delay and not self._batching then
    local wait = window.down(self)
    if wait then
      delay = min(delay, wait)
    elseif not renew(self) then
      delay = min(self._lease / 6, 1)
    end
  end
  self._renewer = later(self, delay, renew_tick, self)
end

-- While handlers still wait on I/O at an nginx worker's exit (nginx lets
-- them finish), their jobs stay leased to this process until they return,
-- renewed every third of the lease on nginx's own sleep: else a new worker
-- would take each one whose lease ran out and run it a second time beside it.
local function renew_at_exit(self, sleep)
  local step = min(0.1, self._lease / 6)
  -- (and while a claim is under way: its rows go back once it returns)
  while not self._gone and ((self._running_jobs > 0 and self._n_held > 0) or self._claiming) do
    if self._now() - self._renewed >= self._lease / 3 and not renew(self) then
      self._renewed = self._now() - self._lease / 3 + min(self._lease / 6, 1) -- tried again sooner
    end
    if not pcall(sleep, step) then return end
  end
end

---------------------------------------------------------------------------
-- Workers
---------------------------------------------------------------------------

-- This process's runs by kind and outcome, for q:stats (and metrics).
local OUTCOME = { done = "succeeded", next = "succeeded", retry = "retried", bury = "dead" }

local function count_run(self, kind, what)
  local k = self._runs[kind]
  if not k then
    k = { succeeded = 0, retried = 0, dead = 0 }
    self._runs[kind] = k
  end
  local o = OUTCOME[what]
  k[o] = k[o] + 1
end

-- A schedule's row: the calendar time its run stands for and whether it is
-- late, or no run (the acknowledgement to write instead: missed times
-- skipped, the schedule ended).
local function schedule_run(self, row)
  local at, late_or_ack, why = schedule.begin(row, self._now())
  if at then return at, late_or_ack end
  if late_or_ack then
    late_or_ack.row, late_or_ack.now = row, self._now()
    add_ack(self, late_or_ack)
    return nil
  end
  local ack = { what = "bury", row = row, arg = tostring(why), now = self._now() }
  report(self, why, { id = row.id, kind = row.kind })
  add_ack(self, ack)
  return nil
end

local function run_handler(self, row)
  local fn = self._handlers[row.kind]
  if not fn then -- (q:handle(kind, nil) after the claim: back as it was, as a stop hands it back)
    add_ack(self, { what = "release", row = row, now = self._now() })
    return
  end
  local at, late
  if row.every or row.cron then
    at, late = schedule_run(self, row)
    if not at then return end
  end
  local job = { id = row.id, kind = row.kind, payload = row.payload, due = row.due, attempt = row.attempt,
                every = row.every, cron = row.cron, tz = row.tz, scheduled_for = at, late = late }
  local ok, err = pcall(fn, job)
  if not ok then report(self, err, job) end
  local ack = outcome(self, row, ok, err, at, late)
  count_run(self, job.kind, ack.what)
  add_ack(self, ack)
end

-- Where nothing else of ours runs (always so in a loop that runs handlers
-- one after another, which no timeout interrupts): renew the leases once
-- half of one has passed, and write the acknowledgements that have waited
-- `ack_delay`, or all of them when handlers take longer than that (the next
-- one may block as long). false when the leases could not be renewed.
local function before_start(self)
  if self._running_jobs > 0 then return true end
  local now = self._now()
  if now - self._renewed > self._lease / 2 and not other_batch(self) and not renew(self) then
    return false
  end
  if #self._acks > 0 and (now - self._acks_since >= self._ack_delay or self._last_took >= self._ack_delay) then
    runs.settle(self)
  end
  return true
end

--- The queue's part of an nginx worker's exit (reload, quit), called by
-- hwtimer.ngx (its at_exit) once the timer has stopped, in a light thread
-- of its own, whatever the timer's exit_max: the rows not started go back
-- to the store with the acknowledgements, and the leases of the handlers
-- still running are kept until they return (each writes its own
-- acknowledgement then: the timer is stopped, so at once).
function runs.exit(self, sleep)
  if self._gone then return end
  self._stopped = true
  runs.release(self)
  renew_at_exit(self, sleep)
  -- What the handlers that ended left to write, tried again while the
  -- store is out of reach (within a lease: past it the jobs run again
  -- anyway): a job that ran is not run a second time for a failed write.
  local limit = self._now() + self._lease
  while not self._gone and (#self._acks > 0 or n_queued(self) > 0) and self._now() < limit do
    if runs.release(self) then break end
    if not pcall(sleep, min(0.5, self._lease / 6)) then return end
  end
end

local function finish_close(self)
  if self._gone then return end
  self._gone = true
  if self._exit_function then self._exit_function:cancel() end
  if self._renewer then pcall(self._renewer.cancel, self._renewer) end
  runs.flush(self)
  self._engine:close()
end

--- Close once no handler and no claim is under way.
function runs.close(self)
  runs.release(self)
  if self._running_jobs == 0 and not self._claiming then finish_close(self) end
end

local more_workers -- forward

local function start(self, row)
  self._running_jobs = self._running_jobs + 1
  more_workers(self)
  local began = self._now()
  run_handler(self, row)
  self._last_took = self._now() - began
  self._running_jobs = self._running_jobs - 1
  if self._closed then
    if self._running_jobs == 0 and not self._claiming then finish_close(self) end
    return
  end
  acks_later(self)
  if self._more then soon(self) end -- a worker is free: claim more
end

-- Let go of the rows not started: the store is out of reach, they come
-- back to whichever process claims them once their lease ends.
local function abandon(self, row)
  while row do
    row.lost = true
    let_go(self, row)
    row = dequeue(self)
  end
end

-- A worker: start queued rows until none is left. Once the timer is
-- stopped (an nginx worker exiting) or the worker is called cancelled, it
-- hands them back to the store instead.
local function work(t, self)
  local exiting = cancelled(t)
  while not self._closed do
    if exiting or self._stopped then
      runs.release(self)
      break
    end
    local row = dequeue(self)
    if not row then break end
    if not before_start(self) then
      abandon(self, row)
      break
    end
    if self._stopped and not row.lost then -- the worker exited while before_start waited on the store
      add_ack(self, { what = "release", row = row, now = self._now() })
      runs.release(self)
      break
    end
    if not row.lost then start(self, row) end -- (the renewal may have found it taken)
  end
  self._workers = self._workers - 1
end

-- One more worker where rows are queued and every worker is running a
-- handler (this one included, about to): where handlers wait, each start
-- adds the next worker; where they run one after another, a claim costs one
-- spare worker, not one per row. (No more than `concurrency`: claims take
-- no more rows than that, less those queued or running.) Where the timer
-- refuses (max_pending), the workers there take the rows in turn.
function more_workers(self)
  if n_queued(self) == 0 or self._workers > self._running_jobs then return end
  if later(self, 0, work, self) then self._workers = self._workers + 1 end
end

---------------------------------------------------------------------------
-- The pass
---------------------------------------------------------------------------

-- The rows whose id is not in `gone`, and how many.
local function without(rows, n, gone)
  local kept = {}
  for i = 1, n do
    if not gone[rows[i].id] then kept[#kept + 1] = rows[i] end
  end
  return kept, #kept
end

local function by_due(a, b)
  if a.due ~= b.due then return a.due < b.due end
  return a.key < b.key
end

-- Claim up to `limit` rows due by `cutoff`; the engine writes the pending
-- acknowledgements with them.
local function claim(self, cutoff, limit)
  local acks = take_acks(self)
  local rows, n, marks = self._engine:claim(acks, cutoff, self._lease, limit, self._loaded_until)
  if not rows then
    give_back(self, acks)
    return nil, n
  end
  window.succeeded(self)
  written(self, acks)
  load_all(self, marks)
  return rows, n
end

-- Take the claimed rows: hold them, queue them, start a worker.
local function take(self, rows, n)
  table.sort(rows, by_due)
  if self._n_held == 0 then self._renewed = self._now() end
  for i = 1, n do
    local row = rows[i]
    unload(self, row.key)
    hold(self, row)
    enqueue(self, row)
  end
  if n > 0 and not self._renewer then self._renewer = later(self, self._lease / 3, renew_tick, self) end
  if n > 0 and self._workers == 0 then
    -- no worker yet: the pass's own callback is the first one, so that a
    -- job due now starts now, not at the timer's next dispatch
    self._workers = 1
    return work(nil, self)
  end
  more_workers(self)
end

--- The pass: claim what is due (by the store's clock; at least by
-- `min_cutoff`, the ready time of the timeout that fired, where the engine
-- lets the client say), as many as the free workers can start, and start
-- them. While claims come back full another pass follows at the next
-- dispatch, or when a worker is free, so that a backlog never stalls the loop.
function runs.pass(self, min_cutoff)
  if self._closed then return end
  if self._batching then -- a yielded batch holds the store: claim once it is done
    return soon(self, 0.001)
  end
  if self._claiming then
    self._rerun = true
    return
  end
  local wait = window.down(self)
  if wait then return soon(self, wait) end
  local room = self._concurrency - self._running_jobs - n_queued(self)
  if room <= 0 then
    self._more = true
    return runs.settle(self)
  end
  local limit = min(room, self._batch)
  local cutoff = max(self._now(), min_cutoff or 0)
  if #self._acks == 0 and not self._engine:probe(cutoff, min_cutoff) then
    self._more = false
    return
  end
  self._claiming = true
  local rows, n = claim(self, cutoff, limit)
  self._claiming = false
  local claimed, gone = n, self._cancelled_in_claim
  if gone then -- (runs.skip)
    self._cancelled_in_claim = nil
    if rows then rows, n = without(rows, n, gone) end
  end
  if not rows then
    report(self, "claim: " .. tostring(n))
    if self._closed then return runs.close(self) end
    return soon(self, window.failed(self))
  end
  self._more = claimed >= limit
  for i = 1, n do -- (queued, so that a close meanwhile hands them back)
    if self._closed then enqueue(self, rows[i]) end
  end
  if self._closed then return runs.close(self) end
  if self._stopped then -- the worker exited during the claim (runs.exit): back to the store
    for i = 1, n do
      hold(self, rows[i])
      enqueue(self, rows[i])
    end
    return runs.release(self)
  end
  -- (the next pass is asked for before the rows start: take may run the
  -- first in this callback, and a handler that waits would hold the rest of
  -- this function, and the claims that fill the other workers, till its end)
  if self._rerun or (self._more and claimed >= self._batch) then
    self._rerun = false
    soon(self)
  end
  take(self, rows, n)
end

return runs
