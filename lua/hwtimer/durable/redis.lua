--- hwtimer.durable.redis: the store of hwtimer.durable in Redis, shared by
-- processes on many machines. Every read and write of jobs is one of the
-- server-side scripts of hwtimer.durable.redis_scripts (loaded once with
-- SCRIPT LOAD, called with EVALSHA, loaded again on NOSCRIPT), so a claim,
-- an acknowledgement or a replacement is atomic and "now" is the server's
-- TIME, whatever each client's clock says.
--
-- The client is the user's: lua-resty-redis in OpenResty (methods return
-- res, err) or redis-lua (nrk/redis-lua, Debian lua-redis: methods raise).
-- hwtimer.durable.redis_client makes both give `nil, message`; a connection
-- error drops the client, and the next call gets a new one when opts.redis
-- was a function. A schedule of a fresh id is one RPUSH to the intake, of an
-- entry stamped with the server's time as this process bounds it (or the
-- `add` script, which reads TIME); in nginx those of concurrent requests
-- share round trips (hwtimer.durable.redis_batch).
--
-- The window's key of a job is its ready time (integer microseconds on the
-- server's clock): one timeout serves every job due at the same microsecond.
-- Other processes' jobs are seen by a short poll of the earliest ready time
-- among the kinds this process handles (the `peek` script); a claim returns
-- the next earliest too, so a chain of jobs due one after another is loaded
-- one claim ahead.
local scripts = require("hwtimer.durable.redis_scripts")
local calls = require("hwtimer.durable.redis_client")
local entry = require("hwtimer.durable.redis_entry")

local floor, ceil, format = math.floor, math.ceil, string.format
local INTAKE_MAX = scripts.INTAKE_MAX
local concat, unpack = table.concat, table.unpack or unpack

local Engine = {}
Engine.__index = Engine
-- (the calls to the server and its clock: hwtimer.durable.redis_client)
Engine.command, Engine.run, Engine.sync, Engine.now = calls.command, calls.run, calls.sync, calls.now
Engine.push_stamped = calls.push_stamped
local mono, call = calls.mono, calls.call

local callable = require("hwtimer.check").callable

-- A Redis client (lua-resty-redis, redis-lua: anything with evalsha,
-- script and rpush methods), or a function that returns one (called again
-- to reconnect after the connection broke).
local function redis_client(v)
  if callable(v) then return true end
  if type(v) ~= "table" and type(v) ~= "userdata" then return false end
  local ok, yes = pcall(function() return callable(v.evalsha) and callable(v.script) and callable(v.rpush) end)
  return ok and yes
end

-- This engine's options (hwtimer.durable.engine): `redis` selects it.
Engine.OPTIONS = {
  redis = { nil, redis_client, "Redis client (with evalsha, script and rpush methods) or function" },
  prefix = { "hwtimer", function(v) return type(v) == "string" and #v > 0 end, "non-empty string" },
  -- only a store of this format, as it is: none made, none upgraded, and
  -- the open writes nothing (hwtimer-jobs)
  existing = { false, function(v) return type(v) == "boolean" end, "boolean" },
  -- a PUBLISH on BASE:wake for each job due within `poll` that this
  -- process does not handle, and (hwtimer.durable.ngx) a listener for them
  wake = { true, function(v) return type(v) == "boolean" end, "boolean" },
}

local function us(seconds) return format("%.0f", ceil(seconds * 1e6)) end
-- a schedule's times: to the nearest microsecond (a calendar time read
-- back and written again stays the same)
local function us_near(seconds) return format("%.0f", seconds * 1e6) end

-- The fields of a length-prefixed blob, in turn (nil at the end).
local function fields_of(b)
  local pos, find, sub = 1, string.find, string.sub
  return function()
    local c = find(b, ":", pos, true)
    if not c then return nil end
    local n = tonumber(sub(b, pos, c - 1))
    pos = c + 1 + n
    return sub(b, c + 1, c + n)
  end
end

-- A length-prefixed blob of fields ("3:abc0:"), one script argument.
local function blob(parts)
  for i = 1, #parts do
    local s = parts[i]
    parts[i] = #s .. ":" .. s
  end
  return concat(parts)
end

---------------------------------------------------------------------------
-- Opening
---------------------------------------------------------------------------

-- A part of an escaped key base: the bytes that could end a hash tag or
-- join two parts ("%", ":", "{", "}") as %XX.
local function escape(s)
  return (s:gsub("[%%:{}]", function(c) return format("%%%02X", c:byte()) end))
end

--- base, old, where = Engine.base(prefix, queue): the key base of the
-- queue's store (format 7 on), and the one of format 6 and older,
-- {prefix:queue}, which two pairs could share ("shop:eu", "orders" and
-- "shop", "eu:orders") and whose hash tag a "}" could cut short or leave
-- empty. Every key of a store is its base, ":" and a name
-- (hwtimer.durable.redis_scripts). The base is {prefix:queue} and
-- prefix's length in bytes ({shop:eu:orders}7): the hash tag is then the
-- old one, so the old keys are in the same slot (the upgrade renames
-- them, on a Redis Cluster too), and the tag, up to the first "}", gives
-- back both parts with the length (a "{" in it changes nothing: a tag
-- ends at the first "}"). Where prefix or queue has a "}", the parts are
-- escaped ({a%7Db:orders}%): after the tag, "%" never begins a length; an
-- escaped part has no ":". `where` says where the old keys are: "same"
-- (the same hash tag: the same slot), "none" (an empty tag, "{}...": on a
-- Redis Cluster no script of such a store ever ran, CROSSSLOT) or "other".
function Engine.base(prefix, queue)
  local old = "{" .. prefix .. ":" .. queue .. "}"
  if old:find("}", 2, true) == #old then return old .. #prefix, old, "same" end
  return "{" .. escape(prefix) .. ":" .. escape(queue) .. "}%", old, prefix:sub(1, 1) == "}" and "none" or "other"
end

--- eng, err = engine.open(o, owner): o are the front's checked options.
function Engine.open(o, owner)
  local base, old, where = Engine.base(o.prefix, o.queue)
  local self = setmetatable({
    name = "redis " .. base, owner = owner, sha = {}, kinds = {}, handled = {},
    offset = 0, offset_lo = -math.huge, offset_hi = math.huge, synced_at = mono(),
    claimed_until = 0,
    keys = { base .. ":j", base .. ":kinds", base .. ":dead", base .. ":meta" }, intake = base .. ":incoming",
    wake = o.wake ~= false and base .. ":wake" or nil, wake_within = o.poll or 0.05,
  }, Engine)
  if type(o.redis) == "function" or (getmetatable(o.redis) and not o.redis.evalsha) then
    self.connect = o.redis
  else
    self.client = o.redis
  end
  local res, err = self:run(o.existing and "open_existing" or "open", tostring(scripts.FORMAT), old, where,
    o.prefix, o.queue)
  if not res then return nil, "hwtimer.durable: " .. self.name .. ": " .. err end
  if tonumber(res[2]) ~= 0 then return nil, "hwtimer.durable: " .. self.name .. ": " .. res[3] end
  return self
end

function Engine:close() self.closed = true end

---------------------------------------------------------------------------
-- Waking the processes that handle a kind
---------------------------------------------------------------------------

-- A job due within `poll` that another process is to run would wait for
-- that process's next poll (half a period, on average); a PUBLISH of its
-- kind on BASE:wake, sent after the write on the same client (so a
-- listener's poll finds the job), has every listening process poll at once
-- (hwtimer.durable.ngx's listener). A job this process handles runs here
-- without it. A refusal (an ACL without the channel, a client without
-- publish) turns it off for this engine; a lost message costs only the
-- wait for the poll, which stays the fallback.
-- Whether a job of `kind` due in `within` seconds calls for one: every
-- path that stores a job asks here (one rule for them all).
local function wakes(self, kind, within)
  return self.wake and within <= self.wake_within and not self.handled[kind]
end

local function wake(self, kind, within)
  if not wakes(self, kind, within) then return end
  local ok, _, from_server = calls.publish(self, self.wake, kind)
  if not ok and from_server then self.wake = nil end
end

-- One PUBLISH for a write of several jobs: the kind to wake for so far
-- (nil: none yet) with one more of `kind`: that kind, or "" for several.
local function with_kind(so_far, kind)
  return (so_far == nil or so_far == kind) and kind or ""
end

-- The kind to wake for among jobs to add (put's tables: [7] the seconds
-- until due).
local function wake_jobs(self, jobs)
  local kind
  for i = 1, #jobs do
    local j = jobs[i]
    if j[7] and wakes(self, j[2], j[7]) then kind = with_kind(kind, j[2]) end
  end
  if kind then wake(self, kind, 0) end
end

--- channel = eng:wake_channel(): where the wake-ups of this queue's jobs
-- are published; nil when turned off.
function Engine:wake_channel() return self.wake end

---------------------------------------------------------------------------
-- Jobs
---------------------------------------------------------------------------

-- A job for the put script, as struct.unpack in Redis reads it: each
-- string after its length in 4 bytes (big-endian), the flags a byte each.
local u32 = entry.u32

-- `when` in microseconds as text, for put: the last one made is kept (a
-- service's schedules mostly use the same few delays; format is a third
-- of the cost of encoding a job here).
local last_when, last_w
local function when_us(when)
  if when ~= last_when then last_when, last_w = when, us(when) end
  return last_w
end

-- A schedule's calendar and options as the scripts read them
-- (hwtimer.durable.redis_schedules): cron, tz, start, stop, limit, missed,
-- window, and the first time after now (for an upsert over a run in
-- flight), '' for none; "" for a job that is no schedule.
local function sched_put(s)
  if not s then return "" end
  local function t(v) return v and us_near(v) or "" end
  return blob({ s.cron or "", s.tz or "", t(s.start), t(s.stop), s.limit and format("%d", s.limit) or "",
                s.missed or "", t(s.window), t(s.later) })
end

-- The job as one string (a single concatenation: a table of its parts and
-- table.concat take twice as long): `w` its when, `e` its interval, `sc`
-- its schedule, as text.
local function job_put(id, kind, payload, w, relative, e, fresh, sc)
  local p = payload or ""
  return u32(#id) .. id .. u32(#kind) .. kind .. (payload and "\1" or "\0") .. (relative and "\1" or "\0") ..
    (fresh and "\1" or "\0") .. u32(#p) .. p .. u32(#w) .. w .. u32(#e) .. e .. u32(#sc) .. sc
end

-- Store one job (in a batch: keep it for the commit, returning true).
-- `fresh`: the front made the id, so no job has it (nothing to replace).
-- A schedule (`sched`) goes through `put`, which may keep the one stored.
function Engine:put(id, kind, payload, when, relative, every, fresh, sched)
  local within = self.wake and (relative and when or when - self:now()) or math.huge -- (no clock read when off)
  if fresh and not sched and not self.batch then
    local w, e = ceil(when * 1e6), every and ceil(every * 1e6) or 0
    if self.client and not self.pooled then return self:add_one(id, kind, payload, w, relative, e) end
    return self:add({ id, kind, payload, w, relative, e, within })
  end
  local job = job_put(id, kind, payload, when_us(when), relative, every and us(every) or "0", fresh, sched_put(sched))
  if self.batch then
    self.batch[#self.batch + 1] = job
    if wakes(self, kind, within) then self.batch_wake = with_kind(self.batch_wake, kind) end -- (sent at the commit)
    return true
  end
  local res, err = self:run("put", job)
  if not res then return nil, err end
  local due = tonumber(res[2])
  if self.wake then wake(self, kind, within) end
  return due, due / 1e6
end

-- The intake moved in: now, or in nginx in a timer (one at a time).
local function drain(self)
  if not self.pooled then return self:run("drain") end
  if self.draining then return end
  self.draining = ngx.timer.at(0, function() -- luacheck: ignore 113 (pooled: in nginx, ngx is there)
    self:run("drain")
    self.draining = nil
  end)
end

-- A job to add is { id, kind, payload, when, relative, every } (when and
-- every: whole microseconds, numbers): encoded once it is known how
-- (stamped here or by `add`).
local entry_job, MARK = entry.job, entry.MARK
local function due_of(job, at)
  local w = job[4]
  return job[5] and at + w or w
end
-- The entry of `jobs` stamped `at` here (hwtimer.durable.redis_entry).
local function stamped(at, jobs)
  if #jobs == 1 then -- (the mark in the job's own concatenation: one string made, not two)
    local j = jobs[1]
    return entry_job(j[1], j[2], due_of(j, at), j[6], j[3], MARK)
  end
  local parts = { MARK }
  for i = 1, #jobs do
    local j = jobs[i]
    parts[i + 1] = entry_job(j[1], j[2], due_of(j, at), j[6], j[3])
  end
  return concat(parts)
end
-- The jobs as the `add` script takes them (put's encoding).
local function for_add(jobs)
  local parts = {}
  for i = 1, #jobs do
    local j = jobs[i]
    parts[i] = job_put(j[1], j[2], j[3], format("%.0f", j[4]), j[5], format("%.0f", j[6]), true, "")
  end
  -- (one argument: Redis makes an object of each, ~0.2 us a job)
  return concat(parts)
end
-- (the `add` script's way: no stamp to give)
local function add_script(self, jobs)
  local res, err = self:run("add", for_add(jobs))
  if res and tonumber(res[2]) * #jobs >= INTAKE_MAX then drain(self) end
  return res, err
end
--- res, err = eng:add_many(jobs): jobs with fresh ids to the intake, in
-- one call, as one entry (each job as Engine:add takes it). Its time
-- is the server's as this process bounds it from above (redis_client's
-- stamp), so no job is due before its delay has passed on the server's
-- clock: then the call is a plain RPUSH, which costs Redis less than any
-- script (an EVALSHA of one that only reads TIME is the floor the schedule
-- is measured against), of the jobs as they are to be stored
-- (hwtimer.durable.redis_entry). When the bounds are too wide for that (no
-- reply for about a second), the `add` script stamps the entry with TIME
-- ("seconds microseconds jobs", the jobs as `put` reads them), and its
-- reply narrows them. Returns { the entry's time (us), the intake's length
-- in entries }.
-- The intake is moved in once it is long, where no process of the queue
-- polls it: by the caller that sent the jobs, once the intake's entries
-- times its jobs reach INTAKE_MAX (so about once in INTAKE_MAX schedules);
-- in nginx by a timer of its own, which no request waits for. Its failure
-- is no schedule's: the jobs are stored, and the next script moves them.
function Engine:add_many(jobs)
  local len, at = self:push_stamped(self.intake, stamped, jobs)
  if len == false then
    local res, err = add_script(self, jobs)
    if res and self.wake then wake_jobs(self, jobs) end
    return res, err
  end
  if not len then return nil, at end
  if len * #jobs >= INTAKE_MAX then drain(self) end
  if self.wake then wake_jobs(self, jobs) end
  return { at, len }
end

-- key, due of `job` from add_many's reply
local function added(job, res, err)
  if not res then return nil, err end
  local due = due_of(job, tonumber(res[1]))
  return due, due / 1e6
end

-- One job with a fresh id on the client this engine keeps (not nginx's
-- pool): add_many's path for it alone, without its lists. This is every
-- plain process's schedule: one RPUSH, and as little of this process's own
-- work as it can be; that work runs between two round trips, where the
-- caches are cold, and costs about twice what a loop of it alone does
-- (bench/durable_parts.lua's last two lines).
function Engine:add_one(id, kind, payload, w, relative, every)
  local at = calls.stamp(self) -- (looked up each time: spec 07 refuses some stamps)
  if not at then
    local job = { id, kind, payload, w, relative, every, (relative and w or w - self:now() * 1e6) / 1e6 }
    local res, err = add_script(self, { job })
    if res and self.wake then wake_jobs(self, { job }) end
    return added(job, res, err)
  end
  local due = relative and at + w or w
  local packed = entry_job(id, kind, due, every, payload, MARK)
  local len, err
  if wakes(self, kind, (relative and w or w - at) / 1e6) then
    local res -- (the wake-up in the same round trip: the push_wake script)
    res, err = self:run("push_wake", packed, self.wake, kind)
    len = res and tonumber(res[2])
    if res and res[3] ~= 0 then self.wake = nil end -- (refused: an ACL without the channel)
  else
    len, err = call(self, self.client, "rpush", self.intake, packed)
  end
  if not len then return nil, err end
  if len >= INTAKE_MAX then drain(self) end
  return due, due / 1e6
end

--- key, due = eng:schedule(id, kind, payload, delay): q:schedule's usual
-- call (hwtimer.durable.engine): add_one, or put's way where that is not
-- the path.
function Engine:schedule(id, kind, payload, delay)
  if self.batch or self.pooled or not self.client then return self:put(id, kind, payload, delay, true, nil, true) end
  return self:add_one(id, kind, payload, ceil(delay * 1e6), true, 0)
end

-- A job with a fresh id, to the intake: its due time is the server's now
-- plus its delay (when relative), as the entry's stamp gives it. In nginx,
-- with a client from nginx's pool, the schedules of requests waiting at
-- once go in one call (hwtimer.durable.redis_batch).
function Engine:add(job)
  local res, err
  if self.pooled then
    if not self.batcher then
      self.batcher = require("hwtimer.durable.redis_batch").new(function(jobs) return self:add_many(jobs) end)
    end
    res, err = self.batcher:add(job)
  else
    res, err = self:add_many({ job })
  end
  return added(job, res, err)
end

function Engine:cancel(id)
  local res, err = self:run("cancel", id, self.owner)
  if not res then return nil, err end
  if res[2] == "leased" then return false, tonumber(res[3]) / 1e6 end
  return res[2] and tonumber(res[2]) or false
end

-- A schedule's fields from a reply's text (redis_schedules' sched_text)
-- into `job`, as q:get shows them; returns its run's time and lateness.
-- A periodic job of format 3 has none: its interval makes it a schedule.
local function sched_of(job, text)
  if text == "" and not job.every then return end
  local f = fields_of(text)
  local v = {}
  for i = 1, 10 do
    local x = f()
    v[i] = x ~= "" and x or nil
  end
  local function t(x) return x and tonumber(x) / 1e6 end
  job.cron, job.tz, job.start, job.stop, job.limit = v[1], v[2], t(v[3]), t(v[4]), tonumber(v[5])
  job.missed, job.window, job.runs = v[6] or "once", t(v[7]), tonumber(v[8]) or 0
  job.scheduled_for = t(v[9]) or job.due
  return job.scheduled_for, v[10] and v[10] == "1"
end

-- A job from a reply's ten fields starting at res[i] (and a schedule's
-- run's time and lateness).
local function job_of(res, i, id)
  local every = tonumber(res[i + 5])
  local job = {
    id = id, kind = res[i], payload = tonumber(res[i + 1]) == 1 and res[i + 2] or nil,
    due = tonumber(res[i + 3]) / 1e6, attempt = tonumber(res[i + 4]),
    every = every ~= 0 and every / 1e6 or nil, dead = tonumber(res[i + 6]) == 1 or nil,
    error = res[i + 7] ~= "" and res[i + 7] or nil, leased = tonumber(res[i + 8]) == 1 or nil,
  }
  return job, sched_of(job, res[i + 9])
end

function Engine:get(id)
  local res, err = self:run("get", id)
  if not res then return nil, err end
  if #res < 2 then return nil end
  return job_of(res, 2, id)
end

function Engine:pending()
  local res, err = self:run("pending")
  if not res then return nil, err end
  return tonumber(res[2])
end

function Engine:dead()
  local res, err = self:run("dead")
  if not res then return nil, err end
  local list = {}
  for i = 2, #res, 11 do list[#list + 1] = job_of(res, i + 1, res[i]) end
  return list
end

function Engine:handle(kind, on)
  self.claimed_until = 0 -- the last claim did not take this kind
  if on and not self.handled[kind] then
    self.handled[kind] = true
    self.kinds[#self.kinds + 1] = kind
  elseif not on and self.handled[kind] then
    self.handled[kind] = nil
    for i = #self.kinds, 1, -1 do
      if self.kinds[i] == kind then table.remove(self.kinds, i) end
    end
  end
  return true
end

-- q:batch: the jobs go in one `put` call at the commit, atomic (all or
-- none); a cancel inside the batch is sent at once.
function Engine:begin(hi)
  self.batch, self.batch_hi, self.batch_wake = {}, hi, nil
  return true
end

function Engine:commit()
  local parts, hi, kind = self.batch, self.batch_hi, self.batch_wake
  self.batch, self.batch_wake = nil, nil
  if #parts == 0 then return {} end
  local res, err = self:run("put", concat(parts))
  if not res then return nil, err end
  if kind then wake(self, kind, 0) end
  local reload = {}
  for i = 2, #res do
    local ready = tonumber(res[i])
    if ready / 1e6 < hi then reload[#reload + 1] = { ready, ready / 1e6 } end
  end
  return reload
end

function Engine:rollback() self.batch, self.batch_wake = nil, nil end

---------------------------------------------------------------------------
-- Operating a store (the scripts: hwtimer.durable.redis_ops)
---------------------------------------------------------------------------

function Engine:counts()
  local res, err = self:run("counts")
  if not res then return nil, err end
  local kinds, field = {}, fields_of(res[2])
  while true do
    local kind = field()
    if not kind then break end
    local n = {}
    for i = 1, 4 do n[i] = tonumber(field()) end
    kinds[kind] = { pending = n[1], due = n[2], leased = n[3], dead = n[4] }
  end
  return kinds
end

function Engine:jobs(state, kind, limit, after_due, after_id)
  local res, err = self:run("jobs", state, kind or "", tostring(limit),
    after_due and format("%.0f", after_due * 1e6) or "", after_id or "")
  if not res then return nil, err end
  local list = {}
  for i = 2, #res, 11 do list[#list + 1] = job_of(res, i + 1, res[i]) end
  return list
end

-- A reply of retry or run_now as the engine's answer: key, due; false, why
-- (and a lease's end).
local function made_due(res, err)
  if not res then return nil, err end
  local why, ready = res[2], tonumber(res[3])
  if why == nil then return false, "missing" end
  if why ~= "ok" then return false, why, ready and ready / 1e6 end
  return ready, ready / 1e6
end

-- (the reply does not say the job's kind: the wake-up names none, and
-- every listener polls)
local function made_due_woken(self, res, err)
  local key, due, ready = made_due(res, err)
  if key and self.wake then wake(self, "", 0) end
  return key, due, ready
end

function Engine:retry(id) return made_due_woken(self, self:run("retry", id)) end

function Engine:run_now(id) return made_due_woken(self, self:run("run_now", id)) end

-- a before b in (due, id) order, the ids byte by byte (Lua's < on strings
-- follows the locale)
local function by_due(a, b)
  if a.due ~= b.due then return a.due < b.due end
  local x, y = a.id, b.id
  for i = 1, math.min(#x, #y) do
    local p, q = x:byte(i), y:byte(i)
    if p ~= q then return p < q end
  end
  return #x < #y
end

-- The schedules: the store's numbered buckets read SCHEDULE_BUCKETS a call
-- (a bucket holds 40 to 80 jobs), in increasing order, then its blocks (32
-- jobs at most) as many a call, in the order of their names. A bucket that
-- splits between two calls moves jobs only to the new, last bucket, read
-- later: a job may be read twice (the later read is kept), never missed; one
-- written meanwhile to a bucket or block read already is not seen (as
-- between pages of q:jobs).
local SCHEDULE_BUCKETS = 16

function Engine:schedules()
  local by_id = {}
  local function read(mode, first)
    local res, err = self:run("schedules", mode, tostring(first), tostring(SCHEDULE_BUCKETS))
    if not res then return nil, err end
    for i = 3, #res, 11 do by_id[res[i]] = job_of(res, i + 1, res[i]) end
    return res[2]
  end
  local first, buckets = 0
  repeat
    local n, err = read("n", first)
    if not n then return nil, err end
    buckets, first = tonumber(n), first + SCHEDULE_BUCKETS
  until first >= buckets
  local after = ""
  repeat
    local last, err = read("b", after)
    if not last then return nil, err end
    after = last
  until last == ""
  local list = {}
  for _, job in pairs(by_id) do list[#list + 1] = job end
  table.sort(list, by_due)
  return list
end

---------------------------------------------------------------------------
-- The window's reads
---------------------------------------------------------------------------

local function rows_of(res, from, to, hi)
  local rows = {}
  for i = from, to do
    local ready = tonumber(res[i])
    if not hi or ready / 1e6 < hi then rows[#rows + 1] = { ready, ready / 1e6 } end
  end
  return rows
end

-- Jobs with lo < ready < hi, as { key, ready } (one per distinct time).
function Engine:range(lo, hi)
  local res, err = self:run("range", format("%.0f", floor(lo * 1e6)), us(hi))
  if not res then return nil, err end
  local rows = {}
  for s in fields_of(res[2]) do
    local ready = tonumber(s)
    rows[#rows + 1] = { ready, ready / 1e6 }
  end
  return rows, #rows
end

-- The poll: the earliest ready time among the handled kinds, when it is
-- inside the window (the front skips what it holds already).
function Engine:changes(hi)
  if #self.kinds == 0 then return nil end
  local res, err = self:run("peek", unpack(self.kinds))
  if not res then return nil, err end
  local next_ready = tonumber(res[2])
  if next_ready == 0 or next_ready / 1e6 >= hi then return nil end
  return { { next_ready, next_ready / 1e6 } }, 1
end

-- Worth a claim? Not for a timeout whose ready time the last claim had
-- reached already (it took every due job of the handled kinds then): many
-- jobs due within one tick make one script call, not one each.
function Engine:probe(_, ready)
  return not ready or ready > self.claimed_until
end

---------------------------------------------------------------------------
-- Claim and acknowledge
---------------------------------------------------------------------------

-- The front's acknowledgements as one script argument: what, id, attempt,
-- arg, and a schedule's at, runs, late.
local function acks_blob(acks)
  local parts = {}
  for i = 1, #acks do
    local a = acks[i]
    local what, arg = a.what, ""
    if what == "retry" then arg = us(a.arg) elseif what == "bury" then arg = a.arg end
    local n = #parts
    parts[n + 1], parts[n + 2], parts[n + 3], parts[n + 4] = what, a.row.id, tostring(a.row.attempt), arg
    parts[n + 5] = a.at and us_near(a.at) or ""
    parts[n + 6] = a.runs and format("%d", a.runs) or ""
    parts[n + 7] = a.late == nil and "" or (a.late and "1" or "0")
  end
  return blob(parts)
end

function Engine:ack(acks, hi)
  local res, err = self:run("ack", self.owner, acks_blob(acks))
  if not res then return nil, err end
  return rows_of(res, 2, #res, hi)
end

-- Extend the lease of the claimed rows to `lease` seconds from now (the
-- server's); returns the set of the ids still ours.
function Engine:renew(rows, lease)
  local parts = {}
  for i = 1, #rows do
    local n = #parts
    parts[n + 1], parts[n + 2] = rows[i].id, tostring(rows[i].attempt)
  end
  local res, err = self:run("renew", self.owner, us(lease), blob(parts))
  if not res then return nil, err end
  local kept = {}
  for id in fields_of(res[2]) do kept[id] = true end
  return kept
end

-- Claim what is due by the server's clock (the front's cutoff is not
-- used: a client's clock never makes a job early), writing `acks` first.
function Engine:claim(acks, _, lease, batch, hi)
  if #self.kinds == 0 and #acks == 0 then return {}, 0, {} end
  local res, err = self:run("claim", self.owner, acks_blob(acks), us(lease), tostring(batch),
    unpack(self.kinds))
  if not res then return nil, err end
  local reload = {}
  for s in fields_of(res[3]) do
    local ready = tonumber(s)
    if ready / 1e6 < hi then reload[#reload + 1] = { ready, ready / 1e6 } end
  end
  local next_ready = tonumber(res[2])
  if next_ready ~= 0 and next_ready / 1e6 < hi then reload[#reload + 1] = { next_ready, next_ready / 1e6 } end
  local rows, f, field = {}, {}, fields_of(res[4])
  while true do
    local ready = field()
    if not ready then break end
    for i = 1, 11 do f[i] = field() end -- id, then a job's ten fields
    local job, at, late = job_of(f, 2, f[1])
    job.key, job.at, job.late = tonumber(ready), at, late
    rows[#rows + 1] = job
  end
  self.claimed_until = #rows < batch and tonumber(res[1]) / 1e6 or 0
  return rows, #rows, reload
end

return Engine
