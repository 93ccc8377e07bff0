--- hwtimer.durable: timers that survive the process, kept in an SQLite file
-- and held in the wheel only while they are due within a window.
--
--   local q = durable.open(timer, { path = "timers.db" })
--   q:handle("close_order", function(job) ... end)
--   local id = q:schedule("close_order", 1800, order_id)
--
-- It knows SQLite (through hwtimer.sqlite) and its job table; the timer it
-- talks to only through the public API a user has (timer:schedule and
-- t:cancel), so `timer` may be a hwtimer timer or hwtimer.ngx's object.
--
-- How a job moves: a row of hwtimer_jobs, `ready` is when it may next be
-- claimed (its due time, or while claimed the end of its lease). A process
-- keeps an ordinary timeout for each row with `ready` inside its window; when
-- one fires it claims every due row in one BEGIN IMMEDIATE transaction (the
-- lease), runs the handlers, then acknowledges them in one more (delete, or
-- for a periodic job or a retry a copy of the row with its next due time).
-- Every write of a due time gets a new `seq` (AUTOINCREMENT), so a process
-- learns what others scheduled by reading the rows past the last seq it saw
-- whenever SQLite's data_version says another connection committed.
local sqlite = require("hwtimer.sqlite")
local check = require("hwtimer.check")
local type_name, callable, is_timer = check.type_name, check.callable, check.is_timer

local wall = sqlite.now
local floor, huge, max, min = math.floor, math.huge, math.max, math.min

local M = {}

local APP_ID = 1213682756 -- "HWTD": PRAGMA application_id of a store
local FORMAT = 1 -- PRAGMA user_version: the schema below

local SCHEMA = [[
CREATE TABLE hwtimer_jobs (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT, -- new at every write of a due time
  queue   TEXT NOT NULL,
  id      TEXT NOT NULL,
  kind    TEXT NOT NULL,
  payload BLOB,
  due     REAL NOT NULL,             -- epoch seconds: when this run is due
  ready   REAL NOT NULL,             -- when it may be claimed: due, or the lease's end
  every   REAL,                      -- a periodic job's interval
  attempt INTEGER NOT NULL DEFAULT 0, -- attempts started
  owner   TEXT,                      -- the process holding the lease
  dead    INTEGER NOT NULL DEFAULT 0,
  error   TEXT                       -- a dead job's last error
);
CREATE UNIQUE INDEX hwtimer_jobs_id ON hwtimer_jobs (queue, id);
CREATE INDEX hwtimer_jobs_ready ON hwtimer_jobs (queue, ready) WHERE dead = 0;
]]

M.SCHEMA = SCHEMA

-- The statements, prepared once per queue.
local SQL = {
  begin = "BEGIN IMMEDIATE",
  commit = "COMMIT",
  rollback = "ROLLBACK",
  insert = [[INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, every)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)]],
  cancel = "DELETE FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2 RETURNING seq",
  get = [[SELECT id, kind, payload, due, attempt, every, dead, error, owner
          FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2]],
  pending = "SELECT count(*) FROM hwtimer_jobs WHERE queue = ?1 AND dead = 0",
  dead = [[SELECT id, kind, payload, due, attempt, every, dead, error, owner
           FROM hwtimer_jobs WHERE queue = ?1 AND dead = 1 ORDER BY due, seq]],
  range = [[SELECT seq, ready FROM hwtimer_jobs
            WHERE queue = ?1 AND dead = 0 AND ready > ?2 AND ready < ?3]],
  max_seq = "SELECT max(seq) FROM hwtimer_jobs",
  since = [[SELECT seq, ready FROM hwtimer_jobs
            WHERE seq > ?1 AND seq <= ?2 AND +queue = ?3 AND dead = 0 AND +ready < ?4]],
  probe = [[SELECT 1 FROM hwtimer_jobs WHERE queue = ?1 AND dead = 0 AND ready <= ?2
            AND kind IN (SELECT kind FROM temp.hwtimer_handled) LIMIT 1]],
  claim = [[UPDATE hwtimer_jobs SET ready = ?3, owner = ?4, attempt = attempt + 1
            WHERE seq IN (SELECT seq FROM hwtimer_jobs WHERE queue = ?1 AND dead = 0 AND ready <= ?2
                          AND kind IN (SELECT kind FROM temp.hwtimer_handled)
                          ORDER BY ready LIMIT ?5)
            RETURNING seq, id, kind, payload, due, attempt, every]],
  done = "DELETE FROM hwtimer_jobs WHERE seq = ?1 AND owner = ?2",
  -- a copy with a new seq, so that other processes see the new due time
  requeue = [[INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, every, attempt)
              SELECT queue, id, kind, payload, ?3, ?3, every, ?4 FROM hwtimer_jobs
              WHERE seq = ?1 AND owner = ?2]],
  bury = "UPDATE hwtimer_jobs SET dead = 1, owner = NULL, error = ?3 WHERE seq = ?1 AND owner = ?2",
  data_version = "PRAGMA data_version",
  handle = "INSERT OR IGNORE INTO temp.hwtimer_handled (kind) VALUES (?1)",
  unhandle = "DELETE FROM temp.hwtimer_handled WHERE kind = ?1",
}

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

-- name = { default, check, what is expected }
local OPTIONS = {
  path = { nil, name, "non-empty string" },
  queue = { "default", name, "non-empty string" },
  window = { 60, span, "number of seconds from 0 (excluded) to 1e9" },
  lease = { 30, span, "number of seconds from 0 (excluded) to 1e9" },
  attempts = { 5, whole, "positive integer" },
  backoff = { nil, function(v) return type(v) == "table" end, "table" },
  on_error = { nil, callable, "function" },
  sync = { "normal", function(v) return v == "normal" or v == "full" end, "'normal' or 'full'" },
  busy_timeout = { 5, function(v) return finite(v) and v >= 0 and v <= 86400 end,
                   "number of seconds from 0 to 86400" },
  poll = { 0.05, span, "number of seconds from 0 (excluded) to 1e9" },
  sweep = { 1, span, "number of seconds from 0 (excluded) to 1e9" },
  batch = { 500, whole, "positive integer" },
  redis = { nil, function() return true end, "" },
  prefix = { nil, name, "non-empty string" },
}

local function check_options(opts)
  if type(opts) ~= "table" then argerror(2, "open", "table expected, got " .. type_name(opts)) end
  local o, err = check.options(opts, OPTIONS)
  if not o then argerror(2, "open", err) end
  if o.redis ~= nil then
    argerror(2, "open", "option 'redis': the Redis engine is not available yet; use 'path'")
  end
  if o.path == nil then argerror(2, "open", "option 'path' expected") end
  o.backoff, err = check.options(o.backoff or {}, BACKOFF,
    function(key) return "option 'backoff." .. key .. "'" end,
    function(key) return "option 'backoff': unknown key '" .. key .. "'" end)
  if not o.backoff then argerror(2, "open", err) end
  return o
end

local function default_on_error(err, job)
  io.stderr:write(string.format("hwtimer.durable: %s%s\n",
    job and ("job " .. job.id .. " (" .. job.kind .. "): ") or "", tostring(err)))
end

---------------------------------------------------------------------------
-- The queue object
---------------------------------------------------------------------------

local Q = {}
Q.__index = Q
Q.__name = "hwtimer.durable"

local function live(self, fname)
  if getmetatable(self) ~= Q then
    error(string.format("calling '%s' on bad self (hwtimer.durable expected, got %s)", fname, type_name(self)), 3)
  end
  if self._closed then error("attempt to use a closed queue", 3) end
end

-- Report an error to on_error, never letting it unwind us.
local function report(self, err, job)
  local ok, e = pcall(self._on_error, err, job)
  if not ok then default_on_error("on_error raised: " .. tostring(e), job) end
end

local function job_of(id, kind, payload, due, attempt, every, dead, err, owner)
  return { id = id, kind = kind, payload = payload, due = due, attempt = attempt,
           every = every, dead = dead == 1 or nil, error = err, leased = owner ~= nil or nil }
end

---------------------------------------------------------------------------
-- The window: rows due soon, as ordinary timeouts of the timer
---------------------------------------------------------------------------

local pass -- forward

-- A job's timeout: the claim pass runs whatever is due by its ready time.
local function fire(_, self, seq, ready)
  if self._closed then return end
  self._loaded[seq] = nil
  pass(self, ready)
end

-- Hold row `seq` in the wheel until `ready` (epoch seconds). A timer that
-- refuses (max_pending) leaves the row to the sweep.
local function load(self, seq, ready, now)
  if self._loaded[seq] then return end
  local t = self._timer:schedule(max(0, ready - (now or wall())), fire, self, seq, ready)
  if t then self._loaded[seq] = t end
end

local function unload(self, seq)
  local t = self._loaded[seq]
  if t then
    self._loaded[seq] = nil
    t:cancel()
  end
end

-- Run a pass soon (next dispatch), at most one queued at a time.
local function soon(self, delay)
  if self._soon or self._closed then return end
  self._soon = self._timer:schedule(delay or 0, function()
    self._soon = nil
    pass(self)
  end)
end

-- Load the rows with lo < ready < hi; returns whether any is due already.
local function load_range(self, lo, hi)
  local now = wall()
  local rows, n = self._st.range:rows(self._queue, lo, hi)
  if not rows then return nil, n end
  local overdue = false
  for i = 1, n do
    local r = rows[i]
    if r[2] <= now then overdue = true else load(self, r[1], r[2], now) end
  end
  return overdue
end

-- The refill: every window/2, load what came inside the window.
local function refill(_, self)
  if self._closed then return end
  local horizon = wall() + self._window
  local overdue, err = load_range(self, self._loaded_until - 1e-9, horizon)
  if overdue == nil then
    report(self, "refill: " .. err)
  else
    self._loaded_until = horizon
    if overdue then soon(self) end
  end
  self._refill = self._timer:schedule(self._window / 2, refill, self)
end

-- Rows other processes wrote since we last looked (seq past _seen).
local function catch_up_rows(self)
  local st = self._st
  local top = st.max_seq:first()
  if not top or top <= self._seen then return end
  local rows, n = st.since:rows(self._seen, top, self._queue, self._loaded_until)
  if not rows then return report(self, "poll: " .. n) end
  self._seen = top
  local now, overdue = wall(), false
  for i = 1, n do
    local r = rows[i]
    if r[2] <= now then overdue = true else load(self, r[1], r[2], now) end
  end
  if overdue then soon(self) end
end

-- Every `poll` seconds: has another connection committed? Every `sweep`
-- seconds: is anything due that no timeout of ours holds (an expired lease
-- of a process that died, a row this process could not load)?
local function poll(self)
  if self._closed then return end
  local v = self._st.data_version:first()
  if v and v ~= self._version then
    self._version = v
    catch_up_rows(self)
  end
  local now = wall()
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

-- What the handler's outcome writes: { statement, args... }.
local function outcome(self, row, ok, err, now)
  local seq, every, attempt = row[1], row[7], row[6]
  if ok then
    if not every then return { "done", seq } end
    local due = row[5]
    local next_due = due + every * max(1, floor((now - due) / every) + 1)
    return { "requeue", seq, next_due, 0 }
  end
  if attempt >= self._attempts then return { "bury", seq, tostring(err) } end
  return { "requeue", seq, now + backoff(self, attempt), attempt }
end

-- Write the pending acknowledgements (inside the caller's transaction);
-- rows requeued inside the window are loaded once the commit succeeded.
local function write_acks(self, acks, reload)
  local st, owner = self._st, self._owner
  for i = 1, #acks do
    local a = acks[i]
    local n, err
    if a[1] == "done" then
      n, err = st.done:run(a[2], owner)
    elseif a[1] == "bury" then
      n, err = st.bury:run(a[2], owner, a[3])
    else
      n, err = st.requeue:run(a[2], owner, a[3], a[4])
      if n == 1 and a[3] < self._loaded_until then
        reload[#reload + 1] = { self._db:last_insert_rowid(), a[3] }
      end
    end
    if not n then return nil, err end
  end
  return true
end

local function commit(self)
  local ok, err = self._st.commit:run()
  if not ok then self._st.rollback:run() end
  return ok, err
end

local function load_all(self, reload)
  local now = wall()
  for i = 1, #reload do
    local r = reload[i]
    if r[2] <= now then soon(self) else load(self, r[1], r[2], now) end
  end
end

local function flush_acks(self)
  local acks = self._acks
  if #acks == 0 then return true end
  local st, reload = self._st, {}
  local ok, err = st.begin:run()
  if ok then
    ok, err = write_acks(self, acks, reload)
    if ok then ok, err = commit(self) else st.rollback:run() end
  end
  if not ok then
    report(self, "acknowledge: " .. tostring(err))
    soon(self, 0.05)
    return nil
  end
  self._acks = {}
  load_all(self, reload)
  return true
end

local function by_due(a, b)
  if a[5] ~= b[5] then return a[5] < b[5] end
  return a[1] < b[1]
end

-- Claim what is due (one transaction, which also writes the acknowledgements
-- of the previous batch), run it, and go on in another batch at the next
-- dispatch while batches come back full, so that a backlog never stalls the
-- loop.
local function claim(self, cutoff)
  local st, reload = self._st, {}
  local ok, err = st.begin:run()
  if not ok then return nil, err end
  ok, err = write_acks(self, self._acks, reload)
  local rows, n
  if ok then
    rows, n = st.claim:rows(self._queue, cutoff, wall() + self._lease, self._owner, self._batch)
    if not rows then ok, err = nil, n end
  end
  if ok then ok, err = commit(self) else st.rollback:run() end
  if not ok then return nil, err end
  self._acks = {}
  load_all(self, reload)
  return rows, n
end

local function run_one(self, row, acks)
  local job = job_of(row[2], row[3], row[4], row[5], row[6], row[7])
  local fn = self._handlers[job.kind]
  local ok, err
  if fn then
    ok, err = pcall(fn, job)
  else
    ok, err = false, "no handler for kind '" .. job.kind .. "'"
  end
  if not ok then report(self, err, job) end
  acks[#acks + 1] = outcome(self, row, ok, err, wall())
end

function pass(self, min_cutoff)
  if self._closed then return end
  if self._running then
    self._rerun = true
    return
  end
  local cutoff = max(wall(), min_cutoff or 0)
  if #self._acks == 0 and not self._st.probe:first(self._queue, cutoff) then return end
  self._running = true
  local rows, n = claim(self, cutoff)
  if not rows then
    self._running = false
    report(self, "claim: " .. tostring(n))
    return soon(self, 0.05)
  end
  table.sort(rows, by_due)
  for i = 1, n do unload(self, rows[i][1]) end
  for i = 1, n do
    if self._closed then break end
    run_one(self, rows[i], self._acks)
  end
  self._running = false
  if self._closed then return end
  if n >= self._batch or self._rerun then
    self._rerun = false
    soon(self)
  else
    flush_acks(self) -- a backlog's next batch writes them in its claim's commit
  end
end

---------------------------------------------------------------------------
-- Opening a store
---------------------------------------------------------------------------

local function refuse(db, path, msg)
  db:close()
  return nil, "hwtimer.durable: " .. path .. ": " .. msg
end

-- Check that the file is ours (or empty, then make it ours).
local function prepare_store(db, path)
  local st, err = db:prepare("PRAGMA application_id")
  if not st then return refuse(db, path, err) end
  local app = st:first()
  if app == nil then return refuse(db, path, db:errmsg()) end
  st:finalize()
  if app == 0 then
    local ok
    ok, err = db:exec("BEGIN IMMEDIATE")
    if not ok then return refuse(db, path, err) end
    local c = db:prepare("SELECT (SELECT count(*) FROM sqlite_master), (SELECT application_id FROM pragma_application_id)")
    local tables, app2 = c:first()
    c:finalize()
    if app2 == 0 and tables > 0 then
      db:exec("ROLLBACK")
      return refuse(db, path, "not a hwtimer.durable store (it holds other tables)")
    end
    if app2 == 0 then
      ok, err = db:exec(SCHEMA .. "PRAGMA application_id = " .. APP_ID .. "; PRAGMA user_version = " .. FORMAT .. ";")
      if not ok then
        db:exec("ROLLBACK")
        return refuse(db, path, err)
      end
    end
    ok, err = db:exec("COMMIT")
    if not ok then return refuse(db, path, err) end
    app = APP_ID
  end
  if app ~= APP_ID then
    return refuse(db, path, "not a hwtimer.durable store (application_id " .. app .. ")")
  end
  st = db:prepare("PRAGMA user_version")
  local version = st:first()
  st:finalize()
  if version ~= FORMAT then
    return refuse(db, path, "store format " .. tostring(version) .. ", this module reads " .. FORMAT)
  end
  return true
end

local function connect(o)
  local db, err = sqlite.open(o.path)
  if not db then return nil, "hwtimer.durable: " .. o.path .. ": " .. err end
  db:busy_timeout(o.busy_timeout)
  local ok
  ok, err = prepare_store(db, o.path) -- before anything writes to a file that may not be ours
  if not ok then return nil, err end
  ok, err = db:exec("PRAGMA journal_mode = WAL")
  if not ok then return refuse(db, o.path, err) end
  ok, err = db:exec("PRAGMA synchronous = " .. (o.sync == "full" and "FULL" or "NORMAL") ..
    "; CREATE TEMP TABLE hwtimer_handled (kind TEXT PRIMARY KEY)")
  if not ok then return refuse(db, o.path, err) end
  local st = {}
  for key, sql in pairs(SQL) do
    st[key], err = db:prepare(sql)
    if not st[key] then return refuse(db, o.path, err) end
  end
  return db, st
end

--- q, err = durable.open(timer, opts)
function M.open(timer, opts)
  if not is_timer(timer) then argerror(1, "open", "hwtimer.timer expected, got " .. type_name(timer)) end
  local o = check_options(opts)
  local db, st = connect(o)
  if not db then return nil, st end
  local self = setmetatable({
    _timer = timer, _db = db, _st = st, _queue = o.queue, _window = o.window, _lease = o.lease,
    _attempts = o.attempts, _backoff = o.backoff, _on_error = o.on_error or default_on_error,
    _sweep = o.sweep, _batch = o.batch, _path = o.path,
    _owner = sqlite.random_id(), _handlers = {}, _loaded = {}, _acks = {},
    _seen = 0, _version = nil, _next_sweep = 0, _loaded_until = 0,
  }, Q)
  self._version = st.data_version:first()
  self._seen = st.max_seq:first() or 0
  local now = wall()
  local overdue, err = load_range(self, now, now + o.window)
  if overdue == nil then
    db:close()
    return nil, "hwtimer.durable: " .. o.path .. ": " .. err
  end
  self._loaded_until = now + o.window
  self._next_sweep = now + o.sweep
  self._refill = timer:schedule(o.window / 2, refill, self)
  self._poll = timer:every(o.poll, function() poll(self) end)
  soon(self) -- what came due while no process ran
  return self
end

---------------------------------------------------------------------------
-- The public methods
---------------------------------------------------------------------------

--- q:handle(kind, fn): fn(job) runs the jobs of `kind` in this process.
function Q:handle(kind, fn)
  live(self, "handle")
  if not name(kind) then argerror(1, "handle", "non-empty string expected, got " .. type_name(kind)) end
  if fn ~= nil and not callable(fn) then argerror(2, "handle", "function expected, got " .. type_name(fn)) end
  self._handlers[kind] = fn
  local ok, err = (fn and self._st.handle or self._st.unhandle):run(kind)
  if not ok then error("hwtimer.durable: " .. err, 2) end
  if fn then soon(self) end
end

-- Store one job; the common part of schedule, at and every.
local function put(self, fname, kind, due, payload, opts, every)
  if not name(kind) then argerror(1, fname, "non-empty string expected, got " .. type_name(kind)) end
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
  id = id or sqlite.random_id()
  local n, err = self._st.insert:run(self._queue, id, kind, payload, due, every)
  if not n then return nil, "hwtimer.durable: " .. err end
  if due < self._loaded_until then
    local seq = self._db:last_insert_rowid()
    if self._batching then
      local b = self._batched
      b[#b + 1] = { seq, due }
    elseif due <= wall() then
      soon(self)
    else
      load(self, seq, due)
    end
  end
  return id
end

--- id, err = q:schedule(kind, delay, [payload], [opts])
function Q:schedule(kind, delay, payload, opts)
  live(self, "schedule")
  if not finite(delay) or delay > 1e9 then
    argerror(2, "schedule", "finite number of seconds up to 1e9 expected, got " ..
      shown(delay))
  end
  return put(self, "schedule", kind, wall() + delay, payload, opts)
end

--- id, err = q:at(kind, epoch_seconds, [payload], [opts])
function Q:at(kind, when, payload, opts)
  live(self, "at")
  if not finite(when) then
    argerror(2, "at", "finite number expected, got " .. shown(when))
  end
  return put(self, "at", kind, when, payload, opts)
end

--- id, err = q:every(kind, interval, [payload], [opts])
function Q:every(kind, interval, payload, opts)
  live(self, "every")
  if not span(interval) then
    argerror(2, "every", "positive number of seconds up to 1e9 expected, got " ..
      shown(interval))
  end
  return put(self, "every", kind, wall() + interval, payload, opts, interval)
end

--- ok, err = q:batch(fn): fn(q) schedules, cancels ... in one transaction.
function Q:batch(fn)
  live(self, "batch")
  if not callable(fn) then argerror(1, "batch", "function expected, got " .. type_name(fn)) end
  if self._batching then return fn(self) end -- nested: part of the outer one
  local st = self._st
  local ok, err = st.begin:run()
  if not ok then return nil, "hwtimer.durable: " .. err end
  self._batching, self._batched, self._unbatched = true, {}, {}
  local done, e = pcall(fn, self)
  local loads, unloads = self._batched, self._unbatched
  self._batching, self._batched, self._unbatched = nil, nil, nil
  if not done then
    if not self._db:autocommit() then st.rollback:run() end
    error(e, 0)
  end
  ok, err = commit(self)
  if not ok then return nil, "hwtimer.durable: " .. err end
  for i = 1, #unloads do unload(self, unloads[i]) end
  load_all(self, loads)
  return true
end

--- ok = q:cancel(id)
function Q:cancel(id)
  live(self, "cancel")
  if not name(id) then argerror(1, "cancel", "non-empty string expected, got " .. type_name(id)) end
  local seq, err = self._st.cancel:first(self._queue, id)
  if seq == nil and err then return nil, "hwtimer.durable: " .. err end
  if seq == nil then return false end
  if self._batching then
    local u = self._unbatched
    u[#u + 1] = seq
  else
    unload(self, seq)
  end
  return true
end

--- job = q:get(id)
function Q:get(id)
  live(self, "get")
  if not name(id) then argerror(1, "get", "non-empty string expected, got " .. type_name(id)) end
  local r = { self._st.get:first(self._queue, id) }
  if r[1] == nil then return nil, r[2] end
  return job_of(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])
end

--- n = q:pending()
function Q:pending()
  live(self, "pending")
  return self._st.pending:first(self._queue)
end

--- list = q:dead()
function Q:dead()
  live(self, "dead")
  local rows, n = self._st.dead:rows(self._queue)
  if not rows then return nil, n end
  local list = {}
  for i = 1, n do
    local r = rows[i]
    list[i] = job_of(r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])
  end
  return list
end

--- q:close(): writes what ran, lets go of the timer's timeouts and the file.
function Q:close()
  if self._closed then return end
  if not self._running then flush_acks(self) end
  self._closed = true
  for _, t in pairs(self._loaded) do t:cancel() end
  self._loaded = {}
  for _, t in ipairs({ self._refill or false, self._poll or false, self._soon or false }) do
    if t then pcall(t.cancel, t) end
  end
  self._db:close()
end

function Q:__tostring()
  if self._closed then return "hwtimer.durable (closed)" end
  local n = 0
  for _ in pairs(self._loaded) do n = n + 1 end
  return string.format("hwtimer.durable (%s, queue %s, %d in the window)", self._path, self._queue, n)
end

return M
