-- c:next and c:prev at known epochs: the calendar in UTC (steps, names,
-- the day rule, leap years, February 29, seconds, year rollover, floats),
-- then daylight saving time in Europe/Berlin, America/New_York,
-- Australia/Lord_Howe (30 minutes) and, past 2037 where only the zone's
-- POSIX footer says when DST starts, Berlin, New York and Sydney: a
-- nightly job at 02:30 across spring-forward (fires at 03:00, the first
-- instant after the gap) and fall-back (fires once), hourly and minutely
-- jobs across both. Every list of next times is walked back with prev.
local cron = require("hwtimer.cron")

-- n successive next times from t; prev must give them back in reverse.
local function nexts(expr, t, n, tz)
  local c = assert(cron.parse(expr, { tz = tz }))
  local out = {}
  for i = 1, n do
    t = c:next(t)
    out[i] = t
  end
  for i = n - 1, 1, -1 do
    assert.equal(out[i], c:prev(out[i + 1]), "prev from " .. out[i + 1])
  end
  return out
end

local function prevs(expr, t, n, tz)
  local c = assert(cron.parse(expr, { tz = tz }))
  local out = {}
  for i = 1, n do
    t = c:prev(t)
    out[i] = t
  end
  return out
end

describe("c:next and c:prev in UTC", function()
  local T = 1700000000 -- 2023-11-14 22:13:20 UTC

  it("every minute, strictly after (a float epoch too) and strictly before", function()
    assert.same({ 1700000040, 1700000100, 1700000160 }, nexts("* * * * *", T, 3))
    local c = assert(cron.parse("* * * * *"))
    assert.equal(1700000040, c:next(1700000039.5))
    assert.equal(1700000100, c:next(1700000040))
    assert.equal(1700000100, c:next(1700000040.25))
    assert.equal(1700000040, c:prev(1700000040.25))
    assert.equal(1699999980, c:prev(1700000040))
    assert.equal(-60, c:prev(0))  -- 1969-12-31 23:59
    assert.equal(0, c:next(-0.5))
  end)

  it("steps, ranges, lists and v/s", function()
    -- 22:13:20 -> 22:25, 22:40, 23:10
    assert.same({ 1700000700, 1700001600, 1700003400 }, nexts("10-40/15 * * * *", T, 3))
    assert.same({ 1700000820, 1700002020, 1700003220 }, nexts("7/20 * * * *", T, 3)) -- :27 :47 :07
    assert.same({ 1700002800, 1700006400 }, nexts("0 */1 * * *", T, 2))
    assert.same({ 1700010900, 1700011800 }, nexts("15,30 1 * * *", T, 2))   -- 01:15, 01:30
  end)

  it("month and day names", function()
    -- from 2026-01-01 00:00 UTC (a Thursday): 09:00 on Thursdays and Fridays of January and July
    assert.same({ 1767258000, 1767344400 }, nexts("0 9 * jan,JUL Thu-fri", 1767225600, 2)) -- Jan 1, 2
    assert.same(nexts("0 9 * 1,7 4-5", 1767225600, 30), nexts("0 9 * jan,JUL Thu-fri", 1767225600, 30))
  end)

  it("the day rule: both restricted, either matches; one starting with '*', both must", function()
    local sep1 = 1725148800 -- 2024-09-01, a Sunday
    assert.same({ 1725580800, 1726185600, 1726790400, 1727395200, 1728000000, 1728604800, 1728777600, 1729209600 },
      nexts("0 0 13 * 5", sep1, 8))   -- every Friday and every 13th
    assert.same({ 1726185600, 1727395200, 1728604800, 1729814400, 1730419200 },
      nexts("0 0 */2 * 5", sep1, 5))  -- odd days that are Fridays ('*/2' counts as '*', as in cronie)
    assert.same({ 1728777600, 1744502400, 1752364800 }, nexts("0 0 13 * */7", sep1, 3)) -- Sundays the 13th
    assert.same({ 1725235200, 1725321600 }, nexts("0 0 1-31 * 1", sep1, 2)) -- '1-31' is restricted: daily
    assert.same({ 1725235200, 1725840000 }, nexts("0 0 * * 1", sep1, 2))    -- Mondays
  end)

  it("every month and day name, each its own month and day", function()
    local tzif = require("hwtimer.tzif")
    local function utc(y, m, d) return tzif.days_from_civil(y, m, d) * 86400 end
    local from = utc(2025, 12, 15)
    for m, name in ipairs({ "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec" }) do
      assert.same({ utc(2026, m, 1), utc(2027, m, 1) }, nexts("0 0 1 " .. name .. " *", from, 2), name)
    end
    for d, name in ipairs({ "sun", "mon", "tue", "wed", "thu", "fri", "sat" }) do
      local first = utc(2026, 1, 4) + (d - 1) * 86400 -- 2026-01-04, a Sunday
      assert.same({ first, first + 7 * 86400 }, nexts("0 0 * * " .. name, utc(2026, 1, 3), 2), name)
    end
  end)

  it("a month or a day ahead starts at its first second", function()
    local tzif = require("hwtimer.tzif")
    local function utc(y, m, d) return tzif.days_from_civil(y, m, d) * 86400 end
    assert.same({ utc(2024, 3, 1), utc(2025, 3, 1) }, nexts("0 0 1 3 *", 1700000000, 2)) -- from 2023-11-14
    assert.same({ utc(2024, 3, 1), utc(2025, 3, 1) }, nexts("0 0 0 1 3 *", 1700000000, 2))
    assert.same({ utc(2023, 11, 20) }, nexts("0 0 20 * *", 1700000000, 1))
    -- day 30 skips February, 29 days long in 2024 and 28 in 2025
    assert.same({ utc(2024, 1, 30), utc(2024, 3, 30), utc(2024, 4, 30) }, nexts("0 0 30 * *", utc(2024, 1, 29), 3))
    assert.same({ utc(2025, 1, 29), utc(2025, 3, 29) }, nexts("0 0 29 * *", utc(2025, 1, 28), 2))
  end)

  it("day of week 0 and 7 are both Sunday", function()
    assert.same(nexts("0 0 * * 0", 1725148800, 3), nexts("0 0 * * 7", 1725148800, 3))
    assert.same(nexts("0 0 * * 5,6,0", 1725148800, 6), nexts("0 0 * * fri-sun", 1725148800, 6))
  end)

  it("the year's end, the month's end, February 29 and leap centuries", function()
    assert.same({ 1704067200 }, nexts("0 0 1 1 *", 1704067199, 1))           -- 2024-01-01
    assert.same({ 1704067140 }, prevs("59 23 31 12 *", 1704067200, 1))       -- 2023-12-31 23:59
    assert.same({ 1706659200, 1711843200, 1717113600 }, nexts("0 0 31 * *", 1706659199, 3)) -- Jan, Mar, May 31
    assert.same({ 1709164800 }, nexts("0 0 * * *", 1709164770, 1))          -- 2024-02-29
    assert.same({ 1677628800 }, nexts("0 0 * * *", 1677628770, 1))          -- 2023-03-01
    assert.same({ 1835438400 }, nexts("0 12 29 2 *", 1709251200, 1))        -- 2028-02-29
    assert.same({ 4233729600 }, nexts("0 12 29 2 *", 3981398400, 1))        -- 2096 -> 2104: 2100 is not leap
    assert.same({ 3981355200 }, prevs("0 12 29 2 *", 4228588800, 1))        -- back from 2104 to 2096
    assert.same({ 253402300740 }, nexts("59 23 31 12 *", 253402300000, 1))  -- 9999-12-31 23:59
    -- December has 31 days: past its last, a December-only job waits for the next December
    assert.same({ 1733011200, 1733097600 }, nexts("0 0 * 12 *", 1703984400, 2)) -- 2024-12-01, 02
    assert.same({ 1703980800 }, prevs("0 0 * 12 *", 1704067200, 1))         -- 2023-12-31
  end)

  it("the seconds field", function()
    -- 22:13:20 -> :30, :45, 22:14:00
    assert.same({ 1700000010, 1700000025, 1700000040 }, nexts("*/15 * * * * *", T, 3))
    assert.same({ 1700000001, 1700000002 }, nexts("* * * * * *", T, 2))
    assert.same({ 1700002830 }, nexts("30 0 23 * * *", T, 1))             -- 23:00:30
    assert.same({ 1699999999 }, prevs("* * * * * *", T, 1))
  end)

  it("the @macros", function()
    assert.same({ 1704067200 }, nexts("@yearly", T, 1))    -- 2024-01-01
    assert.same({ 1701388800 }, nexts("@monthly", T, 1))   -- 2023-12-01
    assert.same({ 1700352000 }, nexts("@weekly", T, 1))    -- Sunday 2023-11-19
    assert.same({ 1700006400 }, nexts("@daily", T, 1))     -- 2023-11-15
    assert.same({ 1700006400 }, nexts("@midnight", T, 1))
    assert.same({ 1700002800 }, nexts("@hourly", T, 1))    -- 23:00
  end)

  it("a rare match: February 29 on a Sunday, 2088 then 2128 (2100 is not leap)", function()
    local c = assert(cron.parse("0 0 29 2 */7"))  -- both must match: day 29 and a Sunday
    assert.equal(4991068800, c:next(3728937600))    -- 2088-03-01 -> 2128-02-29
    assert.equal(3728851200, c:prev(4991068800))    -- 2128-02-29 -> 2088-02-29
  end)
end)

describe("c:next and c:prev across daylight saving time", function()
  -- Europe/Berlin 2026: 02:00 CET -> 03:00 CEST on March 29 at 01:00 UTC
  -- (1774746000); 03:00 CEST -> 02:00 CET on October 25 at 01:00 UTC (1792890000).
  local BERLIN = "Europe/Berlin"

  it("Berlin: a nightly job at 02:30 fires at 03:00 CEST on the day the clock skips 02:30", function()
    -- from 2026-03-28 00:00 UTC: 03-28 02:30 CET, 03-29 03:00 CEST, 03-30 02:30 CEST
    assert.same({ 1774661400, 1774746000, 1774830600 }, nexts("30 2 * * *", 1774656000, 3, BERLIN))
  end)

  it("Berlin: a nightly job at 02:30 fires once when 02:30 comes twice", function()
    -- 10-24 02:30 CEST, 10-25 02:30 CEST (not 02:30 CET an hour later), 10-26 02:30 CET
    assert.same({ 1792801800, 1792888200, 1792978200 }, nexts("30 2 * * *", 1792800000, 3, BERLIN))
    local c = assert(cron.parse("30 2 * * *", { tz = BERLIN }))
    assert.equal(1792978200, c:next(1792888200 + 1800)) -- from inside the repeated hour
  end)

  it("Berlin: hourly runs by the hour that passes (the skipped one at 03:00, the repeated one twice)", function()
    -- 00:00 CET, 01:00 CET, 03:00 CEST (02:00 skipped), 04:00 CEST
    assert.same({ 1774738800, 1774742400, 1774746000, 1774749600 }, nexts("0 * * * *", 1774735200, 4, BERLIN))
    -- 01:00 CEST, 02:00 CEST, 02:00 CET, 03:00 CET
    assert.same({ 1792882800, 1792886400, 1792890000, 1792893600 }, nexts("@hourly", 1792879200, 4, BERLIN))
  end)

  it("Berlin: every minute: 01:59 CET then 03:00 CEST; 02:59 CEST then 02:00 CET", function()
    assert.same({ 1774745940, 1774746000, 1774746060 }, nexts("* * * * *", 1774745900, 3, BERLIN))
    assert.same({ 1792889940, 1792890000, 1792890060 }, nexts("* * * * *", 1792889900, 3, BERLIN))
  end)

  it("Berlin: a job pinned to the 2 o'clock hour runs through it once, whether skipped or repeated", function()
    -- spring: 02:00, 02:20 and 02:40 all fire once at 03:00 CEST; then 03-30 02:00 CEST
    assert.same({ 1774746000, 1774828800 }, nexts("*/20 2 * * *", 1774735200, 2, BERLIN))
    -- fall: 02:00, 02:20, 02:40 CEST; then 10-26 02:00 CET
    assert.same({ 1792886400, 1792887600, 1792888800, 1792976400 }, nexts("*/20 2 * * *", 1792879200, 4, BERLIN))
    assert.same({ 1792886400, 1792976400 }, nexts("0 2 * * *", 1792879200, 2, BERLIN))
  end)

  it("Berlin: prev from inside and after the transitions", function()
    local c = assert(cron.parse("30 2 * * *", { tz = BERLIN }))
    assert.equal(1774746000, c:prev(1774746001))
    assert.equal(1774661400, c:prev(1774746000))
    assert.equal(1792888200, c:prev(1792978200))
    local h = assert(cron.parse("0 * * * *", { tz = BERLIN }))
    assert.equal(1792890000, h:prev(1792893600))  -- 02:00 CET
    assert.equal(1792886400, h:prev(1792890000))  -- 02:00 CEST
  end)

  -- America/New_York 2026: 02:00 EST -> 03:00 EDT on March 8 at 07:00 UTC
  -- (1772953200); 02:00 EDT -> 01:00 EST on November 1 at 06:00 UTC (1793512800).
  local NY = "America/New_York"

  it("New York: 02:30 fires at 03:00 EDT; 01:30 fires once at 01:30 EDT", function()
    assert.same({ 1772868600, 1772953200, 1773037800 }, nexts("30 2 * * *", 1772841600, 3, NY))
    -- 11-01 01:30 EDT (05:30 UTC), then 11-02 01:30 EST
    assert.same({ 1793511000, 1793601000 }, nexts("30 1 * * *", 1793505600, 2, NY))
  end)

  it("New York: every half hour runs through the repeated hour twice", function()
    -- 01:00 EDT, 01:30 EDT, 01:00 EST, 01:30 EST, 02:00 EST
    assert.same({ 1793509200, 1793511000, 1793512800, 1793514600, 1793516400 },
      nexts("0,30 * * * *", 1793507400, 5, NY))
    -- spring: 01:30 EST, 03:00 EDT (02:00 and 02:30 skipped, fired once at 03:00), 03:30 EDT
    assert.same({ 1772951400, 1772953200, 1772955000 }, nexts("*/30 * * * *", 1772950000, 3, NY))
  end)

  -- Australia/Lord_Howe, 30-minute DST: 02:00 +11 -> 01:30 +10:30 on
  -- 2026-04-05 at 15:00 UTC Apr 4 (1775314800); 02:00 +10:30 -> 02:30 +11 on
  -- 2026-10-04 at 15:30 UTC Oct 3 (1791041400).
  local LH = "Australia/Lord_Howe"

  it("Lord Howe: 02:15 fires at 02:30 on the day the clock skips from 02:00 to 02:30", function()
    -- 10-03 02:15 +10:30, 10-04 02:30 +11, 10-05 02:15 +11
    assert.same({ 1790955900, 1791041400, 1791126900 }, nexts("15 2 * * *", 1790900000, 3, LH))
  end)

  it("Lord Howe: 01:45 fires once; every quarter hour runs through the repeated half hour twice", function()
    -- 04-05 01:45 +11, 04-06 01:45 +10:30
    assert.same({ 1775313900, 1775402100 }, nexts("45 1 * * *", 1775300000, 2, LH))
    -- 01:30 +11, 01:45 +11, 01:30 +10:30, 01:45 +10:30, 02:00 +10:30
    assert.same({ 1775313000, 1775313900, 1775314800, 1775315700, 1775316600 },
      nexts("*/15 * * * *", 1775312500, 5, LH))
  end)

  -- Past 2037 only the POSIX footer of the TZif file knows the rules.
  it("past 2037 from the zone's POSIX footer: Berlin 2050, New York 2045, Sydney 2045", function()
    -- Berlin 2050-03-27: 02:30 fires at 03:00 CEST; 2050-10-30: 02:30 CEST only
    assert.same({ 2531871000, 2531955600, 2532040200 }, nexts("30 2 * * *", 2531865600, 3, BERLIN))
    assert.same({ 2550702600, 2550792600 }, nexts("30 2 * * *", 2550700000, 2, BERLIN))
    -- 03:00 comes once, in winter time, just after the change back (01:00 UTC)
    assert.same({ 2550708000, 2550794400 }, nexts("0 3 * * *", 2550697200, 2, BERLIN))
    -- New York 2045-03-12: 02:30 -> 03:00 EDT, then 03-13 02:30 EDT
    assert.same({ 2372914800, 2372999400 }, nexts("30 2 * * *", 2372900000, 2, NY))
    -- Sydney (southern: DST from October to April): 2045-10-01 02:30 -> 03:00;
    -- 2045-04-02 02:30 +11 once, while every half hour sees +11 and +10
    assert.same({ 2390400000 }, nexts("30 2 * * *", 2390390000, 1, "Australia/Sydney"))
    assert.same({ 2374673400, 2374763400 }, nexts("30 2 * * *", 2374670000, 2, "Australia/Sydney"))
    assert.same({ 2374673400, 2374677000 }, nexts("30 * * * *", 2374670000, 2, "Australia/Sydney"))
  end)
end)

-- prev from any instant, not only from the times next gave: the last time
-- strictly before x is a time (next from a second before it gives it back)
-- and none comes between it and x (next from it is x or later).
describe("c:prev from any instant", function()
  it("is a time, strictly before x, with none between: 400 instants an expression", function()
    local state = 12345
    local function random(n) -- (an LCG: the same instants on every Lua)
      state = (state * 1103515245 + 12345) % 2147483648
      return state % n
    end
    for _, case in ipairs({
      { "*/7 5,17,45 3-9,22 * * *" }, { "10 59 23 31 12 *" }, { "0,30 */20 1 * * 1-5" },
      { "15 2 29 2 *" }, { "* 0 0 1 1 *" }, { "30 2 * * *", "Europe/Berlin" }, { "*/10 * * * *", "America/New_York" },
      { "45 59 * * * 0" }, { "0 0 * * 0-0" }, { "0 12 * * 1-0" }, { "20 59 3,22 * * *" }, { "20 58,59 3,22 * * *" },
    }) do
      local c = assert(cron.parse(case[1], { tz = case[2] }))
      for i = 1, 400 do
        local x = 946684800 + random(40 * 366 * 86400) -- (2000 to 2040)
        if i % 2 == 0 then -- (half of them just around a time: a second, a minute, an hour off)
          local offsets = { -3601, -3600, -61, -60, -59, -11, -5, -1, 1, 5, 59, 60, 61, 3600 }
          x = c:next(x) + offsets[random(#offsets) + 1]
        end
        local p = c:prev(x)
        local where = case[1] .. " from " .. x
        assert.is_true(p < x, where .. ": " .. p)
        assert.equal(p, c:next(p - 1), where .. ": " .. p .. " is not a time")
        assert.is_true(c:next(p) >= x, where .. ": " .. c:next(p) .. " comes between " .. p .. " and x")
      end
    end
  end)

  -- (a day-of-week range that ends on Sunday, written 0: Friday to Sunday is
  -- 5-0; 0-0 is Sunday alone, 1-0 every day)
  it("reads a day-of-week range ending in Sunday as 0", function()
    local function days(expr)
      local c, seen, t = assert(cron.parse(expr)), {}, 1767225600 -- a Thursday
      for _ = 1, 14 do
        t = c:next(t)
        seen[tonumber(os.date("!%w", t))] = true
      end
      local out = {}
      for d = 0, 6 do if seen[d] then out[#out + 1] = d end end
      return table.concat(out, ",")
    end
    assert.equal("0,5,6", days("0 12 * * 5-0"))
    assert.equal("0", days("0 12 * * 0-0"))
    assert.equal("0,1,2,3,4,5,6", days("0 12 * * 1-0"))
    assert.equal("hwtimer.cron (0 12 * * 5, UTC)", tostring(assert(cron.parse("0 12 * * 5-6/3"))))
  end)
end)
