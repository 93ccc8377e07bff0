--- hwtimer.cron: cron expressions, the times they name in a time zone.
--
--   local cron = require("hwtimer.cron")
--   local c = assert(cron.parse("30 2 * * *", { tz = "Europe/Berlin" }))
--   local t = c:next(os.time())     -- the first run strictly after now
--   local p = c:prev(os.time())     -- the last one strictly before
--
-- Pure Lua (Lua 5.1 to 5.4, LuaJIT), no C, no process-wide TZ switching:
-- zones are read from the zoneinfo files by hwtimer.tzif. docs/cron.md has
-- the syntax and the rules for daylight saving time.
--
-- How a search goes: the expression names wall-clock times ("civil"
-- seconds: a local date and time counted as if it were UTC). The zone is a
-- series of segments of constant UTC offset. Within a segment a civil time c
-- is the instant c - off; at a segment's start the clock jumps, forward (a
-- gap: the civil times skipped fire at the jump) or back (an overlap: the
-- civil times repeated fire again only for schedules whose hour field starts
-- with '*'). The calendar search jumps field by field (month, day, hour,
-- minute, second), never second by second.
local tzif = require("hwtimer.tzif")
local check = require("hwtimer.check")

local floor, ceil, max = math.floor, math.ceil, math.max
local days_from_civil, civil_from_days = tzif.days_from_civil, tzif.civil_from_days
local days_in_month, weekday = tzif.days_in_month, tzif.weekday

local M = {}

-- How far a search looks, in years. Every expression parse accepts matches
-- at least every 40 years (a February 29 on a given weekday), so a search
-- that finds nothing in this many years has gone astray: it returns nil.
local SEARCH_YEARS = 100

---------------------------------------------------------------------------
-- Fields
---------------------------------------------------------------------------

local MONTHS = { jan = 1, feb = 2, mar = 3, apr = 4, may = 5, jun = 6,
                 jul = 7, aug = 8, sep = 9, oct = 10, nov = 11, dec = 12 }
local DAYS = { sun = 0, mon = 1, tue = 2, wed = 3, thu = 4, fri = 5, sat = 6 }

-- In the order of a six-field expression; `what` words a bad value.
local SECOND = { name = "second", lo = 0, hi = 59, what = "a number" }
local MINUTE = { name = "minute", lo = 0, hi = 59, what = "a number" }
local HOUR = { name = "hour", lo = 0, hi = 23, what = "a number" }
local DOM = { name = "day-of-month", lo = 1, hi = 31, what = "a number" }
local MONTH = { name = "month", lo = 1, hi = 12, names = MONTHS, what = "a number or month name" }
local DOW = { name = "day-of-week", lo = 0, hi = 7, names = DAYS, what = "a number or day name" }
local FIELDS = { SECOND, MINUTE, HOUR, DOM, MONTH, DOW }

local MACROS = {
  ["@yearly"] = "0 0 1 1 *", ["@annually"] = "0 0 1 1 *", ["@monthly"] = "0 0 1 * *",
  ["@weekly"] = "0 0 * * 0", ["@daily"] = "0 0 * * *", ["@midnight"] = "0 0 * * *",
  ["@hourly"] = "0 * * * *",
}

-- Errors while parsing are raised as { msg } and caught by M.parse.
local function fail(f, fmt, ...)
  error({ string.format("cron: %s field: " .. fmt, f.name, ...) }, 0)
end

-- A value: digits, or a name where the field has names.
local function value(f, tok)
  local v
  if tok:find("^%d+$") then
    v = tonumber(tok)
  elseif f.names then
    v = f.names[tok]
  end
  if v == nil then fail(f, "'%s' is not %s", tok, f.what) end
  if v < f.lo or v > f.hi then fail(f, "%s is out of range %d-%d", tok, f.lo, f.hi) end
  return v
end

-- One list item: *, */s, v, a-b, a-b/s, v/s (v to the field's end, by s).
-- Sets its values in `set` and returns its normal form.
local function item(f, text, set)
  if text == "" then fail(f, "empty list item") end
  local base, step = text:match("^([^/]*)/(.*)$")
  base = base or text
  local s = 1
  if step then
    if not step:find("^%d+$") or tonumber(step) < 1 then
      fail(f, "step '%s' is not a positive integer", step)
    end
    s = tonumber(step)
  end
  local lo, hi
  if base == "*" then
    lo, hi = f.lo, f == DOW and 6 or f.hi
  else
    local a, b = base:match("^([^-]*)%-(.*)$")
    if a then
      lo, hi = value(f, a), value(f, b)
      if f == DOW and hi == 0 and lo > 0 then hi = 7 end -- fri-sun: 5-7
      if lo > hi then fail(f, "range %s runs backwards", base) end
    else
      lo = value(f, base)
      hi = step and f.hi or lo
    end
  end
  for v = lo, hi, s do set[v] = true end
  -- (a step past the range's end leaves one value: written alone, as 5-5/10
  -- or 7/1 in day of week would read back as something else)
  local one = base ~= "*" and (lo == hi or s > hi - lo)
  local norm = base == "*" and "*" or ((lo == hi or one) and tostring(lo) or lo .. "-" .. hi)
  if f == DOW and norm == "7" then norm = "0" end
  return (step and not one) and norm .. "/" .. s or norm
end

-- The lookup arrays of a set: nxt[v] is the smallest allowed value >= v, and
-- prv[v] the largest <= v (nil past either end).
local function jumps(f, set)
  local nxt, prv = {}, {}
  local n, p
  for v = f.hi, f.lo, -1 do
    if set[v] then n = v end
    nxt[v] = n
  end
  for v = f.lo, f.hi do
    if set[v] then p = v end
    prv[v] = p
  end
  return nxt, prv
end

-- A field: { set, nxt, prv, star (its text begins with '*'), text (normalized) }.
local function field(f, text)
  local set, norm = {}, {}
  for part in (text .. ","):gmatch("([^,]*),") do norm[#norm + 1] = item(f, part, set) end
  if f == DOW and set[7] then set[0], set[7] = true, nil end -- 7 is Sunday too
  local fd = { set = set, star = text:sub(1, 1) == "*", text = table.concat(norm, ",") }
  fd.nxt, fd.prv = jumps(f, set)
  return fd
end

-- A five-field expression's seconds: 0 only.
local ZERO_SECOND = { set = { [0] = true }, nxt = { [0] = 0 }, prv = {} }
for v = 0, 59 do ZERO_SECOND.prv[v] = 0 end

-- The day-of-month and day-of-week fields are combined as Vixie cron and
-- cronie do: when both are restricted (neither begins with '*') a day
-- matches if either matches, otherwise it must match both.
local function day_matches(self, y, m, d)
  local dom = self.dom.set[d]
  local dow = self.dow.set[weekday(days_from_civil(y, m, d))]
  if self.and_days then return dom and dow end
  return dom or dow
end

-- Whether some allowed day of month exists in some allowed month (in a leap
-- year for February): an expression that fails this never matches.
local function some_day_exists(self)
  for m = 1, 12 do
    if self.month.set[m] then
      for d = 1, days_in_month(2000, m) do
        if self.dom.set[d] then return true end
      end
    end
  end
  return false
end

-- Split and parse the fields; raises { msg } on a bad expression.
local function parse_fields(self, expr)
  local text = expr:lower():gsub("^%s+", ""):gsub("%s+$", "")
  if text:sub(1, 1) == "@" then
    if not MACROS[text] then error({ string.format("cron: unknown macro '%s'", text) }, 0) end
    text = MACROS[text]
  end
  local parts = {}
  for p in text:gmatch("%S+") do parts[#parts + 1] = p end
  if #parts ~= 5 and #parts ~= 6 then
    error({ string.format("cron: 5 or 6 fields expected, got %d", #parts) }, 0)
  end
  local first = #parts == 6 and 1 or 2
  local fds = {}
  for k = first, 6 do fds[k] = field(FIELDS[k], parts[k - first + 1]) end
  local norm = {}
  for k = first, 6 do norm[#norm + 1] = fds[k].text end
  self.second, self.minute, self.hour = fds[1] or ZERO_SECOND, fds[2], fds[3]
  self.dom, self.month, self.dow = fds[4], fds[5], fds[6]
  self.text = table.concat(norm, " ")
end

---------------------------------------------------------------------------
-- The calendar search, in civil time
---------------------------------------------------------------------------

-- The first day >= d of month y-m that matches, or nil.
local function next_day(self, y, m, d)
  for dd = d, days_in_month(y, m) do
    if day_matches(self, y, m, dd) then return dd end
  end
end

-- The last day <= d of month y-m that matches, or nil.
local function prev_day(self, y, m, d)
  for dd = math.min(d, days_in_month(y, m)), 1, -1 do
    if day_matches(self, y, m, dd) then return dd end
  end
end

local function split(c)
  local days = floor(c / 86400)
  local sod = c - days * 86400
  local y, m, d = civil_from_days(days)
  return y, m, d, floor(sod / 3600), floor(sod % 3600 / 60), sod % 60
end

local function join(y, m, d, h, mi, s)
  return days_from_civil(y, m, d) * 86400 + h * 3600 + mi * 60 + s
end

-- Within a matching day: the first matching h:mi:s at or after the given
-- one, or nil when none is left that day.
local function time_at_or_after(self, h, mi, s)
  while true do
    local h2 = self.hour.nxt[h]
    if h2 == nil then return nil end
    if h2 ~= h then h, mi, s = h2, 0, 0 end
    local mi2 = self.minute.nxt[mi]
    if mi2 == nil then
      h, mi, s = h + 1, 0, 0
    else
      if mi2 ~= mi then mi, s = mi2, 0 end
      local s2 = self.second.nxt[s]
      if s2 then return h, mi, s2 end
      mi, s = mi + 1, 0
    end
  end
end

-- The same, backwards: the last matching h:mi:s at or before the given one.
local function time_at_or_before(self, h, mi, s)
  while true do
    local h2 = self.hour.prv[h]
    if h2 == nil then return nil end
    if h2 ~= h then h, mi, s = h2, 59, 59 end
    local mi2 = self.minute.prv[mi]
    if mi2 == nil then
      h, mi, s = h - 1, 59, 59
    else
      if mi2 ~= mi then mi, s = mi2, 59 end
      local s2 = self.second.prv[s]
      if s2 then return h, mi, s2 end
      mi, s = mi - 1, 59
    end
  end
end

--- The first matching civil time >= c, or nil within SEARCH_YEARS.
local function first_match(self, c)
  local y, m, d, h, mi, s = split(c)
  local limit = y + SEARCH_YEARS
  while y <= limit do
    local m2 = self.month.nxt[m]
    if m2 == nil then
      y, m, d, h, mi, s = y + 1, 1, 1, 0, 0, 0
    elseif m2 ~= m then
      m, d, h, mi, s = m2, 1, 0, 0, 0
    else
      local d2 = next_day(self, y, m, d)
      if d2 and d2 ~= d then d, h, mi, s = d2, 0, 0, 0 end
      local h2, mi2, s2
      if d2 then h2, mi2, s2 = time_at_or_after(self, h, mi, s) end
      if h2 then return join(y, m, d, h2, mi2, s2) end
      if d2 and d < days_in_month(y, m) then -- the next day, from its start
        d, h, mi, s = d + 1, 0, 0, 0
      else
        y, m, d, h, mi, s = m == 12 and y + 1 or y, m % 12 + 1, 1, 0, 0, 0
      end
    end
  end
end

--- The last matching civil time <= c, or nil within SEARCH_YEARS.
local function last_match(self, c)
  local y, m, d, h, mi, s = split(c)
  local limit = y - SEARCH_YEARS
  while y >= limit do
    local m2 = self.month.prv[m]
    if m2 == nil then
      y, m, d, h, mi, s = y - 1, 12, 31, 23, 59, 59
    elseif m2 ~= m then
      m, d, h, mi, s = m2, days_in_month(y, m2), 23, 59, 59
    else
      local d2 = prev_day(self, y, m, d)
      if d2 and d2 ~= d then d, h, mi, s = d2, 23, 59, 59 end
      local h2, mi2, s2
      if d2 then h2, mi2, s2 = time_at_or_before(self, h, mi, s) end
      if h2 then return join(y, m, d, h2, mi2, s2) end
      if d2 and d > 1 then -- the day before, from its end
        d, h, mi, s = d - 1, 23, 59, 59
      else
        if m == 1 then y, m = y - 1, 12 else m = m - 1 end
        d, h, mi, s = days_in_month(y, m), 23, 59, 59
      end
    end
  end
end

---------------------------------------------------------------------------
-- From civil times to instants: the zone's segments, gaps and overlaps
---------------------------------------------------------------------------

-- first_match(self, c) with a memo: the last answer holds for any c between
-- the c it was asked for and itself.
local function memo_first(self)
  local asked, found
  return function(c)
    if not (found and asked <= c and c <= found) then asked, found = c, first_match(self, c) end
    return found
  end
end

local function memo_last(self)
  local asked, found
  return function(c)
    if not (found and found <= c and c <= asked) then asked, found = c, last_match(self, c) end
    return found
  end
end

-- The first firing instant >= x (an integer epoch second).
local function next_at(self, x)
  local first = memo_first(self)
  local a, b, off, before = self.zone:segment(x)
  while true do
    local c
    if a == x and before and before < off then
      -- x is the end of a gap: every civil time the gap skipped fires at x
      c = first(x + before)
      if c == nil then return nil end
      if c < x + off then return x end
    else
      local lo = x + off
      if before and before > off and not self.hour.star then
        lo = max(lo, a + before) -- after an overlap: repeated times fired the first time
      end
      c = first(lo)
      if c == nil then return nil end
    end
    if b == nil or c - off < b then return c - off end
    x = b
    a, b, off, before = self.zone:segment(x)
  end
end

-- The last firing instant <= x (an integer epoch second).
local function prev_at(self, x)
  local last = memo_last(self)
  local a, _, off, before = self.zone:segment(x)
  while true do
    local c = last(x + off)
    if c == nil then return nil end
    local lo = a and a + off
    if before and before > off and not self.hour.star then lo = a + before end
    if lo == nil or c >= lo then return c - off end
    if before and before < off and c >= a + before then return a end -- a gap's times fire at its end
    x = a - 1
    a, _, off, before = self.zone:segment(x)
  end
end

---------------------------------------------------------------------------
-- The API
---------------------------------------------------------------------------

local Cron = {}
Cron.__index = Cron
Cron.__name = "hwtimer.cron"

local OPTIONS = {
  tz = { "UTC", function(v) return type(v) == "string" end, "string" },
}

--- c, err = cron.parse(expr, [opts]): the schedule, or nil and a message
-- naming what is wrong. opts.tz: "UTC" (default), "local" or an IANA name.
function M.parse(expr, opts)
  if type(expr) ~= "string" then
    check.argerror(1, "parse", "string expected, got " .. check.type_name(expr), 2)
  end
  local o = check.arg_options(opts, OPTIONS, 2, "parse", 2)
  local zone, zerr = tzif.load(o.tz)
  if not zone then return nil, zerr end
  local self = setmetatable({ zone = zone, tz = o.tz }, Cron)
  local ok, err = pcall(parse_fields, self, expr)
  if not ok then
    if type(err) == "table" then return nil, err[1] end
    error(err, 0)
  end
  self.and_days = self.dom.star or self.dow.star
  if self.dow.star and not some_day_exists(self) then
    return nil, "cron: day-of-month field: no day it allows exists in the months allowed"
  end
  return self
end

local EPOCH_MAX = 1e15

-- Check self and the epoch argument of method fname.
local function checked(self, t, fname)
  if getmetatable(self) ~= Cron then
    error(string.format("calling '%s' on bad self (hwtimer.cron expected, got %s)", fname,
      check.type_name(self)), 3)
  end
  if type(t) ~= "number" then
    check.argerror(1, fname, "number expected, got " .. check.type_name(t), 3)
  end
  if not (t >= -EPOCH_MAX and t <= EPOCH_MAX) then -- also NaN
    check.argerror(1, fname, "epoch seconds from -1e15 to 1e15 expected", 3)
  end
  return t
end

--- t = c:next(epoch): the first firing time strictly after epoch (seconds,
-- a float is fine), in epoch seconds; nil only if there is none in 100 years.
function Cron:next(epoch)
  return next_at(self, floor(checked(self, epoch, "next")) + 1)
end

--- t = c:prev(epoch): the last firing time strictly before epoch.
function Cron:prev(epoch)
  return prev_at(self, ceil(checked(self, epoch, "prev")) - 1)
end

function Cron:__tostring()
  return string.format("hwtimer.cron (%s, %s)", self.text, self.tz)
end

return M
