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

local count = require("spec.helpers").count
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
  end)
end
