-- What q:cancel(id) promises, shared by the SQLite (spec/durable/01-sqlite) and Redis
-- (spec/durable/03-redis) engines: true means the job does not start, whoever claimed it.
-- `env` is the one spec/durable/leases.lua takes.
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert
  describe("q:cancel and claimed jobs", function()
    -- Two jobs due together are claimed in one pass, a before b.
    local function two_due(q)
      local due = env.now() + 0.05
      assert(q:batch(function(b)
        b:at("k", due, nil, { id = "a" })
        b:at("k", due + 2e-6, nil, { id = "b" })
      end))
    end

    it("from a handler, of a job the same pass claimed: true, and it never starts", function()
      local q = assert(env.open({ sweep = 0.05 }))
      local ran, cancelled, err = {}, nil, nil
      q:handle("k", function(job)
        ran[#ran + 1] = job.id
        if job.id == "a" then cancelled, err = q:cancel("b") end
      end)
      two_due(q)
      assert.is_true(env.wait(function() return #ran >= 1 end, 5 * SLOW))
      -- past the pass, the acknowledgements, and a few sweeps that would find b
      env.wait(function() return false end, 0.4 * SLOW)
      assert.is_true(cancelled, tostring(err))
      assert.same({ "a" }, ran)
      assert.is_nil(q:get("b"))
      assert.equal(0, q:pending())
    end)

    it("of a job another process holds under a live lease: nil and a message; the job stays", function()
      local q = assert(env.open({ poll = 60, sweep = 60 }))
      assert(q:schedule("k", 30, nil, { id = "x" }))
      env.take("x")
      local ok, err = q:cancel("x")
      assert.is_nil(ok)
      assert.matches("^hwtimer.durable: job x is in flight in another process %(leased for [%d.]+ s more%)$", err)
      assert.is_true(q:get("x").leased)
      assert.equal(1, q:pending())
    end)

    it("of a pending job: true, and it is gone", function()
      local q = assert(env.open({ poll = 60, sweep = 60 }))
      local ran = false
      q:handle("k", function() ran = true end)
      assert(q:schedule("k", 30, nil, { id = "y" }))
      assert.is_true(q:cancel("y"))
      assert.is_nil(q:get("y"))
      assert.is_false(ran)
    end)
  end)
end
