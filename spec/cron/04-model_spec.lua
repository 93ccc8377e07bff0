-- hwtimer.cron against the reference model of its firing rule
-- (spec/cron/cases.lua: one instant at a time, no calendar search): random
-- expressions of every form (days 29-31, a day-of-week 7, seconds) from
-- starts near the UTC offset changes of zones with gaps and overlaps of
-- every size: an hour (Berlin, New York), half an hour (Lord Howe), two
-- hours (Antarctica/Troll), at midnight (Sao Paulo before 2019), a whole
-- day (Pacific/Apia, December 2011), past 2037 from the POSIX footer. next
-- and prev must give the first and last instants the model fires at within
-- a window around the start, or lie beyond it when the model finds none.
local cron = require("hwtimer.cron")
local tzif = require("hwtimer.tzif")
local cases = require("spec.cron.cases")

local SEED = tonumber(os.getenv("HWT_CRON_SEED")) or 22
-- (600 cases take ~1 s on Lua 5.4; under valgrind, HWT_SLOW, 100 took 7 s)
local N = os.getenv("HWT_SLOW") and 100 or os.getenv("HWT_QUICK") and 200 or 600
local ZONES = { "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Antarctica/Troll",
                "America/Sao_Paulo", "Europe/London", "America/St_Johns" }

-- A start within `span` of an offset change in 2000-2060 (the POSIX footer
-- beyond the table's end: some after 2037), half of them within 3 hours.
local function start_near_change(r, zone, span, at)
  local _, b = zone:segment(r(946684800, 2840140800))
  b = at or b
  local near = math.min(span, 3 * 3600)
  return (b or 0) + (r(1, 2) == 1 and r(-near, near) or r(-span, span))
end

local function check(c, zone, kind, t, step, span, failures)
  local m = cases.model(c, zone)
  local ours = c[kind](c, t)
  local want
  if kind == "next" then
    want = cases.brute_next(m, math.floor(t), step, span)
  else
    want = cases.brute_prev(m, math.ceil(t), step, span)
  end
  local ok
  if want then
    ok = ours == want
  else
    ok = ours == nil or (kind == "next" and ours > t + span) or (kind == "prev" and ours < t - span)
  end
  if not ok and #failures < 10 then
    failures[#failures + 1] = string.format("%s: c:%s(%.3f): %s, the model: %s", tostring(c), kind,
      t, tostring(ours), tostring(want or "none within " .. span .. " s"))
  end
end

describe("hwtimer.cron against the reference model", function()
  -- (`at`: the offset change to start near, instead of a random one)
  local function run(zones, n, label, at)
    local r = cases.rng(SEED + #label)
    local failures, done = {}, 0
    for i = 1, n do
      local tz = zones[r(1, #zones)]
      local zone = assert(tzif.load(tz))
      -- most fields "*" but the minute and hour, half the hours at night
      local expr, six = cases.expression(r, { weights = { 2, 3, 8, 9, 8 }, hours = r(1, 2) == 1 and 4 or 23 })
      local c = cron.parse(expr, { tz = tz })
      if c then -- (an expression that never matches is refused: 01-parse)
        local step, span = six and 1 or 60, six and 3 * 3600 or 2 * 86400
        local t = start_near_change(r, zone, span, at)
        if r(1, 3) == 1 then t = t + r(1, 999) / 1000 end
        check(c, zone, i % 2 == 0 and "next" or "prev", t, step, span, failures)
        done = done + 1
      end
    end
    assert(#failures == 0, table.concat(failures, "\n"))
    assert.is_true(done >= n * 0.9)
  end

  it("near the offset changes of seven zones, " .. N .. " random cases", function()
    run(ZONES, N, "zones")
  end)

  it("across Pacific/Apia's lost day (2011-12-30 never happened there)", function()
    run({ "Pacific/Apia" }, math.max(10, math.floor(N / 5)), "apia", 1325239200)
  end)
end)
