-- The window: only jobs due within it wait in the timer's wheel; later ones
-- come in with the refill, and what another process schedules inside it with
-- the poll. Shared by the SQLite (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines; `env`
-- is the one spec/durable/leases.lua takes. No lateness bound (that figure is
-- make bench's): the sweep is a minute away, so a job that runs within the
-- wait was brought by the mechanism named.
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert
  describe("the window", function()
    it("holds only jobs due within the window in the wheel, and runs later ones from the refill", function()
      -- (times scale with SLOW: under valgrind the 250 schedules take longer
      -- than the first job's delay would be.) Counts are taken between
      -- schedules, where no callback runs; the jobs beyond the window go
      -- first, so that no job of the queue can fire while the wheel is counted.
      local q = assert(env.open({ window = 1.0 * SLOW, sweep = 60 }))
      local timer = env.timer()
      local ran = {}
      q:handle("k", function(job) ran[#ran + 1] = { id = job.id, late = env.now() - job.due } end)
      timer:run(0.01) -- the pass queued at delay 0 has run: it would expire while we count
      local base = timer:pending()
      for i = 1, 200 do q:schedule("k", (1.2 + i * 0.001) * SLOW) end
      -- (at most: the queue's own refill timeout may expire meanwhile)
      assert.is_true(timer:pending() <= base, timer:pending() - base .. " more in the wheel")
      assert.matches(", 0 in the window%)$", tostring(q))
      -- (the first due 0.5 s on: 50 SQLite writes took over 0.1 s beside a CI
      -- run, and 50 Redis schedules over 0.2 s in the ASan run of a slower machine)
      for i = 1, 50 do q:schedule("k", (0.5 + i * 0.003) * SLOW) end
      assert.matches(", 50 in the window%)$", tostring(q))
      assert.is_true(timer:pending() <= base + 50)
      assert.is_true(env.wait(function() return #ran >= 250 end, 10 * SLOW), #ran .. " of 250 ran")
      env.wait(function() return false end, 0.05)
      assert.equal(250, #ran)
      -- (each job leaves the window as its time fires: nothing is kept of those that ran)
      assert.matches(", 0 in the window%)$", tostring(q))
      local seen = {}
      for _, r in ipairs(ran) do
        assert.is_nil(seen[r.id], "ran twice")
        seen[r.id] = true
        assert.is_true(r.late >= 0, "early by " .. -r.late)
      end
    end)

    -- (docs/durable.md: the queue's own calls try a store that failed once a step)
    it("backs off a store that failed 0.05 s, doubling up to 1 s, and starts over once it answers", function()
      local window = require("hwtimer.durable.window")
      local state, steps = {}, {}
      for i = 1, 7 do steps[i] = window.failed(state) end
      assert.same({ 0.05, 0.1, 0.2, 0.4, 0.8, 1, 1 }, steps)
      window.succeeded(state)
      assert.equal(0.05, window.failed(state))
    end)

    -- A job scheduled due now goes to the next pass, whatever the store
    -- stamped it with: Redis stamps by the server's clock, which may read
    -- ahead of the queue's (here made to read 50 ms behind the store).
    it("sends a job scheduled with no delay to the next pass, not into the window, though its stamp is ahead", function()
      local q = assert(env.open({ window = 60, sweep = 60, poll = 60 }))
      env.wait(function() return false end, 0.02) -- (the open's own pass)
      local engine = require("hwtimer.durable").engine(q)
      local now = engine.now
      engine.now = function(e) return now(e) - 0.05 end
      assert(q:schedule("k", 0))
      assert.matches(", 0 in the window%)$", tostring(q))
      assert(q:schedule("k", 0.5)) -- (one ahead is held)
      assert.matches(", 1 in the window%)$", tostring(q))
      engine.now = nil
    end)

    -- A time that fires leaves the window even when the pass it starts finds
    -- nothing to claim (another process cancelled or took the job): the
    -- window holds what is still to come, nothing of what has passed.
    it("forgets a job's time once it fires, though another process cancelled the job meanwhile", function()
      local q = assert(env.open({ window = 60, sweep = 60, poll = 60 }))
      local other = assert(env.open({ window = 60, sweep = 60, poll = 60 }))
      assert(q:schedule("k", 0.2 * SLOW, nil, { id = "gone" }))
      assert.matches(", 1 in the window%)$", tostring(q))
      assert.is_true(other:cancel("gone"))
      assert.matches(", 1 in the window%)$", tostring(q)) -- (q cannot know yet)
      env.wait(function() return false end, 0.4 * SLOW)
      assert.matches(", 0 in the window%)$", tostring(q))
    end)

    -- Each refill reads the store from where the last one ended (a hair
    -- before it) to the new horizon: never again what it read before.
    it("refills from the end of the last refill to the new horizon", function()
      local q = assert(env.open({ window = 0.1, sweep = 60 }))
      local engine, reads = require("hwtimer.durable").engine(q), {}
      local range = engine.range
      engine.range = function(e, from, to, ...)
        reads[#reads + 1] = { from, to }
        return range(e, from, to, ...)
      end
      env.wait(function() return #reads >= 4 end, 5 * SLOW)
      engine.range = range
      assert.is_true(#reads >= 4, #reads .. " refills")
      for i = 2, #reads do
        local gap = reads[i][1] - reads[i - 1][2]
        assert.is_true(gap <= 0 and gap > -1e-6, ("refill %d starts %.9f s from the last one's end"):format(i, gap))
        assert.is_true(reads[i][2] > reads[i][1])
      end
    end)

    it("picks up what another process scheduled inside its window, from the poll", function()
      local q = assert(env.open({ poll = 0.02, sweep = 60 }))
      local other = assert(env.open({ sweep = 60 })) -- its own connection and owner: another process to the store
      local late
      q:handle("k", function(job) late = env.now() - job.due end)
      other:schedule("k", 0.1)
      assert.truthy(env.wait(function() return late end, 10 * SLOW))
      assert.is_true(late >= 0, "early by " .. late)
      late = nil
      other:schedule("k", 0.005) -- shorter than the poll: run at the next poll
      assert.truthy(env.wait(function() return late end, 10 * SLOW))
      assert.is_true(late >= 0, "early by " .. late)
    end)

    -- A refill the store refused is reported (as a store error: no job) and
    -- the queue's own calls back off; the next refill reads from where the
    -- last good one ended, so what another process scheduled meanwhile
    -- inside the window is loaded then, and runs on time, not at the sweep.
    it("reports a refill the store refused, and loads the window at the next one that succeeds", function()
      local errors, late = {}, nil
      local q = assert(env.open({ window = 0.4 * SLOW, poll = 60, sweep = 60,
        on_error = function(err, job) errors[#errors + 1] = { tostring(err), job } end }))
      local other = assert(env.open({ sweep = 60, poll = 60 }))
      q:handle("k", function(job) late = env.now() - job.due end)
      local engine = require("hwtimer.durable").engine(q)
      local range = engine.range
      engine.range = function() return nil, "refused for the spec" end
      assert.is_true(env.wait(function() return #errors > 0 end, 5 * SLOW), "no refill reported")
      assert.same({ "refill: refused for the spec" }, errors[1])
      assert.is_not_nil(q._retry_step, "no backoff after the failure") -- (window.failed's step)
      assert(other:schedule("k", 0.5 * SLOW)) -- past the refused horizon, inside the next one
      engine.range = range
      assert.truthy(env.wait(function() return late end, 5 * SLOW), "not run: the window was not refilled")
      assert.is_true(late >= 0 and late < 0.2 * SLOW, "late by " .. late)
      assert.is_nil(q._retry_step, "the backoff not ended once the store answered")
      assert.equal(1, #errors)
    end)

    -- A poll the store refused: reported once, and the polls back off (0.05,
    -- 0.1, 0.2 s ...), not one every `poll` seconds at a store that is down.
    it("reports a poll the store refused, and polls a store that is down by the backoff", function()
      local errors = {}
      local q = assert(env.open({ poll = 0.01, sweep = 60,
        on_error = function(err, job) errors[#errors + 1] = { tostring(err), job } end }))
      local engine = require("hwtimer.durable").engine(q)
      env.wait(function() return false end, 0.05) -- (the open's own poll and pass)
      local calls = 0
      engine.changes = function() calls = calls + 1 return nil, "refused for the spec" end
      env.wait(function() return false end, 0.4)
      engine.changes = nil
      assert.same({ "poll: refused for the spec" }, errors[1])
      assert.equal(1, #errors) -- (a store's errors: one a second at most)
      assert.is_true(calls >= 2 and calls <= 6, calls .. " polls in 0.4 s of a store that is down")
    end)
  end)
end
