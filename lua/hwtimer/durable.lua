--- hwtimer.durable: timers that survive the process, kept in a store (an
-- SQLite file, or Redis) and held in the wheel only while they are due within
-- a window.
--
--   local q = durable.open(timer, { path = "timers.db" })
--   local q = durable.open(timer, { redis = client, prefix = "app" })
--   q:handle("close_order", function(job) ... end)
--   local id = q:schedule("close_order", 1800, order_id)
--
-- This file is the front: the arguments, the window of ordinary timeouts
-- and the claim/run/acknowledge pass. The store is an engine module
-- (hwtimer.durable.sqlite, hwtimer.durable.redis) that knows its job table;
-- the timer is used only through the public API a user has (timer:schedule
-- and t:cancel), so `timer` may be a hwtimer timer or hwtimer.ngx's object.
--
-- The window: the front keeps an ordinary timeout per key the engine gives
-- for a job due within `window` seconds (SQLite: the row's seq; Redis: its
-- ready time). When one fires the pass claims every due job of a handled
-- kind (a lease), runs the handlers, and acknowledges them (delete, or for a
-- periodic job or a retry the next due time).
local check = require("hwtimer.check")
local engine_api = require("hwtimer.durable.engine")
local ids = require("hwtimer.durable.ids")
local type_name, callable, is_timer = check.type_name, check.callable, check.is_timer

local floor, huge, max, min = math.floor, math.huge, math.max, math.min

local M = {}

-- The engines that come with hwtimer, by the option that selects each,
-- loaded when a store of theirs is opened; `needs`: what to install when it
-- cannot be loaded (a machine without SQLite's headers has no hwtimer.sqlite,
-- and may still use Redis).
local ENGINES = {
  path = { module = "hwtimer.durable.sqlite", needs = "SQLite stores need the hwtimer-sqlite rock "
    .. "(luarocks install hwtimer-sqlite; or make install where libsqlite3-dev is installed)" },
  redis = { module = "hwtimer.durable.redis" },
}

-- The engine module of ENGINES[key], or nil and a message naming what to
-- install where a module it needs is missing. Any other error in loading it
-- is raised as it is.
local function engine_for(key)
  local e = ENGINES[key]
  local ok, engine = pcall(require, e.module)
  if ok then return engine end
  -- (Lua 5.1 and LuaJIT leave a marker there after a failed load: the next
  -- require would say "loop or previous error" instead of what is missing)
  package.loaded[e.module] = nil
  local missing = tostring(engine):match("module '(hwtimer%.[%w_.]+)' not found")
  if not missing or not e.needs then error(engine, 0) end
  return nil, "hwtimer.durable: " .. e.needs .. ": module '" .. missing .. "' not found"
end


---------------------------------------------------------------------------
-- Arguments and options
---------------------------------------------------------------------------

local function argerror(n, fname, msg)
  error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), 3)
end

-- What a bad number argument was, alike on every Lua version.
local function shown(v)
  return type(v) == "number" and string.format("%g", v) or type_name(v)
end

local function finite(v) return type(v) == "number" and v == v and v > -huge and v < huge end
local function positive(v) return finite(v) and v > 0 end
local function seconds(v) return finite(v) and v >= 0 and v <= 1e9 end
local function span(v) return finite(v) and v > 0 and v <= 1e9 end
local function whole(v) return positive(v) and v == floor(v) end
local function name(v) return type(v) == "string" and #v > 0 end

local BACKOFF = {
  delay = { 1, seconds, "number of seconds from 0 to 1e9" },
  factor = { 2, positive, "positive number" },
  max_delay = { 300, seconds, "number of seconds from 0 to 1e9" },
}

-- The options every store has: name = { default, check, what is expected }.
-- Each engine adds its own (its OPTIONS), the one that selects it among them.
local OPTIONS = {
  queue = { "default", name, "non-empty string" },
  window = { 60, span, "number of seconds from 0 (excluded) to 1e9" },
  lease = { 30, span, "number of seconds from 0 (excluded) to 1e9" },
  attempts = { 5, whole, "positive integer" },
  backoff = { nil, function(v) return type(v) == "table" end, "table" },
  on_error = { nil, callable, "function" },
  poll = { 0.05, span, "number of seconds from 0 (excluded) to 1e9" },
  sweep = { 1, span, "number of seconds from 0 (excluded) to 1e9" },
  batch = { 500, whole, "positive integer" },
  ack_delay = { 0.002, seconds, "number of seconds from 0 to 1e9" },
  engine = { nil, function(v) return type(v) == "table" end, "engine module (table)" },
}

-- The engine `opts` select: opts.engine, or the module of the one option of
-- ENGINES they hold. Returns the engine; or nil and a message when its rock
-- is not installed; or nil, nil and what is wrong with the options.
local function select_engine(opts)
  if opts.engine ~= nil then return opts.engine end
  local chosen
  for key in pairs(ENGINES) do
    if opts[key] ~= nil then
      if chosen then return nil, nil, "options 'path' and 'redis' exclude each other" end
      chosen = key
    end
  end
  if not chosen then return nil, nil, "option 'path' expected" end
  return engine_for(chosen)
end

local function check_options(opts)
  if type(opts) ~= "table" then argerror(2, "open", "table expected, got " .. type_name(opts)) end
  local Engine, missing, bad_options = select_engine(opts)
  if bad_options then argerror(2, "open", bad_options) end
  if not Engine then return nil, missing end
  local spec = {}
  for k, v in pairs(OPTIONS) do spec[k] = v end
  for k, v in pairs(Engine.OPTIONS or {}) do spec[k] = v end
  local o, err = check.options(opts, spec)
  if not o then argerror(2, "open", err) end
  local bad = engine_api.missing(Engine)
  if bad then argerror(2, "open", "option 'engine': " .. bad) end
  o.backoff, err = check.options(o.backoff or {}, BACKOFF,
    function(key) return "option 'backoff." .. key .. "'" end,
    function(key) return "option 'backoff': unknown key '" .. key .. "'" end)
  if not o.backoff then argerror(2, "open", err) end
  return o, Engine
end

local function default_on_error(err, job)
  io.stderr:write(string.format("hwtimer.durable: %s%s\n",
    job and ("job " .. job.id .. " (" .. job.kind .. "): ") or "", tostring(err)))
end

---------------------------------------------------------------------------
-- The queue object
---------------------------------------------------------------------------

local Queue = {}
Queue.__index = Queue
Queue.__name = "hwtimer.durable"

local function live(self, fname)
  if getmetatable(self) ~= Queue then
    error(string.format("calling '%s' on bad self (hwtimer.durable expected, got %s)", fname, type_name(self)), 3)
  end
  if self._closed then error("attempt to use a closed queue", 3) end
end

-- q:batch's function may yield (a cosocket in nginx, a cqueues or copas
-- socket). Until it returns the open batch belongs to its coroutine: a write
-- from another coroutine would fall into it, and out with it if it is rolled
-- back, after its caller was told the job was stored. Such writes are refused
-- (nil, message), and a claim pass waits for the batch to end.
local MAIN = {} -- coroutine.running() is nil on the main thread of 5.1 and LuaJIT
local function current() return coroutine.running() or MAIN end
local BATCH_BUSY = "hwtimer.durable: a batch is open in another coroutine (q:batch's function yielded)"
local function other_batch(self) return self._batching ~= nil and self._batching ~= current() end

-- Report an error to on_error, never letting it unwind us. The store's own
-- errors (no job) come from a poll every `poll` seconds and a retry every
-- 0.05 s while the store is down: at most one a second reaches on_error,
-- with the count of those held back since.
local STORE_ERRORS_EVERY = 1
local mono = require("hwtimer.core").now
local function report(self, err, job)
  if not job then
    local now = mono()
    if now < self._quiet_until then
      self._held_back = self._held_back + 1
      return
    end
    if self._held_back > 0 then
      err = tostring(err) .. " (and " .. self._held_back .. " store errors in the last " ..
        STORE_ERRORS_EVERY .. " s)"
    end
    self._quiet_until, self._held_back = now + STORE_ERRORS_EVERY, 0
  end
  local ok, e = pcall(self._on_error, err, job)
  if not ok then default_on_error("on_error raised: " .. tostring(e), job) end
end

---------------------------------------------------------------------------
-- The window: jobs due soon, as ordinary timeouts of the timer
---------------------------------------------------------------------------

local pass -- forward

-- At an nginx worker's exit hwtimer.ngx calls the callbacks of the pending
-- timeouts once more, each cancelled: nothing is due then (the jobs stay in
-- the store for the next process), so every callback here returns at once.
local function cancelled(t)
  local ok, state = pcall(function() return t:state() end)
  return ok and state == "cancelled"
end

-- timer:schedule, or nil where the timer refuses (max_pending) or raises: it
-- is stopped (an nginx worker exiting while a pass was yielded in a
-- cosocket). Every caller has a way on without it.
local function later(self, delay, fn, ...)
  local ok, t = pcall(self._timer.schedule, self._timer, delay, fn, ...)
  return ok and t or nil
end

-- A key's timeout: the claim pass runs whatever is due by its ready time.
local function fire(t, self, key, ready)
  if self._closed or cancelled(t) then return end
  self._loaded[key] = nil
  pass(self, ready)
end

-- Hold `key` in the wheel until `ready` (epoch seconds on the store's
-- clock). A timer that refuses (max_pending) leaves the job to the sweep.
-- `now` is read for each job: loading a large window takes long enough that
-- a `now` read once before it made the last ones late by as much.
local function load(self, key, ready)
  if self._loaded[key] then return end
  local t = later(self, max(0, ready - self._now()), fire, self, key, ready)
  if t then self._loaded[key] = t end
end

local function unload(self, key)
  local t = self._loaded[key]
  if t then
    self._loaded[key] = nil
    t:cancel()
  end
end

-- Run a pass soon (next dispatch), at most one queued at a time.
local function soon(self, delay)
  if self._soon or self._closed then return end
  self._soon = later(self, delay or 0, function(t)
    self._soon = nil
    if not cancelled(t) then pass(self) end
  end)
end

-- Load rows { key, ready }; a pass soon if one is due already.
local function load_rows(self, rows, n)
  local now, overdue = self._now(), false
  for i = 1, n or #rows do
    local r = rows[i]
    if r[2] <= now then overdue = true else load(self, r[1], r[2]) end
  end
  if overdue then soon(self) end
end

-- The refill: every window/2, load what came inside the window.
local function refill(t, self)
  if self._closed or cancelled(t) then return end
  local horizon = self._now() + self._window
  local rows, n = self._engine:range(self._loaded_until - 1e-9, horizon)
  if not rows then
    report(self, "refill: " .. tostring(n))
  else
    self._loaded_until = horizon
    load_rows(self, rows, n)
  end
  self._refill = later(self, self._window / 2, refill, self)
end

-- Every `poll` seconds: what did other processes write (the engine knows
-- how to tell)? Every `sweep` seconds: is anything due that no timeout of
-- ours holds (an expired lease of a process that died, a job this process
-- could not load)?
local function poll(self)
  if self._closed then return end
  local rows, n = self._engine:changes(self._loaded_until)
  if rows then
    load_rows(self, rows, n)
  elseif n then
    report(self, "poll: " .. tostring(n))
  end
  local now = self._now()
  if now >= self._next_sweep then
    self._next_sweep = now + self._sweep
    pass(self)
  end
end

---------------------------------------------------------------------------
-- Claim, run, acknowledge
---------------------------------------------------------------------------

local function backoff(self, attempt)
  local b = self._backoff
  return min(b.max_delay, b.delay * b.factor ^ (attempt - 1))
end

-- What the handler's outcome asks the engine to write, with the time the
-- run ended (the engine may prefer its own clock): an acknowledgement as
-- hwtimer.durable.engine describes it.
local function outcome(self, row, ok, err)
  if ok then return { what = row.every and "next" or "done", row = row, now = self._now() } end
  if row.attempt >= self._attempts then
    return { what = "bury", row = row, arg = tostring(err), now = self._now() }
  end
  return { what = "retry", row = row, arg = backoff(self, row.attempt), now = self._now() }
end

local function load_all(self, reload)
  local now = self._now()
  for i = 1, #reload do
    local r = reload[i]
    if r[2] <= now then soon(self) else load(self, r[1], r[2]) end
  end
end

-- Take the pending acknowledgements for a write to the store; give them
-- back (before any made meanwhile) when it failed. Taken before the call:
-- with Redis in nginx the call yields, and a pass may add acks meanwhile.
local function take_acks(self)
  local acks = self._acks
  self._acks = {}
  return acks
end

local function give_back(self, acks)
  local later = self._acks
  for i = 1, #later do acks[#acks + 1] = later[i] end
  self._acks = acks
end

local function flush_acks(self)
  if #self._acks == 0 then return true end
  local acks = take_acks(self)
  local reload, err = self._engine:ack(acks, self._loaded_until)
  if not reload then
    give_back(self, acks)
    report(self, "acknowledge: " .. tostring(err))
    soon(self, 0.05)
    return nil
  end
  load_all(self, reload)
  return true
end

-- After a pass the acknowledgements wait up to `ack_delay` for the next claim,
-- which writes them in its own transaction or script call: one store round
-- trip a pass instead of two while jobs come due every few milliseconds
-- (docs/internals.md, "Measurements behind the code").
-- Until written the jobs stay leased, in flight; the methods that read jobs
-- (get, pending, dead, cancel) and close write them first. At an nginx
-- worker's exit this timeout is called cancelled, and still writes them.
-- Not inside a running pass (its claim took them) nor an open q:batch (the
-- store's transaction is the batch's).
local function settle(self)
  if #self._acks > 0 and not self._running and not self._batching then flush_acks(self) end
end

local function acks_later(self)
  if self._flush then return end
  if self._ack_delay == 0 then return flush_acks(self) end
  self._flush = later(self, self._ack_delay, function()
    self._flush = nil
    if self._closed then return end
    if self._batching then return acks_later(self) end -- a yielded q:batch: after it
    settle(self)
  end)
  if not self._flush then flush_acks(self) end -- the timer refused or is stopped: now
end

local function by_due(a, b)
  if a.due ~= b.due then return a.due < b.due end
  return a.key < b.key
end

-- Claim what is due (the engine writes the previous batch's
-- acknowledgements with it), returning the rows.
local function claim(self, cutoff)
  local acks = take_acks(self)
  local rows, n, reload = self._engine:claim(acks, cutoff, self._lease, self._batch,
    self._loaded_until)
  if not rows then
    give_back(self, acks)
    return nil, n
  end
  load_all(self, reload)
  return rows, n
end

local function run_one(self, row, acks)
  local job = { id = row.id, kind = row.kind, payload = row.payload, due = row.due, attempt = row.attempt,
                every = row.every }
  local fn = self._handlers[job.kind]
  local ok, err
  if fn then
    ok, err = pcall(fn, job)
  else
    ok, err = false, "no handler for kind '" .. job.kind .. "'"
  end
  if not ok then report(self, err, job) end
  acks[#acks + 1] = outcome(self, row, ok, err)
end

-- The jobs of a batch wait for the handlers before them, and those that
-- ran wait for the pass to end before their acknowledgement is written:
-- once half their lease has passed, the lease of every job of the pass is
-- extended, so that no other process takes one while this one still means
-- to run it or to acknowledge it (a batch of 500 handlers of 100 ms each
-- outlasts a lease of 30 s). A job no longer ours (its lease ran out:
-- another process may run it) is left. When the store cannot be reached
-- the pass stops: the jobs not run come back when their lease ends. `p` is
-- the pass: its rows, the one running (i), how many (n), when last renewed.
local function renew(self, p)
  p.renewed = self._now()
  local kept, err = self._engine:renew(p.rows, self._lease)
  if not kept then
    report(self, "renew: " .. tostring(err))
    return false
  end
  for i = p.i, p.n do
    if not kept[p.rows[i].id] then p.rows[i].lost = true end
  end
  return true
end

-- While a handler waits on I/O (a cosocket in nginx, a cqueues or copas
-- socket), the loop runs other callbacks: this one, every third of the
-- lease while passes run, extends the leases of the pass under way once a
-- third of its lease has passed (a handler that blocks the loop longer than
-- the lease cannot be helped: its job may run a second time elsewhere). One
-- timeout a queue, armed by a pass when none is, and left to lapse once no
-- pass runs: a pass costs no schedule and cancel of its own. A renewal that
-- failed (the store out of reach) is tried again sooner.
local function renew_tick(t, self)
  self._renewer = nil
  local p = self._pass
  if self._closed or cancelled(t) or not p then return end
  local delay = self._lease / 3
  -- (not while a yielded q:batch holds the store)
  if self._now() - p.renewed >= delay and not self._batching and not renew(self, p) then
    delay = min(self._lease / 6, 1)
  end
  self._renewer = later(self, delay, renew_tick, self)
end

-- Claim what is due (by the store's clock; at least by `min_cutoff`, the
-- ready time of the timeout that fired, where the engine lets the client
-- say), run it, and go on in another batch at the next dispatch while
-- batches come back full, so that a backlog never stalls the loop.
function pass(self, min_cutoff)
  if self._closed then return end
  if self._batching then -- a yielded batch holds the store: claim once it is done
    return soon(self, 0.001)
  end
  if self._running then
    self._rerun = true
    return
  end
  local cutoff = max(self._now(), min_cutoff or 0)
  if #self._acks == 0 and not self._engine:probe(cutoff, min_cutoff) then return end
  self._running = true
  local rows, n = claim(self, cutoff)
  if not rows then
    self._running = false
    report(self, "claim: " .. tostring(n))
    return soon(self, 0.05)
  end
  table.sort(rows, by_due)
  for i = 1, n do unload(self, rows[i].key) end
  local p = { rows = rows, i = 1, n = n, renewed = self._now() }
  self._pass = p
  if not self._renewer then self._renewer = later(self, self._lease / 3, renew_tick, self) end
  for i = 1, n do
    if self._closed then break end
    p.i = i
    -- (not while another coroutine's q:batch holds the store: at the next job)
    if self._now() - p.renewed > self._lease / 2 and not other_batch(self) and not renew(self, p) then break end
    if not rows[i].lost then run_one(self, rows[i], self._acks) end
  end
  self._pass = nil
  self._running = false
  if self._closed then return end
  if n >= self._batch or self._rerun then
    self._rerun = false
    soon(self)
  else
    acks_later(self) -- a backlog's next batch writes them in its claim's commit
  end
end

---------------------------------------------------------------------------
-- Opening a store
---------------------------------------------------------------------------

--- q, err = durable.open(timer, opts)
function M.open(timer, opts)
  if not is_timer(timer) then argerror(1, "open", "hwtimer.timer expected, got " .. type_name(timer)) end
  local o, Engine = check_options(opts)
  if not o then return nil, Engine end
  local owner = ids.generator(os.time)() -- this process's leases, in this queue
  local engine, err = Engine.open(o, owner)
  if not engine then return nil, err end
  local self = setmetatable({
    _timer = timer, _engine = engine, _queue = o.queue, _window = o.window, _lease = o.lease,
    _attempts = o.attempts, _backoff = o.backoff, _on_error = o.on_error or default_on_error,
    _sweep = o.sweep, _batch = o.batch, _ack_delay = o.ack_delay,
    _new_id = ids.generator(engine.now, engine),
    _now = function() return engine:now() end,
    _closed = false, _handlers = {}, _loaded = {}, _acks = {}, _next_sweep = 0, _loaded_until = 0,
    _quiet_until = -huge, _held_back = 0,
  }, Queue)
  local now = self._now()
  local rows, n = engine:range(now, now + o.window)
  if not rows then
    engine:close()
    return nil, "hwtimer.durable: " .. engine.name .. ": " .. tostring(n)
  end
  self._loaded_until = now + o.window
  load_rows(self, rows, n)
  self._next_sweep = now + o.sweep
  self._refill = timer:schedule(o.window / 2, refill, self)
  self._poll = timer:every(o.poll, function(t) if not cancelled(t) then poll(self) end end)
  soon(self) -- what came due while no process ran
  return self
end

--- engine = durable.engine(q): the queue's engine (hwtimer.durable.engine),
-- for tests and tools that look at the store itself.
function M.engine(q)
  if getmetatable(q) ~= Queue then argerror(1, "engine", "hwtimer.durable expected, got " .. type_name(q)) end
  return q._engine
end

---------------------------------------------------------------------------
-- The public methods
---------------------------------------------------------------------------

--- q:handle(kind, fn): fn(job) runs the jobs of `kind` in this process.
function Queue:handle(kind, fn)
  live(self, "handle")
  if not name(kind) then argerror(1, "handle", "non-empty string expected, got " .. type_name(kind)) end
  if fn ~= nil and not callable(fn) then argerror(2, "handle", "function expected, got " .. type_name(fn)) end
  self._handlers[kind] = fn
  local ok, err = self._engine:handle(kind, fn ~= nil)
  if not ok then error("hwtimer.durable: " .. tostring(err), 2) end
  if fn then soon(self) end
end

-- Store one job; the common part of schedule, at and every. `when` is a
-- delay when `relative` (the engine adds its clock's now), else epoch seconds.
local function put(self, fname, kind, when, relative, payload, opts, every)
  if type(kind) ~= "string" or kind == "" then -- name(), inline: this is the hot path
    argerror(1, fname, "non-empty string expected, got " .. type_name(kind))
  end
  if payload ~= nil and type(payload) ~= "string" then
    argerror(3, fname, "string or nil expected, got " .. type_name(payload))
  end
  local id
  if opts ~= nil then
    if type(opts) ~= "table" then argerror(4, fname, "table expected, got " .. type_name(opts)) end
    for k in pairs(opts) do
      if k ~= "id" then argerror(4, fname, "unknown option '" .. tostring(k) .. "'") end
    end
    id = opts.id
    if id ~= nil and not name(id) then
      argerror(4, fname, "option 'id': non-empty string expected, got " .. type_name(id))
    end
  end
  local batching = self._batching
  if batching ~= nil and batching ~= current() then return nil, BATCH_BUSY end
  local fresh = id == nil -- ours: no job of that id to replace
  id = id or self._new_id()
  local key, due = self._engine:put(id, kind, payload, when, relative, every, fresh)
  if not key then return nil, "hwtimer.durable: " .. tostring(due) end
  if not self._batching and due < self._loaded_until then -- (a batch's come with its commit)
    if due <= self._now() then soon(self) else load(self, key, due) end
  end
  return id
end

--- id, err = q:schedule(kind, delay, [payload], [opts])
function Queue:schedule(kind, delay, payload, opts)
  if type(self) ~= "table" or self._closed ~= false then live(self, "schedule") end -- live(), inline
  if type(delay) ~= "number" or not (delay > -huge and delay <= 1e9) then -- NaN fails too
    argerror(2, "schedule", "finite number of seconds up to 1e9 expected, got " ..
      shown(delay))
  end
  return put(self, "schedule", kind, delay, true, payload, opts)
end

--- id, err = q:at(kind, epoch_seconds, [payload], [opts])
function Queue:at(kind, when, payload, opts)
  live(self, "at")
  if not finite(when) then
    argerror(2, "at", "finite number expected, got " .. shown(when))
  end
  return put(self, "at", kind, when, false, payload, opts)
end

--- id, err = q:every(kind, interval, [payload], [opts])
function Queue:every(kind, interval, payload, opts)
  live(self, "every")
  if not span(interval) then
    argerror(2, "every", "positive number of seconds up to 1e9 expected, got " ..
      shown(interval))
  end
  return put(self, "every", kind, interval, true, payload, opts, interval)
end

--- ok, err = q:batch(fn): fn(q) schedules, cancels ... in one transaction.
function Queue:batch(fn)
  live(self, "batch")
  if not callable(fn) then argerror(1, "batch", "function expected, got " .. type_name(fn)) end
  if self._batching then -- nested: part of the outer one, if it is this coroutine's
    if other_batch(self) then return nil, BATCH_BUSY end
    return fn(self)
  end
  local engine = self._engine
  local ok, err = engine:begin(self._loaded_until)
  if not ok then return nil, "hwtimer.durable: " .. tostring(err) end
  self._batching, self._unbatched = current(), {}
  local done, e = pcall(fn, self)
  local unloads = self._unbatched
  self._batching, self._unbatched = nil, nil
  if not done then
    engine:rollback()
    error(e, 0)
  end
  local marks
  marks, err = engine:commit()
  if not marks then return nil, "hwtimer.durable: " .. tostring(err) end
  for i = 1, #unloads do unload(self, unloads[i]) end
  load_all(self, marks)
  return true
end

-- A job the pass under way claimed and has not started yet is not started:
-- a cancel that returned true holds (one running now finishes its run).
local function skip_in_pass(self, id)
  local p = self._pass
  if not p then return end
  for i = p.i + 1, p.n do
    if p.rows[i].id == id then p.rows[i].lost = true end
  end
end

--- ok = q:cancel(id)
function Queue:cancel(id)
  live(self, "cancel")
  if not name(id) then argerror(1, "cancel", "non-empty string expected, got " .. type_name(id)) end
  if other_batch(self) then return nil, BATCH_BUSY end
  settle(self) -- a job that ran is not cancelled
  local key, err = self._engine:cancel(id)
  if key == nil then return nil, "hwtimer.durable: " .. tostring(err) end
  if key == false and err then
    return nil, string.format("hwtimer.durable: job %s is in flight in another process (leased for %.3f s more)",
      id, max(0, err - self._now()))
  end
  if key == false then return false end
  skip_in_pass(self, id)
  if self._batching then
    local u = self._unbatched
    u[#u + 1] = key
  else
    unload(self, key)
  end
  return true
end

--- job = q:get(id)
function Queue:get(id)
  live(self, "get")
  if not name(id) then argerror(1, "get", "non-empty string expected, got " .. type_name(id)) end
  settle(self)
  return self._engine:get(id)
end

--- n = q:pending()
function Queue:pending()
  live(self, "pending")
  settle(self)
  return self._engine:pending()
end

--- list = q:dead()
function Queue:dead()
  live(self, "dead")
  settle(self)
  return self._engine:dead()
end

--- q:close(): writes what ran, lets go of the timer's timeouts and the store.
function Queue:close()
  if self._closed then return end
  if not self._running then flush_acks(self) end
  self._closed = true
  for _, t in pairs(self._loaded) do t:cancel() end
  self._loaded = {}
  for _, t in ipairs({ self._refill or false, self._poll or false, self._soon or false,
                       self._flush or false, self._renewer or false }) do
    if t then pcall(t.cancel, t) end
  end
  self._engine:close()
end

function Queue:__tostring()
  if self._closed then return "hwtimer.durable (closed)" end
  local n = 0
  for _, _ in pairs(self._loaded) do n = n + 1 end
  return string.format("hwtimer.durable (%s, queue %s, %d in the window)", self._engine.name, self._queue, n)
end

return M
