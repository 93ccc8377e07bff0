-- Handlers side by side (issue 20), shared by the SQLite (spec/durable/01-sqlite)
-- and Redis (spec/durable/03-redis) engines; `env` is the one
-- spec/durable/leases.lua takes. Where the host lets a handler wait
-- (hwtimer.cqueues here; hwtimer.ngx in spec/durable/05-nginx_orders), up to
-- `concurrency` run at once; each job's acknowledgement is written within
-- ack_delay of its end while others still run; jobs claimed and not
-- started go back to the store at close. A plain loop runs them one by one.
local durable = require("hwtimer.durable")
local sleep = require("hwtimer_testutil").sleep
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  local describe, it, pending, assert = env.describe, env.it, env.pending, env.assert

  -- n jobs due at once, ids j1..jn in that order.
  local function due_now(q, n)
    local due = env.now()
    assert(q:batch(function(b)
      for i = 1, n do b:at("k", due + i * 2e-6, nil, { id = "j" .. i }) end
    end))
  end

  describe("concurrency", function()
    it("runs handlers one after another in a plain loop, whatever concurrency says", function()
      local q = assert(env.open({ concurrency = 8, sweep = 60 }))
      local running, most, ran = 0, 0, 0
      q:handle("k", function()
        running = running + 1
        if running > most then most = running end
        sleep(0.002)
        running, ran = running - 1, ran + 1
      end)
      due_now(q, 6)
      assert.is_true(env.wait(function() return ran == 6 end, 10 * SLOW))
      assert.equal(1, most)
    end)

    it("hands the jobs claimed and not started back to the store at close, attempts not counted", function()
      local q = assert(env.open({ concurrency = 3, sweep = 60, lease = 60 }))
      local started = {}
      q:handle("k", function(job)
        started[#started + 1] = job.id
        if job.id == "j1" then q:close() end -- j2 and j3 are claimed, waiting for their workers
      end)
      due_now(q, 3)
      env.wait(function() return #started > 0 end, 10 * SLOW)
      env.wait(function() return false end, 0.05)
      assert.same({ "j1" }, started)
      local engine = durable.engine(assert(env.open({ sweep = 60 }))) -- another process looks
      assert.is_nil(engine:get("j1"), "j1 ran: acknowledged once its handler returned")
      for _, id in ipairs({ "j2", "j3" }) do
        local job = assert(engine:get(id), id .. " lost")
        assert.is_nil(job.leased, id .. " still leased: it would wait 60 s for its lease to end")
        assert.equal(0, job.attempt, id .. "'s attempt counted though it never started")
      end
    end)

    -- (cqueues: a host where a handler waits; busted's pending beside `it`)
    if not pcall(require, "cqueues") then
      pending("concurrency where handlers wait: cqueues is not installed for " .. _VERSION)
      return
    elseif _VERSION == "Lua 5.1" and not rawget(_G, "jit") then
      pending("concurrency where handlers wait: Lua 5.1's pcall is not yieldable")
      return
    end
    local cqueues = require("cqueues")

    -- Run the timer on a cqueues controller until done() or 10 s.
    local function on_cqueues(done)
      local cq = cqueues.new()
      local attached = require("hwtimer.cqueues").attach(env.timer(), cq)
      cq:wrap(function()
        local limit = cqueues.monotime() + 10 * SLOW
        while not done() and cqueues.monotime() < limit do cqueues.sleep(0.005) end
        attached.detach()
      end)
      assert(cq:loop())
    end

    -- n jobs due at once whose handlers each wait `secs` on cqueues: the ids
    -- in the order they ended, and the most that ran at once.
    local function run_waiting(q, n, secs)
      local running, most, ran = 0, 0, {}
      q:handle("k", function(job)
        running = running + 1
        if running > most then most = running end
        cqueues.sleep(secs)
        running = running - 1
        ran[#ran + 1] = job.id
      end)
      due_now(q, n)
      on_cqueues(function() return #ran == n end)
      return ran, most
    end

    it("runs up to `concurrency` handlers at once where they wait (cqueues), each job once", function()
      local q = assert(env.open({ concurrency = 4, sweep = 60 }))
      local ran, most = run_waiting(q, 12, 0.05)
      assert.equal(12, #ran)
      assert.equal(4, most)
      local seen = {}
      for _, id in ipairs(ran) do
        assert.is_nil(seen[id], id .. " ran twice")
        seen[id] = true
      end
      assert.equal(0, q:pending())
    end)

    -- A claim takes at most `batch` rows: one that comes back full is
    -- followed by another at once, until every worker has a job.
    it("fills every worker though a claim takes at most `batch`", function()
      -- (each waits longer than the three claims that fill the workers take, valgrind's too)
      local q = assert(env.open({ concurrency = 6, batch = 2, sweep = 60, poll = 60 }))
      local ran, most = run_waiting(q, 12, 0.1 * SLOW)
      assert.equal(12, #ran)
      assert.equal(6, most)
    end)

    -- A write of acknowledgements that fails is given back, with those made
    -- while it was in flight (a store call yields in nginx, here in cqueues):
    -- the next write carries both, and no job runs again.
    it("keeps an acknowledgement made while a failed write was in flight: both written, each job run once", function()
      local reports = {}
      local q = assert(env.open({ concurrency = 2, sweep = 60, poll = 60, ack_delay = 0.02,
        on_error = function(err) reports[#reports + 1] = tostring(err) end }))
      local engine = durable.engine(q)
      local failed, writing, j2_ended = false, false, false
      for _, name in ipairs({ "ack", "claim" }) do
        local real = engine[name]
        engine[name] = function(e, acks, ...)
          if not failed and #acks > 0 then
            failed, writing = true, true
            while not j2_ended do cqueues.sleep(0.002) end
            return nil, "the store is down (the test's)"
          end
          return real(e, acks, ...)
        end
      end
      local ran = {}
      q:handle("k", function(job)
        if job.id == "j2" then
          while not writing do cqueues.sleep(0.002) end
          j2_ended = true
        end
        ran[#ran + 1] = job.id
      end)
      due_now(q, 2)
      on_cqueues(function() return failed and engine:get("j1") == nil and engine:get("j2") == nil end)
      assert.is_true(failed, "no write failed")
      assert.is_nil(engine:get("j1"), "j1 is not acknowledged")
      assert.is_nil(engine:get("j2"), "j2 (acknowledged during the failed write) is not")
      table.sort(ran)
      assert.same({ "j1", "j2" }, ran)
      assert.equal(1, #reports, table.concat(reports, "\n")) -- the failed write, reported once
      assert.matches("the store is down %(the test's%)$", reports[1])
    end)

    it("keeps the leases of handlers still running after q:close(): another process does not run their jobs", function()
      local q = assert(env.open({ concurrency = 2, sweep = 60, lease = 0.5 }))
      local runs, ended = {}, false
      q:handle("k", function(job)
        runs[#runs + 1] = "closed:" .. job.id
        cqueues.sleep(0.05)
        q:close()            -- a graceful shutdown, the handler still at work
        cqueues.sleep(1.5)   -- three leases
        ended = true
      end)
      due_now(q, 1)
      -- another process: a queue of its own owner on the same store, sweeping often
      local other = assert(env.open({ sweep = 0.05, lease = 0.5 }))
      other:handle("k", function(job) runs[#runs + 1] = "other:" .. job.id end)
      on_cqueues(function() return ended end)
      other:close()
      assert.same({ "closed:j1" }, runs)
      local engine = durable.engine(assert(env.open({ sweep = 60 })))
      assert.is_nil(engine:get("j1"), "j1 was not acknowledged once its handler returned")
    end)

    -- q:close() with two handlers at work: the store stays open until the
    -- last of them returns, and each one's acknowledgement is written.
    it("closes the store only once the last handler still running has returned: each job acknowledged", function()
      local q = assert(env.open({ concurrency = 2, sweep = 60, poll = 60, lease = 60 }))
      local ended = {}
      q:handle("k", function(job)
        if job.id == "j1" then
          cqueues.sleep(0.02)
          q:close() -- (j2's handler still runs, and returns after this one)
        else
          cqueues.sleep(0.2 * SLOW)
        end
        ended[#ended + 1] = job.id
      end)
      due_now(q, 2)
      on_cqueues(function() return #ended == 2 end)
      assert.same({ "j1", "j2" }, ended)
      local engine = durable.engine(assert(env.open({ sweep = 60 }))) -- another process looks
      assert.is_nil(engine:get("j1"), "j1 was not acknowledged")
      assert.is_nil(engine:get("j2"), "j2 was not acknowledged: the store closed while its handler ran")
    end)

    -- (a pass with no free worker claims nothing: it waits for one to end)
    it("makes no claim while every worker is busy", function()
      local q = assert(env.open({ concurrency = 2, sweep = 60, poll = 60 }))
      local claims, stop = require("spec.helpers").count_calls(durable.engine(q), "claim")
      local ran = run_waiting(q, 6, 0.1 * SLOW)
      stop()
      assert.equal(6, #ran)
      -- (6 jobs for 2 workers: a claim as each pair starts, and one as each worker frees, at most)
      assert.is_true(claims() <= 10, claims() .. " claims for 6 jobs on 2 workers")
    end)

    it("claims only as many due jobs as there are free workers: the rest stay for any process", function()
      local q = assert(env.open({ concurrency = 2, sweep = 60 }))
      local engine, leased_at_start, ran = durable.engine(q), nil, 0
      q:handle("k", function(job)
        if job.id == "j1" then
          leased_at_start = 0
          for i = 1, 6 do
            local stored = engine:get("j" .. i)
            if stored and stored.leased then leased_at_start = leased_at_start + 1 end
          end
        end
        cqueues.sleep(0.02)
        ran = ran + 1
      end)
      due_now(q, 6)
      on_cqueues(function() return ran == 6 end)
      assert.equal(6, ran)
      assert.equal(2, leased_at_start)
    end)

    it("writes a job's acknowledgement within ack_delay of its end while others still wait", function()
      local q = assert(env.open({ concurrency = 4, sweep = 60 }))
      local engine, stored_after, done = durable.engine(q), nil, false
      q:handle("k", function(job)
        if job.id == "j1" then return end -- at once
        cqueues.sleep(0.05)               -- j2 looks at j1 0.05 s on, j1's ack_delay (2 ms) long past
        if job.id == "j2" then stored_after = engine:get("j1") or false end
        cqueues.sleep(0.2)
        done = true
      end)
      due_now(q, 2)
      on_cqueues(function() return done end)
      assert.is_false(stored_after, "j1 ran, and was still stored 0.05 s later while j2 ran")
    end)

  end)
end
