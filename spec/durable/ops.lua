-- Operating a store: q:counts, q:jobs, q:retry, q:run_now, q:schedules (what hwtimer-jobs
-- and a metrics exporter will call), on a queue that handles no kind as well
-- as on one that runs jobs, and from another process. Shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines. `env`
-- is the one spec/durable/processes.lua takes (describe, it, assert, open,
-- wait, now, child_open).
local helpers = require("spec.helpers")

return function(env)
  local describe, it, assert = env.describe, env.it, env.assert

  local open = env.quiet_open -- (shared.lua)

  local function ids(list)
    local t = {}
    for i, job in ipairs(list) do t[i] = job.id end
    return t
  end

  local function without_kinds(c)
    return { pending = c.pending, due = c.due, leased = c.leased, dead = c.dead }
  end

  -- Every page of q:jobs(opts) from `cursor` on: the jobs in turn. Each
  -- page but the last is full; the last has no cursor.
  local function pages(q, opts, cursor)
    local got, limit, n = {}, opts.limit or 100, 0
    repeat
      local o = {}
      for k, v in pairs(opts) do o[k] = v end
      o.after = cursor
      local list
      list, cursor = q:jobs(o)
      assert.is_table(list, cursor)
      assert.is_true(#list <= limit)
      if cursor then assert.equal(limit, #list) end
      for _, job in ipairs(list) do got[#got + 1] = job end
      n = n + 1
      assert.is_true(n < 1000, "no end of pages")
    until not cursor
    return got
  end

  -- Jobs of kind "d" made dead (the queue's attempts = 1), at due times
  -- due_of(i) (default: a second ago); then kind "d" is no longer handled.
  local function make_dead(q, list, due_of)
    q:handle("d", function() error("boom", 0) end)
    for i, id in ipairs(list) do assert(q:at("d", due_of and due_of(i) or env.now() - 1, nil, { id = id })) end
    assert.truthy(env.wait(function()
      for _, id in ipairs(list) do
        local job = q:get(id)
        if not (job and job.dead) then return false end
      end
      return true
    end))
    q:handle("d", nil)
  end

  -- ids sorted by (due, id): { { due, id }, ... } -> { id, ... }
  local function in_order(list)
    table.sort(list, function(a, b)
      if a[1] ~= b[1] then return a[1] < b[1] end
      return a[2] < b[2]
    end)
    local t = {}
    for i, e in ipairs(list) do t[i] = e[2] end
    return t
  end

  describe("operating a store", function()
    describe("q:counts", function()
      it("counts by state and kind: pending, leased and dead disjoint, due a part of pending", function()
        local q = open({ attempts = 1 })
        assert.same({ pending = 0, due = 0, leased = 0, dead = 0, kinds = {} }, q:counts())
        make_dead(q, { "d1" })
        local now = env.now()
        assert(q:at("b", now - 5, nil, { id = "b1" })) -- due, no process handles "b"
        assert(q:at("b", now + 3600, nil, { id = "b2" }))
        assert(q:at("a", now + 3600, nil, { id = "a2" }))
        local inside, pending_inside, leased
        q:handle("a", function()
          inside, pending_inside, leased = q:counts(), q:pending(), q:jobs({ state = "leased" })
        end)
        assert(q:schedule("a", 0, "run", { id = "a1" }))
        assert.truthy(env.wait(function() return inside end))
        assert.same({ pending = 3, due = 1, leased = 1, dead = 1, kinds = {
          a = { pending = 1, due = 0, leased = 1, dead = 0 },
          b = { pending = 2, due = 1, leased = 0, dead = 0 },
          d = { pending = 0, due = 0, leased = 0, dead = 1 },
        } }, inside)
        assert.equal(inside.pending + inside.leased, pending_inside) -- q:pending(): every job not dead
        assert.same({ "a1" }, ids(leased))
        assert.same({ true, "run", 1 }, { leased[1].leased, leased[1].payload, leased[1].attempt })
        assert.truthy(env.wait(function() return q:counts().leased == 0 end))
        local c = q:counts()
        assert.same({ pending = 3, due = 1, leased = 0, dead = 1 }, without_kinds(c))
        assert.same({ pending = 1, due = 0, leased = 0, dead = 0 }, c.kinds.a)
        for _, id in ipairs({ "b1", "b2", "a2", "d1" }) do assert.is_true(q:cancel(id)) end
        assert.same({ pending = 0, due = 0, leased = 0, dead = 0, kinds = {} }, q:counts())
      end)

      -- (the store keeps its counts apart from its jobs, as Redis's meta
      -- does: a cancel of a dead job that took one from pending left it at
      -- -1, and one short ever after)
      it("keeps q:pending and q:counts exact after every operation", function()
        local q = open({ attempts = 1 })
        local function counted(pending, dead, what)
          local c = q:counts()
          assert.same({ pending, dead }, { c.pending + c.leased, c.dead }, what)
          assert.equal(pending, q:pending(), what)
          assert.equal(dead, #q:dead(), what)
        end
        counted(0, 0, "empty")
        make_dead(q, { "d1", "d2" })
        counted(0, 2, "two dead")
        assert(q:at("p", env.now() + 3600, nil, { id = "p1" }))
        assert(q:schedule("p", 3600))
        counted(2, 2, "two pending")
        assert.is_true(q:cancel("d1"))
        counted(2, 1, "a dead one cancelled")
        assert.is_false(q:cancel("d1"))
        counted(2, 1, "cancelled again")
        assert(q:retry("d2"))
        counted(3, 0, "the other dead one retried (pending, due now, no handler)")
        assert.is_true(q:cancel("d2"))
        assert.is_true(q:cancel("p1"))
        counted(1, 0, "two pending cancelled")
        assert(q:run_now((q:jobs()[1]).id))
        counted(1, 0, "run_now on one no process handles")
        local ran = 0
        q:handle("p", function() ran = ran + 1 end)
        assert.truthy(env.wait(function() return ran == 1 and q:pending() == 0 end))
        counted(0, 0, "the last one ran")
      end)

      it("counts jobs scheduled without an id (Redis: still in the intake)", function()
        local q = open()
        for i = 1, 3 do assert(q:schedule("k", i - 2)) end -- due 1 s ago, now, in 1 s
        local c = q:counts()
        assert.same({ pending = 3, due = 2, leased = 0, dead = 0 }, without_kinds(c))
        assert.same({ pending = 3, due = 2, leased = 0, dead = 0 }, c.kinds.k)
      end)
    end)

    describe("q:jobs", function()
      it("pages jobs in due order, ties by id, each once; of one kind or all; as q:get shows them", function()
        local q = open()
        local base = env.now() + 3600
        local all, k = {}, {}
        for i = 1, 25 do
          local id = string.format("j%02d", (i * 7) % 25) -- ids out of due order
          assert(q:at("k", base + math.floor(i / 3), "p" .. i, { id = id })) -- ties of three
          local due = q:get(id).due
          all[#all + 1], k[#k + 1] = { due, id }, { due, id }
        end
        for i = 1, 5 do
          assert(q:at("x", base + 2 * i, nil, { id = "x" .. i })) -- tied with k's
          all[#all + 1] = { q:get("x" .. i).due, "x" .. i }
        end
        local got = pages(q, { kind = "k", limit = 4 })
        assert.same(in_order(k), ids(got))
        for _, job in ipairs(got) do assert.same(q:get(job.id), job) end
        assert.same(in_order(all), ids(pages(q, { limit = 7 })))
        assert.same(in_order(all), ids(pages(q, { limit = 1 })))
        local list, cursor = q:jobs({ kind = "k", limit = 25 }) -- exactly one page: no cursor
        assert.equal(25, #list)
        assert.is_nil(cursor)
        list, cursor = q:jobs({ kind = "none" })
        assert.same({}, list)
        assert.is_nil(cursor)
        assert.same({}, q:jobs({ state = "dead" }))
        assert.same({}, q:jobs({ state = "leased" }))
      end)

      it("holds its cursor across jobs added and removed between pages: none skipped, none twice", function()
        local q = open()
        local base = env.now() + 3600
        for i = 1, 12 do assert(q:at("k", base + math.floor(i / 2), nil, { id = string.format("j%02d", i) })) end
        local first, cursor = q:jobs({ limit = 5 })
        assert.same({ "j01", "j02", "j03", "j04", "j05" }, ids(first))
        assert.is_true(q:cancel("j05")) -- the cursor's own job
        assert.is_true(q:cancel("j07")) -- one of the next page
        local at = q:get("j04").due
        assert(q:at("k", at, nil, { id = "j04b" })) -- tied with the cursor, before it: not shown
        assert(q:at("k", at, nil, { id = "j05b" })) -- tied, after it: shown
        assert(q:at("k", base - 1, nil, { id = "j00" })) -- before the cursor: not shown
        assert(q:at("k", base + 9, nil, { id = "j99" }))
        assert.same({ "j05b", "j06", "j08", "j09", "j10", "j11", "j12", "j99" }, ids(pages(q, { limit = 3 }, cursor)))
        -- a cursor whose job is still there
        first, cursor = q:jobs({ limit = 2 })
        assert.same({ "j00", "j01" }, ids(first))
        assert.same({ "j02", "j03", "j04", "j04b" }, ids(q:jobs({ limit = 4, after = cursor })))
        -- an id with the cursor's separator and a space in it
        assert(q:at("k", base - 2, nil, { id = "a/b c" }))
        first, cursor = q:jobs({ limit = 1 })
        assert.same({ "a/b c" }, ids(first))
        assert.same({ "j00" }, ids(q:jobs({ limit = 1, after = cursor })))
      end)

      it("pages the dead, and the leased, in due order", function()
        local q = open({ attempts = 1 })
        local now = env.now()
        local dues = { -2, -2, -1, -1, -1 }
        make_dead(q, { "d3", "d1", "d5", "d2", "d4" }, function(i) return now + dues[i] end)
        local got = pages(q, { state = "dead", limit = 2 })
        assert.same({ "d1", "d3", "d2", "d4", "d5" }, ids(got))
        for _, job in ipairs(got) do
          assert.same({ true, "boom", 1 }, { job.dead, job.error, job.attempt })
          assert.same(q:get(job.id), job)
        end
        assert.same(ids(got), ids(pages(q, { state = "dead", kind = "d", limit = 3 })))
        assert.same({}, q:jobs({ state = "dead", kind = "k" }))
        assert.same({}, q:jobs()) -- a dead job is not pending
        local seen
        q:handle("k", function() -- (the first of the three: all are leased then)
          seen = seen or { pages(q, { state = "leased", limit = 2 }), q:jobs({ state = "leased", kind = "d" }),
                   q:jobs({ state = "pending", kind = "k" }) }
        end)
        assert(q:batch(function(b)
          for i, id in ipairs({ "l2", "l3", "l1" }) do b:at("k", now - 3 + (i == 3 and 0 or 1), nil, { id = id }) end
        end))
        assert.truthy(env.wait(function() return seen end))
        assert.same({ "l1", "l2", "l3" }, ids(seen[1]))
        assert.same({}, seen[2])
        assert.same({}, seen[3])
      end)

      it("takes 100 a page unless told, at most 1000; raises on bad options, naming them", function()
        local q = open()
        local now = env.now()
        assert(q:batch(function(b)
          for i = 1, 900 do b:at("k", now + 3600 + i, nil, { id = string.format("n%04d", i) }) end
        end))
        for _ = 1, 101 do assert(q:schedule("k", 7200)) end -- made ids (Redis: in the intake)
        local list, cursor = q:jobs()
        assert.equal(100, #list)
        assert.is_string(cursor)
        list, cursor = q:jobs({ limit = 1000 })
        assert.equal(1000, #list)
        list, cursor = q:jobs({ limit = 1000, after = cursor })
        assert.equal(1, #list)
        assert.is_nil(cursor)
        local function bad(opts, msg)
          assert.has_error(function() q:jobs(opts) end, "bad argument #1 to 'jobs' (" .. msg .. ")")
        end
        bad("pending", "table or nil expected, got string")
        for _, n in ipairs({ 0, 1001, 2.5, "10" }) do bad({ limit = n }, "option 'limit': integer from 1 to 1000 expected") end
        bad({ state = "done" }, "option 'state': 'pending', 'leased' or 'dead' expected")
        bad({ kind = "" }, "option 'kind': non-empty string expected")
        for _, c in ipairs({ "nope", "x/", 12, "inf/a" }) do
          bad({ after = c }, "option 'after': cursor (a string q:jobs returned) expected")
        end
        bad({ limt = 5 }, "unknown option 'limt'")
      end)
    end)

    describe("q:retry", function()
      it("makes a dead job pending, due now, attempts from zero, its error gone; refuses any other", function()
        local q = open({ attempts = 1 })
        make_dead(q, { "d1" })
        assert.same({ true, 1, "boom" }, { q:get("d1").dead, q:get("d1").attempt, q:get("d1").error })
        local before = env.now()
        assert.is_true(q:retry("d1"))
        local job = q:get("d1")
        assert.same({ "d1", "d", 0 }, { job.id, job.kind, job.attempt })
        assert.is_nil(job.dead)
        assert.is_nil(job.error)
        assert.is_nil(job.leased)
        assert.is_true(job.due >= before - 0.01 and job.due <= env.now() + 0.01, job.due - before)
        assert.same({ pending = 1, due = 1, leased = 0, dead = 0 }, without_kinds(q:counts()))
        assert.same({}, q:jobs({ state = "dead" }))
        local r = { q:retry("d1") }
        assert.same({ nil, "hwtimer.durable: job d1 is not dead (it is pending)" }, r)
        r = { q:retry("nope") }
        assert.same({ nil, "hwtimer.durable: no job nope" }, r)
        local got
        q:handle("d", function(j) got = j end)
        assert.truthy(env.wait(function() return got end))
        assert.equal(1, got.attempt) -- a first try again
        assert.has_error(function() q:retry() end, "bad argument #1 to 'retry' (non-empty string expected, got nil)")
        assert.has_error(function() q:retry("") end, "bad argument #1 to 'retry' (non-empty string expected, got string)")
      end)
    end)

    describe("q:run_now", function()
      it("makes a pending job due now, run at once here where its kind is handled, attempts kept", function()
        local q = open({ attempts = 3, backoff = { delay = 3600, max_delay = 3600 } })
        local ran = {}
        q:handle("k", function(job)
          ran[#ran + 1] = job
          if job.payload == "fail" and job.attempt == 1 then error("boom", 0) end
        end)
        local due = env.now() + 3600
        assert(q:at("k", due, "p", { id = "later" }))
        local before = env.now()
        assert.is_true(q:run_now("later"))
        assert.truthy(env.wait(function() return #ran == 1 end))
        assert.same({ "later", "p", 1 }, { ran[1].id, ran[1].payload, ran[1].attempt })
        assert.is_true(ran[1].due >= before - 0.01 and ran[1].due < due - 3000)
        -- a job waiting out its backoff: run now, its attempts counted on
        assert(q:schedule("k", 0, "fail", { id = "flaky" }))
        assert.truthy(env.wait(function() return #ran == 2 end))
        assert.truthy(env.wait(function() local j = q:get("flaky") return j and not j.leased end))
        assert.is_true(q:get("flaky").due > env.now() + 3000)
        assert.is_true(q:run_now("flaky"))
        assert.truthy(env.wait(function() return #ran == 3 end))
        assert.same({ "flaky", 2 }, { ran[3].id, ran[3].attempt })
        -- a periodic job: its next period counts from this run's due time
        assert(q:every("k", 3600, "tick", { id = "tick" }))
        assert.is_true(q:run_now("tick"))
        assert.truthy(env.wait(function() return #ran == 4 end))
        assert.truthy(env.wait(function() local j = q:get("tick") return j and not j.leased end))
        assert.is_true(math.abs(q:get("tick").due - (ran[4].due + 3600)) < 0.01)
        assert.truthy(env.wait(function() return q:pending() == 1 end))
      end)

      it("leaves a job due already as it is; refuses a dead one, one in flight, one unknown", function()
        local q = open({ attempts = 1 })
        local due = env.now() - 10
        assert(q:at("u", due, nil, { id = "overdue" }))
        assert.is_true(q:run_now("overdue"))
        assert.is_true(math.abs(q:get("overdue").due - due) < 0.01)
        make_dead(q, { "d1" })
        assert.same({ nil, "hwtimer.durable: job d1 is dead: q:retry(id) runs it again" }, { q:run_now("d1") })
        assert.same({ nil, "hwtimer.durable: no job nope" }, { q:run_now("nope") })
        local inside
        q:handle("l", function(job) inside = { { q:run_now(job.id) }, { q:retry(job.id) } } end)
        assert(q:schedule("l", 0, nil, { id = "l1" }))
        assert.truthy(env.wait(function() return inside end))
        assert.is_nil(inside[1][1])
        assert.matches("^hwtimer.durable: job l1 is in flight %(leased for %d+%.%d+ s more%)$", inside[1][2])
        assert.same({ nil, "hwtimer.durable: job l1 is not dead (it is leased)" }, inside[2])
        assert.has_error(function() q:run_now(1) end, "bad argument #1 to 'run_now' (non-empty string expected, got number)")
      end)
    end)

    describe("q:schedules", function()
      -- the ids of `list` as (due, id) orders them, by q:get's due times
      local function by_due(q, list)
        local t = {}
        for i, id in ipairs(list) do t[i] = { q:get(id).due, id } end
        return in_order(t)
      end

      it("lists the periodic jobs alone, in next-due order, each as q:get shows it", function()
        local q = open()
        assert.same({}, q:schedules())
        assert(q:every("b", 60, "p", { id = "s3" }))
        assert(q:every("a", 10, nil, { id = "s1" }))
        assert(q:schedule("a", 5, nil, { id = "once" })) -- not periodic: not listed
        assert(q:at("a", env.now() - 1, nil, { id = "due" }))
        local made = assert(q:every("c", 0.5)) -- a made id (Redis: still in the intake)
        assert(q:every("a", 3600, nil, { id = "s2" }))
        -- (eight: an engine that gathers them in a hash table and did not
        -- sort would list them in order by chance once in 40,320 runs)
        assert(q:every("d", 30, nil, { id = "s4" }))
        assert(q:every("d", 120, nil, { id = "s5" }))
        assert(q:every("b", 1800, nil, { id = "s6" }))
        assert(q:every("a", 20, nil, { id = "s7" }))
        local list = assert(q:schedules())
        assert.same(by_due(q, { "s1", "s2", "s3", "s4", "s5", "s6", "s7", made }), ids(list))
        -- 0.5 s, 10 s, 20 s, 30 s, 60 s, 120 s, 1800 s, 3600 s ahead
        assert.same({ made, "s1", "s7", "s4", "s3", "s5", "s6", "s2" }, ids(list))
        for _, job in ipairs(list) do assert.same(q:get(job.id), job) end
        assert.same({ "s3", "b", "p", 60, 0 }, { list[5].id, list[5].kind, list[5].payload, list[5].every,
                                                 list[5].attempt })
        assert.is_nil(list[5].leased)
        assert.is_nil(list[5].dead)
        assert.is_true(q:cancel("s3"))
        assert(q:schedule("b", 1, nil, { id = "s1" })) -- replaced by a one-shot job: no longer listed
        assert.same({ made, "s7", "s4", "s5", "s6", "s2" }, ids(q:schedules()))
      end)

      it("shows a schedule leased while it runs, its next due time after, a dead one as dead", function()
        local q = open({ attempts = 1 })
        local inside
        q:handle("tick", function() inside = inside or q:schedules() end)
        q:handle("bad", function() error("boom", 0) end)
        assert(q:every("tick", 3600, nil, { id = "t" }))
        assert(q:every("bad", 7200, nil, { id = "b" }))
        assert.is_true(q:run_now("t"))
        assert.truthy(env.wait(function() return inside end))
        assert.same({ "t", "b" }, ids(inside))
        assert.same({ true, 1 }, { inside[1].leased, inside[1].attempt })
        assert.is_nil(inside[2].leased)
        local ran_due = inside[1].due
        assert.truthy(env.wait(function() local j = q:get("t") return j and not j.leased end))
        assert.is_true(q:run_now("b"))
        assert.truthy(env.wait(function() local j = q:get("b") return j and j.dead end))
        local list = assert(q:schedules())
        assert.same({ "b", "t" }, ids(list)) -- b's due time: its run's, now past
        assert.same({ true, "boom", 1 }, { list[1].dead, list[1].error, list[1].attempt })
        assert.same({ 0, 3600 }, { list[2].attempt, list[2].every })
        assert.is_nil(list[2].leased)
        assert.is_true(math.abs(list[2].due - (ran_due + 3600)) < 0.01, list[2].due - ran_due)
      end)

      it("finds every schedule of a large store once, among many other jobs", function()
        local q = open()
        local now, every = env.now(), {}
        assert(q:batch(function(b)
          for i = 1, 2500 do
            if i % 50 == 0 then
              local id = string.format("e%03d", 120 - i / 50) -- ids against due order
              every[#every + 1] = id
              b:every("k", 3600 + i, nil, { id = id })
            else
              b:at("k", now + 7200 + i, nil, { id = "j" .. i })
            end
          end
        end))
        local list = assert(q:schedules())
        assert.equal(50, #list)
        assert.same(by_due(q, every), ids(list))
        assert.same(every, ids(list))
      end)
    end)

    -- hwtimer-jobs: another process opens the store, handles no kind, and
    -- runs a job now or retries a dead one; the process that runs the kind
    -- sees each at its next poll (no sweep comes within the spec), one at a
    -- time (a pass that one brought would claim the other too).
    it("a run_now or retry from another process, which handles no kind, runs here within a poll", function()
      local q = open({ attempts = 1 })
      local ran = {}
      q:handle("k", function(job)
        ran[#ran + 1] = job
        if job.payload == "fail" and #ran == 1 then error("boom", 0) end
      end)
      assert(q:schedule("k", 0, "fail", { id = "dead1" }))
      -- (later1 stored by another queue, so that this one's polls have read
      -- it, as a job stored long ago, before it is made due)
      assert(open():schedule("k", 3600, nil, { id = "later1" }))
      assert.truthy(env.wait(function() local j = q:get("dead1") return j and j.dead end))
      env.wait(function() return false end, 0.2) -- a few polls: nothing new
      local function elsewhere(code)
        local out, ok = helpers.run_lua(string.format([[
          local hwtimer = require("hwtimer")
          local durable = require("hwtimer.durable")
          local timer = hwtimer.new()
          local q = assert(durable.open(timer, %s))
          %s
          q:close()
          timer:close()
        ]], env.child_open(), code))
        assert.is_true(ok, out)
        return out
      end
      local out = elsewhere([[
        local c = assert(q:counts())
        print("counts", c.pending, c.due, c.dead)
        print("run_now", q:run_now("later1"))]])
      assert.matches("counts\t1\t0\t1\n", out, 1, true)
      assert.matches("run_now\ttrue\n", out, 1, true)
      assert.truthy(env.wait(function() return #ran == 2 end))
      assert.same({ "later1", 1 }, { ran[2].id, ran[2].attempt })
      out = elsewhere([[
        print("retry", q:retry("dead1"))
        print("again", q:retry("dead1"))]])
      assert.matches("retry\ttrue\n", out, 1, true)
      assert.matches("again\tnil\thwtimer.durable: job dead1 is not dead (it is pending)\n", out, 1, true)
      assert.truthy(env.wait(function() return #ran == 3 end))
      assert.same({ "dead1", 1 }, { ran[3].id, ran[3].attempt })
      assert.truthy(env.wait(function() return q:pending() == 0 end))
    end)
  end)
end
