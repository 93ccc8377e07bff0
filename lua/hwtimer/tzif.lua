--- hwtimer.tzif: time zones for hwtimer.cron, read from the system's zoneinfo
-- files (TZif, RFC 8536) in pure Lua, without setenv/tzset: nothing here
-- touches process-wide state, so it is safe beside other threads.
--
--   local zone, err = tzif.load("Europe/Berlin")   -- "UTC", "local", a name
--   local a, b, off, before = zone:segment(t)      -- the offset in force at t
--
-- A zone is a list of UTC offsets, each in force over a segment of time
-- [a, b) (epoch seconds; a nil a or b is unbounded), taken from the file's
-- transitions and, past the last one, from its POSIX TZ footer
-- ("CET-1CEST,M3.5.0,M10.5.0/3"). Only offsets matter to cron: transitions
-- that change only the abbreviation or the DST flag are dropped.
--
-- Runs on Lua 5.1 (no string.unpack, no bit operators): integers are decoded
-- from big-endian bytes with arithmetic, which is exact for every time a
-- TZif file holds (on 5.3+ in integers, on 5.1 and LuaJIT in doubles).
local floor = math.floor

local M = {}

---------------------------------------------------------------------------
-- Civil dates (proleptic Gregorian, any year), after H. Hinnant's
-- days_from_civil / civil_from_days
---------------------------------------------------------------------------

--- Days since 1970-01-01 of the date y-m-d.
function M.days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = floor(y / 400)
  local yoe = y - era * 400
  local doy = floor((153 * ((m + 9) % 12) + 2) / 5) + d - 1
  return era * 146097 + yoe * 365 + floor(yoe / 4) - floor(yoe / 100) + doy - 719468
end

--- The date y, m, d of a count of days since 1970-01-01.
function M.civil_from_days(z)
  z = z + 719468
  local era = floor(z / 146097)
  local doe = z - era * 146097
  local yoe = floor((doe - floor(doe / 1460) + floor(doe / 36524) - floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + floor(yoe / 4) - floor(yoe / 100))
  local mp = floor((5 * doy + 2) / 153)
  local d = doy - floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

function M.is_leap(y)
  return y % 4 == 0 and (y % 100 ~= 0 or y % 400 == 0)
end

local DAYS_IN_MONTH = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 }

function M.days_in_month(y, m)
  if m == 2 and M.is_leap(y) then return 29 end
  return DAYS_IN_MONTH[m]
end

--- Day of the week of a day count: 0 is Sunday (1970-01-01 was a Thursday).
function M.weekday(days)
  return (days + 4) % 7
end

local days_from_civil, weekday, days_in_month = M.days_from_civil, M.weekday, M.days_in_month

---------------------------------------------------------------------------
-- The POSIX TZ string (a TZif v2+ footer, or $TZ): "STDoff[DST[off][,start[/time],end[/time]]]"
---------------------------------------------------------------------------

-- A name: <...> quoted, or three or more letters. Returns the position after it.
local function tz_name(s, i)
  if s:sub(i, i) == "<" then
    local j = s:find(">", i + 1, true)
    if not j or j - i - 1 < 3 then return nil end
    return j + 1
  end
  local j = s:match("^%a+()", i)
  if not j or j - i < 3 then return nil end
  return j
end

-- [+-]hh[:mm[:ss]] as seconds (hours up to 167: RFC 8536's extension for
-- rule times). Returns the seconds and the position after them.
local function hms(s, i)
  local sign, h, j = s:match("^([+-]?)(%d%d?%d?)()", i)
  if not h or tonumber(h) > 167 then return nil end
  local secs = tonumber(h) * 3600
  for _, unit in ipairs({ 60, 1 }) do
    local v, k = s:match("^:(%d%d)()", j)
    if not v then break end
    if tonumber(v) > 59 then return nil end
    secs, j = secs + tonumber(v) * unit, k
  end
  return sign == "-" and 0 - secs or secs, j
end

-- A rule date "Jn", "n" or "Mm.w.d" and its optional "/time" (default 02:00).
local function rule_date(s, i)
  local r = {}
  local m, w, d, j = s:match("^M(%d%d?)%.(%d)%.(%d)()", i)
  if m then
    r.kind, r.m, r.w, r.d = "M", tonumber(m), tonumber(w), tonumber(d)
    if r.m < 1 or r.m > 12 or r.w < 1 or r.w > 5 or r.d > 6 then return nil end
  else
    local julian, n, k = s:match("^(J?)(%d%d?%d?)()", i)
    if not n then return nil end
    r.kind, r.n, j = julian == "J" and "J" or "n", tonumber(n), k
    if r.n > 365 or (julian == "J" and r.n < 1) then return nil end
  end
  r.time = 7200
  if s:sub(j, j) == "/" then
    r.time, j = hms(s, j + 1)
    if not r.time then return nil end
  end
  return r, j
end

--- Parse a POSIX TZ string into { std = utoff, dst = utoff or nil, start =
-- date, finish = date } (utoff: seconds east of UTC, the opposite of the
-- string's sign), or nil when it is not one.
function M.parse_posix(s)
  local i = tz_name(s, 1)
  local off
  if not i then return nil end
  off, i = hms(s, i)
  if not off then return nil end
  local rule = { std = 0 - off } -- (0 - x: no -0 on Lua 5.1)
  if i > #s then return rule end
  i = tz_name(s, i)
  if not i then return nil end
  rule.dst = rule.std + 3600
  if i <= #s and s:sub(i, i) ~= "," then
    off, i = hms(s, i)
    if not off then return nil end
    rule.dst = 0 - off
  end
  if i > #s then -- DST named without rules: POSIX leaves them to the system; glibc's default
    rule.start = { kind = "M", m = 3, w = 2, d = 0, time = 7200 }
    rule.finish = { kind = "M", m = 11, w = 1, d = 0, time = 7200 }
    return rule
  end
  if s:sub(i, i) ~= "," then return nil end
  rule.start, i = rule_date(s, i + 1)
  if not rule.start or s:sub(i, i) ~= "," then return nil end
  rule.finish, i = rule_date(s, i + 1)
  if not rule.finish or i <= #s then return nil end
  return rule
end

-- The day (a day count) a rule date names in year y.
local function rule_day(r, y)
  local jan1 = days_from_civil(y, 1, 1)
  if r.kind == "n" then return jan1 + r.n end
  if r.kind == "J" then -- 1..365, February 29 never counted
    return jan1 + r.n - 1 + ((M.is_leap(y) and r.n >= 60) and 1 or 0)
  end
  local first = days_from_civil(y, r.m, 1)
  local day = first + (r.d - weekday(first)) % 7 + (r.w - 1) * 7
  while day >= first + days_in_month(y, r.m) do day = day - 7 end -- week 5: the last
  return day
end

-- Year y's two transitions of a DST rule, as { t, off, seq } (seq orders ties:
-- the later entry wins). A rule's times are in the local time before it.
local function rule_year(rule, y, list)
  local on = rule_day(rule.start, y) * 86400 + rule.start.time - rule.std
  local off = rule_day(rule.finish, y) * 86400 + rule.finish.time - rule.dst
  local a, b = { t = on, off = rule.dst }, { t = off, off = rule.std }
  if off < on then a, b = b, a end
  list[#list + 1] = a
  a.seq = #list
  list[#list + 1] = b
  b.seq = #list
end

---------------------------------------------------------------------------
-- Reading a TZif file
---------------------------------------------------------------------------

local function u32(s, i)
  local a, b, c, d = s:byte(i, i + 3)
  return ((a * 256 + b) * 256 + c) * 256 + d
end

local function s32(s, i)
  local v = u32(s, i)
  if v >= 2147483648 then v = v - 4294967296 end
  return v
end

-- A signed 64-bit big-endian integer: exact on 5.3+ (integer arithmetic),
-- and on 5.1 exact below 2^53 in magnitude and for zic's -2^59 "big bang".
local function s64(s, i)
  return s32(s, i) * 4294967296 + u32(s, i + 4)
end

-- The header at position p: version and the six counts, or nil.
local function header(data, p)
  if #data < p + 43 or data:sub(p, p + 3) ~= "TZif" then return nil end
  local h = { version = data:sub(p + 4, p + 4) }
  local names = { "isutcnt", "isstdcnt", "leapcnt", "timecnt", "typecnt", "charcnt" }
  for k, name in ipairs(names) do h[name] = u32(data, p + 20 + (k - 1) * 4) end
  return h
end

-- Length of a data block whose times are `size` bytes.
local function block_length(h, size)
  return h.timecnt * (size + 1) + h.typecnt * 6 + h.charcnt + h.leapcnt * (size + 4)
    + h.isstdcnt + h.isutcnt
end

-- The block's transitions { t, off } and the offset before the first (RFC
-- 8536: time type 0), or nil and why.
local function read_block(data, h, p, size)
  if h.typecnt == 0 or #data < p - 1 + block_length(h, size) then return nil, "truncated" end
  local offsets = {}
  local types = p + h.timecnt * (size + 1)
  for k = 0, h.typecnt - 1 do offsets[k] = s32(data, types + k * 6) end
  local list, read_time = {}, size == 8 and s64 or s32
  for k = 1, h.timecnt do
    local ty = data:byte(p + h.timecnt * size + k - 1)
    if ty >= h.typecnt then return nil, "bad time type index" end
    list[k] = { t = read_time(data, p + (k - 1) * size), off = offsets[ty] }
  end
  return { list = list, first = offsets[0] }
end

-- Keep only the transitions that change the offset.
local function offset_changes(list, first)
  local out, cur = {}, first
  for _, tr in ipairs(list) do
    if tr.off ~= cur then out[#out + 1] = tr end
    cur = tr.off
  end
  return out
end

--- Parse TZif data (v1, v2, v3 or v4). Returns { list, first, rule } or nil
-- and why. Zones with leap seconds ("right/") are refused: their times are
-- not POSIX epoch seconds.
function M.parse(data)
  local h = header(data, 1)
  if not h then return nil, "not a TZif file" end
  if h.leapcnt > 0 then return nil, "has leap seconds (not supported)" end
  local p, size = 45, 4
  if h.version >= "2" then -- skip the 32-bit block for the 64-bit one and its footer
    p = 45 + block_length(h, 4)
    h = header(data, p)
    if not h then return nil, "truncated" end
    p, size = p + 44, 8
  end
  local z, err = read_block(data, h, p, size)
  if not z then return nil, err end
  -- (the footer's rule holds from the table's last transition, which may
  -- change only the name or the DST flag: slim files end there)
  z.table_end = z.list[#z.list] and z.list[#z.list].t
  z.list = offset_changes(z.list, z.first)
  if size == 8 then
    local footer = data:match("^\n([^\n]*)\n", p + block_length(h, 8))
    if footer == nil then return nil, "no footer" end
    if footer ~= "" then
      z.rule = M.parse_posix(footer)
      if not z.rule then return nil, "bad footer '" .. footer .. "'" end
    end
  end
  return z
end

---------------------------------------------------------------------------
-- Zones: the offset segment around a time
---------------------------------------------------------------------------

local Zone = {}
Zone.__index = Zone

-- The footer rule's transitions over the years around y (a window wide
-- enough that a time in year y has one on each side), without those that
-- change nothing. Cached by y (up to 64 years).
local function rule_window(z, y)
  if z.windows[y] then return z.windows[y] end
  local list = {}
  for yy = y - 3, y + 3 do rule_year(z.rule, yy, list) end
  table.sort(list, function(a, b) return a.t < b.t or (a.t == b.t and a.seq < b.seq) end)
  -- The first and last years only settle the offset in force before the
  -- window and the ties at its end. Of equal times the later wins (DST all
  -- year: one year's end is the next one's start, and nothing changes).
  local out, cur = {}, z.rule.std
  for k, tr in ipairs(list) do
    local tied = list[k + 1] and list[k + 1].t == tr.t
    if not tied then
      if tr.off ~= cur and k > 2 and k <= #list - 2 then
        out[#out + 1] = { t = tr.t, off = tr.off, before = cur }
      end
      cur = tr.off
    end
    if k == #list - 2 then out.constant = cur end -- (what holds when nothing changes)
  end
  if z.nwindows >= 64 then z.windows, z.nwindows = {}, 0 end
  z.windows[y], z.nwindows = out, z.nwindows + 1
  return out
end

-- Largest k with list[k].t <= t (0 if none).
local function search(list, t)
  local lo, hi = 0, #list
  while lo < hi do
    local mid = floor((lo + hi + 1) / 2)
    if list[mid].t <= t then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- The segment around t from the table: a, b, off, before.
local function table_segment(z, t)
  local list = z.list
  local k = search(list, t)
  local a, b = list[k], list[k + 1]
  local before = k > 1 and list[k - 1].off or z.first
  return a and a.t, b and b.t, a and a.off or z.first, a and before or nil
end

-- The footer rule's own segment around t: a, b, off, before.
local function rule_only(z, t)
  local rule = z.rule
  if not rule.dst then return nil, nil, rule.std, nil end
  local y = M.civil_from_days(floor((t + rule.std) / 86400))
  local list = rule_window(z, y)
  local k = search(list, t)
  local a, b = list[k], list[k + 1]
  local off = a and a.off or (list[1] and list[1].before or list.constant)
  return a and a.t, b and b.t, off, a and a.before
end

-- The segment around t, at or after the table's last offset change `last`
-- (nil: none). The footer rule holds from the table's end (its last
-- transition, which may change only the name or the DST flag: slim files
-- end a zone's table there); before it the table's offset does. The two
-- join into one segment where they agree.
local function rule_segment(z, t, last)
  local edge, table_off = z.table_end, last and last.off or z.first
  local last_t, last_before = last and last.t, last and z.last_before
  if edge and t < edge then
    local _, b, off = rule_only(z, edge)
    if off == table_off then return last_t, b, table_off, last_before end
    return last_t, edge, table_off, last_before
  end
  local a, b, off, before = rule_only(z, t)
  if edge and (not a or a <= edge) then -- the rule's segment began before the table's end
    if off == table_off then return last_t, b, off, last_before end
    return edge, b, off, table_off
  end
  return a, b, off, before
end

--- The offset segment around epoch second t: a, b, off, before. `off` (seconds
-- east of UTC) is in force over [a, b); a nil a (or b) is unbounded; `before`
-- is the offset just before a.
function Zone:segment(t)
  local list = self.list
  local last = list[#list]
  if self.rule and (not last or t >= last.t) then return rule_segment(self, t, last) end
  return table_segment(self, t)
end

--- The offset (seconds east of UTC) in force at epoch second t.
function Zone:offset(t)
  local _, _, off = self:segment(t)
  return off
end

function Zone:__tostring() return self.name end

local function new_zone(name, z)
  z.name, z.windows, z.nwindows = name, {}, 0
  local n = #z.list
  z.last_before = n > 1 and z.list[n - 1].off or z.first
  return setmetatable(z, Zone)
end

---------------------------------------------------------------------------
-- Loading zones by name, cached
---------------------------------------------------------------------------

local cache = {}

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local data = f:read("*a")
  f:close()
  return data
end

--- A zone from TZif data, named `name`: the zone, or nil and why.
function M.from_data(data, name)
  local z, err = M.parse(data)
  if not z then return nil, err end
  return new_zone(name, z)
end

-- A zone from a file, cached by path.
local function from_file(path, name)
  local key = "file:" .. path
  if cache[key] then return cache[key] end
  local data = read_file(path)
  if not data then return nil, "no file" end
  local z, err = M.from_data(data, name)
  if not z then return nil, err end
  cache[key] = z
  return z
end

--- A zone from a POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3"), cached by
-- the string; nil when it is not one.
function M.from_posix(s)
  local key = "posix:" .. s
  if cache[key] then return cache[key] end
  local rule = M.parse_posix(s)
  if not rule then return nil end
  cache[key] = new_zone(s, { list = {}, first = rule.std, rule = rule })
  return cache[key]
end

local function zoneinfo_dir()
  local dir = os.getenv("TZDIR")
  return (dir and dir ~= "") and dir or "/usr/share/zoneinfo"
end

-- An IANA name: letters, digits, "_", "+", "-" in "/"-separated parts, none
-- starting with "." (no way out of the zoneinfo directory).
local function valid_name(name)
  if name == "" or name:find("[^%w_+%-/]") or name:sub(1, 1) == "/" then return false end
  for part in (name .. "/"):gmatch("([^/]*)/") do
    if part == "" or part:sub(1, 1) == "." then return false end
  end
  return true
end

local UTC = new_zone("UTC", { list = {}, first = 0 })

-- $TZ as glibc reads it: "" is UTC; ":x" is x; an absolute path is a file;
-- otherwise a zoneinfo name, else a POSIX TZ string.
local function from_env(tz)
  local spec = tz:gsub("^:", "")
  if spec == "" then return UTC end
  if spec:sub(1, 1) == "/" then
    local z, err = from_file(spec, "local")
    if not z then return nil, string.format("cron: TZ '%s': %s", tz, err == "no file" and "no such file" or err) end
    return z
  end
  if valid_name(spec) then
    local z = from_file(zoneinfo_dir() .. "/" .. spec, "local")
    if z then return z end
  end
  local z = M.from_posix(spec)
  if z then return z end
  return nil, string.format("cron: TZ '%s' is neither a time zone name nor a POSIX TZ string", tz)
end

--- The zone called `name`: "UTC", "local" (the zone $TZ names, when set,
-- else /etc/localtime, else UTC), or an IANA name under $TZDIR or
-- /usr/share/zoneinfo. Returns the zone, or nil and a message.
function M.load(name)
  if name == "UTC" then return UTC end
  if name == "local" then
    local tz = os.getenv("TZ")
    if tz then return from_env(tz) end
    local z, err = from_file("/etc/localtime", "local")
    if z then return z end
    if err == "no file" then return UTC end
    return nil, "cron: /etc/localtime: " .. err
  end
  if not valid_name(name) then return nil, string.format("cron: unknown time zone '%s'", name) end
  local z, err = from_file(zoneinfo_dir() .. "/" .. name, name)
  if z then return z end
  if err == "no file" then return nil, string.format("cron: unknown time zone '%s'", name) end
  return nil, string.format("cron: time zone '%s': %s", name, err)
end

return M
