-- What a program sees of a queue (lua/hwtimer/durable.lua): q:schedule, q:at,
-- q:every, q:cancel, q:get, q:pending, q:handle and q:close; how its jobs run
-- is spec/durable/runs.lua. Shared by the SQLite (spec/durable/01-sqlite) and
-- Redis (spec/durable/03-redis) engines. `env` is the one
-- spec/durable/leases.lua takes (describe, it, assert, open, timer, wait,
-- now), and:
--   jobs(queue)     the jobs of `queue` (default "default") as the store holds
--                   them, read on a connection of its own:
--                   id -> { owner = the lease's holder or "", ready = epoch }
--   resolution      how far a due time read back may be from the one given
--                   (0: the same number; Redis keeps whole microseconds)
local sleep = require("hwtimer_testutil").sleep
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert
  local function wait(done, secs) return env.wait(done, secs) end
  local function idle(secs) env.wait(function() return false end, secs) end

  describe("q:schedule", function()
    it("runs the handler with the job once it is due by the store's clock, never earlier", function()
      local q = assert(env.open())
      local got, at
      q:handle("close_order", function(job) got, at = job, env.now() end)
      local before = env.now()
      local id = assert(q:schedule("close_order", 0.2, "order 17"))
      assert.is_string(id)
      assert.equal(26, #id)
      assert.truthy(wait(function() return got end))
      assert.equal(id, got.id)
      assert.equal("close_order", got.kind)
      assert.equal("order 17", got.payload)
      assert.equal(1, got.attempt)
      assert.is_true(got.due >= before + 0.2 and got.due <= before + 0.25, "due " .. (got.due - before))
      assert.is_true(at >= got.due, "ran early")
      assert.is_nil(q:get(id))
      assert.equal(0, q:pending())
    end)

    it("is durable when it returns: another connection sees the job", function()
      local q = assert(env.open())
      assert.equal("order-1", q:schedule("k", 60, nil, { id = "order-1" }))
      assert.truthy(env.jobs()["order-1"])
    end)

    it("keeps a binary payload and nil apart from the empty string", function()
      local q = assert(env.open())
      local bytes = "a\0b\r\n" .. string.char(255) .. "{x}:"
      q:schedule("k", 60, bytes, { id = "b" })
      q:schedule("k", 60, "", { id = "e" })
      q:schedule("k", 60, nil, { id = "n" })
      assert.equal(bytes, q:get("b").payload)
      assert.equal("", q:get("e").payload)
      assert.is_nil(q:get("n").payload)
    end)

    -- (with ids made and given: with Redis, the intake's path and put's)
    it("keeps kinds and payloads of any length, and a due time before 1970", function()
      local q = assert(env.open())
      local made, cases = {}, {}
      for _, n in ipairs({ 0, 1, 31, 32, 255, 256, 65535, 70000 }) do
        -- (a kind's length with another payload's: each long one beside a short one)
        local kind, payload = "k" .. string.rep("i", ({ 300, 254, 31, 0, 30, 299, 1, 40 })[#cases / 2 + 1]),
          string.rep(string.char(n % 256), n)
        cases[#cases + 1] = { kind = kind, payload = payload }
        made[#made + 1] = assert(q:schedule(kind, 60, payload))
        assert(q:schedule(kind, 60, payload, { id = "given" .. n }))
        cases[#cases + 1] = { kind = kind, payload = payload, id = "given" .. n }
      end
      for i, c in ipairs(cases) do
        local job = q:get(c.id or made[(i + 1) / 2])
        assert.equal(c.kind, job.kind)
        assert.equal(c.payload, job.payload)
      end
      local old = assert(q:at("old", -86400.25, "x"))
      assert(q:at("old", -1, nil, { id = "o" }))
      assert.same({ "old", -86400.25, "x" }, { q:get(old).kind, q:get(old).due, q:get(old).payload })
      assert.same({ "old", -1 }, { q:get("o").kind, q:get("o").due })
    end)

    it("replaces the job when opts.id exists, even of another kind", function()
      local q = assert(env.open())
      local runs = {}
      q:handle("k", function(job) runs[#runs + 1] = job.payload end)
      q:handle("other", function(job) runs[#runs + 1] = "other " .. job.payload end)
      q:schedule("k", 0.1, "first", { id = "x" })
      q:schedule("k", 0.2, "second", { id = "x" })
      assert.equal(1, q:pending())
      assert.equal("second", q:get("x").payload)
      q:schedule("other", 0.25, "third", { id = "x" })
      assert.equal(1, q:pending())
      idle(0.5)
      assert.same({ "other third" }, runs)
    end)

    it("takes a delay of 0 or less as due now", function()
      local q = assert(env.open())
      local n = 0
      q:handle("k", function() n = n + 1 end)
      q:schedule("k", 0)
      q:schedule("k", -5)
      assert.is_true(wait(function() return n == 2 end))
    end)

    -- Ids in the order they were made keep the store's id index growing at
    -- its right edge (docs/durable.md: batched schedules).
    it("makes ids of 26 hex digits, unique, that sort in the order they were made", function()
      local q = assert(env.open())
      local ids, seen = {}, {}
      local n = os.getenv("HWT_SLOW") and 2000 or 20000 -- (valgrind: 49 s of its run at 20,000)
      assert(q:batch(function(b)
        for i = 1, n do ids[i] = b:schedule("k", 3600) end
      end))
      for i, id in ipairs(ids) do
        assert.matches("^%x+$", id)
        assert.equal(26, #id)
        assert.is_nil(seen[id], "id made twice: " .. id)
        seen[id] = true
        if i > 1 then assert.is_true(id > ids[i - 1], ids[i - 1] .. " then " .. id) end
      end
      local t0 = math.floor(env.now() * 1000)
      assert.is_true(math.abs(tonumber(ids[#ids]:sub(1, 12), 16) - t0) < 60000 * SLOW, "time part")
      assert.equal(n, q:pending())
    end)

    it("raises on bad arguments, naming them", function()
      local q = assert(env.open())
      assert.has_error(function() q:schedule(nil, 1) end,
        "bad argument #1 to 'schedule' (non-empty string expected, got nil)")
      assert.has_error(function() q:schedule("", 1) end,
        "bad argument #1 to 'schedule' (non-empty string expected, got string)")
      assert.has_error(function() q:schedule("k", "1") end,
        "bad argument #2 to 'schedule' (number of seconds from -1e9 to 1e9 expected, got string)")
      assert.has_error(function() q:schedule("k", 0 / 0) end)
      assert.has_error(function() q:schedule("k", 1e10) end,
        "bad argument #2 to 'schedule' (number of seconds from -1e9 to 1e9 expected, got 1e+10)")
      assert.has_error(function() q:schedule("k", -1e30) end,
        "bad argument #2 to 'schedule' (number of seconds from -1e9 to 1e9 expected, got -1e+30)")
      assert.has_error(function() q:schedule("k", 1, {}) end,
        "bad argument #3 to 'schedule' (string or nil expected, got table)")
      assert.has_error(function() q:schedule("k", 1, nil, 5) end,
        "bad argument #4 to 'schedule' (table expected, got number)")
      assert.has_error(function() q:schedule("k", 1, nil, { key = "x" }) end,
        "bad argument #4 to 'schedule' (unknown option 'key')")
      assert.has_error(function() q:schedule("k", 1, nil, { id = 5 }) end,
        "bad argument #4 to 'schedule' (option 'id': non-empty string expected, got number)")
      assert.has_error(function() q.schedule({}, "k", 1) end,
        "calling 'schedule' on bad self (hwtimer.durable expected, got table)")
      assert.equal(0, q:pending())
    end)
  end)

  describe("q:at", function()
    -- (assert.near with a tolerance of 0 asks for the same number)
    it("runs at epoch seconds of the store's clock, due when it was told", function()
      local q = assert(env.open())
      local got, at
      q:handle("k", function(job) got, at = job, env.now() end)
      local when = env.now() + 0.15
      local id = q:at("k", when, "p")
      assert.near(os.time(), q:get(id).due, 2)
      assert.near(when, q:get(id).due, env.resolution)
      assert.truthy(wait(function() return got end))
      assert.near(when, got.due, env.resolution)
      assert.is_true(at >= got.due, "ran early")
      local expected = "bad argument #2 to 'at' (epoch seconds from -9e9 to 9e9 expected, got "
      assert.has_error(function() q:at("k", "soon") end, expected .. "string)")
      assert.has_error(function() q:at("k", math.huge) end, expected .. "inf)")
      -- past 2^53 microseconds a Redis score no longer tells them apart
      -- (1e23 once spun a script for good: Redis answered BUSY to all)
      assert.has_error(function() q:at("k", 1e23) end, expected .. "1e+23)")
      assert.has_error(function() q:at("k", -1e10) end, expected .. "-1e+10)")
      assert.truthy(q:at("k", 9e9)) -- the year 2255 is fine
      assert.truthy(q:cancel(assert(q:at("k", -9e9))) ~= nil)
    end)
  end)

  describe("q:every", function()
    it("runs a durable periodic job until cancelled", function()
      local q = assert(env.open())
      local runs = {}
      q:handle("tick", function(job) runs[#runs + 1] = job end)
      local id = q:every("tick", 0.1, "hb")
      assert.is_true(wait(function() return #runs >= 3 end))
      assert.equal(1, q:pending())
      for _, job in ipairs(runs) do
        assert.equal(id, job.id)
        assert.equal(1, job.attempt)
        assert.equal(0.1, job.every)
      end
      assert.near(0.1, runs[2].due - runs[1].due, 1e-6)
      assert.is_true(q:cancel(id))
      local n = #runs
      idle(0.3)
      assert.equal(n, #runs)
      assert.has_error(function() q:every("tick", 0) end,
        "bad argument #2 to 'every' (positive number of seconds up to 1e9 expected, got 0)")
    end)

    it("runs once, not once per period, after missing several", function()
      local q = assert(env.open())
      local id = q:every("tick", 0.1)
      local due = q:get(id).due
      q:close()
      sleep(0.55) -- five periods with no process
      q = assert(env.open())
      local runs, first_at = {}, nil
      q:handle("tick", function(job)
        runs[#runs + 1] = job
        first_at = first_at or env.now()
      end)
      assert.is_true(wait(function() return #runs >= 1 end, 1))
      idle(0.05)
      assert.near(due, runs[1].due, env.resolution)
      for i = 2, #runs do -- any later run is of a period after the restart
        assert.is_true(runs[i].due > first_at - 0.002, "a missed period ran again")
      end
      local next_due = q:get(id).due
      assert.is_true(next_due > first_at and next_due <= env.now() + 0.1 + env.resolution)
      -- a whole number of periods after `due`, within what a double holds
      -- at epoch magnitude (~2.4e-7 s; 1e-6 periods failed once)
      local periods = (next_due - due) / 0.1
      assert.near(math.floor(periods + 0.5), periods, 1e-4)
    end)
  end)

  describe("q:cancel", function()
    it("returns true once, and the job never runs", function()
      local q = assert(env.open())
      local ran = false
      q:handle("k", function() ran = true end)
      local id = q:schedule("k", 0.1)
      assert.is_true(q:cancel(id))
      assert.is_false(q:cancel(id))
      assert.is_false(q:cancel("unknown"))
      assert.is_nil(q:get(id))
      -- past its due time and the sweep (1 s), either of which would run it
      idle(1.3)
      assert.is_false(ran)
      assert.equal(0, q:pending())
      assert.has_error(function() q:cancel(nil) end, "bad argument #1 to 'cancel' (non-empty string expected, got nil)")
    end)
  end)

  describe("q:get, q:pending", function()
    it("shows a job, nil once ran or unknown; counts all processes' jobs", function()
      local q = assert(env.open())
      local q2 = assert(env.open()) -- its own connection and owner: another process to the store
      local id = q:schedule("k", 30, "p", { id = "a" })
      q2:schedule("other", 30, nil, { id = "b" })
      assert.equal(2, q:pending())
      assert.equal(2, q2:pending())
      local job = q:get(id)
      assert.same({ "a", "k", "p", 0 }, { job.id, job.kind, job.payload, job.attempt })
      assert.is_nil(job.dead)
      assert.is_nil(job.every)
      assert.equal("other", q:get("b").kind)
      assert.is_nil(q:get("nope"))
      assert.has_error(function() q:get(1) end, "bad argument #1 to 'get' (non-empty string expected, got number)")
    end)

    it("keeps queues apart in one store", function()
      local q = assert(env.open({ queue = "mail" }))
      local q2 = assert(env.open({ queue = "billing" }))
      q:schedule("k", 30, nil, { id = "same" })
      q2:schedule("k", 30, "other", { id = "same" })
      q2:schedule("k", 30, nil, { id = "billing only" })
      assert.equal(1, q:pending())
      assert.equal(2, q2:pending())
      assert.is_nil(q:get("same").payload)
      assert.equal("other", q2:get("same").payload)
      assert.is_nil(q:get("billing only"))
    end)
  end)

  describe("q:handle, q:close", function()
    it("raises on bad arguments and after close", function()
      local q = assert(env.open())
      assert.has_error(function() q:handle(1, print) end,
        "bad argument #1 to 'handle' (non-empty string expected, got number)")
      assert.has_error(function() q:handle("k", 1) end, "bad argument #2 to 'handle' (function expected, got number)")
      local base = env.timer():pending()
      q:schedule("k", 5)
      q:close()
      q:close()
      assert.is_true(env.timer():pending() < base)
      for _, m in ipairs({ "schedule", "at", "every", "cancel", "get", "pending", "dead", "handle", "batch",
                           "counts", "jobs", "retry", "run_now", "schedules" }) do
        assert.has_error(function() q[m](q, "k", 1) end, "attempt to use a closed queue")
        -- (at the caller's line: this one)
        local line
        local ok, err = pcall(function()
          line = debug.getinfo(1, "l").currentline; local r = q[m](q, "k", 1); return r -- luacheck: ignore 571
        end)
        assert.is_false(ok)
        assert.matches("front%.lua:" .. line .. ": attempt to use a closed queue$", err, nil, false, m)
      end
      assert.is_table(q:stats()) -- (this process's runs: no store read)
      assert.is_nil(q:wake()) -- (nothing to wake)
    end)
  end)
end
