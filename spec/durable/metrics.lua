-- A queue's figures for monitoring: q:stats() (this process's runs by kind
-- and outcome) and hwtimer.metrics' rendering of them with the store's jobs
-- by state and kind, checked by promtool. Shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines. `env`
-- as spec/durable/ops.lua takes it (describe, it, assert, open, wait, now).
local helpers = require("spec.helpers")
local metrics = require("hwtimer.metrics")

local sample = helpers.prom_sample

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert

  local open = env.quiet_open -- (shared.lua)

  describe("figures for monitoring", function()
    it("q:stats counts this process's runs by kind and outcome", function()
      local q = open({ attempts = 2, backoff = { delay = 0.01 } })
      assert.same({ runs = {}, held = 0, running = 0 }, q:stats())
      q:handle("ok", function() end)
      q:handle("bad", function() error("no", 0) end)
      for i = 1, 3 do assert(q:schedule("ok", 0, nil, { id = "ok" .. i })) end
      assert(q:schedule("bad", 0, nil, { id = "bad1" }))
      assert.truthy(env.wait(function()
        local r = q:stats().runs
        return r.ok and r.ok.succeeded == 3 and r.bad and r.bad.dead == 1
      end))
      local s = q:stats()
      assert.same({ ok = { succeeded = 3, retried = 0, dead = 0 }, bad = { succeeded = 0, retried = 1, dead = 1 } }, s.runs)
      assert.equal(0, s.running)
      assert.truthy(env.wait(function() return q:stats().held == 0 end)) -- once the acks are written
    end)

    it("renders the store's jobs by kind and state and the runs, as promtool accepts", function()
      local q = open({ attempts = 1 })
      q:handle("bad", function() error("no", 0) end)
      assert(q:schedule("bad", 0, nil, { id = "dead1" }))
      assert.truthy(env.wait(function() local j = q:get("dead1") return j and j.dead end))
      q:handle("bad", nil)
      local now = env.now()
      assert(q:at("later", now + 3600, nil, { id = "l1" }))
      assert(q:at("later", now + 3600, nil, { id = "l2" }))
      assert(q:at("late", now - 5, nil, { id = "d1" }))  -- due: nothing here handles "late"
      local text = metrics.render({ queues = { orders = q }, labels = { instance = "a" } })
      local ok, out = helpers.promtool(text)
      assert.is_true(ok, out .. "\n" .. text)
      local function v(s) return sample(text, s) end
      assert.equal(1, v('hwtimer_store_up{instance="a",queue="orders"}'))
      assert.equal(2, v('hwtimer_jobs{instance="a",kind="later",queue="orders",state="pending"}'))
      assert.equal(0, v('hwtimer_jobs_due{instance="a",kind="later",queue="orders"}'))
      assert.equal(1, v('hwtimer_jobs{instance="a",kind="late",queue="orders",state="pending"}'))
      assert.equal(1, v('hwtimer_jobs_due{instance="a",kind="late",queue="orders"}'))
      assert.equal(1, v('hwtimer_jobs{instance="a",kind="bad",queue="orders",state="dead"}'))
      assert.equal(0, v('hwtimer_jobs{instance="a",kind="bad",queue="orders",state="leased"}'))
      assert.equal(1, v('hwtimer_job_runs_total{instance="a",kind="bad",outcome="dead",queue="orders"}'))
      -- without the store: no round trip, the process's runs only
      local runs_only = metrics.render({ queues = { orders = q }, store = false })
      assert.is_nil(runs_only:find("hwtimer_jobs{", 1, true))
      assert.equal(1, sample(runs_only, 'hwtimer_job_runs_total{kind="bad",outcome="dead",queue="orders"}'))
      -- without the runs: the store's figures only
      local store_only = metrics.render({ queues = { orders = q }, runs = false })
      assert.is_nil(store_only:find("hwtimer_job_runs_total{", 1, true))
      assert.equal(1, sample(store_only, 'hwtimer_jobs{kind="bad",queue="orders",state="dead"}'))
      for _, id in ipairs({ "dead1", "l1", "l2", "d1" }) do q:cancel(id) end
    end)

    -- Kinds as the store gives them back: bytes that are not UTF-8 are
    -- written as the text \xHH (backslashes doubled), so the scrape stays
    -- valid; a run of a kind shows under the same label value as its jobs.
    it("writes a kind that is not valid UTF-8 as a valid label value, as promtool accepts", function()
      local q = open({ attempts = 1 })
      local kinds = {
        { "\255", [[\\xff]] }, { "\192\175", [[\\xc0\\xaf]] }, { "\237\160\128", [[\\xed\\xa0\\x80]] },
        { "\128x", [[\\x80x]] }, { "\244\144\128\128", [[\\xf4\\x90\\x80\\x80]] },
        { 'a"\\\n\254', [[a\"\\\\\n\\xfe]] }, { "k\0z", "k\0z" }, { "\195\169", "\195\169" },
      }
      local now = env.now()
      for i, k in ipairs(kinds) do assert(q:at(k[1], now + 3600, nil, { id = "h" .. i })) end
      q:handle("\255", function() end)
      assert(q:schedule("\255", 0, nil, { id = "run1" }))
      assert.truthy(env.wait(function() local r = q:stats().runs["\255"] return r and r.succeeded == 1 end))
      local text = metrics.render({ queues = { orders = q } })
      local ok, out = helpers.promtool(text)
      assert.is_true(ok, out .. "\n" .. text)
      for _, k in ipairs(kinds) do
        assert.equal(1, sample(text, 'hwtimer_jobs{kind="' .. k[2] .. '",queue="orders",state="pending"}'), text)
      end
      assert.equal(1, sample(text, [[hwtimer_job_runs_total{kind="\\xff",outcome="succeeded",queue="orders"}]]))
      for i = 1, #kinds do q:cancel("h" .. i) end
    end)

    it("refuses a closed queue when its store is to be read, and renders its runs without", function()
      local q = open({})
      q:close()
      assert.has_error(function() metrics.render({ queues = { orders = q } }) end,
        "bad argument #1 to 'render' (field 'queues': queue 'orders': an open hwtimer.durable queue expected, " ..
        "got a closed one (store = false renders its runs only))")
      local text = metrics.render({ queues = { orders = q }, store = false })
      local ok, out = helpers.promtool(text)
      assert.is_true(ok, out .. "\n" .. text)
      assert.is_nil(text:find("hwtimer_store_up", 1, true))
    end)

    it("refuses a constant label the queue's samples write", function()
      local q = open({})
      for _, key in ipairs({ "queue", "kind", "state", "outcome" }) do
        assert.has_error(function() metrics.render({ queues = { orders = q }, labels = { [key] = "x" } }) end,
          "bad argument #1 to 'render' (field 'labels': key '" .. key .. "' is reserved (hwtimer.metrics writes it))")
      end
    end)
  end)
end
