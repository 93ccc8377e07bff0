-- hwtimer.durable.schedule, the calendar of q:every, as pure functions of a
-- row and a time (no store, no timer): the first time of a new schedule,
-- the time after a redeploy, what a claimed run stands for under each
-- missed-run policy (docs/durable.md, "Schedules"), and the next time once
-- a run ended. Every answer is worked out by hand from the documented rules.
local schedule = require("hwtimer.durable.schedule")

local T0 = 1767225600 -- 2026-01-01 00:00:00 UTC, a Thursday

describe("hwtimer.durable.schedule", function()
  describe("first", function()
    it("is start, or one interval after now, for an interval", function()
      assert.equal(T0 + 5, schedule.first({ every = 60, start = T0 + 5 }, T0))
      assert.equal(T0 + 60, schedule.first({ every = 60 }, T0))
      assert.is_nil(schedule.first({ every = 60, stop = T0 + 59 }, T0))
      assert.equal(T0 + 60, schedule.first({ every = 60, stop = T0 + 60 }, T0)) -- (stop itself is a time)
    end)

    it("is a cron expression's first time at or after start, else after now", function()
      local s = { cron = "0 * * * *" } -- every hour on the hour
      assert.equal(T0 + 3600, schedule.first(s, T0))
      assert.equal(T0 + 3600, schedule.first(s, T0 + 1))
      s.start = T0 -- on the calendar: that time itself
      assert.equal(T0, schedule.first(s, T0 - 7200))
      s.start = T0 + 0.5 -- a fraction past: the next one
      assert.equal(T0 + 3600, schedule.first(s, T0 - 7200))
      s.start = T0 - 0.5 -- a fraction before: the one it comes to
      assert.equal(T0, schedule.first(s, T0 - 7200))
    end)
  end)

  describe("after_now", function()
    it("is an interval's next time on start's grid, or start while it is ahead", function()
      assert.equal(T0 + 100, schedule.after_now({ every = 60, start = T0 + 100 }, T0))
      assert.equal(T0 + 120, schedule.after_now({ every = 60, start = T0 }, T0 + 61))
      assert.equal(T0 + 120, schedule.after_now({ every = 60, start = T0 }, T0 + 60)) -- (strictly after)
      assert.equal(T0 + 60, schedule.after_now({ every = 60 }, T0))
      assert.is_nil(schedule.after_now({ every = 60, start = T0, stop = T0 + 100 }, T0 + 61))
    end)

    it("is a cron expression's first time strictly after now", function()
      assert.equal(T0 + 3600, schedule.after_now({ cron = "0 * * * *" }, T0))
      assert.equal(T0 + 7200, schedule.after_now({ cron = "0 * * * *" }, T0 + 3600))
    end)
  end)

  describe("begin", function()
    local LATE = schedule.LATE
    local function row(t) -- an interval of 60 s whose pending run is at T0
      t = t or {}
      t.every, t.at, t.due = 60, T0, T0
      return t
    end

    it("runs the row's time when it alone is due and at most LATE behind", function()
      assert.same({ T0, false }, { schedule.begin(row(), T0) })
      assert.same({ T0, false }, { schedule.begin(row(), T0 + 59.5) })
      assert.same({ T0, false }, { schedule.begin(row({ missed = "skip" }), T0 + 30) })
    end)

    it("once (the default): the latest time missed, late when more than LATE behind", function()
      assert.same({ T0 + 120, false }, { schedule.begin(row(), T0 + 130) })
      local r = row()
      r.every = 600 -- (the next time 600 s on: LATE's edge with one time due)
      assert.same({ T0, false }, { schedule.begin(r, T0 + LATE) })
      assert.same({ T0, true }, { schedule.begin(r, T0 + LATE + 1) })
      assert.same({ T0 + 600, false }, { schedule.begin(r, T0 + 600 + LATE) })
      assert.same({ T0 + 600, true }, { schedule.begin(r, T0 + 600 + LATE + 1) })
    end)

    it("skip: the latest time only if on time, else none: the next time after now", function()
      assert.same({ T0 + 120, false }, { schedule.begin(row({ missed = "skip" }), T0 + 130) })
      local r = row({ missed = "skip", runs = 3 })
      r.every = 600
      assert.same({ T0 + 600, false }, { schedule.begin(r, T0 + 600 + LATE) })
      local at, ack = schedule.begin(r, T0 + 600 + LATE + 1)
      assert.is_nil(at)
      assert.same({ what = "next", at = T0 + 1200, runs = 3 }, ack)
      at, ack = schedule.begin(r, T0 + LATE + 1) -- (the row's own time, late)
      assert.is_nil(at)
      assert.same({ what = "next", at = T0 + 600, runs = 3 }, ack)
    end)

    it("all: the earliest time missed, at most BACKLOG back from the latest", function()
      assert.same({ T0, true }, { schedule.begin(row({ missed = "all" }), T0 + 130) })
      local now = T0 + 1000 * 60 + 1
      local at = schedule.begin(row({ missed = "all" }), now)
      assert.equal(T0 + (1000 - schedule.BACKLOG + 1) * 60, at)
    end)

    it("window: none older than now - window; none at all when the latest is older", function()
      assert.same({ T0 + 60, true }, { schedule.begin(row({ missed = "all", window = 100 }), T0 + 130) })
      local at, ack = schedule.begin(row({ missed = "once", window = 5 }), T0 + 130)
      assert.is_nil(at)
      assert.same({ what = "next", at = T0 + 180, runs = 0 }, ack)
      assert.same({ T0 + 120, false }, { schedule.begin(row({ missed = "once", window = 10 }), T0 + 130) })
    end)

    it("stop: times past it are never run; a row past it ends the schedule", function()
      assert.same({ T0 + 60, true }, { schedule.begin(row({ stop = T0 + 90 }), T0 + 300) })
      assert.same({ nil, { what = "done" } }, { schedule.begin(row({ stop = T0 - 1 }), T0) })
    end)

    it("limit: a schedule that has run its limit ends", function()
      assert.same({ nil, { what = "done" } }, { schedule.begin(row({ limit = 3, runs = 3 }), T0) })
      assert.same({ T0, false }, { schedule.begin(row({ limit = 3, runs = 2 }), T0) })
    end)

    it("a run already decided (its retries) keeps its time and lateness", function()
      assert.same({ T0, true }, { schedule.begin(row({ late = true }), T0 + 1000) })
      assert.same({ T0, false }, { schedule.begin(row({ late = false }), T0 + 1000) })
    end)

    it("reads a time read back a hair off the grid as that time (Redis keeps microseconds)", function()
      local r = row()
      r.at = T0 + 60 * 3 - 2e-6
      assert.same({ r.at, false }, { schedule.begin(r, T0 + 180 + 30) })
      -- a clock 5 us before the next time on the grid is at it (SNAP, 10 us)
      assert.same({ T0 + 120, false }, { schedule.begin(row(), T0 + 120 - 5e-6) })
      assert.same({ T0 + 60, false }, { schedule.begin(row(), T0 + 120 - 2e-5) })
    end)

    it("LATE is 60 s and BACKLOG 100 times, as docs/durable.md says", function()
      assert.equal(60, schedule.LATE)
      assert.equal(100, schedule.BACKLOG)
    end)

    it("the row's time on time is run whatever the window, and times due since it by the policy", function()
      assert.same({ T0, false }, { schedule.begin(row({ window = 10 }), T0 + 30) })
      local r = row({ window = 10 })
      r.every = 600
      assert.same({ T0, false }, { schedule.begin(r, T0 + LATE) })
      r = row()
      r.every = 10 -- (T0 + 10 and T0 + 20 due too: once runs the latest)
      assert.same({ T0 + 20, false }, { schedule.begin(r, T0 + 25) })
    end)

    it("all: a time exactly `window` old is kept, and LATE itself is not late", function()
      assert.same({ T0, true }, { schedule.begin(row({ missed = "all", window = 130 }), T0 + 130) })
      local r = row({ missed = "all" })
      r.every = 30 -- (T0, T0 + 30 and T0 + 60 due: the earliest, exactly LATE behind)
      assert.same({ T0, false }, { schedule.begin(r, T0 + LATE) })
    end)

    it("stop and limit at their edges: a row at stop runs, a first run with a limit of 1 runs", function()
      assert.same({ T0, false }, { schedule.begin(row({ stop = T0 }), T0) })
      assert.same({ T0, false }, { schedule.begin(row({ limit = 1 }), T0) })
      local r = row({ missed = "skip" })
      r.every = 600 -- (late: skipped; the next time is stop itself, then past stop)
      assert.same({ nil, { what = "next", at = T0 + 1200, runs = 0 } },
        { schedule.begin(r, T0 + 600 + LATE + 1) })
      r.stop = T0 + 1200
      assert.same({ nil, { what = "next", at = T0 + 1200, runs = 0 } },
        { schedule.begin(r, T0 + 600 + LATE + 1) })
      r.stop = T0 + 1199
      assert.same({ nil, { what = "done" } }, { schedule.begin(r, T0 + 600 + LATE + 1) })
    end)

    it("a cron row's latest time at or before now: now itself when it is one", function()
      local r = { cron = "0 * * * *", at = T0, due = T0 }
      assert.same({ T0 + 3600, false }, { schedule.begin(r, T0 + 3600) })
      assert.same({ T0 + 3600, false }, { schedule.begin(r, T0 + 3600.5) })
      r = { cron = "* * * * * *", at = T0, due = T0 } -- (every second)
      assert.same({ T0 + 100, false }, { schedule.begin(r, T0 + 100) })
    end)
  end)

  describe("next", function()
    it("once and skip: the first time after the run ended; all: the first after the run's time", function()
      assert.same({ what = "next", at = T0 + 240, runs = 1 }, schedule.next({ every = 60 }, T0 + 60, T0 + 200))
      assert.same({ what = "next", at = T0 + 240, runs = 1 },
        schedule.next({ every = 60, missed = "skip" }, T0 + 60, T0 + 200))
      assert.same({ what = "next", at = T0 + 120, runs = 5 },
        schedule.next({ every = 60, missed = "all", runs = 4 }, T0 + 60, T0 + 200))
      assert.same({ what = "next", at = T0 + 120, runs = 1 }, schedule.next({ every = 60 }, T0 + 60, T0 + 61))
    end)

    it("ends at the limit and past stop", function()
      assert.same({ what = "done" }, schedule.next({ every = 60, limit = 2, runs = 1 }, T0, T0))
      assert.same({ what = "next", at = T0 + 60, runs = 1 }, schedule.next({ every = 60, limit = 2 }, T0, T0))
      assert.same({ what = "done" }, schedule.next({ every = 60, stop = T0 + 59 }, T0, T0))
      assert.same({ what = "next", at = T0 + 60, runs = 1 }, schedule.next({ every = 60, stop = T0 + 60 }, T0, T0))
    end)

    it("follows a cron expression in its zone", function()
      -- 02:30 every day in Berlin, across the spring change of 2026-03-29
      local s = { cron = "30 2 * * *", tz = "Europe/Berlin" }
      local mar28 = 1774661400 -- 2026-03-28 02:30 CET (01:30 UTC)
      local n = schedule.next(s, mar28, mar28)
      assert.equal("next", n.what)
      assert.equal(mar28 + 86400 - 1800, n.at) -- 03:00 CEST on the 29th (02:30 does not exist)
    end)
  end)

  describe("config", function()
    local function argerror(n, msg) error(n .. ": " .. msg, 0) end
    it("defaults missed to once, and refuses tz without a cron expression and stop before start", function()
      assert.same({ missed = "once", every = 60 }, schedule.config(60, nil, argerror))
      assert.has_error(function() schedule.config(60, { tz = "UTC" }, argerror) end,
        "4: option 'tz': only with a cron expression")
      assert.has_error(function() schedule.config(60, { start = 10, stop = 9 }, argerror) end,
        "4: option 'stop': before option 'start'")
      -- (a one-letter zone is a name to look up, not a bad option)
      assert.same({ nil, "cron: unknown time zone 'X'" }, { schedule.config("* * * * *", { tz = "X" }, argerror) })
      for _, policy in ipairs({ "skip", "once", "all" }) do
        assert.equal(policy, schedule.config(60, { missed = policy }, argerror).missed)
      end
    end)

    it("refuses each option's values past its bounds, naming the option (argument 4)", function()
      local cases = {
        { "tz", "", "non-empty string" }, { "tz", 3, "non-empty string" },
        { "start", 9e9 + 1, "epoch seconds from -9e9 to 9e9" }, { "start", -9e9 - 1, "epoch seconds from -9e9 to 9e9" },
        { "stop", 0 / 0, "epoch seconds from -9e9 to 9e9" }, { "stop", math.huge, "epoch seconds from -9e9 to 9e9" },
        { "start", -math.huge, "epoch seconds from -9e9 to 9e9" }, { "start", "1", "epoch seconds from -9e9 to 9e9" },
        { "limit", 0, "integer from 1 to 1e15" }, { "limit", 1.5, "integer from 1 to 1e15" },
        { "limit", 1e15 + 2, "integer from 1 to 1e15" }, { "limit", math.huge, "integer from 1 to 1e15" },
        { "missed", "never", "'skip', 'once' or 'all'" }, { "missed", true, "'skip', 'once' or 'all'" },
        { "window", 0, "number of seconds from 0 (excluded) to 1e9" },
        { "window", 1e9 + 1, "number of seconds from 0 (excluded) to 1e9" },
        { "window", -1, "number of seconds from 0 (excluded) to 1e9" },
      }
      for _, c in ipairs(cases) do
        assert.has_error(function() schedule.config("* * * * *", { [c[1]] = c[2] }, argerror) end,
          "4: option '" .. c[1] .. "': " .. c[3] .. " expected", c[1] .. " = " .. tostring(c[2]))
      end
      -- each bound itself
      local ok = { { "start", 9e9 }, { "start", -9e9 }, { "stop", 9e9 }, { "stop", -9e9 },
        { "limit", 1 }, { "limit", 2 }, { "limit", 1e15 }, { "window", 1e9 }, { "window", 0.001 } }
      for _, c in ipairs(ok) do
        assert.equal(c[2], assert(schedule.config("* * * * *", { [c[1]] = c[2] }, argerror))[c[1]])
      end
      assert.same({ missed = "once", every = 60, start = 10, stop = 10 },
        schedule.config(60, { start = 10, stop = 10 }, argerror))
      assert.same({ nil, "cron: unknown time zone 'Nowhere/Land'" },
        { schedule.config("* * * * *", { tz = "Nowhere/Land" }, argerror) })
    end)
  end)
end)
