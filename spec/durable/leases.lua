-- The specs of leases kept while a process works, shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines. `env` gives:
--   open(opts)      a queue on the spec's store (closed by the spec's after_each)
--   timer()         the spec's current timer
--   wait(done, s)   run the timer until done() or s seconds
--   now()           the store's clock (epoch seconds)
--   lease_end(id)   the end of the job's lease as stored (epoch seconds)
--   holder(id)      the process holding the job's lease (nil or "" for none)
--   take(id)        another process takes the job (its lease, for an hour)
local durable = require("hwtimer.durable")
local sleep = require("hwtimer_testutil").sleep
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  -- (busted's words live in the spec file's environment, not in this module's)
  local describe, it, pending, assert = env.describe, env.it, env.pending, env.assert
  describe("leases", function()
    -- (Lua only, no C: left out of the valgrind, sanitizer and rock runs,
    -- whose handlers' seconds would take CI past 15 minutes)
    if os.getenv("HWT_SLOW") or os.getenv("HWT_QUICK") then
      pending("the leases' specs run in the plain runs of each Lua")
      return
    end

    -- Eight jobs due together make one batch, in this order; their handlers
    -- take 0.05 s each (blocking), twice the 0.2 s lease in all. Each handler
    -- looks at its own job in the store, from a connection of its own.
    local function run_batch(on_start)
      local ran, seen = {}, {}
      local q = assert(env.open({ lease = 0.2 * SLOW, poll = 60, sweep = 60 }))
      local due = env.now() + 0.05
      assert(q:batch(function(b)
        for i = 1, 8 do b:at("k", due + i * 2e-6, nil, { id = "j" .. i }) end
      end))
      q:handle("k", function(job)
        seen[job.id] = { left = env.lease_end(job.id) - env.now(), holder = env.holder(job.id),
                         now = env.now(), last_end = env.lease_end("j8") }
        if on_start then on_start(job) end
        ran[#ran + 1] = job.id
        sleep(0.05 * SLOW)
      end)
      return q, ran, seen
    end

    it("are extended for the jobs of a batch once half the lease has passed", function()
      local stored -- at the last job's start: what the store holds of the seven that ran
      local q, ran, seen -- (q is set before any handler runs: they run in env.wait)
      q, ran, seen = run_batch(function(job)
        if job.id ~= "j8" then return end
        stored = {}
        for i = 1, 7 do stored[i] = durable.engine(q):get("j" .. i) or false end
      end)
      assert.is_true(env.wait(function() return #ran == 8 end, 10 * SLOW))
      for i = 1, 8 do
        local s = seen["j" .. i]
        assert.is_true(s.holder ~= nil and s.holder ~= "", "j" .. i .. " not leased")
        assert.is_true(s.left > 0, "j" .. i .. " started " .. -s.left .. " s after its lease ended")
      end
      for i = 1, 7 do -- ran, each acknowledged before the next handler blocked the loop
        assert.is_false(stored[i], "j" .. i .. " ran and was still stored when j8 started")
      end
      -- and not before: a start less than half the lease after the claim
      -- (the first lease's end less the lease) leaves j8's lease as it was
      local claimed, checked = seen.j1.last_end - 0.2 * SLOW, 0
      for i = 2, 8 do
        local s = seen["j" .. i]
        if s.now - claimed < 0.08 * SLOW then
          checked = checked + 1
          assert.equal(seen.j1.last_end, s.last_end, "j8's lease extended at j" .. i .. "'s start, "
            .. s.now - claimed .. " s after the claim")
        end
      end
      assert.is_true(checked > 0, "no job started within 0.08 s of the claim: j2 at +" .. seen.j2.now - claimed)
      assert.is_true(env.wait(function() return q:pending() == 0 end, 5))
    end)

    -- The renewal's timeout is armed by a claim and lapses once nothing is
    -- held: an idle queue leaves on the timer only what it had before any
    -- job ran (its poll and sweep), not a renewal ticking every third of the
    -- lease for nothing.
    it("leave nothing ticking on the timer once the last job held is done", function()
      local q = assert(env.open({ lease = 0.2 * SLOW, poll = 60, sweep = 60 }))
      local timer = env.timer()
      env.wait(function() return false end, 0.05)
      local idle = timer:pending()
      local done = 0
      q:handle("k", function() done = done + 1 end)
      for i = 1, 3 do assert(q:schedule("k", 0.01, nil, { id = "r" .. i })) end
      assert.is_true(env.wait(function() return done == 3 and q:pending() == 0 end, 5 * SLOW))
      -- (a renewal armed by the claim ticks at most once more, a third of the lease later)
      env.wait(function() return false end, 0.2 * SLOW)
      assert.equal(idle, timer:pending(), "timeouts left on the timer by an idle queue")
    end)

    -- A handler that reads four lines from a socket of the host, one every
    -- 0.1 s (0.4 s, near three leases of 0.15 s), noting the lease left after
    -- each; `host` runs the loop with the peer that writes them until done.
    local function waits_on_io(host, read_line)
      local left, done, calls = {}, false, 0
      local q = assert(env.open({ lease = 0.15 * SLOW, poll = 60, sweep = 60 }))
      local eng, renewals = durable.engine(q), {}
      local renew = eng.renew
      eng.renew = function(...)
        renewals[#renewals + 1] = env.now()
        return renew(...)
      end
      q:handle("k", function(job)
        calls = calls + 1
        for _ = 1, 4 do
          assert.equal("tick", read_line())
          left[#left + 1] = env.lease_end(job.id) - env.now()
        end
        done = true
      end)
      assert(q:schedule("k", 0.02))
      host(function() return done end)
      assert.is_true(done)
      assert.equal(1, calls, "the job ran again while its lease held")
      for i = 1, 4 do assert.is_true(left[i] > 0, "after read " .. i .. ": lease ended " .. -left[i] .. " s ago") end
      -- renewed every third of the lease, not more often (0.9: the store's
      -- clock and the timer's may differ by a rounding)
      assert.is_true(#renewals >= 2, #renewals .. " renewals")
      for i = 2, #renewals do
        local gap = renewals[i] - renewals[i - 1]
        assert.is_true(gap >= 0.9 * 0.15 * SLOW / 3, "renewed again after " .. gap .. " s")
      end
    end

    -- (busted's pending here, beside `it`: inside one it is not the same function)
    local function io_spec(name, module, fn)
      local title = "are extended while a handler waits on a " .. name .. " socket longer than the lease"
      if not pcall(require, module) then
        pending(title .. ": " .. module .. " is not installed for " .. _VERSION)
      elseif _VERSION == "Lua 5.1" and not jit then
        pending(title .. ": Lua 5.1's pcall is not yieldable, a handler cannot wait on a socket")
      else
        it(title, fn)
      end
    end

    io_spec("cqueues", "cqueues", function()
      local cqueues, csocket = require("cqueues"), require("cqueues.socket")
      local cq, a, b = cqueues.new(), csocket.pair()
      -- (a handler left without lines fails its read, rather than waiting
      -- for ever: the loop would never end)
      a:settimeout(2 * SLOW)
      local attached = require("hwtimer.cqueues").attach(env.timer(), cq)
      waits_on_io(function(done)
        cq:wrap(function() -- the peer
          for _ = 1, 4 do
            cqueues.sleep(0.1 * SLOW)
            assert(b:write("tick\n"))
            assert(b:flush())
          end
        end)
        cq:wrap(function()
          local limit = cqueues.monotime() + 10 * SLOW
          while not done() and cqueues.monotime() < limit do cqueues.sleep(0.01) end
          attached.detach()
        end)
        assert(cq:loop())
      end, function() return a:read("*l") end)
    end)

    io_spec("copas", "copas", function()
      local copas, socket, glue = require("copas"), require("socket"), require("hwtimer.copas")
      local server = assert(socket.bind("127.0.0.1", 0))
      local _, port = server:getsockname()
      local peer, raw, conn
      copas.addserver(server, function(skt) -- the peer: held open until the handler is done
        peer = skt
        copas.wrap(skt):receive("*l")
      end)
      -- (Debian's copas 2 has no copas.sleep: a timeout of the timer writes)
      local ticks = env.timer():every(0.1 * SLOW, function() if peer then peer:send("tick\n") end end)
      waits_on_io(function(done)
        local limit = socket.gettime() + 10 * SLOW
        while not done() and socket.gettime() < limit do glue.step(env.timer()) end
        ticks:cancel()
        if raw then raw:close() end
        if copas.removeserver then copas.removeserver(server) end -- (copas 2 has none either)
      end, function()
        if not conn then
          raw = socket.tcp()
          assert(copas.connect(raw, "127.0.0.1", port))
          conn = copas.wrap(raw)
        end
        return conn:receive("*l")
      end)
    end)

    it("leave a job that another process took meanwhile to it", function()
      local q, ran = run_batch(function(job)
        if job.id == "j1" then env.take("j6") end
      end)
      assert.is_true(env.wait(function() return #ran == 7 end, 10 * SLOW), table.concat(ran, " "))
      env.wait(function() return false end, 0.1 * SLOW)
      assert.same({ "j1", "j2", "j3", "j4", "j5", "j7", "j8" }, ran)
      assert.equal("other", env.holder("j6"))
      -- (and hold it no more: a renewal that found it taken let it go)
      assert.same({ held = 0, running = 0 }, { held = q:stats().held, running = q:stats().running })
    end)
  end)
end
