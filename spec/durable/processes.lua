-- Processes that share a store: a worker killed with kill -9 holding a job,
-- or amid thousands, and restarted; three workers on one store; a process
-- that opens a store of a year of jobs. Shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines. `env`
-- is the one spec/durable/front.lua takes (describe, it, assert, open,
-- wait, now, jobs), and:
--   start_worker(lease, exit_when_empty, stall, log)
--                   starts a worker process (worker.lua, redis_worker.lua)
--                   that runs the jobs of kind "job" of the spec's store,
--                   recording each run first, and stalls in the job when
--                   `stall`; its output goes to the file `log`. -> its pid
--   ran()           how many runs the workers have recorded
--   runs()          id -> how many times it ran, pid -> how many jobs it ran
--   kill_jobs       how many jobs the kill -9 spec stores
--   child_open()    Lua source of the options with which another process
--                   opens the spec's store: durable.open(timer, <child_open()>)
--   finally(fn)     busted's finally
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local sleep = require("hwtimer_testutil").sleep
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

local sh = helpers.sh

local function alive(pid) return sh("kill -0 " .. pid .. " 2>/dev/null") end

local function wait_exit(pid, secs)
  local limit = hwtimer.now() + secs
  while alive(pid) and hwtimer.now() < limit do sleep(0.05) end
  return not alive(pid)
end

-- A directory for the workers' logs, removed when the spec ends.
local function logdir(finally)
  local dir = helpers.tempdir("hwtimer-durable-w")
  finally(function() sh("rm -rf '" .. dir .. "'") end)
  return dir
end

return function(env)
  local describe, it, assert, finally = env.describe, env.it, env.assert, env.finally

  -- n jobs of kind "job", ids j1 .. jn, due from `from` s on over `spread` s
  local function store_jobs(q, n, from, spread)
    local now = env.now()
    assert(q:batch(function(b)
      for i = 1, n do b:at("job", now + from + spread * i / n, nil, { id = "j" .. i }) end
    end))
  end

  describe("processes", function()
    it("runs a job again after its lease expires when its process was killed with kill -9", function()
      local dir = logdir(finally)
      local q = assert(env.open({ sweep = 0.05 }))
      q:schedule("job", 0, nil, { id = "x" })
      local pid = env.start_worker(2, false, true, dir .. "/w.log") -- lease 2 s, stalls in the job
      local limit = hwtimer.now() + 10 * SLOW
      while env.runs().x == nil and hwtimer.now() < limit do sleep(0.01) end
      assert.equal(1, env.runs().x, helpers.read_file(dir .. "/w.log"))
      local lease_end = env.jobs().x.ready
      assert.is_true(q:get("x").leased)
      sh("kill -9 " .. pid)
      assert.is_true(wait_exit(pid, 5))
      local got, at
      q:handle("job", function(job) got, at = job, env.now() end)
      assert.truthy(env.wait(function() return got end))
      assert.equal(2, got.attempt)
      assert.is_true(at >= lease_end, "ran " .. (lease_end - at) .. " s before its lease expired")
      assert.equal(0, q:pending())
    end)

    local n_kill = env.kill_jobs
    it("kill -9 amid " .. n_kill .. " jobs: after a restart every job ran, twice only if in flight", function()
      local dir = logdir(finally)
      local q = assert(env.open())
      store_jobs(q, n_kill, 0, 0.5 * SLOW)
      local pid = env.start_worker(1, false, false, dir .. "/w1.log")
      local limit = hwtimer.now() + 30 * SLOW
      while env.ran() < n_kill / 3 and hwtimer.now() < limit do sleep(0.002) end
      sh("kill -9 " .. pid)
      assert.is_true(wait_exit(pid, 5))
      local ran_before = env.ran()
      assert.is_true(ran_before >= n_kill / 3 and ran_before < n_kill, "killed after " .. ran_before .. " runs")
      local in_flight = {}
      for id, job in pairs(env.jobs()) do
        if job.owner ~= "" then in_flight[id] = true end
      end
      pid = env.start_worker(1, true, false, dir .. "/w2.log")
      assert.is_true(wait_exit(pid, 60), "the restarted worker did not finish")
      local counts = env.runs()
      local dup, missing, flight = 0, 0, helpers.count(in_flight)
      for i = 1, n_kill do
        local c = counts["j" .. i]
        if not c then
          missing = missing + 1
        elseif c > 1 then
          dup = dup + 1
          assert.is_true(in_flight["j" .. i], "j" .. i .. " ran twice but was not in flight")
        end
      end
      assert.equal(0, missing)
      assert.equal(0, q:pending())
      assert.same({}, env.jobs())
      assert.is_true(dup <= flight)
      print(string.format("\n    kill -9 after %d of %d runs: %d in flight, %d ran twice", ran_before, n_kill, flight, dup))
    end)

    -- (the jobs are due from 1 s on: every worker is up by then)
    it("three processes on one store run every job exactly once", function()
      local dir = logdir(finally)
      local n = 6000
      local q = assert(env.open())
      store_jobs(q, n, 1, 1.5)
      local pids = {}
      for i = 1, 3 do pids[i] = env.start_worker(30, true, false, dir .. "/w" .. i .. ".log") end
      for i = 1, 3 do assert.is_true(wait_exit(pids[i], 60), "worker " .. i .. " did not finish") end
      local counts, by_pid = env.runs()
      for i = 1, n do assert.equal(1, counts["j" .. i], "j" .. i) end
      assert.equal(n, env.ran())
      assert.is_true(helpers.count(by_pid) >= 2, "one process ran every job")
      assert.equal(0, q:pending())
      assert.same({}, env.jobs())
    end)

    -- (the end of a Lua state that never closed its queue, as nginx -s stop
    -- ends a worker's: the queue's finalizer)
    it("a queue left open when its Lua state ends writes its acknowledgements and leaves no timeout to warn of",
      function()
      local s = assert(env.open())
      s:close()
      local out, ok = helpers.run_lua(string.format([[
        local hwtimer = require("hwtimer")
        local durable = require("hwtimer.durable")
        local timer = hwtimer.new()
        local o = %s
        o.ack_delay = 600 -- (acknowledgements wait: the end writes them)
        local q = assert(durable.open(timer, o))
        local ran = false
        q:handle("k", function(job) ran = true print("ran " .. job.id) end)
        assert(q:schedule("k", 0, nil, { id = "now" }))
        assert(q:schedule("k", 30, nil, { id = "later" })) -- (inside the window: a timeout of the queue's)
        local limit = hwtimer.now() + 5
        while not ran and hwtimer.now() < limit do timer:run(0.05) end
        timer:run(0.05)
        print("timeouts " .. timer:pending()) -- (q:pending() would write the acknowledgement)
      ]], env.child_open()))
      assert.is_true(ok, out)
      assert.matches("ran now\ntimeouts [1-9]", out)
      assert.is_nil(out:find("ran later", 1, true), out)
      assert.is_nil(out:find("hwtimer", 1, true), out) -- (no warning, no error)
      local jobs = env.jobs()
      assert.is_nil(jobs.now, "the run's acknowledgement was not written")
      assert.is_table(jobs.later)
    end)

    it("opens a store of jobs over a year (10^6 on Lua 5.4) within the window's memory", function()
      -- (valgrind: a tenth again; the parent's Lua writing 10^5 jobs took 36 s of its run)
      local n = helpers.full_size() and 1000000 or os.getenv("HWT_SLOW") and 10000 or 100000
      local s = assert(env.open())
      local now = env.now()
      for part = 0, n - 1, 100000 do -- (batches of 100,000: one Redis script call each)
        assert(s:batch(function(b)
          for i = part + 1, math.min(part + 100000, n) do b:at("far", now + 3600 + i * 315.36, nil) end
        end))
      end
      s:close()
      local out, ok = helpers.run_lua(string.format([[
        local function rss()
          local f = io.open("/proc/self/status")
          local kb = f:read("*a"):match("VmRSS:%%s*(%%d+)")
          f:close()
          return tonumber(kb)
        end
        local hwtimer = require("hwtimer")
        local durable = require("hwtimer.durable")
        local timer = hwtimer.new()
        collectgarbage()
        local before = rss()
        local q = assert(durable.open(timer, %s))
        q:handle("far", function() end)
        timer:run(0.3)
        collectgarbage()
        print("pending", q:pending(), "in wheel", timer:pending(), "rss growth kB", rss() - before)
      ]], env.child_open()))
      assert.is_true(ok, out)
      local pend, wheel, growth = out:match("pending%s+(%d+)%s+in wheel%s+(%d+)%s+rss growth kB%s+(%-?%d+)")
      assert.equal(n, tonumber(pend), out)
      assert.is_true(tonumber(wheel) <= 3, out)
      assert.is_true(tonumber(growth) < 8 * 1024, out)
    end)
  end)
end
