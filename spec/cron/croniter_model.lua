-- What croniter 1.3.5 (Debian's python3-croniter) does differently from
-- hwtimer.cron, by design, written out so that the oracle spec can classify
-- each disagreement by the rule that explains it, exactly (from reading
-- croniter/croniter.py: croniter._get_next and _calc):
--
-- * the day rule: croniter ORs day-of-month and day-of-week when neither
--   field's expanded set is full; cronie (and hwtimer.cron) when neither
--   field's text begins with '*' (so "*/2" is restricted for croniter, and
--   "1-31" unrestricted);
-- * daylight saving time: croniter searches wall-clock time from the wall
--   time after the start, maps the wall time it finds to an instant as
--   Python does for fold=0 (a repeated time: its first occurrence; a time in
--   a gap: the offset before the gap, an instant after it), then, when the
--   UTC offset at that instant differs from the offset at the start, may
--   shift it by the difference (its "lag" correction for jobs that span a
--   DST change);
-- * February 29 in prev: coming into February from a later month,
--   croniter's prev starts from day 28, also in a leap year (its table of
--   month lengths has no leap day), so it never answers a February 29 so
--   reached: it answers the match before it.
--
-- M.answer(case, rules) answers as hwtimer.cron would under any of these
-- rules of croniter's.
local cron = require("hwtimer.cron")
local tzif = require("hwtimer.tzif")
local cases = require("spec.cron.cases")

local floor, ceil = math.floor, math.ceil

local M = {}

-- croniter's day rule: AND unless both expanded sets are restricted (not full).
function M.croniter_and_days(model)
  local dom, dow = model.sets[4], model.sets[6]
  local dom_full, dow_full = true, true
  for d = 1, 31 do dom_full = dom_full and dom[d] == true end
  for d = 0, 6 do dow_full = dow_full and dow[d] == true end
  return dom_full or dow_full
end

-- Python's utcoffset for wall time c with fold=0 (zoneinfo): a transition
-- takes effect, in wall time, at T + max(offset before, offset after).
local function fold0_offset(zone, c)
  local x = c - 3 * 86400
  local _, b, off = zone:segment(x)
  while b and b <= c + 3 * 86400 do
    local _, nb, noff, before = zone:segment(b)
    if b + math.max(before, noff) > c then break end
    b, off = nb, noff
  end
  return off
end

-- The wall time (local civil seconds, may be fractional) of instant t.
local function wall(zone, t)
  return t + zone:offset(floor(t))
end

-- croniter's lag correction of result r (an instant) found from start.
local function lag_corrected(zone, start, r)
  local so, ro = zone:offset(floor(start)), zone:offset(r)
  if so == ro then return r end
  local lag = ro - so
  local lag_hours = (wall(zone, r) - wall(zone, start)) / 3600 -- same tzinfo: wall difference
  local hbm = 24 - floor(wall(zone, start) % 86400 / 3600)
  if (lag > 0 and math.abs(lag_hours) >= hbm)
    or (lag < 0 and 3600 * math.abs(lag_hours) + math.abs(lag) >= hbm * 3600) then
    local w = wall(zone, r) - lag
    return w - fold0_offset(zone, w)
  end
  return r
end

-- The local date of instant t in zone: y, m, d.
local function local_date(zone, t)
  return tzif.civil_from_days(floor((t + zone:offset(floor(t))) / 86400))
end

-- Whether civil time n is a February 29 that croniter's prev, from start,
-- does not reach: it came into February from a later month (see above).
local function missed_feb29(zone, start, n)
  local y, m, d = tzif.civil_from_days(floor(n / 86400))
  local sy, sm = local_date(zone, start)
  return m == 2 and d == 29 and not (sy == y and sm == 2)
end

-- croniter's search and mapping, on hwtimer.cron's calendar search (a UTC
-- schedule searches wall time).
local function croniter_dst(c_utc, zone, start, kind, six, feb29)
  if kind == "next" then
    local first = floor(start) + (six and 1 or 60)
    local w = wall(zone, first)
    if not six then w = w - w % 60 end
    local n = c_utc:next(w - 1)
    if n == nil then return nil end
    -- six fields, the first candidate matching: croniter keeps its instant
    local r = (six and n == w) and first or n - fold0_offset(zone, n)
    return lag_corrected(zone, start, r)
  end
  local now = ceil(start)
  local back = (six or now % 60 > 0) and 1 or 60
  local w = wall(zone, now - back)
  if not six then w = w - w % 60 end
  local n = c_utc:prev(w + 1)
  if n and feb29 and missed_feb29(zone, start, n) then
    n = c_utc:prev(n - n % 86400) -- the match before that day
  end
  if n == nil then return nil end
  local r = (six and n == w) and now - back or n - fold0_offset(zone, n)
  return lag_corrected(zone, start, r)
end

--- The answer to case { expr, tz, start, kind, six } under rules { day =
-- true (croniter's day rule), dst = true (its DST handling), feb29 = true
-- (its prev missing February 29) }.
function M.answer(case, rules)
  local zone = assert(tzif.load(case.tz))
  local c = assert(cron.parse(case.expr, { tz = rules.dst and "UTC" or case.tz }))
  if rules.day then
    -- the one internal poked: which day rule the schedule uses
    c.and_days = M.croniter_and_days(cases.model(c, zone))
  end
  if rules.dst then return croniter_dst(c, zone, case.start, case.kind, case.six, rules.feb29) end
  local t = c[case.kind](c, case.start)
  if rules.feb29 and case.kind == "prev" then -- our mapping, the missed days left out
    while t and missed_feb29(zone, case.start, t + zone:offset(t)) do t = c:prev(t) end
  end
  return t
end

return M
