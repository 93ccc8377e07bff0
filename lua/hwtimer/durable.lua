--- hwtimer.durable: timers that survive the process, kept in a store (an
-- SQLite file, or Redis) and held in the wheel only while they are due within
-- a window.
--
--   local q = durable.open(timer, { path = "timers.db" })
--   local q = durable.open(timer, { redis = client, prefix = "app" })
--   q:handle("close_order", function(job) ... end)
--   local id = q:schedule("close_order", 1800, order_id)
--
-- This file is the front: the arguments, the options and the methods. A
-- queue's parts are rooms of their own: its timeouts (the window of jobs due
-- soon, hwtimer.durable.window), its passes (claim, run, acknowledge,
-- hwtimer.durable.runs), and the store, an engine module
-- (hwtimer.durable.sqlite, hwtimer.durable.redis, as hwtimer.durable.engine
-- describes one). The timer is used only through the public API a user has,
-- so `timer` may be a hwtimer timer or hwtimer.ngx's object.
local check = require("hwtimer.check")
local engine_api = require("hwtimer.durable.engine")
local ids = require("hwtimer.durable.ids")
local window = require("hwtimer.durable.window")
local runs = require("hwtimer.durable.runs")
local schedule = require("hwtimer.durable.schedule")
local type_name, callable, is_timer = check.type_name, check.callable, check.is_timer
local message = require("hwtimer.text").message

local huge, max = math.huge, math.max

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

-- What a bad number argument was, alike on every Lua version.
local function shown(v)
  return type(v) == "number" and string.format("%g", v) or type_name(v)
end

-- The due times a store holds: up to the year 2255 either way, whole
-- microseconds below 2^53 (what a Redis score, a double, keeps exactly).
local EPOCH_MAX = 9e9
local finite, positive, seconds, span, whole = check.finite, check.positive, check.seconds, check.span, check.whole
-- A count option: a whole number from 1 to `most` (check.count_to). The
-- counts reach the store (a claim's LIMIT, a script's argument), where a
-- number past what it keeps was refused at every claim after the queue had
-- opened.
local count_to = check.count_to
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
  attempts = { 5, count_to(1e9) },
  backoff = { nil, function(v) return type(v) == "table" end, "table" },
  on_error = { nil, callable, "function" },
  poll = { 0.05, span, "number of seconds from 0 (excluded) to 1e9" },
  sweep = { 1, span, "number of seconds from 0 (excluded) to 1e9" },
  batch = { 500, count_to(1e5) },
  ack_delay = { 0.002, seconds, "number of seconds from 0 to 1e9" },
  concurrency = { 32, count_to(1e6) },
  batch_timeout = { 5, span, "number of seconds from 0 (excluded) to 1e9" },
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
  if type(opts) ~= "table" then check.argerror(2, "open", "table expected, got " .. type_name(opts), 3) end
  local Engine, missing, bad_options = select_engine(opts)
  if bad_options then check.argerror(2, "open", bad_options, 3) end
  if not Engine then return nil, missing end
  local spec = {}
  for k, v in pairs(OPTIONS) do spec[k] = v end
  for k, v in pairs(Engine.OPTIONS or {}) do spec[k] = v end
  local o, err = check.options(opts, spec)
  if not o then check.argerror(2, "open", err, 3) end
  local bad = engine_api.missing(Engine)
  if bad then check.argerror(2, "open", "option 'engine': " .. bad, 3) end
  o.backoff, err = check.options(o.backoff or {}, BACKOFF,
    function(key) return "option 'backoff." .. key .. "'" end,
    function(key) return "option 'backoff': unknown key '" .. key .. "'" end)
  if not o.backoff then check.argerror(2, "open", err, 3) end
  return o, Engine
end

---------------------------------------------------------------------------
-- The queue object
---------------------------------------------------------------------------

local Queue = {}
Queue.__index = Queue
Queue.__name = "hwtimer.durable"

local function live(self, fname, level)
  level = level or 3
  if getmetatable(self) ~= Queue then
    error(string.format("calling '%s' on bad self (hwtimer.durable expected, got %s)", fname, type_name(self)), level)
  end
  if self._closed then error("attempt to use a closed queue", level) end
end

-- (A q:batch's function may yield: until it returns, writes from other
-- coroutines are refused, hwtimer.durable.window says why.)
local BATCH_BUSY = "hwtimer.durable: a batch is open in another coroutine (q:batch's function yielded)"
local current, other_batch = window.current, window.other_batch
local load, unload, soon, load_all = window.load, window.unload, window.soon, window.load_all
local settle = runs.settle

-- A batch is bounded: one whose function has not returned `batch_timeout`
-- seconds after it began (it yielded and nothing resumed it: an nginx
-- request aborted, a light thread killed) is rolled back by a timeout, as
-- is one open when another coroutine closes the queue. Nothing of it is
-- stored, SQLite's write lock is given back to every process, and the
-- coroutine, if it ever runs again, is refused every write (the reason is
-- kept in self._expired, weakly: a coroutine never resumed is collected).
local function end_batch(self, why)
  self._engine:rollback()
  local expired = self._expired or setmetatable({}, { __mode = "k" })
  expired[self._batching] = "hwtimer.durable: this coroutine's batch was rolled back, nothing of it stored: " .. why
  self._expired = expired
  self._batching, self._unbatched, self._batch_token = nil, nil, nil
end

local function batch_timed_out(_, self, token)
  if self._batch_token ~= token or self._closed then return end
  local why = string.format("its function was still running after batch_timeout (%g s)", self._batch_timeout)
  end_batch(self, why)
  window.report(self, "a batch was rolled back, nothing of it stored: " .. why)
end

-- The message for a write from a coroutine whose batch was rolled back, or nil.
local function expired_batch(self)
  local expired = self._expired
  if not expired then return nil end
  local why = expired[current()]
  if why then return why end
  if next(expired) == nil then self._expired = nil end -- (the fast path again)
end

-- Why a write from this coroutine is refused now, or nil: another
-- coroutine's batch is open, or this one's was rolled back.
local function refused_write(self)
  if other_batch(self) then return BATCH_BUSY end
  return self._expired and expired_batch(self)
end

-- Every timeout of the queue's: its window's, the acknowledgements', the renewals'.
-- (the renewer stays while handlers run, when `keep_renewer`: runs.close's
-- end cancels it)
local function cancel_timeouts(self, keep_renewer)
  window.close(self)
  for _, t in ipairs({ self._flush or false, not keep_renewer and self._renewer or false }) do
    if t then pcall(t.cancel, t) end
  end
end

-- The end of the Lua state (nginx -s stop closes it without running any
-- timer callback) cancels the queue's timeouts before the timer is
-- collected, and writes what it can of the acknowledgements (a store that
-- needs a cosocket cannot be reached then): the jobs are safe in the store,
-- and the timer's "will never run" warning is for timeouts that are lost.
-- Finalizers run newest first, and a queue is newer than its timer. (Lua
-- 5.1 and LuaJIT call __gc on userdata only: newproxy makes one.)
local function at_collect(self)
  local function quietly()
    if self._closed then return end
    self._closed, self._on_error = true, function() end
    pcall(cancel_timeouts, self)
    pcall(runs.flush, self)
  end
  local newproxy = rawget(_G, "newproxy")
  if newproxy then
    local p = newproxy(true)
    getmetatable(p).__gc = quietly
    return p
  end
  return setmetatable({}, { __gc = quietly })
end

-- On a timer that says what to do at its host's exit (hwtimer.ngx's
-- at_exit): the queue's exit (runs.exit), on nginx's sleep. Its handle, or nil.
local function at_exit(self, timer)
  if type(timer) ~= "table" or not callable(timer.at_exit) then return nil end
  local ngx = rawget(_G, "ngx")
  local ok, h = pcall(timer.at_exit, timer, runs.exit, self, ngx.sleep)
  return ok and h or nil
end

---------------------------------------------------------------------------
-- Opening a store
---------------------------------------------------------------------------

-- A stopped timer takes no timeout, and a queue lives on its timeouts:
-- told before the store is touched. (getfd raises on a stopped timer and
-- does nothing else; an object without it is not asked)
local function stopped(timer)
  local ok, getfd = pcall(function() return timer.getfd end)
  if not ok or not callable(getfd) then return false end
  local fine, err = pcall(getfd, timer)
  return not fine and message(err):find("stopped timer", 1, true) ~= nil
end

--- q, err = durable.open(timer, opts)
function M.open(timer, opts)
  if not is_timer(timer) then check.argerror(1, "open", "hwtimer.timer expected, got " .. type_name(timer), 2) end
  if stopped(timer) then check.argerror(1, "open", "hwtimer.timer expected, got a stopped timer", 2) end
  local o, Engine = check_options(opts)
  if not o then return nil, Engine end
  local owner = ids.generator(os.time)() -- this process's leases, in this queue
  local engine, err = Engine.open(o, owner)
  if not engine then return nil, err end
  local self = setmetatable({
    _timer = timer, _engine = engine, _queue = o.queue, _window = o.window, _lease = o.lease,
    _batch_timeout = o.batch_timeout,
    _attempts = o.attempts, _backoff = o.backoff, _on_error = o.on_error or window.default_on_error,
    _sweep = o.sweep, _poll_every = o.poll, _batch = o.batch, _ack_delay = o.ack_delay,
    _concurrency = o.concurrency, _pass = runs.pass,
    _new_id = ids.generator(engine.now, engine),
    _schedule = engine.schedule, -- (optional: hwtimer.durable.engine)
    _now = function() return engine:now() end,
    _closed = false, _handlers = {}, _loaded = {}, _next_sweep = 0, _loaded_until = 0,
    _quiet_until = -huge, _held_back = 0,
    -- the rows held (hwtimer.durable.runs): their set, the queue of those
    -- not started, the workers, the handlers running, the acks not written
    _held = {}, _n_held = 0, _queued = {}, _qhead = 1, _qtail = 0, _workers = 0, _running_jobs = 0,
    _acks = {}, _acks_since = 0, _last_took = 0, _renewed = 0, _runs = {},
  }, Queue)
  local ok
  ok, err = window.open(self)
  if not ok then
    engine:close()
    return nil, "hwtimer.durable: " .. engine.name .. ": " .. tostring(err)
  end
  self._at_collect = at_collect(self)
  self._exit_function = at_exit(self, timer)
  return self
end

--- up = durable.store_up(q): false while the queue's own calls hold the
-- store to be down (they try it once a backoff step); a listener of
-- wake-ups reconnects only once they have reached it, so an outage costs
-- no connection attempts beyond theirs.
function M.store_up(q)
  if getmetatable(q) ~= Queue then
    check.argerror(1, "store_up", "hwtimer.durable expected, got " .. type_name(q), 2)
  end
  return q._retry_step == nil
end

--- engine = durable.engine(q): the queue's engine (hwtimer.durable.engine),
-- for tests and tools that look at the store itself.
function M.engine(q)
  if getmetatable(q) ~= Queue then check.argerror(1, "engine", "hwtimer.durable expected, got " .. type_name(q), 2) end
  return q._engine
end

---------------------------------------------------------------------------
-- The public methods
---------------------------------------------------------------------------

--- q:handle(kind, fn): fn(job) runs the jobs of `kind` in this process.
function Queue:handle(kind, fn)
  live(self, "handle")
  if not name(kind) then check.argerror(1, "handle", "non-empty string expected, got " .. type_name(kind), 2) end
  if fn ~= nil and not callable(fn) then check.argerror(2, "handle", "function expected, got " .. type_name(fn), 2) end
  self._handlers[kind] = fn
  local ok, err = self._engine:handle(kind, fn ~= nil)
  if not ok then error("hwtimer.durable: " .. tostring(err), 2) end
  if fn then soon(self) end
end

-- q:schedule's and q:at's options; q:every's are these and
-- hwtimer.durable.schedule's.
local ID_ONLY = { id = true }
local EVERY_OPTIONS = { id = true }
for k in pairs(schedule.OPTIONS) do EVERY_OPTIONS[k] = true end

-- Check the common arguments of schedule, at and every (raised where those
-- were called: level 4); returns the id given (or nil).
local function common(fname, kind, payload, opts, allowed)
  if type(kind) ~= "string" or kind == "" then -- name(), inline: this is the hot path
    check.argerror(1, fname, "non-empty string expected, got " .. type_name(kind), 3)
  end
  if payload ~= nil and type(payload) ~= "string" then
    check.argerror(3, fname, "string or nil expected, got " .. type_name(payload), 3)
  end
  local id
  if opts ~= nil then
    if type(opts) ~= "table" then check.argerror(4, fname, "table expected, got " .. type_name(opts), 3) end
    for k in pairs(opts) do
      if not allowed[k] then check.argerror(4, fname, "unknown option '" .. message(k) .. "'", 3) end
    end
    id = opts.id
    if id ~= nil and not name(id) then
      check.argerror(4, fname, "option 'id': non-empty string expected, got " .. type_name(id), 3)
    end
  end
  return id
end

-- A job stored due before the window's end: into the window (due now:
-- the next pass takes it).
-- `now_due`: scheduled with no delay. Such a job goes to the next pass even
-- where its due reads a little ahead of self._now(): Redis stamps it with
-- the upper bound of the server's clock (redis_client.stamp), up to
-- STAMP_SPREAD ahead of the midpoint that _now reads. The claim goes by the
-- server's clock, so it is never taken early; one not yet due comes back
-- among the claim's marks and is loaded at its time.
local function loaded(self, key, due, now_due)
  if now_due or due <= self._now() then soon(self) else load(self, key, due) end
end

-- Store one job; the common part of schedule, at and every. `when` is a
-- delay when `relative` (the engine adds its clock's now), else epoch
-- seconds; `sched`: a schedule's (hwtimer.durable.schedule's config).
local function put(self, kind, when, relative, payload, id, every, sched)
  local refused = refused_write(self)
  if refused then return nil, refused end
  local fresh = id == nil -- ours: no job of that id to replace
  id = id or self._new_id()
  local key, due = self._engine:put(id, kind, payload, when, relative, every, fresh, sched)
  if not key then return nil, "hwtimer.durable: " .. tostring(due) end
  -- (a batch's come with its commit)
  if not self._batching and due < self._loaded_until then loaded(self, key, due, relative and when <= 0) end
  return id
end

--- id, err = q:schedule(kind, delay, [payload], [opts])
function Queue:schedule(kind, delay, payload, opts)
  if type(self) ~= "table" or self._closed ~= false then live(self, "schedule") end -- live(), inline
  if type(delay) ~= "number" or not (delay >= -1e9 and delay <= 1e9) then -- NaN fails too
    check.argerror(2, "schedule", "number of seconds from -1e9 to 1e9 expected, got " ..
      shown(delay), 2)
  end
  -- The usual call (a kind, maybe a payload, no options, no batch open)
  -- goes to the engine's `schedule` when it has one: every layer here runs
  -- with cold caches between two round trips, at about twice what it
  -- costs in a loop (bench/durable_parts.lua's last lines).
  local fast = self._schedule
  if fast and opts == nil and self._batching == nil and self._expired == nil and type(kind) == "string" and kind ~= ""
    and (payload == nil or type(payload) == "string") then
    local id = self._new_id()
    local key, due = fast(self._engine, id, kind, payload, delay)
    if not key then return nil, "hwtimer.durable: " .. tostring(due) end
    if due < self._loaded_until then loaded(self, key, due, delay <= 0) end
    return id
  end
  return put(self, kind, delay, true, payload, common("schedule", kind, payload, opts, ID_ONLY))
end

--- id, err = q:at(kind, epoch_seconds, [payload], [opts])
function Queue:at(kind, when, payload, opts)
  live(self, "at")
  if not (finite(when) and when >= -EPOCH_MAX and when <= EPOCH_MAX) then
    check.argerror(2, "at", "epoch seconds from -9e9 to 9e9 expected, got " .. shown(when), 2)
  end
  return put(self, kind, when, false, payload, common("at", kind, payload, opts, ID_ONLY))
end

--- id, err = q:every(kind, interval | cron, [payload], [opts]): a durable
-- schedule (hwtimer.durable.schedule); opts: id (an upsert), tz, start,
-- stop, limit, missed, window.
function Queue:every(kind, spec, payload, opts)
  live(self, "every")
  if type(spec) ~= "string" and not span(spec) then
    check.argerror(2, "every", type(spec) == "number"
      and "positive number of seconds up to 1e9 expected, got " .. shown(spec)
      or "positive number of seconds up to 1e9 or cron expression expected, got " .. type_name(spec), 2)
  end
  local id = common("every", kind, payload, opts, EVERY_OPTIONS)
  -- (raised where q:every was called, as argerror's are)
  local sched, err = schedule.config(spec, opts, function(n, msg)
    error(string.format("bad argument #%d to 'every' (%s)", n, msg), 4)
  end)
  if not sched then return nil, "hwtimer.durable: " .. err end
  local first = schedule.first(sched, self._now())
  if not first then
    return nil, "hwtimer.durable: schedule " .. (id or "") .. (id and " " or "") .. "has no time before its stop"
  end
  -- (for an upsert over a run in flight: the engine starts it there instead,
  -- where `first` is not after that run's time)
  sched.later = id and schedule.after_now(sched, self._now()) or nil
  return put(self, kind, first, false, payload, id, sched.every, sched)
end

--- ok, err = q:batch(fn): fn(q) schedules, cancels ... in one transaction.
function Queue:batch(fn)
  live(self, "batch")
  if not callable(fn) then check.argerror(1, "batch", "function expected, got " .. type_name(fn), 2) end
  local refused = refused_write(self)
  if refused then return nil, refused end
  if self._batching then return fn(self) end -- nested: part of the outer one (this coroutine's)
  local engine = self._engine
  local ok, err = engine:begin(self._loaded_until)
  if not ok then return nil, "hwtimer.durable: " .. tostring(err) end
  local token = {}
  self._batching, self._unbatched, self._batch_token = current(), {}, token
  local guard = window.later(self, self._batch_timeout, batch_timed_out, self, token)
  local done, e = pcall(fn, self)
  if guard then pcall(guard.cancel, guard) end
  if self._batch_token ~= token then -- rolled back meanwhile (end_batch)
    refused = expired_batch(self)
    if self._expired then self._expired[current()] = nil end
    if not done then error(e, 0) end
    return nil, refused
  end
  local unloads = self._unbatched
  self._batching, self._unbatched, self._batch_token = nil, nil, nil
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

--- ok = q:cancel(id)
function Queue:cancel(id)
  live(self, "cancel")
  if not name(id) then check.argerror(1, "cancel", "non-empty string expected, got " .. type_name(id), 2) end
  local refused = refused_write(self)
  if refused then return nil, refused end
  settle(self) -- a job that ran is not cancelled
  local key, err = self._engine:cancel(id)
  if key == nil then return nil, "hwtimer.durable: " .. tostring(err) end
  if key == false and err then
    return nil, string.format("hwtimer.durable: job %s is in flight in another process (leased for %.3f s more)",
      id, max(0, err - self._now()))
  end
  if key == false then return false end
  runs.skip(self, id)
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
  if not name(id) then check.argerror(1, "get", "non-empty string expected, got " .. type_name(id), 2) end
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

---------------------------------------------------------------------------
-- Operating a store: counts, pages of jobs, a dead job retried, a job run
-- now, the periodic jobs. What a tool (hwtimer-jobs, a metrics exporter) calls, on a queue
-- that may handle no kind; the results are plain tables.
---------------------------------------------------------------------------

local STATES = { "pending", "due", "leased", "dead" }

--- s = q:stats(): this process's figures: { runs = { [kind] = { succeeded,
-- retried, dead } }, held = rows leased here, running = handlers running }.
-- No store round trip: it works on a closed queue too.
function Queue:stats()
  local by_kind = {}
  for kind, k in pairs(self._runs) do
    by_kind[kind] = { succeeded = k.succeeded, retried = k.retried, dead = k.dead }
  end
  return { runs = by_kind, held = self._n_held, running = self._running_jobs }
end

--- counts, err = q:counts(): { pending, due, leased, dead, kinds = { [kind] = { ... } } }
function Queue:counts()
  live(self, "counts")
  settle(self)
  local kinds, err = self._engine:counts()
  if not kinds then return nil, "hwtimer.durable: " .. tostring(err) end
  local c = { pending = 0, due = 0, leased = 0, dead = 0, kinds = kinds }
  for _, k in pairs(kinds) do
    for _, state in ipairs(STATES) do c[state] = c[state] + k[state] end
  end
  return c
end

-- q:jobs' cursor: the last job's due time (%.17g: the same double back)
-- and id, "due/id"; the due time and the id, or nil when it is not one.
local function cursor_of(s)
  if type(s) ~= "string" then return nil end
  local due, id = s:match("^([^/]+)/(.+)$")
  due = tonumber(due)
  if not finite(due) then return nil end
  return due, id
end

local JOBS_MAX = 1000
local JOBS = {
  state = { "pending", function(v) return v == "pending" or v == "leased" or v == "dead" end,
            "'pending', 'leased' or 'dead'" },
  kind = { nil, name, "non-empty string" },
  limit = { 100, function(v) return whole(v) and v <= JOBS_MAX end, "integer from 1 to " .. JOBS_MAX },
  after = { nil, cursor_of, "cursor (a string q:jobs returned)" },
}

--- list, cursor = q:jobs([opts]): a page of jobs in (due, id) order; the
-- cursor of the next page, nil after the last.
function Queue:jobs(opts)
  live(self, "jobs")
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then check.argerror(1, "jobs", "table or nil expected, got " .. type_name(opts), 2) end
  local o, err = check.options(opts, JOBS)
  if not o then check.argerror(1, "jobs", err, 2) end
  settle(self)
  local after_due, after_id
  if o.after then after_due, after_id = cursor_of(o.after) end
  -- one more than the page: is there a next one?
  local list
  list, err = self._engine:jobs(o.state, o.kind, o.limit + 1, after_due, after_id)
  if not list then return nil, "hwtimer.durable: " .. tostring(err) end
  if #list <= o.limit then return list end
  list[#list] = nil
  local last = list[#list]
  return list, string.format("%.17g", last.due) .. "/" .. last.id
end

-- The end of q:retry and q:run_now: the engine's answer (key, due; false,
-- why, lease end; nil, message) as true or nil, message. A job made due is
-- claimed by this process at once where it handles its kind; others see it
-- at their next poll (the engine wrote it as their changes show).
local function made_due(self, fname, id, key, due, lease_end)
  if key == nil then return nil, "hwtimer.durable: " .. tostring(due) end
  if key == false then
    local why = due
    if why == "missing" then return nil, "hwtimer.durable: no job " .. id end
    if fname == "retry" then return nil, "hwtimer.durable: job " .. id .. " is not dead (it is " .. why .. ")" end
    if why == "dead" then return nil, "hwtimer.durable: job " .. id .. " is dead: q:retry(id) runs it again" end
    return nil, string.format("hwtimer.durable: job %s is in flight (leased for %.3f s more)",
      id, max(0, (lease_end or 0) - self._now()))
  end
  -- (a batch's: at its end; due now, whatever the clocks: loaded)
  if not self._batching and due < self._loaded_until then loaded(self, key, due, true) end
  return true
end

-- q:retry's and q:run_now's checks, raised at their caller's line (called
-- from them, not in a tail call: on Lua 5.1 a tail call's frame would stand
-- where that line is looked for)
local function due_args(self, fname, id)
  live(self, fname, 4)
  if not name(id) then check.argerror(1, fname, "non-empty string expected, got " .. type_name(id), 3) end
end

local function make_due(self, fname, id)
  local refused = refused_write(self)
  if refused then return nil, refused end
  settle(self)
  return made_due(self, fname, id, self._engine[fname](self._engine, id))
end

--- ok, err = q:retry(id): a dead job pending again, due now, attempts from zero.
function Queue:retry(id)
  due_args(self, "retry", id)
  return make_due(self, "retry", id)
end

--- ok, err = q:run_now(id): a pending job due now.
function Queue:run_now(id)
  due_args(self, "run_now", id)
  return make_due(self, "run_now", id)
end

--- q:wake(): poll the store now, in a timeout of the queue's timer (a
-- listener calls it when another process says a job is due now:
-- hwtimer.durable.ngx's); nothing on a closed queue.
function Queue:wake()
  if getmetatable(self) == Queue and not self._closed then window.wake(self) end
end

--- list, err = q:schedules(): the schedules (q:every), each as q:get
-- shows it, in next-due order (due, then id byte by byte).
function Queue:schedules()
  live(self, "schedules")
  settle(self)
  local list, err = self._engine:schedules()
  if not list then return nil, "hwtimer.durable: " .. tostring(err) end
  return list
end

--- q:close(): hands the jobs claimed and not started back to the store,
-- writes what ran, lets go of the timer's timeouts, and of the store once
-- the handlers running (where they may wait) have returned.
function Queue:close()
  if getmetatable(self) ~= Queue then
    error(string.format("calling 'close' on bad self (hwtimer.durable expected, got %s)", type_name(self)), 2)
  end
  if self._closed then return end
  if self._batching then
    if not other_batch(self) then
      error("hwtimer.durable: q:close() inside q:batch's function: close the queue once the batch has returned", 2)
    end
    end_batch(self, "the queue was closed while its function waited")
  end
  self._closed = true
  cancel_timeouts(self, true) -- (the handlers still running keep their leases)
  runs.close(self)
end

function Queue:__tostring()
  if self._closed then return "hwtimer.durable (closed)" end
  local n = 0
  for _, _ in pairs(self._loaded) do n = n + 1 end
  return string.format("hwtimer.durable (%s, queue %s, %d in the window)", self._engine.name, self._queue, n)
end

return M
