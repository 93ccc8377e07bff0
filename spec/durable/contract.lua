-- What an engine provides the front (lua/hwtimer/durable/engine.lua), spec'd
-- against the engine itself, through durable.engine(q); shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines, and by any engine to come. The queue
-- is never dispatched here: nothing of the front runs while the engine is
-- called. `env` is the one spec/durable/leases.lua takes.
local durable = require("hwtimer.durable")
local engine_api = require("hwtimer.durable.engine")

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert
  describe("the engine contract", function()
    local e, hi
    local function fresh()
      local q = assert(env.open({ poll = 60, sweep = 60 }))
      e = durable.engine(q)
      hi = e:now() + 3600
      return e
    end

    local function near(a, b) return math.abs(a - b) < 0.01 end
    -- x was read off the store's clock between lo and hi (a put's `now`):
    -- bracketed, since a slow disk can take more than `near` between them
    local function between(x, low, high) return x > low - 0.002 and x < high + 0.002 end

    -- one run of kind k due a second ago, claimed: its row
    local function claimed(id)
      assert(e:handle("k", true))
      assert(e:put(id, "k", "p", e:now() - 1, false, nil, true))
      local rows, n = e:claim({}, e:now(), 30, 10, hi)
      assert.equal(1, n)
      return rows[1]
    end

    it("is what the engine module provides", function()
      fresh()
      assert.is_nil(engine_api.missing(getmetatable(e).__index))
      assert.is_string(e.name)
      assert.is_true(math.abs(e:now() - os.time()) < 5)
    end)

    it("put, get and cancel a job by id, with named fields", function()
      fresh()
      local t0 = e:now()
      local key, due = e:put("j1", "k", "pay", 60, true, nil, true)
      assert.truthy(key)
      assert.is_true(between(due, t0 + 60, e:now() + 60))
      local job = e:get("j1")
      assert.same({ "j1", "k", "pay", 0 }, { job.id, job.kind, job.payload, job.attempt })
      assert.is_true(near(job.due, due))
      assert.is_nil(job.dead)
      assert.is_nil(job.leased)
      assert.equal(1, e:pending())
      assert.truthy(e:cancel("j1"))
      assert.is_nil(e:get("j1"))
      assert.is_false(e:cancel("j1"))
      assert.equal(0, e:pending())
    end)

    it("range gives the marks { key, ready } of the runs inside it", function()
      fresh()
      local now = e:now()
      for i, d in ipairs({ 10, 20, 30 }) do assert(e:put("r" .. i, "k", nil, now + d, false, nil, true)) end
      local marks, n = e:range(now + 15, now + 40)
      assert.equal(2, n)
      table.sort(marks, function(a, b) return a[2] < b[2] end)
      assert.is_true(near(marks[1][2], now + 20) and near(marks[2][2], now + 30))
      assert.truthy(marks[1][1])
    end)

    it("claim leases a handled due run as a row with named fields; renew keeps it; done deletes it", function()
      fresh()
      local before = e:now()
      local row = claimed("c1")
      assert.same({ "c1", "k", "p", 1 }, { row.id, row.kind, row.payload, row.attempt })
      assert.is_true(between(row.due, before - 1, e:now() - 1))
      assert.truthy(row.key)
      assert.is_nil(row.every)
      assert.is_true(e:get("c1").leased)
      local kept = assert(e:renew({ row }, 30))
      assert.is_true(kept.c1)
      assert(e:ack({ { what = "done", row = row, now = e:now() } }, hi))
      assert.is_nil(e:get("c1"))
    end)

    -- Other processes claim by the store's index of leases (Redis: a sorted
    -- set per kind, apart from the job): a renewal must move the lease's
    -- end there too, or another process takes the job early, or never.
    it("renew moves the lease's end where other processes claim by it", function()
      local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1
      local lease = 0.3 * SLOW
      fresh()
      assert(e:handle("k", true))
      assert(e:put("l1", "k", "p", e:now() - 1, false, nil, true))
      local rows, n = e:claim({}, e:now(), lease, 10, hi)
      assert.equal(1, n)
      local other = durable.engine(assert(env.open({ poll = 60, sweep = 60 })))
      assert(other:handle("k", true))
      local renewed_at = e:now()
      assert.is_true(assert(e:renew(rows, 3 * lease)).l1)
      local function wait_until(t) while e:now() < t do require("socket").sleep(0.01) end end
      wait_until(renewed_at + 1.5 * lease) -- past the first lease, inside the renewed one
      local _, early = other:claim({}, other:now(), lease, 10, hi)
      assert.equal(0, early, "claimed by another process inside its renewed lease")
      wait_until(renewed_at + 3.5 * lease) -- its owner renews no more, as a process that died
      local taken, late = other:claim({}, other:now(), lease, 10, hi)
      assert.equal(1, late, "never claimed again after its renewed lease ended")
      assert.equal("l1", taken[1].id)
      assert.equal(2, taken[1].attempt)
    end)

    it("claims only handled kinds, and none not due", function()
      fresh()
      assert(e:put("x1", "other", nil, e:now() - 1, false, nil, true))
      assert(e:put("x2", "k", nil, e:now() + 60, false, nil, true))
      assert(e:handle("k", true))
      local _, n = e:claim({}, e:now(), 30, 10, hi)
      assert.equal(0, n)
    end)

    it("retry keeps the attempts and the job, due after the backoff; bury makes it dead", function()
      fresh()
      local row = claimed("t1")
      local marks = assert(e:ack({ { what = "retry", row = row, arg = 60, now = e:now() } }, hi))
      local job = e:get("t1")
      assert.equal(1, job.attempt)
      assert.is_nil(job.leased)
      assert.equal(1, #marks) -- its new run lies inside hi
      row = claimed("t2")
      assert(e:ack({ { what = "bury", row = row, arg = "boom", now = e:now() } }, hi))
      local dead = assert(e:dead())
      assert.equal(1, #dead)
      assert.same({ "t2", true, "boom" }, { dead[1].id, dead[1].dead, dead[1].error })
      assert.equal(1, e:pending()) -- t1; a dead job is not pending
    end)

    it("next puts a schedule's run at the time the front gives, its runs counted; retry keeps its run", function()
      fresh()
      assert(e:handle("k", true))
      local due = e:now() - 0.5
      local sched = { missed = "all", limit = 9, stop = due + 3600 }
      assert(e:put("p1", "k", nil, due, false, 2, true, sched))
      local rows = e:claim({}, e:now(), 30, 10, hi)
      local row = rows[1]
      assert.same({ 2, "all", 9, 0, nil }, { row.every, row.missed, row.limit, row.runs, row.late })
      assert.is_true(near(row.at, due) and near(row.stop, due + 3600))
      assert(e:ack({ { what = "retry", row = row, arg = 0, now = e:now(), at = due + 2, late = true } }, hi))
      row = e:claim({}, e:now(), 30, 10, hi)[1]
      assert.is_true(near(row.at, due + 2))
      assert.is_true(row.late)
      assert.equal(2, row.attempt)
      -- (a next run due already: Redis claims by its own clock)
      assert(e:ack({ { what = "next", row = row, now = e:now(), at = due + 0.25, runs = 1 } }, hi))
      local job = e:get("p1")
      assert.is_true(near(job.due, due + 0.25) and near(job.scheduled_for, due + 0.25))
      assert.same({ 0, 1, 2, "all" }, { job.attempt, job.runs, job.every, job.missed })
      row = e:claim({}, e:now(), 30, 10, hi)[1]
      assert.is_nil(row.late) -- a new run: not started yet
    end)

    it("is the engine option's: a module given as `engine` serves a queue", function()
      local E = getmetatable(fresh()).__index
      local q = assert(env.open({ engine = E }))
      assert.equal(E, getmetatable(durable.engine(q)).__index)
      local ran
      q:handle("k", function(job) ran = job.payload end)
      assert(q:schedule("k", 0, "via engine"))
      assert.truthy(env.wait(function() return ran end, 5))
      assert.equal("via engine", ran)
      assert.has_error(function() durable.open(env.timer(), { engine = { open = print } }) end,
        "bad argument #2 to 'open' (option 'engine': engine module without method now())")
    end)

    it("begin/commit stores a batch at once and returns its marks; rollback stores none of it", function()
      fresh()
      assert(e:begin(hi))
      assert.is_true(e:put("b1", "k", nil, 30, true, nil, true))
      assert.is_true(e:put("b2", "k", nil, 7200, true, nil, true)) -- past hi: no mark
      local marks = assert(e:commit())
      assert.equal(1, #marks)
      assert.truthy(e:get("b1") and e:get("b2"))
      assert(e:begin(hi))
      assert.is_true(e:put("b3", "k", nil, 30, true, nil, true))
      e:rollback()
      assert.is_nil(e:get("b3"))
    end)
  end)
end
