-- When the acknowledgements of a pass (delete, next period, retry, dead) are
-- written: with the next claim, after ack_delay, at once with ack_delay = 0,
-- before a read of the jobs, at close and cancel. Shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines. `env`
-- is the one spec/durable/front.lua takes (describe, it, assert, open, wait,
-- now, jobs), and:
--   poll_claims     true where the poll or the sweep claims, and so writes
--                   the acknowledgements, with nothing due (Redis: a poll
--                   50 ms after a pass does); the specs that count them
--                   unwritten then turn both off

local helpers = require("spec.helpers")
local count = helpers.count
local durable = require("hwtimer.durable")

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert
  local function quiet(opts)
    if env.poll_claims then opts.poll, opts.sweep = 60, 60 end
    return opts
  end

  describe("acknowledgements", function()
    it("wait for the next claim, which writes them; reads of jobs write them first", function()
      -- (no poll or sweep: either would claim, and write them, on its own)
      local q = assert(env.open({ ack_delay = 30, poll = 60, sweep = 60 }))
      local ran = {}
      q:handle("k", function(job) ran[#ran + 1] = job.id end)
      assert(q:schedule("k", 0.05, nil, { id = "a" }))
      assert(q:schedule("k", 0.3, nil, { id = "b" }))
      assert(q:schedule("k", 0.55, nil, { id = "c" }))
      assert.is_true(env.wait(function() return #ran == 1 end))
      local a = env.jobs().a
      assert.is_true(a ~= nil and a.owner ~= "", "a ran: stored and leased until its acknowledgement")
      assert.is_true(env.wait(function() return #ran == 2 end))
      assert.is_nil(env.jobs().a) -- written with b's claim
      assert.truthy(env.jobs().b)
      assert.is_nil(q:get("b"))
      assert.is_nil(env.jobs().b) -- get wrote it first
      assert.is_true(env.wait(function() return #ran == 3 end))
      assert.truthy(env.jobs().c)
      assert.equal(0, q:pending())
      assert.is_nil(env.jobs().c) -- pending wrote it first
      assert.equal(0, count(env.jobs()))
    end)

    it("are written after ack_delay when no claim comes, and at once with ack_delay = 0", function()
      local delays = { 0.05, 0 }
      for _, delay in ipairs(delays) do
        local queue = assert(env.open({ ack_delay = delay, queue = "q" .. delay }))
        local ran
        queue:handle("k", function() ran = true end)
        assert(queue:schedule("k", 0.02))
        assert.is_true(env.wait(function() return ran end))
        if delay == 0 then assert.equal(0, count(env.jobs("q0"))) end
        assert.is_true(env.wait(function() return count(env.jobs("q" .. delay)) == 0 end, 2))
      end
      for _, delay in ipairs(delays) do assert.equal(0, count(env.jobs("q" .. delay))) end
    end)

    -- (ack_delay = 1: held for that second, not written at once as 0 is)
    it("are held ack_delay = 1 s when no claim comes, the job leased meanwhile", function()
      local queue = assert(env.open({ ack_delay = 1, poll = 60, sweep = 60, queue = "q1s" }))
      local ran
      queue:handle("k", function() ran = env.now() end)
      assert(queue:schedule("k", 0.02))
      assert.is_true(env.wait(function() return ran ~= nil end))
      env.wait(function() return false end, 0.1)
      assert.equal(1, count(env.jobs("q1s")), "the acknowledgement was written before its second")
      assert.is_true(env.wait(function() return count(env.jobs("q1s")) == 0 end, 3))
      assert.is_true(env.now() - ran >= 0.9, "written " .. (env.now() - ran) .. " s after the run")
    end)

    it("are written at once when the timer was stopped during the pass", function()
      -- (in nginx: a worker exiting while a handler waits on a cosocket; an
      -- earlier pass's ack_delay timeout, pending then, never runs)
      local timer = env.timer()
      local q = assert(env.open({ ack_delay = 30 }))
      local stopped
      q:handle("k", function() stopped = timer:stop() end)
      env.wait(function() return false end, 0.05) -- the first, empty pass (Redis: claims, arms the ack timeout)
      assert(q:schedule("k", 0.02))
      local limit = env.now() + 5
      while not stopped and env.now() < limit do timer:run(0.005) end
      assert.truthy(stopped)
      assert.equal(0, timer:stats().errors)
      assert.equal(0, durable.engine(q):pending()) -- the store itself, as another process sees it
    end)

    it("are written by close, and by cancel, which then finds the job gone", function()
      local q = assert(env.open(quiet({ ack_delay = 30 })))
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      local due = env.now() + 0.05
      assert(q:batch(function(b) -- due together: one claim
        b:at("k", due, nil, { id = "a" })
        b:at("k", due, nil, { id = "b" })
      end))
      assert.is_true(env.wait(function() return ran == 2 end))
      assert.equal(2, count(env.jobs()))
      assert.is_false(q:cancel("a"))
      assert.equal(0, count(env.jobs()))
      assert(q:schedule("k", 0.02, nil, { id = "c" }))
      assert.is_true(env.wait(function() return ran == 3 end))
      assert.equal(1, count(env.jobs()))
      q:close()
      assert.equal(0, count(env.jobs()))
    end)

    -- (close writes them: the timeout that would have written them later
    -- does nothing when it comes, on a closed queue)
    it("leave nothing to do once close wrote them: the later write finds the queue closed", function()
      local errors = {}
      local q = assert(env.open({ ack_delay = 0.05, poll = 60, sweep = 60,
        on_error = function(err) errors[#errors + 1] = tostring(err) end }))
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      assert(q:schedule("k", 0, nil, { id = "a" }))
      assert.is_true(env.wait(function() return ran == 1 end))
      q:close()
      assert.equal(0, count(env.jobs()))
      local engine = require("hwtimer.durable").engine(q)
      local calls = 0
      for _, name in ipairs({ "ack", "claim", "renew", "flush" }) do
        local real = engine[name]
        if real then
          engine[name] = function(...)
            calls = calls + 1
            return real(...)
          end
        end
      end
      env.wait(function() return false end, 0.2) -- (past ack_delay)
      assert.same({}, errors)
      assert.equal(0, calls)
    end)

    -- A retry written with the next claim (ack_delay holds it back) comes
    -- due inside the window: the claim loads it, and it runs at its time.
    -- No poll or sweep here, nor any other claim: left unloaded it would
    -- wait for the sweep (60 s) or the refill (30 s).
    it("written by a claim load a retry due inside the window, which runs at its time", function()
      local q = env.quiet_open(quiet({ ack_delay = 30, backoff = { delay = 1 } }))
      local ran = { a = 0, b = 0 }
      q:handle("k", function(job)
        ran[job.id] = ran[job.id] + 1
        if job.id == "a" and ran.a == 1 then error("once more") end
      end)
      assert(q:schedule("k", 0.05, nil, { id = "a" }))
      assert(q:schedule("k", 0.3, nil, { id = "b" })) -- its claim writes a's retry, due a second after a failed
      assert.is_true(env.wait(function() return ran.b == 1 end))
      assert.equal(1, ran.a) -- (b's claim came before a's retry was due)
      assert.is_true(env.wait(function() return ran.a == 2 end, 5), "the retry did not run")
      assert.equal(1, ran.b)
    end)

    -- A queue its program never closed: the end of the Lua state collects it
    -- (durable.lua's at_collect), and its pending acknowledgements are
    -- written then. A retry due at once asks the window for a pass; the
    -- queue is closed by then, so none is scheduled, and the timer, collected
    -- next, has no timeout to call lost. (A queue left open there scheduled
    -- that pass: "timer collected with 1 pending timeouts".)
    it("are written when the Lua state ends with the queue open, and leave the timer no timeout to lose", function()
      local out, ok = helpers.run_lua(string.format([[
        local hwtimer = require("hwtimer")
        local durable = require("hwtimer.durable")
        local timer = hwtimer.new()
        local o = %s
        o.ack_delay, o.poll, o.sweep, o.backoff = 60, 60, 60, { delay = 0 }
        o.on_error = function() end
        local q = assert(durable.open(timer, o))
        local ran = 0
        q:handle("k", function() ran = ran + 1; error("again") end)
        assert(q:schedule("k", 0, nil, { id = "r" }))
        local limit = hwtimer.now() + 10
        while ran == 0 and hwtimer.now() < limit do timer:run(0.01) end
        print("ran " .. ran .. ", acks pending " .. #q._acks)
      ]], env.child_open()))
      assert.is_true(ok, out)
      assert.equal("ran 1, acks pending 1\nexit=0\n", out) -- (run_lua adds the exit status)
      -- the retry was written: no longer leased to the process that ended
      local r = env.jobs().r
      assert.truthy(r, out)
      assert.equal("", r.owner)
    end)
  end)
end
