--- hwtimer.durable.sqlite: the store of hwtimer.durable in one SQLite file
-- (through hwtimer.sqlite, prepared statements). The front (hwtimer.durable)
-- holds the window and runs the handlers; this engine knows the job table.
--
-- How a job moves: a row of hwtimer_jobs, `ready` is when it may next be
-- claimed (its due time, or while claimed the end of its lease). A claim is
-- one BEGIN IMMEDIATE transaction (the lease); the acknowledgements (delete,
-- or for a periodic job or a retry a copy of the row with its next due time)
-- go in the next claim's transaction or one of their own. Every write of a
-- due time gets a new `seq` (AUTOINCREMENT), the key of the front's timeout,
-- so a process learns what others scheduled by reading the rows past the
-- last seq it saw whenever SQLite's data_version says another connection
-- committed.
local sqlite = require("hwtimer.sqlite")

local Engine = {}
Engine.__index = Engine

-- This engine's options (hwtimer.durable.engine): `path` selects it.
Engine.OPTIONS = {
  path = { nil, function(v) return type(v) == "string" and #v > 0 end, "non-empty string" },
  sync = { "normal", function(v) return v == "normal" or v == "full" end, "'normal' or 'full'" },
  busy_timeout = { 5, function(v) return type(v) == "number" and v >= 0 and v <= 86400 end,
                   "number of seconds from 0 to 86400" },
  -- true: open only a store that is there, in this module's format (make
  -- none in an empty file, upgrade none): hwtimer-jobs beside live
  -- processes, which an upgrade would shut out of their store
  existing = { false, function(v) return type(v) == "boolean" end, "boolean" },
}

local APP_ID = 1213682756 -- "HWTD": PRAGMA application_id of a store
local FORMAT = 2 -- PRAGMA user_version: the schema below
local CHECKPOINT_PAGES = 1000 -- SQLite's own default mark

-- Format 2 added the columns of schedules (cron ... late) and renamed
-- format 1's `every` to `period`. The new name is a fence: a process of
-- format 1 still running when a process of format 2 upgrades the file finds
-- every statement of its that names `every` (its claim, schedule, requeue,
-- get) failing with "no such column: every" once SQLite prepares it again
-- for the new schema, so it writes no row of the new format without the
-- new columns. An upgraded file and a new one have the same columns in the
-- same order.
local SCHEMA = [[
CREATE TABLE hwtimer_jobs (
  seq     INTEGER PRIMARY KEY AUTOINCREMENT, -- new at every write of a due time
  queue   TEXT NOT NULL,
  id      TEXT NOT NULL,
  kind    TEXT NOT NULL,
  payload BLOB,
  due     REAL NOT NULL,             -- epoch seconds: when this run is due
  ready   REAL NOT NULL,             -- when it may be claimed: due, or the lease's end
  period  REAL,                      -- an interval schedule's interval (format 1: every)
  attempt INTEGER NOT NULL DEFAULT 0, -- attempts started
  owner   TEXT,                      -- the process holding the lease
  dead    INTEGER NOT NULL DEFAULT 0,
  error   TEXT,                      -- a dead job's last error
  cron    TEXT,                      -- a cron schedule's expression
  tz      TEXT,                      -- its zone (NULL: UTC)
  start   REAL,                      -- a schedule's bounds (epoch seconds)
  stop    REAL,
  runs_limit INTEGER,                -- most runs
  missed  TEXT,                      -- 'skip', 'once' or 'all'
  missed_window REAL,                -- seconds back a missed time still runs
  runs    INTEGER,                   -- runs ended so far
  at      REAL,                      -- the calendar time this run stands for
  late    INTEGER                    -- NULL until its run started; then 1 if late
);
CREATE UNIQUE INDEX hwtimer_jobs_id ON hwtimer_jobs (queue, id);
CREATE INDEX hwtimer_jobs_ready ON hwtimer_jobs (queue, ready) WHERE dead = 0;
]]

-- Format 1 to 2, in the transaction that checked the format.
local UPGRADE_1 = [[
ALTER TABLE hwtimer_jobs RENAME COLUMN every TO period;
ALTER TABLE hwtimer_jobs ADD COLUMN cron TEXT;
ALTER TABLE hwtimer_jobs ADD COLUMN tz TEXT;
ALTER TABLE hwtimer_jobs ADD COLUMN start REAL;
ALTER TABLE hwtimer_jobs ADD COLUMN stop REAL;
ALTER TABLE hwtimer_jobs ADD COLUMN runs_limit INTEGER;
ALTER TABLE hwtimer_jobs ADD COLUMN missed TEXT;
ALTER TABLE hwtimer_jobs ADD COLUMN missed_window REAL;
ALTER TABLE hwtimer_jobs ADD COLUMN runs INTEGER;
ALTER TABLE hwtimer_jobs ADD COLUMN at REAL;
ALTER TABLE hwtimer_jobs ADD COLUMN late INTEGER;
PRAGMA user_version = 2;
]]

Engine.SCHEMA = SCHEMA

-- A job's columns as job_of reads them, and a schedule's as a row carries them.
local JOB = "id, kind, payload, due, attempt, period, dead, error, owner, " ..
  "cron, tz, start, stop, runs_limit, missed, missed_window, runs, at"
local SCHED = "cron, tz, start, stop, runs_limit, missed, missed_window"
local ROW = "seq, id, kind, payload, due, attempt, period, " .. SCHED .. ", runs, at, late"
-- A copy of a row with a new seq (so that other processes see its new due
-- time): the columns written, and those carried over.
local COPY = "INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, period, attempt, " ..
  SCHED .. ", runs, at, late) SELECT queue, id, kind, payload, "

-- The statements, prepared once per queue.
local SQL = {
  begin = "BEGIN IMMEDIATE",
  commit = "COMMIT",
  rollback = "ROLLBACK",
  insert = [[INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, period)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)]],
  -- a schedule: its calendar and options, the runs so far, its run's time
  insert_schedule = "INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, period, " ..
    "attempt, " .. SCHED .. [[, runs, at, late)
    VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)]],
  -- what an upsert compares
  schedule_of = "SELECT kind, payload, period, " .. SCHED ..
    ", runs, due, at, late, attempt, owner, dead, seq FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2",
  -- not a job another process holds under a live lease: it may be running there
  cancel = [[DELETE FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2
             AND (owner IS NULL OR owner = ?3 OR ready <= ?4) RETURNING seq]],
  leased_until = "SELECT ready FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2 AND owner IS NOT NULL",
  get = "SELECT " .. JOB .. " FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2",
  pending = "SELECT count(*) FROM hwtimer_jobs WHERE queue = ?1 AND dead = 0",
  dead = "SELECT " .. JOB .. " FROM hwtimer_jobs WHERE queue = ?1 AND dead = 1 ORDER BY due, seq",
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
            RETURNING ]] .. ROW,
  done = "DELETE FROM hwtimer_jobs WHERE seq = ?1 AND owner = ?2",
  -- a retry, or a run handed back: due anew, the schedule's run kept (its
  -- time and lateness, once a retry says them)
  requeue = COPY .. "?3, ?3, period, ?4, " .. SCHED .. [[, runs, coalesce(?5, at), coalesce(?6, late)
    FROM hwtimer_jobs WHERE seq = ?1 AND owner = ?2]],
  -- a schedule's next run: due at its time, attempts from zero, the runs counted
  advance = COPY .. "?3, ?3, period, 0, " .. SCHED .. [[, ?4, ?3, NULL
    FROM hwtimer_jobs WHERE seq = ?1 AND owner = ?2]],
  bury = [[UPDATE hwtimer_jobs SET dead = 1, owner = NULL, error = ?3, at = coalesce(?4, at),
           late = coalesce(?5, late) WHERE seq = ?1 AND owner = ?2]],
  renew = "UPDATE hwtimer_jobs SET ready = ?3 WHERE seq = ?1 AND owner = ?2 AND attempt = ?4",
  data_version = "PRAGMA data_version",
  -- operating a store (hwtimer.durable.engine): pending = not dead, not
  -- leased; its ready time is its due time
  counts = [[SELECT kind, sum(dead = 0 AND owner IS NULL), sum(dead = 0 AND owner IS NULL AND ready <= ?2),
             sum(dead = 0 AND owner IS NOT NULL), sum(dead)
             FROM hwtimer_jobs WHERE queue = ?1 GROUP BY kind]],
  -- the job's state, for a refusal's reason
  state = "SELECT dead, owner, ready, seq FROM hwtimer_jobs WHERE queue = ?1 AND id = ?2",
  -- a copy with a new seq (as requeue), so that other processes see it; a
  -- schedule's run as it was (a dead run is tried again as the same run)
  retry = COPY .. "?3, ?3, period, 0, " .. SCHED .. [[, runs, at, late FROM hwtimer_jobs
            WHERE queue = ?1 AND id = ?2 AND dead = 1]],
  -- a schedule run now is a run of now (its calendar goes on after it)
  run_now = COPY .. "?3, ?3, period, attempt, " .. SCHED .. [[, runs,
              CASE WHEN at IS NULL THEN NULL ELSE ?3 END, NULL FROM hwtimer_jobs
              WHERE queue = ?1 AND id = ?2 AND dead = 0 AND owner IS NULL AND ready > ?3]],
  -- the schedules (every row of the queue is read: no index holds them)
  schedules = "SELECT " .. JOB .. [[ FROM hwtimer_jobs
                WHERE queue = ?1 AND (period IS NOT NULL OR cron IS NOT NULL) ORDER BY due, id]],
  handle = "INSERT OR IGNORE INTO temp.hwtimer_handled (kind) VALUES (?1)",
  unhandle = "DELETE FROM temp.hwtimer_handled WHERE kind = ?1",
}

-- q:jobs' pages: per state, its rows and the column they are ordered by
-- (pending: `ready`, its due time, which the index holds); the first page,
-- and the next ones after (due, id) (`col >= ?4` bounds the index's range).
local STATES = {
  pending = { "dead = 0 AND owner IS NULL", "ready" },
  leased = { "dead = 0 AND owner IS NOT NULL", "due" },
  dead = { "dead = 1", "due" },
}
for state, s in pairs(STATES) do
  local head = "SELECT " .. JOB .. " FROM hwtimer_jobs " ..
    "WHERE queue = ?1 AND " .. s[1] .. " AND (?2 IS NULL OR kind = ?2)"
  local tail = " ORDER BY " .. s[2] .. ", id LIMIT ?3"
  SQL["jobs_" .. state] = head .. tail
  SQL["jobs_" .. state .. "_after"] = head .. " AND " .. s[2] .. " >= ?4 AND (" .. s[2] .. " > ?4 OR id > ?5)" .. tail
end

local now = sqlite.now
Engine.now = now

-- A job as q:get shows it, from a row of JOB's columns: a schedule's
-- fields only where it is one (`scheduled_for`: its pending run's time).
local function job_of(r)
  local job = { id = r[1], kind = r[2], payload = r[3], due = r[4], attempt = r[5], every = r[6],
                dead = r[7] == 1 or nil, error = r[8], leased = r[9] ~= nil or nil }
  if r[6] or r[10] then
    job.cron, job.tz, job.start, job.stop, job.limit = r[10], r[11], r[12], r[13], r[14]
    job.missed, job.window, job.runs, job.scheduled_for = r[15] or "once", r[16], r[17] or 0, r[18] or r[4]
  end
  return job
end

-- A query's rows of job columns (JOB's) as jobs, in place: the list, or
-- nil and the message where the query failed.
local function jobs_of(rows, n)
  if not rows then return nil, n end
  for i = 1, n do rows[i] = job_of(rows[i]) end
  return rows
end

---------------------------------------------------------------------------
-- Opening a store
---------------------------------------------------------------------------

-- The user this process runs as, "name (uid N)", for a message: an nginx
-- worker runs as nginx's `user`, not as whoever started it.
local function process_user()
  local f = io.open("/proc/self/status")
  local uid = f and f:read("*a"):match("\nUid:%s*(%d+)")
  if f then f:close() end
  if not uid then return os.getenv("USER") or "unknown" end
  local name
  f = io.open("/etc/passwd")
  if f then
    for line in f:lines() do
      local n, u = line:match("^([^:]*):[^:]*:(%d+):")
      if u == uid then name = n break end
    end
    f:close()
  end
  return (name or "?") .. " (uid " .. uid .. ")"
end

-- SQLite's words for a file it cannot make or write say neither where nor
-- who: name the directory and the user.
local function explained(path, msg)
  if not (msg:find("unable to open database file", 1, true) or msg:find("readonly", 1, true)) then
    return msg
  end
  local dir = path:match("^(.*)/[^/]*$") or "."
  if dir == "" then dir = "/" end
  return msg .. " (the directory " .. dir .. " must exist and be writable by " .. process_user() ..
    ", the user this process runs as: SQLite makes the store and its -wal and -shm files there)"
end

local function refuse(db, path, msg)
  db:close()
  return nil, "hwtimer.durable: " .. path .. ": " .. explained(path, msg)
end

-- A store of format 1 made one of format 2, once every other check has
-- passed, in one transaction that reads the format again (another process
-- may have upgraded it meanwhile).
local function upgrade(db, path)
  local ok, err = db:exec("BEGIN IMMEDIATE")
  if not ok then return refuse(db, path, err) end
  local st = db:prepare("PRAGMA user_version")
  local version = st:first()
  st:finalize()
  if version == 1 then ok, err = db:exec(UPGRADE_1) end
  if ok then ok, err = db:exec("COMMIT") end
  if not ok then
    db:exec("ROLLBACK")
    return refuse(db, path, err)
  end
  return true
end

-- Check that the file is ours (or empty, then make it ours, unless only
-- an `existing` store may be opened).
local function prepare_store(db, path, existing)
  local st, err = db:prepare("PRAGMA application_id")
  if not st then return refuse(db, path, err) end
  local app = st:first()
  if app == nil then return refuse(db, path, db:errmsg()) end
  st:finalize()
  if app == 0 and existing then
    return refuse(db, path, "not a hwtimer.durable store (it is empty, or holds other tables)")
  end
  if app == 0 then
    local ok
    ok, err = db:exec("BEGIN IMMEDIATE")
    if not ok then return refuse(db, path, err) end
    local c = db:prepare("SELECT (SELECT count(*) FROM sqlite_master), "
      .. "(SELECT application_id FROM pragma_application_id)")
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
  if version == 1 and existing then
    return refuse(db, path, "store format 1: the processes of this version upgrade it when they open it "
      .. "(the older ones still using it would be shut out)")
  end
  if version == 1 then return upgrade(db, path) end
  if version ~= FORMAT then
    return refuse(db, path, "store format " .. tostring(version) .. ", this module reads " .. FORMAT)
  end
  return true
end

local function connect(o)
  local db, err = sqlite.open(o.path, o.existing) -- (existing: a file that is missing is not made)
  if not db then return nil, "hwtimer.durable: " .. o.path .. ": " .. explained(o.path, err) end
  -- (a store that ends with the connection would lose every job it took:
  -- SQLite tells by the file name it gives the database, whatever the
  -- spelling, ":memory:", a URI's mode=memory or vfs=memdb, "file:")
  if not db:durable() then
    return refuse(db, o.path, "an in-memory or temporary database, not a store: every job would be lost at "
      .. "its close (name a file)")
  end
  db:busy_timeout(o.busy_timeout)
  local ok
  ok, err = prepare_store(db, o.path, o.existing) -- before anything writes to a file that may not be ours
  if not ok then return nil, err end
  ok, err = db:exec("PRAGMA journal_mode = WAL")
  if not ok then return refuse(db, o.path, err) end
  ok, err = db:exec("PRAGMA synchronous = " .. (o.sync == "full" and "FULL" or "NORMAL") ..
    "; CREATE TEMP TABLE hwtimer_handled (kind TEXT PRIMARY KEY)")
  if not ok then return refuse(db, o.path, err) end
  -- Checkpoints on a thread of their own (csrc/durable/checkpoint.c): inline
  -- each one stalls the loop for a copy and an fsync. If the thread cannot
  -- start, SQLite's own inline checkpoint stays.
  db:checkpoint_in_background(CHECKPOINT_PAGES)
  local st = {}
  for key, sql in pairs(SQL) do
    st[key], err = db:prepare(sql)
    if not st[key] then return refuse(db, o.path, err) end
  end
  return db, st
end

--- eng, err = engine.open(o, owner): o are the front's checked options.
function Engine.open(o, owner)
  local db, st = connect(o)
  if not db then return nil, st end
  local self = setmetatable({ db = db, st = st, queue = o.queue, owner = owner,
                              name = o.path, version = nil, seen = 0, insert = st.insert }, Engine)
  self.version = st.data_version:first()
  self.seen = st.max_seq:first() or 0
  return self
end

function Engine:close() self.db:close() end

---------------------------------------------------------------------------
-- Jobs
---------------------------------------------------------------------------

-- Commit the transaction; rolled back when the commit fails.
local function commit(self)
  local ok, err = self.st.commit:run()
  if not ok then self.st.rollback:run() end
  return ok, err
end

-- A schedule upserted over the row `o` (schedule_of's columns), or nil:
-- the values to write (due, attempt, runs, at, late), or nil when it is
-- the same schedule (nothing to write). The same calendar keeps a pending
-- run's time (a redeploy neither resets nor repeats it); over a run in
-- flight the first run is after that run's time (s.later where `due` is
-- not); the runs so far stay with the id.
local function upsert(o, kind, payload, due, every, s)
  if o[1] == nil then return due, 0, 0, due, nil end
  local was = o[3] ~= nil or o[4] ~= nil
  local same_calendar = was and o[3] == every and o[4] == s.cron and o[5] == s.tz and o[6] == s.start
  if same_calendar and o[1] == kind and o[2] == payload and o[7] == s.stop and o[8] == s.limit
    and o[9] == s.missed and o[10] == s.window then
    return nil
  end
  local runs = was and o[11] or 0
  if same_calendar and o[17] == 0 and o[16] == nil then -- pending: its run kept
    return o[12], o[15], runs, o[13] or o[12], o[14]
  end
  -- a run in flight: the new schedule's first run comes after its time
  if o[16] ~= nil and o[17] == 0 and s.later and due <= (o[13] or o[12]) then due = s.later end
  return due, 0, runs, due, nil
end

-- Store a schedule (in a transaction of its own, outside a batch: the
-- upsert reads, then writes): key, due; or true in a batch.
local function put_schedule(self, id, kind, payload, due, every, fresh, s)
  local st, marks = self.st, self.marks
  local err
  if not marks then
    local ok, e = st.begin:run()
    if not ok then return nil, e end
  end
  local o = {}
  if not fresh then
    o = { st.schedule_of:first(self.queue, id) }
    if o[1] == nil and o[2] ~= nil then err = o[2] end
  end
  local seq, attempt, runs, at, late
  if not err then
    due, attempt, runs, at, late = upsert(o, kind, payload, due, every, s)
    if due == nil then
      seq, due = o[18], o[12] -- the same schedule: as it is
    else
      local n
      n, seq = st.insert_schedule:run(self.queue, id, kind, payload, due, every, attempt, s.cron, s.tz, s.start,
        s.stop, s.limit, s.missed, s.window, runs, at, late)
      if not n then err = seq end
      if n and marks and due < self.marks_hi then marks[#marks + 1] = { seq, due } end
    end
  end
  if marks then
    if err then return nil, err end
    return true
  end
  if err then
    st.rollback:run()
    return nil, err
  end
  local ok, e = commit(self)
  if not ok then return nil, e end
  return seq, due
end

-- Store one job due at `when` (a delay from now when `relative`); returns
-- its key (seq) for the window and its due time; inside a batch, true (the
-- commit returns its mark). `sched`: a schedule's calendar and options.
function Engine:put(id, kind, payload, when, relative, every, fresh, sched)
  local due = relative and now() + when or when
  if sched then return put_schedule(self, id, kind, payload, due, every, fresh, sched) end
  local n, seq = self.insert:run(self.queue, id, kind, payload, due, every)
  if not n then return nil, seq end
  local marks = self.marks
  if marks then
    if due < self.marks_hi then marks[#marks + 1] = { seq, due } end
    return true
  end
  return seq, due
end

function Engine:cancel(id)
  local seq, err = self.st.cancel:first(self.queue, id, self.owner, sqlite.now())
  if seq == nil and err then return nil, err end
  if seq then return seq end
  local until_
  until_, err = self.st.leased_until:first(self.queue, id)
  if until_ == nil and err then return nil, err end
  return false, until_
end

function Engine:get(id)
  local r = { self.st.get:first(self.queue, id) }
  if r[1] == nil then return nil, r[2] end
  return job_of(r)
end

function Engine:pending() return self.st.pending:first(self.queue) end

function Engine:dead() return jobs_of(self.st.dead:rows(self.queue)) end

function Engine:handle(kind, on)
  return (on and self.st.handle or self.st.unhandle):run(kind)
end

-- q:batch: one transaction; the marks of its jobs before hi come back from
-- the commit.
function Engine:begin(hi)
  local ok, err = self.st.begin:run()
  if ok then self.marks, self.marks_hi = {}, hi end
  return ok, err
end

function Engine:commit()
  local marks = self.marks
  self.marks = nil
  local ok, err = commit(self)
  if not ok then return nil, err end
  return marks
end

function Engine:rollback()
  self.marks = nil
  if not self.db:autocommit() then self.st.rollback:run() end
end

---------------------------------------------------------------------------
-- Operating a store
---------------------------------------------------------------------------

function Engine:counts()
  local rows, n = self.st.counts:rows(self.queue, now())
  if not rows then return nil, n end
  local kinds = {}
  for i = 1, n do
    local r = rows[i]
    kinds[r[1]] = { pending = r[2], due = r[3], leased = r[4], dead = r[5] }
  end
  return kinds
end

function Engine:jobs(state, kind, limit, after_due, after_id)
  local st = self.st
  if after_due then
    return jobs_of(st["jobs_" .. state .. "_after"]:rows(self.queue, kind, limit, after_due, after_id))
  end
  return jobs_of(st["jobs_" .. state]:rows(self.queue, kind, limit))
end

-- Why `id` was not made due: false, its state (and a leased job's lease
-- end; a pending one's ready time and seq); nil, message.
local function refusal(self, id)
  local dead, owner, ready, seq = self.st.state:first(self.queue, id)
  if dead == nil and owner then return nil, owner end -- (first's nil, message)
  if dead == nil then return false, "missing" end
  if dead == 1 then return false, "dead" end
  if owner ~= nil then return false, "leased", ready end
  return false, "pending", ready, seq
end

function Engine:retry(id)
  local due = now()
  local n, seq = self.st.retry:run(self.queue, id, due)
  if not n then return nil, seq end
  if n == 1 then return seq, due end
  return refusal(self, id)
end

function Engine:run_now(id)
  local due = now()
  local n, seq = self.st.run_now:run(self.queue, id, due)
  if not n then return nil, seq end
  if n == 1 then return seq, due end
  local ok, why, ready, key = refusal(self, id)
  if why == "pending" then return key, ready end -- due already: left as it was
  return ok, why, ready
end

function Engine:schedules() return jobs_of(self.st.schedules:rows(self.queue)) end

---------------------------------------------------------------------------
-- The window's reads
---------------------------------------------------------------------------

-- Rows with lo < ready < hi: { {key, ready}, ... }, n.
function Engine:range(lo, hi) return self.st.range:rows(self.queue, lo, hi) end

-- Rows other connections wrote since the last look, ready before `hi`;
-- nil when nothing changed.
function Engine:changes(hi)
  local st = self.st
  local v = st.data_version:first()
  if not v or v == self.version then return nil end
  self.version = v
  local top = st.max_seq:first()
  if not top or top <= self.seen then return nil end
  local rows, n = st.since:rows(self.seen, top, self.queue, hi)
  if not rows then return nil, n end
  self.seen = top
  return rows, n
end

-- Is anything of a handled kind due by `cutoff`? (A claim takes the write lock.)
function Engine:probe(cutoff) return self.st.probe:first(self.queue, cutoff) ~= nil end

---------------------------------------------------------------------------
-- Claim and acknowledge
---------------------------------------------------------------------------

local function flag(b) if b == nil then return nil end return b and 1 or 0 end

-- Write the acknowledgements (inside the caller's transaction); rows
-- requeued before `hi` go to `reload` as { seq, ready }. A schedule's next
-- time comes with its "next" (a.at, computed once by the front); a retry
-- or a run handed back is due after its backoff, or as it was.
local function write_acks(self, acks, hi, reload)
  local st, owner = self.st, self.owner
  for i = 1, #acks do
    local a = acks[i]
    local row = a.row
    local seq, n, err = row.key
    local what = a.what
    if what == "done" then
      n, err = st.done:run(seq, owner)
    elseif what == "bury" then
      n, err = st.bury:run(seq, owner, a.arg, a.at, flag(a.late))
    else
      local due, new_seq
      if what == "next" then
        due = a.at
        n, new_seq = st.advance:run(seq, owner, due, a.runs)
      elseif what == "release" then -- never started: as it was
        due = row.due
        n, new_seq = st.requeue:run(seq, owner, due, row.attempt - 1)
      else -- retry: after the backoff, attempts kept
        due = a.now + a.arg
        n, new_seq = st.requeue:run(seq, owner, due, row.attempt, a.at, flag(a.late))
      end
      if not n then
        err = new_seq
      elseif n == 1 and due < hi then
        reload[#reload + 1] = { new_seq, due }
      end
    end
    if not n then return nil, err end
  end
  return true
end

-- Acknowledge alone, in a transaction of its own; returns the reload list.
function Engine:ack(acks, hi)
  local st, reload = self.st, {}
  local ok, err = st.begin:run()
  if ok then
    ok, err = write_acks(self, acks, hi, reload)
    if ok then ok, err = commit(self) else st.rollback:run() end
  end
  if not ok then return nil, err end
  return reload
end

-- Extend the lease of the claimed rows to `lease` seconds from now, in one
-- transaction; returns the set of the ids still ours (a row another process
-- reclaimed, or that was cancelled or replaced, is not).
function Engine:renew(rows, lease)
  local st, kept = self.st, {}
  local ok, err = st.begin:run()
  if not ok then return nil, err end
  local ready = sqlite.now() + lease
  for i = 1, #rows do
    local row = rows[i]
    local n
    n, err = st.renew:run(row.key, self.owner, ready, row.attempt)
    if not n then
      st.rollback:run()
      return nil, err
    end
    if n == 1 then kept[row.id] = true end
  end
  ok, err = commit(self)
  if not ok then return nil, err end
  return kept
end

-- Claim up to `batch` rows due by `cutoff` in the transaction that also
-- writes `acks`.
function Engine:claim(acks, cutoff, lease, batch, hi)
  local st, reload = self.st, {}
  local ok, err = st.begin:run()
  if not ok then return nil, err end
  ok, err = write_acks(self, acks, hi, reload)
  local rows, n
  if ok then
    rows, n = st.claim:rows(self.queue, cutoff, sqlite.now() + lease, self.owner, batch)
    if not rows then ok, err = nil, n end
  end
  if ok then ok, err = commit(self) else st.rollback:run() end
  if not ok then return nil, err end
  for i = 1, n do
    local r = rows[i]
    -- (r[10], the schedule's start, is no part of a run: its calendar
    -- goes on from the run's time)
    rows[i] = { key = r[1], id = r[2], kind = r[3], payload = r[4], due = r[5], attempt = r[6], every = r[7],
                cron = r[8], tz = r[9], stop = r[11], limit = r[12], missed = r[13], window = r[14],
                runs = r[15], at = r[16] }
    if r[17] ~= nil then rows[i].late = r[17] == 1 end
  end
  return rows, n, reload
end

return Engine
