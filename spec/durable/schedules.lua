-- Durable schedules (q:every with an interval or a cron expression, its
-- options, missed runs, upserts), shared by the SQLite (spec/durable/01-sqlite)
-- and Redis (spec/durable/03-redis) engines. `env` is the one
-- spec/durable/leases.lua takes (describe, it, assert, open, timer, wait, now).
--
-- Most specs need no waiting: a schedule whose times lie in the past
-- (`start`, and `stop`, before now) runs its missed times at once, by its
-- policy, and what the store holds is read after each acknowledgement. A
-- few run cron expressions with a seconds field in real time.
local cron = require("hwtimer.cron")
local schedule = require("hwtimer.durable.schedule")
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert

  -- A queue whose sweep and poll never come within a spec.
  local function open(opts)
    opts = opts or {}
    opts.sweep, opts.poll = opts.sweep or 60, opts.poll or 60
    opts.on_error = opts.on_error or function() end
    return assert(env.open(opts))
  end

  local function idle(secs) env.wait(function() return false end, secs) end
  local function near(a, b, eps) return a and b and math.abs(a - b) <= (eps or 1e-3) end

  -- Run the queue until no job of `id` is leased or due, and nothing ran
  -- for 0.1 s: the runs of a schedule whose times are all past are done.
  local function settle(q, runs)
    local n, quiet = -1, 0
    assert.is_true(env.wait(function()
      if #runs ~= n then n, quiet = #runs, 0 return false end
      quiet = quiet + 1
      return quiet > 10
    end, 10), "runs kept coming")
    env.wait(function() return false end, 0.05)
    return q
  end

  -- A handler that records each run: { scheduled_for, late, due, attempt, at }
  local function recorder(q, kind, fn)
    local runs = {}
    q:handle(kind, function(job)
      runs[#runs + 1] = { id = job.id, scheduled_for = job.scheduled_for, late = job.late, due = job.due,
                          attempt = job.attempt, at = env.now(), cron = job.cron, tz = job.tz, every = job.every }
      if fn then fn(job, runs) end
    end)
    return runs
  end

  local function times(runs)
    local t = {}
    for i, r in ipairs(runs) do t[i] = r.scheduled_for end
    return t
  end

  describe("schedules", function()
    describe("q:every with a cron expression", function()
      it("runs at its times, each once, never early, with the calendar time and late = false", function()
        local q = open()
        local runs = recorder(q, "tick")
        local id = assert(q:every("tick", "*/1 * * * * *", "p", { id = "sec", limit = 3 }))
        assert.equal("sec", id)
        local job = q:get("sec")
        assert.same({ "*/1 * * * * *", "once", 0, 3 }, { job.cron, job.missed, job.runs, job.limit })
        assert.is_nil(job.every)
        assert.equal(job.due, job.scheduled_for)
        assert.equal(math.floor(job.due), job.due)
        assert.is_true(env.wait(function() return #runs == 3 end, 6 * SLOW))
        idle(1.2) -- (its limit reached: no fourth)
        assert.equal(3, #runs)
        for i, r in ipairs(runs) do
          assert.equal(job.due + i - 1, r.scheduled_for)
          assert.is_false(r.late)
          assert.equal(r.scheduled_for, r.due)
          assert.is_true(r.at >= r.scheduled_for, "ran early")
          assert.same({ "*/1 * * * * *", 1 }, { r.cron, r.attempt })
        end
        assert.is_nil(q:get("sec")) -- ended: removed
        assert.equal(0, q:pending())
      end)

      it("starts at its first time at or after start, and ends at its last before stop", function()
        local q = open()
        local runs = recorder(q, "tick")
        local start = math.floor(env.now()) + 1.5
        assert(q:every("tick", "*/1 * * * * *", nil, { id = "w", start = start, stop = start + 1.7 }))
        assert.equal(start + 0.5, q:get("w").due) -- the first whole second at or after start
        assert.is_true(env.wait(function() return #runs == 2 end, 5 * SLOW))
        idle(1.2)
        assert.same({ start + 0.5, start + 1.5 }, times(runs))
        assert.is_nil(q:get("w"))
        -- an interval's first run is at start; without start, an interval after now
        local now = env.now()
        assert(q:every("tick", 600, nil, { id = "i1", start = now + 3600 }))
        assert.is_true(near(q:get("i1").due, now + 3600, 2e-6))
        assert(q:every("tick", 600, nil, { id = "i2" }))
        assert.is_true(math.abs(q:get("i2").due - (now + 600)) < 1)
      end)

      -- "at or after": a start that is one of the calendar's times is its first
      it("runs first at its start when the start is one of its times, in the future or the past", function()
        local q = open()
        local runs = recorder(q, "past")
        local hour = math.floor(env.now() / 3600) * 3600
        for i, c in ipairs({ { "0 * * * *", hour + 7200, hour + 7200 }, { "30 * * * *", hour + 9000, hour + 9000 },
                             { "0 * * * *", hour + 7200.25, hour + 10800 }, { "*/10 * * * * *", hour + 7210, hour + 7210 } }) do
          assert(q:every("tick", c[1], nil, { id = "f" .. i, start = c[2] }))
          assert.equal(c[3], q:get("f" .. i).scheduled_for, c[1] .. " from " .. (c[2] - hour))
        end
        -- in the past: its missed times run from the start itself
        assert(q:every("past", "0 * * * *", nil, { id = "past", start = hour - 7200, missed = "all", limit = 2 }))
        settle(q, runs)
        assert.same({ hour - 7200, hour - 3600 }, times(runs))
      end)

      it("refuses an expression or a zone cron refuses, naming what is wrong, and stores nothing", function()
        local q = open()
        assert.same({ nil, "hwtimer.durable: cron: minute field: 61 is out of range 0-59" },
          { q:every("k", "61 * * * *", nil, { id = "bad" }) })
        assert.same({ nil, "hwtimer.durable: cron: unknown time zone 'Mars/Olympus'" },
          { q:every("k", "0 3 * * *", nil, { tz = "Mars/Olympus" }) })
        assert.same({ nil, "hwtimer.durable: cron: 5 or 6 fields expected, got 4" }, { q:every("k", "* * * *") })
        local past = env.now() - 3600
        assert.same({ nil, "hwtimer.durable: schedule late has no time before its stop" },
          { q:every("k", "0 3 * * *", nil, { id = "late", stop = past }) })
        assert.equal(0, q:pending())
      end)

      it("raises on a bad option, naming it", function()
        local q = open()
        local function bad(msg, spec, opts)
          assert.has_error(function() q:every("k", spec, nil, opts) end, "bad argument " .. msg)
        end
        bad("#2 to 'every' (positive number of seconds up to 1e9 or cron expression expected, got table)", {})
        bad("#2 to 'every' (positive number of seconds up to 1e9 expected, got -1)", -1)
        bad("#4 to 'every' (option 'missed': 'skip', 'once' or 'all' expected)", "@daily", { missed = "some" })
        bad("#4 to 'every' (option 'limit': integer from 1 to 1e15 expected)", "@daily", { limit = 0 })
        bad("#4 to 'every' (option 'limit': integer from 1 to 1e15 expected)", "@daily", { limit = 1.5 })
        bad("#4 to 'every' (option 'limit': integer from 1 to 1e15 expected)", "@daily", { limit = 1e19 })
        bad("#4 to 'every' (option 'window': number of seconds from 0 (excluded) to 1e9 expected)", 60,
          { window = 0 })
        bad("#4 to 'every' (option 'start': epoch seconds from -9e9 to 9e9 expected)", "@daily", { start = "x" })
        bad("#4 to 'every' (option 'stop': epoch seconds from -9e9 to 9e9 expected)", 60, { stop = 0 / 0 })
        bad("#4 to 'every' (option 'start': epoch seconds from -9e9 to 9e9 expected)", "@daily", { start = 1e10 })
        bad("#4 to 'every' (option 'stop': epoch seconds from -9e9 to 9e9 expected)", 60, { stop = -2e15 })
        bad("#4 to 'every' (option 'tz': non-empty string expected)", "@daily", { tz = 1 })
        bad("#4 to 'every' (option 'tz': only with a cron expression)", 60, { tz = "UTC" })
        bad("#4 to 'every' (option 'stop': before option 'start')", 60, { start = 10, stop = 5 })
        -- and takes each bound itself
        for _, opts in ipairs({ { limit = 1 }, { limit = 1e15 }, { window = 1e9 }, { start = -9e9 },
                                { start = 9e9 - 60, stop = 9e9 } }) do
          local id = assert(q:every("k", 60, nil, opts))
          assert(q:cancel(id))
        end
        bad("#4 to 'every' (unknown option 'every')", 60, { every = 5 })
        assert.has_error(function() q:schedule("k", 1, nil, { limit = 2 }) end,
          "bad argument #4 to 'schedule' (unknown option 'limit')")
      end)
    end)

    describe("missed runs", function()
      -- An interval of 1000 s whose start was 3500 s ago: four times came
      -- and went (now - 3500, -2500, -1500, -500; the last more than LATE
      -- ago), the next is now + 500.
      local n = 0
      local function missed_four(policy, window)
        n = n + 1
        local q, id = open(), "m" .. n
        local runs = recorder(q, "m")
        local start = env.now() - 3500
        assert(q:every("m", 1000, nil, { id = id, start = start, missed = policy, window = window }))
        settle(q, runs)
        local job = q:get(id)
        assert.is_true(near(job.scheduled_for, start + 4000), "next " .. job.scheduled_for - start)
        assert.is_true(near(job.due, start + 4000))
        local got = {}
        for i, r in ipairs(runs) do
          got[i] = math.floor(r.scheduled_for - start + 0.5)
          assert.is_true(r.late)
          assert.is_true(near(r.due, start + (i == 1 and 0 or got[i])), "due")
        end
        assert.equal(#runs, job.runs)
        q:close()
        return got
      end

      it("all: each missed time once, in order, marked late; then the calendar", function()
        assert.same({ 0, 1000, 2000, 3000 }, missed_four("all"))
      end)

      it("once (the default): one run for all, standing for the latest; then the calendar", function()
        assert.same({ 3000 }, missed_four(nil))
        assert.same({ 3000 }, missed_four("once"))
      end)

      it("skip: none of them; the next calendar time only", function()
        assert.same({}, missed_four("skip"))
      end)

      it("window: times older than now - window are dropped, under every policy", function()
        assert.same({ 2000, 3000 }, missed_four("all", 2000))
        assert.same({ 3000 }, missed_four("once", 2000))
        assert.same({}, missed_four("once", 400)) -- the latest is 500 s old
        assert.same({}, missed_four("skip", 4000))
      end)

      it("skip runs the latest missed time when it is on time (less than LATE behind)", function()
        local q = open()
        local runs = recorder(q, "m")
        local start = env.now() - 2030 -- times at -2030, -1030, -30
        assert(q:every("m", 1000, nil, { id = "m", start = start, missed = "skip" }))
        settle(q, runs)
        assert.equal(1, #runs)
        assert.is_true(near(runs[1].scheduled_for, start + 2000))
        assert.is_false(runs[1].late) -- 30 s behind: on time
        assert.is_true(near(q:get("m").scheduled_for, start + 3000))
      end)

      -- (schedule.begin itself, on exact times: a store's clock never lands on LATE)
      it("a calendar time exactly LATE behind now is on time; any more is late, under each policy", function()
        local L = schedule.LATE
        local function begin(missed, now)
          local t, b = schedule.begin({ every = 1000, at = 0, missed = missed }, now)
          return { t, type(b) == "table" and b.what .. " " .. tostring(b.at) or b }
        end
        -- times 0, 1000 and 2000 came due; 2000 is the latest
        assert.same({ 2000, false }, begin("skip", 2000 + L))
        assert.same({ nil, "next 3000" }, begin("skip", 2000 + L + 0.5))
        assert.same({ 2000, false }, begin("once", 2000 + L))
        assert.same({ 2000, true }, begin("once", 2000 + L + 0.5))
        assert.same({ 0, true }, begin("all", 2000 + L))
        -- the only time due
        for _, missed in ipairs({ "skip", "once", "all" }) do
          assert.same({ 0, false }, begin(missed, L))
        end
        assert.same({ 0, true }, begin("once", L + 0.5))
        assert.same({ nil, "next 1000" }, begin("skip", L + 0.5))
      end)

      it("all: at most BACKLOG of them, the latest", function()
        local q = open()
        local runs = recorder(q, "m")
        local start = env.now() - 200.5 -- 201 times a second apart, and more while they run
        assert(q:every("m", 1, nil, { id = "m", start = start, missed = "all", stop = start + 200 }))
        settle(q, runs)
        assert.equal(schedule.BACKLOG, #runs)
        for i, r in ipairs(runs) do assert.is_true(near(r.scheduled_for, start + 100 + i)) end
        assert.is_nil(q:get("m")) -- its stop passed
      end)

      -- A run slower than the interval: the times it overlapped are not
      -- missed ones for "once" and "skip" (the next run is the first time
      -- after it ended), and each of them runs, in order, for "all".
      for _, case in ipairs({ { "once", { 0, 4 } }, { "skip", { 0, 4 } }, { "all", { 0, 1, 2, 3 } } }) do
        local policy, want = case[1], case[2]
        it(policy .. ": after a run 3.5 intervals long, " .. (policy == "all" and "each time it overlapped"
          or "the first time after it ended"), function()
          local q = open()
          local every = 0.1 * SLOW
          local start = env.now() + every
          local runs = recorder(q, "slow", function(_, list)
            if #list == 1 then require("socket").sleep(3.5 * every) end -- (blocks the loop, as a busy handler does)
          end)
          assert(q:every("slow", every, nil, { id = policy, start = start, missed = policy, limit = #want }))
          assert.is_true(env.wait(function() return #runs >= #want end, 20 * every), #runs .. " runs")
          settle(q, runs)
          local got = {}
          for i, r in ipairs(runs) do got[i] = math.floor((r.scheduled_for - start) / every + 0.5) end
          assert.same(want, got)
          assert.is_nil(q:get(policy)) -- its limit made
        end)
      end

      it("once the queue reopens, runs what came due while it was closed, by the policy", function()
        local q = open()
        local start = env.now() + 0.2
        assert(q:every("m", 0.2 * SLOW, nil, { id = "all", start = start, missed = "all" }))
        assert(q:every("m", 0.2 * SLOW, nil, { id = "once", start = start }))
        q:close()
        idle(1.1 * SLOW) -- five times each, none run
        local now = env.now()
        q = open()
        local runs = recorder(q, "m")
        idle(0.3)
        local all, once = {}, {}
        for _, r in ipairs(runs) do
          local list = r.id == "all" and all or once
          list[#list + 1] = math.floor((r.scheduled_for - start) / (0.2 * SLOW) + 0.5)
        end
        -- all: 0, 1, 2, ... each once in order, the missed ones first; once:
        -- the latest missed, then later ones
        for i, k in ipairs(all) do assert.equal(i - 1, k) end
        assert.is_true(#all >= 5, #all .. " runs")
        assert.is_true(#once >= 1 and once[1] >= math.floor((now - start) / (0.2 * SLOW)), once[1])
        for i = 2, #once do assert.is_true(once[i] > once[i - 1]) end
      end)
    end)

    describe("a nightly job in Europe/Berlin", function()
      -- 02:30 every night, from days before a change of the clocks to days
      -- after it (in 2025, in the past: its missed times run at once, in
      -- order). After each run the next time is read from the store, then
      -- that run is let through.
      local function nights(from, to)
        local q = open()
        local runs, stored, late = {}, {}, {}
        local function handler(job)
          runs[#runs + 1], late[#late + 1] = job.scheduled_for, job.late
          q:handle("nightly", nil) -- (the next run waits until the stored time is read)
        end
        local c = assert(cron.parse("30 2 * * *", { tz = "Europe/Berlin" }))
        assert(q:every("nightly", "30 2 * * *", nil, { id = "n", tz = "Europe/Berlin", start = from, stop = to,
          missed = "all" }))
        stored[1] = q:get("n").scheduled_for
        assert.equal(c:next(from - 1), stored[1])
        for _ = 1, 10 do
          q:handle("nightly", handler)
          local n = #runs
          assert.is_true(env.wait(function()
            local job = q:get("n")
            return #runs > n and (job == nil or not job.leased)
          end, 5))
          local job = q:get("n")
          if not job then break end
          stored[#stored + 1] = job.scheduled_for
          assert.equal(c:next(runs[#runs]), job.scheduled_for) -- the first after the run's own
          assert.equal(#runs, job.runs)
        end
        assert.is_nil(q:get("n")) -- past its stop: ended
        for _, l in ipairs(late) do assert.is_true(l) end
        return runs, stored
      end

      it("runs once at 03:00 CEST on the night the clocks go forward (02:30 does not exist)", function()
        -- 2025-03-28 to 2025-04-01 UTC; 2025-03-30 02:00 CET is 03:00 CEST
        local runs, stored = nights(1743120000, 1743465600)
        assert.same({ 1743125400, 1743211800, 1743296400, 1743381000 }, runs)
        assert.same(runs, stored)
        assert.equal(1743296400, 1743120000 + 2 * 86400 + 3600) -- 01:00 UTC: 03:00 CEST
      end)

      it("runs once at 02:30 CEST on the night the clocks go back, not again at 02:30 CET", function()
        -- 2025-10-24 to 2025-10-28 UTC; 2025-10-26 03:00 CEST is 02:00 CET
        local runs, stored = nights(1761264000, 1761609600)
        assert.same({ 1761265800, 1761352200, 1761438600, 1761528600 }, runs)
        assert.same(runs, stored)
      end)

      it("has its next time after a change of the clocks years ahead, as the store holds it", function()
        local q = open()
        -- 2037-03-29 (the last Sunday of March) 00:00 UTC: 02:30 falls in the gap
        assert(q:every("nightly", "30 2 * * *", nil, { id = "n", tz = "Europe/Berlin", start = 2121897600 }))
        assert.equal(2121897600 + 3600, q:get("n").scheduled_for) -- 03:00 CEST, 01:00 UTC
        assert.equal("Europe/Berlin", q:get("n").tz)
      end)
    end)

    -- (a schedule without an id is a new one, whatever was stored before it)
    it("stores a schedule without an id as a new one, even after a like one was stored again by id", function()
      local q = open()
      assert.equal("s", q:every("k", 60, "p", { id = "s" }))
      assert.equal("s", q:every("k", 60, "p", { id = "s" })) -- (the same again: nothing changes)
      local id = assert(q:every("k", 60, "p"))
      assert.are_not.equal("s", id)
      assert.equal(2, q:pending())
      local job = assert(q:get(id))
      assert.same({ "k", "p", 60, 0 }, { job.kind, job.payload, job.every, job.runs })
    end)

    describe("upserts with opts.id", function()
      it("keeps one schedule: the same one again changes nothing, its next time and runs kept", function()
        local q = open()
        local runs = recorder(q, "u")
        assert(q:every("u", 0.25 * SLOW, "p", { id = "u", missed = "all" }))
        assert.is_true(env.wait(function() return #runs >= 2 end, 5 * SLOW))
        q:handle("u", nil)
        assert.is_true(env.wait(function() local j = q:get("u") return j and not j.leased end))
        local before = q:get("u")
        for _ = 1, 3 do assert.equal("u", q:every("u", 0.25 * SLOW, "p", { id = "u", missed = "all" })) end
        assert.same(before, q:get("u"))
        assert.equal(1, q:pending())
        -- another payload: the same calendar, its pending run kept
        assert(q:every("u", 0.25 * SLOW, "q", { id = "u", missed = "all" }))
        local job = q:get("u")
        assert.same({ "q", before.runs, before.scheduled_for, before.due }, { job.payload, job.runs, job.scheduled_for,
          job.due })
        -- another calendar: its next time from now, its runs kept
        local now = env.now()
        assert(q:every("u", 3600, "q", { id = "u", missed = "all" }))
        job = q:get("u")
        assert.is_true(math.abs(job.due - (now + 3600)) < 1)
        assert.equal(before.runs, job.runs)
        assert.equal(1, q:pending())
        -- and another, due sooner than the time it replaces: from now too
        now = env.now()
        assert(q:every("u", 60, "q", { id = "u", missed = "all" }))
        job = q:get("u")
        assert.same({ 60, before.runs }, { job.every, job.runs })
        assert.is_true(math.abs(job.due - (now + 60)) < 1, "due in " .. job.due - now .. " s")
        assert.equal(1, q:pending())
        -- and one that starts in the past: due at its start, as a new one would be, though no run is in flight
        local start = math.floor(env.now()) - 7200
        assert(q:every("u", 3600, "q", { id = "u", missed = "all", start = start }))
        assert.equal(start, q:get("u").due)
      end)

      -- A deploy that changes the schedule while its run holds the lease.
      for _, case in ipairs({ { "another payload", 1, "q" }, { "another interval", 2, "q" } }) do
        it("never runs a calendar time twice when " .. case[1] .. " is deployed while its run is in flight", function()
          local q = open()
          local every = 0.2 * SLOW
          local start = env.now() + every
          local runs = recorder(q, "u", function(job, list)
            list[#list].payload = job.payload
            if #list == 1 then
              assert.equal("u", q:every("u", every * case[2], case[3], { id = "u", start = start, missed = "all" }))
            end
          end)
          assert(q:every("u", every, "p", { id = "u", start = start, missed = "all" }))
          assert.is_true(env.wait(function() return #runs >= 3 end, 10 * SLOW))
          q:handle("u", nil)
          assert.is_true(env.wait(function() local j = q:get("u") return j and not j.leased end))
          assert.equal("p", runs[1].payload)
          for i = 2, #runs do
            assert.equal(case[3], runs[i].payload)
            assert.is_true(runs[i].scheduled_for > runs[i - 1].scheduled_for,
              "run " .. i .. " at " .. (runs[i].scheduled_for - start) .. " s after the start, the one before at " ..
              (runs[i - 1].scheduled_for - start))
            local k = (runs[i].scheduled_for - start) / (every * case[2])
            assert.is_true(near(k, math.floor(k + 0.5)), "off its calendar: " .. k)
          end
          assert.equal(1, q:pending())
        end)
      end

      -- (its next time from the start's calendar: the first after now, however far back the start)
      it("starts a schedule deployed over its run in flight at its first time after now, from a start long past",
        function()
        local q = open()
        local start = math.floor(env.now()) - 95
        local runs = recorder(q, "v", function(_, list)
          if #list == 1 then assert.equal("v", q:every("v", 20, "q", { id = "v", start = start, missed = "all" })) end
        end)
        assert(q:every("v", 10, "p", { id = "v", start = start, missed = "once" })) -- (its first time, the start, is past)
        assert.is_true(env.wait(function() return #runs == 1 end, 5 * SLOW))
        assert.is_true(env.wait(function() local j = q:get("v") return j and not j.leased end))
        assert.same({ 20, start + 100 }, { q:get("v").every, q:get("v").due }) -- (95 s in: the 6th time, 100 s)
      end)

      it("never runs a calendar time twice while the same schedule is deployed again and again", function()
        local q = open()
        local function deploy() assert(q:every("u", "*/1 * * * * *", "p", { id = "u", tz = "Europe/Berlin" })) end
        local runs = recorder(q, "u", deploy) -- (deployed again while its run is in flight, too)
        deploy()
        local t0 = env.now()
        env.wait(function()
          deploy()
          return env.now() - t0 > 2.5 * SLOW
        end, 10)
        q:handle("u", nil)
        assert.is_true(env.wait(function() return not q:get("u").leased end))
        assert.is_true(#runs >= 2, #runs .. " runs")
        for i = 2, #runs do assert.is_true(runs[i].scheduled_for > runs[i - 1].scheduled_for) end
        assert.equal(#runs, q:get("u").runs) -- each run's acknowledgement counted
      end)
    end)

    describe("q:schedules", function()
      it("lists intervals and cron expressions with their next time, in next-due order; an ended one is gone", function()
        local q = open()
        local now = env.now()
        assert(q:every("a", 7200, "p", { id = "two-hours", limit = 5 }))
        assert(q:every("b", "0 0 1 1 *", nil, { id = "new-year", tz = "Europe/Berlin", missed = "skip" }))
        assert(q:every("c", "*/1 * * * * *", nil, { id = "second", window = 30 }))
        assert(q:every("d", 60, nil, { id = "ending", start = now - 3600, stop = now - 1800 })) -- all past
        assert(q:schedule("e", 5, nil, { id = "plain" }))
        local list = assert(q:schedules())
        local ids = {}
        for i, job in ipairs(list) do
          ids[i] = job.id
          assert.same(q:get(job.id), job)
          assert.equal(job.due, job.scheduled_for)
        end
        assert.same({ "ending", "second", "two-hours", "new-year" }, ids)
        local y = list[4]
        assert.same({ "0 0 1 1 *", "Europe/Berlin", "skip", 0 }, { y.cron, y.tz, y.missed, y.runs })
        assert.equal(assert(cron.parse("0 0 1 1 *", { tz = "Europe/Berlin" })):next(now), y.scheduled_for)
        assert.same({ 7200, 5, "once" }, { list[3].every, list[3].limit, list[3].missed })
        assert.same({ "*/1 * * * * *", 30 }, { list[2].cron, list[2].window })
        -- the past one runs (once, the latest before its stop) and ends
        local ran = recorder(q, "d")
        assert.is_true(env.wait(function() return #ran == 1 and not q:get("ending") end))
        assert.is_true(near(ran[1].scheduled_for, now - 1800))
        ids = {}
        for i, job in ipairs(assert(q:schedules())) do ids[i] = job.id end
        assert.same({ "second", "two-hours", "new-year" }, ids)
      end)

      -- (Lua's < on strings follows the locale: the order is the ids' bytes, as SQLite's BINARY)
      it("lists schedules due at one time in the order of their ids' bytes", function()
        local q = open()
        local given = { "zeta", "\195\169t\195\169", "alpha", "Alpha", "al-b", "al" }
        for _, id in ipairs(given) do
          assert(q:every("k", "0 0 1 1 *", nil, { id = id, tz = "Europe/Berlin" }))
        end
        local ids = {}
        for i, job in ipairs(assert(q:schedules())) do ids[i] = job.id end
        assert.same({ "Alpha", "al", "al-b", "alpha", "zeta", "\195\169t\195\169" }, ids)
      end)
    end)

    describe("a run that fails", function()
      it("is retried as the same calendar time, not as a missed one", function()
        local q = open({ backoff = { delay = 0.1 } })
        local runs = recorder(q, "f", function(job)
          if job.attempt == 1 then error("first try fails", 0) end
        end)
        local start = env.now() - 0.2
        assert(q:every("f", 3600, nil, { id = "f", start = start, missed = "skip" }))
        assert.is_true(env.wait(function() return #runs == 2 end))
        assert.is_true(near(runs[1].scheduled_for, start) and near(runs[2].scheduled_for, start))
        assert.same({ 1, 2, false, false }, { runs[1].attempt, runs[2].attempt, runs[1].late, runs[2].late })
        assert.is_true(env.wait(function() local j = q:get("f") return j and not j.leased end))
        local job = q:get("f")
        assert.is_true(near(job.scheduled_for, start + 3600))
        assert.same({ 1, 0 }, { job.runs, job.attempt })
      end)

      -- (an upsert of the same calendar keeps the pending run as it is: a
      -- run waiting for its retry keeps its try and its time)
      it("keeps its retry, its try and time, when another payload of its schedule is deployed meanwhile", function()
        local q = open({ backoff = { delay = 60 } })
        local runs = recorder(q, "f", function() error("fails", 0) end)
        local start = env.now() - 0.2
        assert(q:every("f", 3600, "p", { id = "f", start = start, missed = "skip" }))
        assert.is_true(env.wait(function() local j = q:get("f") return #runs == 1 and j and not j.leased end))
        local before = q:get("f")
        assert.same({ 1, 0 }, { before.attempt, before.runs })
        assert.is_true(before.due > env.now() + 50, "the retry is due in " .. (before.due - env.now()) .. " s")
        assert.equal("f", q:every("f", 3600, "q", { id = "f", start = start, missed = "skip" }))
        local job = q:get("f")
        assert.same({ "q", 1, 0, before.due, before.scheduled_for }, { job.payload, job.attempt, job.runs, job.due,
          job.scheduled_for })
        assert.is_true(near(job.scheduled_for, start))
      end)
    end)
  end)
end
