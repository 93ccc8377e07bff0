--- hwtimer.durable.schedule: the calendar of a durable schedule (q:every):
-- its times, which run a claimed schedule makes (the missed-run policy),
-- and its next time once a run ended. Pure functions of a row and a time,
-- called by the front (hwtimer.durable, hwtimer.durable.runs): an engine
-- stores what they decide, and computes no time of a schedule itself.
--
-- A schedule's calendar is a fixed interval (`every` seconds, anchored at
-- the time of its pending run: the first is `start`, or one interval after
-- it was made) or a cron expression in a zone (hwtimer.cron, its rules
-- across daylight saving time). A row of a schedule carries its calendar,
-- its options (start, stop, limit, missed, window), `runs` (runs ended so
-- far), `at` (the calendar time its pending run stands for) and `late`
-- (nil until a run of `at` started; then whether it was late, kept for its
-- retries).
local cron = require("hwtimer.cron")
local check = require("hwtimer.check")

local floor, ceil, max, abs, huge = math.floor, math.ceil, math.max, math.abs, math.huge

local M = {}

--- A calendar time more than LATE seconds behind the moment its run starts
-- is late (job.late), and a late one is missed unless it is the latest time
-- due. Quartz's misfire threshold and Sidekiq-cron's grace period are 60 s
-- by default too.
M.LATE = 60

--- missed = "all" runs at most the BACKLOG latest missed times; older ones
-- are dropped (as `window` drops them).
M.BACKLOG = 100

M.POLICIES = { skip = true, once = true, all = true }

---------------------------------------------------------------------------
-- Calendars
---------------------------------------------------------------------------

-- Parsed cron expressions by "tz\0expr": a schedule's is parsed once per
-- process (a zone's file is read once by hwtimer.tzif anyway).
local parsed = {}

local function cron_of(expr, tz)
  local key = (tz or "UTC") .. "\0" .. expr
  local c = parsed[key]
  if c then return c end
  local err
  c, err = cron.parse(expr, { tz = tz or "UTC" })
  if not c then return nil, err end
  parsed[key] = c
  return c
end

-- A calendar: after(x), the first time strictly after x; before(x), the
-- last time strictly before x; upto(x), the last time at or before x. An
-- interval's is anchored at `a`, a time of its own (the pending run's).
-- A time within SNAP seconds of an interval's time is that time: epoch
-- seconds in a double are exact to ~0.24 us, Redis keeps microseconds, and
-- a + k * every read back must be the k-th time, not one just before it.
local SNAP = 1e-5

local function interval(every, a)
  -- x's place on the calendar: an integer when x is one of its times
  local function index(x)
    local k = (x - a) / every
    local r = floor(k + 0.5)
    if abs(x - (a + r * every)) < SNAP then return r end
    return k
  end
  return {
    after = function(x) return a + every * (floor(index(x)) + 1) end,
    before = function(x) return a + every * (ceil(index(x)) - 1) end,
    upto = function(x) return a + every * floor(index(x)) end,
  }
end

-- (a cron expression's times are whole seconds)
local function cron_calendar(c)
  return {
    after = function(x) return c:next(x) end,
    before = function(x) return c:prev(x) end,
    upto = function(x) return c:prev(floor(x) + 1) end,
  }
end

--- The calendar of a schedule (a row or a checked config), an interval
-- anchored at `a`; nil and a message when its cron expression no longer
-- parses here (a zone missing on this machine).
function M.calendar(s, a)
  if s.cron then
    local c, err = cron_of(s.cron, s.tz)
    if not c then return nil, err end
    return cron_calendar(c)
  end
  return interval(s.every, a)
end

---------------------------------------------------------------------------
-- q:every's arguments
---------------------------------------------------------------------------

local finite, span = check.finite, check.span
-- (the due times a store holds: hwtimer.durable's q:at)
local function epoch(v) return finite(v) and v >= -9e9 and v <= 9e9 end

-- q:every's options besides `id`: name = { test, what is expected }.
local OPTIONS = {
  tz = { function(v) return type(v) == "string" and #v > 0 end, "non-empty string" },
  start = { epoch, "epoch seconds from -9e9 to 9e9" },
  stop = { epoch, "epoch seconds from -9e9 to 9e9" },
  -- (runs are counted in whole numbers a double and a store keep exactly)
  limit = { (check.count_to(1e15)), "integer from 1 to 1e15" },
  missed = { function(v) return M.POLICIES[v] == true end, "'skip', 'once' or 'all'" },
  window = { span, "number of seconds from 0 (excluded) to 1e9" },
}
M.OPTIONS = OPTIONS

--- The schedule q:every's `spec` (an interval the front checked, or a
-- cron expression) and `opts` describe: { every = seconds | cron =
-- expression, tz, start, stop, limit, missed, window } (missed defaults to
-- "once"). Raises through argerror(n, message) on a bad option; returns nil
-- and cron's message for an expression or a zone it refuses.
function M.config(spec, opts, argerror)
  local s = { missed = "once" }
  for key, o in pairs(OPTIONS) do
    local v = opts and opts[key]
    if v ~= nil then
      if not o[1](v) then argerror(4, "option '" .. key .. "': " .. o[2] .. " expected") end
      s[key] = v
    end
  end
  if type(spec) == "string" then
    local c, err = cron_of(spec, s.tz)
    if not c then return nil, err end
    s.cron = spec
  else -- (the front checked it: an interval)
    if s.tz then argerror(4, "option 'tz': only with a cron expression") end
    s.every = spec
  end
  if s.start and s.stop and s.stop < s.start then argerror(4, "option 'stop': before option 'start'") end
  return s
end

-- t where it is a time of `s` (not nil, not past its stop), else nil.
local function before_stop(s, t)
  if t == nil or (s.stop and t > s.stop) then return nil end
  return t
end

--- The first time of a new schedule made at `now`: an interval's is
-- `start`, or one interval after now; a cron expression's the first of its
-- times at or after `start`, or after now. nil when it has none before
-- `stop` (or none at all).
function M.first(s, now)
  local t
  if s.every then
    t = s.start or now + s.every
  elseif s.start then
    t = M.calendar(s).after(ceil(s.start) - 1)
  else
    t = M.calendar(s).after(now)
  end
  return before_stop(s, t)
end

--- The first time of schedule `s` after `now` (nil: none before its stop):
-- where a schedule replaces one whose run is in flight, its first run when
-- `first` would not come after that run's time (a deploy never runs a
-- calendar time twice).
function M.after_now(s, now)
  local t
  if s.every then
    local start = s.start or now
    t = start + (start > now and 0 or (floor((now - start) / s.every) + 1) * s.every)
  else
    t = M.calendar(s).after(now)
  end
  return before_stop(s, t)
end

---------------------------------------------------------------------------
-- A claimed run, and the next one
---------------------------------------------------------------------------

-- The latest calendar time in [t, hi] (t is one, or the pending run's time).
local function latest(cal, t, hi)
  if hi <= t then return t end
  local l = cal.upto(hi)
  if l == nil or l < t then return t end
  return l
end

-- The end of a schedule: its job deleted (a new table: the caller adds to it).
local function ended() return { what = "done" } end

-- No run now: the first time after `now`, or the end past `stop`.
local function onward(row, cal, now)
  local t = cal.after(now)
  if t == nil or (row.stop and t > row.stop) then return ended() end
  return { what = "next", at = t, runs = row.runs or 0 }
end

--- What a claimed schedule row does when its run would start at `now`:
-- returns the calendar time the run stands for and whether it is late; or
-- nil and the acknowledgement to write without a run (its next time, or
-- the end of the schedule).
--
-- The row's time `t` (its `at`) is on time when it is the only calendar
-- time due and at most LATE behind now; otherwise the times in [t, now]
-- were missed (no process ran them), and the row's `missed` policy picks:
-- skip: the latest, only if it is on time, else none; once: the latest;
-- all: the earliest (at most BACKLOG back from the latest); in every case
-- none older than now - window. A run already decided (its retries; a dead
-- one retried) keeps its time.
function M.begin(row, now)
  if row.limit and (row.runs or 0) >= row.limit then return nil, ended() end
  local t = row.at or row.due
  if row.late ~= nil then return t, row.late end
  if row.stop and t > row.stop then return nil, ended() end
  local cal, err = M.calendar(row, t)
  if not cal then return nil, nil, err end
  local hi = row.stop and row.stop < now and row.stop or now
  local l = latest(cal, t, hi)
  if l == t and now - t <= M.LATE then return t, false end
  local policy = row.missed or "once"
  local oldest = row.window and now - row.window or -huge
  if policy == "skip" then
    if now - l <= M.LATE then return l, false end
    return nil, onward(row, cal, now)
  end
  if l < oldest then return nil, onward(row, cal, now) end
  if policy == "once" then return l, now - l > M.LATE end
  local first = l -- all: walk back from the latest
  for _ = 2, M.BACKLOG do
    local p = cal.before(first)
    if p == nil or p < t or p < oldest then break end
    first = p
  end
  return first, now - first > M.LATE
end

--- The acknowledgement of a run of `at` that ended well at `now`: the next
-- run (`at`, `runs` counted), or the end of the schedule (its limit
-- reached, no time left before `stop`). The next time is the first after
-- `at` (missed = "all": times that came while it ran run too, in order), or
-- for skip and once the first after the run ended: a schedule never runs
-- beside itself, and times that came while it ran are not missed, they
-- were overlapped (as an interval's periods always were).
function M.next(row, at, now)
  local runs = (row.runs or 0) + 1
  if row.limit and runs >= row.limit then return ended() end
  local cal, err = M.calendar(row, at)
  if not cal then return nil, err end
  local t = cal.after(row.missed == "all" and at or max(at, now))
  if t == nil or (row.stop and t > row.stop) then return ended() end
  return { what = "next", at = t, runs = runs }
end

return M
