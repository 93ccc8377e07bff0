-- What the cron specs share: a random number generator that gives the same
-- numbers on every Lua (math.random does not), random cron expressions, and
-- a reference model of the firing rule written apart from hwtimer.cron: it
-- tests one instant at a time against the fields' sets and the zone's
-- offsets, as docs/cron.md states the rule, with no calendar search.
local tzif = require("hwtimer.tzif")

local cases = {}

--- A Park-Miller generator (exact in doubles: products stay below 2^47).
-- r(lo, hi) is an integer from lo to hi; r() a float in [0, 1).
function cases.rng(seed)
  local x = seed % 2147483646 + 1
  return function(lo, hi)
    x = x * 48271 % 2147483647
    if lo == nil then return (x - 1) / 2147483646 end
    return lo + x % (hi - lo + 1)
  end
end

local MONTH_NAMES = { "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec" }
local DAY_NAMES = { [0] = "sun", "mon", "tue", "wed", "thu", "fri", "sat" }

-- A value of field [lo, hi]: a number, or now and then a name in any case.
local function value(r, f, v)
  local names = f.names
  if names and names[v] and r(1, 3) == 1 then
    local s = names[v]
    local k = r(1, 3)
    return k == 1 and s:upper() or k == 2 and s:sub(1, 1):upper() .. s:sub(2) or s
  end
  return tostring(v)
end

-- One list item.
local function item(r, f)
  local lo, hi = f.lo, f.hi
  local k = r(1, 9)
  if k == 1 then
    if f.steps then return "*/" .. f.steps[r(1, #f.steps)] end
    return "*/" .. r(2, math.max(2, math.floor((hi - lo) / 2)))
  end
  if k <= 4 then return value(r, f, r(lo, hi)) end
  local a = r(lo, hi)
  local b = r(a, hi)
  if k <= 6 then return value(r, f, a) .. "-" .. value(r, f, b) end
  if k <= 8 or f.no_open_step then return value(r, f, a) .. "-" .. value(r, f, b) .. "/" .. r(1, 6) end
  return value(r, f, a) .. "/" .. r(1, 12)
end

-- A field: "*" often, else a list of one to three items.
local function field(r, f, star_weight)
  if r(1, 10) <= star_weight then return "*" end
  local n = r(1, 10) <= 7 and 1 or r(2, 3)
  local parts = {}
  for i = 1, n do parts[i] = item(r, f) end
  return table.concat(parts, ",")
end

local MACROS = { "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly" }

--- A random expression, and whether it has a seconds field. With
-- opts.croniter, only what croniter 1.3.5 reads as hwtimer.cron does, bugs
-- aside: in six fields no 7 in the day of week (croniter leaves it
-- unconverted there, so it never matches: no 7, no "v/s", which runs to 7),
-- and days of the month up to 28 (from a day past the end of a shorter
-- month croniter's next steps into the next month by the difference,
-- skipping days: "*/15" from February 20 gives March 16, not March 1; the
-- unit specs and the model spec cover days 29-31). opts.weights: how
-- often (in tenths) each field is "*" (default 2, 4, 6, 7, 6); opts.hours:
-- the highest hour a value may name (default 23; low ones fall on the
-- night's offset changes).
function cases.expression(r, opts)
  opts = opts or {}
  if r(1, 40) == 1 then return MACROS[r(1, #MACROS)], false end
  local six = r(1, 6) == 1
  local safe = opts.croniter
  local fs = {
    { lo = 0, hi = 59 }, { lo = 0, hi = opts.hours or 23 },
    { lo = 1, hi = safe and 28 or 31, no_open_step = safe, steps = safe and { 8, 9, 11, 12, 13, 16, 20, 27 } },
    { lo = 1, hi = 12, names = MONTH_NAMES },
    { lo = 0, hi = (six and safe) and 6 or 7, names = DAY_NAMES, no_open_step = six and safe },
  }
  -- stars weighted so that most expressions match often enough to matter
  local weights = opts.weights or { 2, 4, 6, 7, 6 }
  local parts = {}
  if six then parts[1] = field(r, { lo = 0, hi = 59 }, 3) end
  for k, f in ipairs(fs) do parts[#parts + 1] = field(r, f, weights[k]) end
  return table.concat(parts, " "), six
end

-------------------------------------------------------------------------
-- The reference model: does instant s fire?
---------------------------------------------------------------------------

-- The sets of an expression, read back from its normalized text (c's
-- tostring), and whether its hour field begins with '*' and days are ANDed.
function cases.model(c, zone)
  local text = tostring(c):match("^hwtimer%.cron %((.-), [^,]+%)$")
  local parts = {}
  for p in text:gmatch("%S+") do parts[#parts + 1] = p end
  if #parts == 5 then table.insert(parts, 1, "0") end
  local his = { 59, 59, 23, 31, 12, 7 }
  local los = { 0, 0, 0, 1, 1, 0 }
  local sets = {}
  for k, p in ipairs(parts) do
    local set = {}
    for it in p:gmatch("[^,]+") do
      local base, step = it:match("^([^/]+)/(%d+)$")
      base, step = base or it, tonumber(step) or 1
      local a, b = base:match("^(%d+)%-(%d+)$")
      if base == "*" then a, b = los[k], his[k] elseif not a then a, b = base, base end
      for v = tonumber(a), tonumber(b), step do set[v] = true end
    end
    if k == 6 and set[7] then set[0] = true end
    sets[k] = set
  end
  return {
    sets = sets, zone = zone,
    hour_star = parts[3]:sub(1, 1) == "*",
    and_days = parts[4]:sub(1, 1) == "*" or parts[6]:sub(1, 1) == "*",
  }
end

-- Whether civil time c (local seconds counted as UTC) matches the fields.
function cases.civil_matches(m, c)
  local days = math.floor(c / 86400)
  local sod = c - days * 86400
  local _, mo, d = tzif.civil_from_days(days)
  local S = m.sets
  if not (S[1][sod % 60] and S[2][math.floor(sod / 60) % 60] and S[3][math.floor(sod / 3600)]
    and S[5][mo]) then return false end
  local dom, dow = S[4][d], S[6][tzif.weekday(days)]
  if m.and_days then return dom and dow end
  return dom or dow
end

-- Whether instant s fires: its civil time matches, unless that time was
-- already shown before a clock set back (and the hour field is not '*');
-- or s ends a gap and some skipped civil time matches (stepping by `step`
-- seconds over the gap).
function cases.fires(m, s, step)
  local a, _, off, before = m.zone:segment(s)
  local c = s + off
  if cases.civil_matches(m, c) then
    local repeated = before and before > off and c < a + before
    if not repeated or m.hour_star then return true end
  end
  if a == s and before and before < off then
    for g = s + before, s + off - 1, step do
      if cases.civil_matches(m, g) then return true end
    end
  end
  return false
end

--- The first instant > t (an integer) that fires, stepping by `step` (60
-- for five fields: firing times are whole minutes), up to t + span; nil if
-- none.
function cases.brute_next(m, t, step, span)
  local s = t + 1
  if step == 60 then s = math.ceil(s / 60) * 60 end
  while s <= t + span do
    if cases.fires(m, s, step) then return s end
    s = s + step
  end
end

function cases.brute_prev(m, t, step, span)
  local s = t - 1
  if step == 60 then s = math.floor(s / 60) * 60 end
  while s >= t - span do
    if cases.fires(m, s, step) then return s end
    s = s - step
  end
end

return cases
