-- How a queue's jobs run (lua/hwtimer/durable.lua): retries and dead jobs,
-- q:batch, a kind no handler of this process runs, a restart's backlog, and
-- due times in crowds, before 1970 and in any order. Shared by the SQLite
-- (spec/durable/01-sqlite) and Redis (spec/durable/03-redis) engines. `env`
-- is the one spec/durable/front.lua takes (describe, it, pending, assert,
-- open, timer, wait, now, jobs), and:
--   check_store(empty)  asserts the store's own consistency (SQLite: its
--                   integrity check; Redis: every slot and its index), and
--                   with `empty` that the queue left nothing in it
local count = require("spec.helpers").count
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

return function(env)
  local describe, it, pending, assert = env.describe, env.it, env.pending, env.assert
  local function wait(done, secs) return env.wait(done, secs) end
  local function idle(secs) env.wait(function() return false end, secs) end
  -- A spec whose q:batch function yields: pending on Lua 5.1 (busted's
  -- pending beside `it`, as in spec/durable/leases.lua)
  local function it_yielding(title, fn)
    if _VERSION == "Lua 5.1" and not jit then
      pending(title .. ": Lua 5.1's pcall is not yieldable: there q:batch's function cannot yield")
    else
      it(title, fn)
    end
  end

  describe("retries and dead jobs", function()
    it("retries a failing job with backoff, then it is dead, kept until cancelled", function()
      local errors = {}
      local q = assert(env.open({ attempts = 3, backoff = { delay = 0.05, factor = 2 },
        on_error = function(err, job) errors[#errors + 1] = { err, job } end }))
      local attempts, times = {}, {}
      q:handle("k", function(job)
        attempts[#attempts + 1] = job.attempt
        times[#times + 1] = env.now()
        error("refused " .. job.attempt, 0)
      end)
      local id = q:schedule("k", 0, "p")
      assert.is_true(wait(function() return #q:dead() == 1 end))
      assert.same({ 1, 2, 3 }, attempts)
      assert.is_true(times[2] - times[1] >= 0.05, "retried before its backoff")
      assert.is_true(times[3] - times[2] >= 0.1, "retried before its backoff")
      assert.equal(3, #errors)
      for i = 1, 3 do
        assert.equal("refused " .. i, errors[i][1])
        assert.equal(id, errors[i][2].id)
      end
      local dead = q:dead()[1]
      assert.same({ id, "k", "p", 3, true, "refused 3" },
        { dead.id, dead.kind, dead.payload, dead.attempt, dead.dead, dead.error })
      assert.is_true(q:get(id).dead)
      assert.equal(0, q:pending())
      idle(0.2)
      assert.equal(3, #attempts)
      assert.is_true(q:cancel(id))
      assert.same({}, q:dead())
      assert.is_nil(q:get(id))
    end)

    -- The wait before try n+1 is delay * factor^(n-1), at most max_delay,
    -- from the end of try n: read from the due time each retry was stored
    -- with, against the end of the try before it.
    it("waits delay * factor^(n-1) after try n, capped at max_delay", function()
      local every = 0.05 * SLOW
      local q = assert(env.open({ attempts = 5, backoff = { delay = every, factor = 3, max_delay = 5 * every },
        on_error = function() end }))
      local tries = {}
      q:handle("k", function(job)
        tries[#tries + 1] = { due = job.due }
        tries[#tries].ended = env.now()
        error("again", 0)
      end)
      q:schedule("k", 0, nil, { id = "b" })
      assert.is_true(wait(function() return #q:dead() == 1 end, 10 * SLOW))
      assert.equal(5, #tries)
      local want = { 1, 3, 5, 5 } -- in units of `every`: 1, 3, 9 and 27 capped at 5
      for n = 1, 4 do
        local waited = (tries[n + 1].due - tries[n].ended) / every
        assert.is_true(math.abs(waited - want[n]) < 0.3, string.format("after try %d: %.3f, not %d", n, waited, want[n]))
      end
    end)

    it("runs a job again after an error until it succeeds", function()
      local q = assert(env.open({ backoff = { delay = 0.01 }, on_error = function() end }))
      local n = 0
      q:handle("k", function()
        n = n + 1
        assert(n >= 3, "not yet")
      end)
      q:schedule("k", 0, nil, { id = "x" })
      assert.is_true(wait(function() return n == 3 and q:pending() == 0 end))
      assert.is_nil(q:get("x"))
      assert.same({}, q:dead())
    end)

    it("reports a handler's error to on_error with the job", function()
      local got
      local q = assert(env.open({ attempts = 1, on_error = function(err, job) got = { err, job } end }))
      q:handle("k", function() error("bad job", 0) end)
      q:schedule("k", 0, nil, { id = "x" })
      assert.truthy(wait(function() return got end))
      assert.equal("bad job", got[1])
      assert.equal("x", got[2].id)
    end)

    -- A handler may raise anything: a value whose tostring raises, yields
    -- or gives no string must not leave its job leased (its lease renewed
    -- for ever, its slot of `concurrency` never given back).
    it("stores any error object as a message, and the queue goes on", function()
      local objects = {
        { setmetatable({}, { __tostring = function() end }), "^%(an error object, table, whose __tostring gave no text%)$" },
        { setmetatable({}, { __tostring = function() error("no text") end }), "__tostring gave no text%)$" },
        { setmetatable({}, { __tostring = function() error(setmetatable({}, {})) end }), "gave no text%)$" },
        { setmetatable({}, { __tostring = function() return {} end }), "gave no text%)$" },
        { setmetatable({}, { __tostring = function() coroutine.yield() end }), "^%(an error object" },
        { setmetatable({}, { __name = "my.error", __tostring = function() end }), "^%(an error object, my.error," },
        { setmetatable({}, { __tostring = function() return "custom text" end }), "^custom text$" },
        { function() end, "^function" },
        { 42, "^42$" },
        { false, "^false$" },
        { nil, "^nil$" },
      }
      local reported = 0
      local q = assert(env.open({ attempts = 2, concurrency = 1, backoff = { delay = 0 },
        on_error = function() reported = reported + 1 end }))
      local ran = 0
      for i, o in ipairs(objects) do
        q:handle("k" .. i, function() ran = ran + 1 error(o[1], 0) end)
        q:schedule("k" .. i, 0, nil, { id = "j" .. i })
      end
      local after
      q:handle("after", function() after = true end)
      q:schedule("after", 0.01)
      assert.is_true(wait(function() return after and #q:dead() == #objects end, 5 * SLOW),
        "dead: " .. #q:dead() .. " of " .. #objects)
      assert.equal(2 * #objects, ran)
      assert.equal(2 * #objects, reported)
      for i, o in ipairs(objects) do
        local job = q:get("j" .. i)
        assert.is_true(job.dead, "j" .. i)
        assert.equal("string", type(job.error))
        assert.truthy(job.error:find(o[2]), "j" .. i .. ": " .. job.error)
      end
      assert.equal(0, q:pending())
    end)

    it("runs jobs with every count option at its largest", function()
      local q = assert(env.open({ attempts = 1e9, batch = 1e5, concurrency = 1e6, on_error = function() end }))
      local ran = {}
      q:handle("k", function(job)
        ran[#ran + 1] = job.id
        if job.id == "fails" and job.attempt == 1 then error("once", 0) end
      end)
      for _, id in ipairs({ "a", "b", "fails" }) do q:schedule("k", 0, nil, { id = id }) end
      q:every("k", 0.05, nil, { id = "every", limit = 1e15 })
      assert.is_true(wait(function() return #ran >= 6 and q:pending() == 1 end, 5 * SLOW))
      assert.equal(1e15, q:get("every").limit)
      assert.is_nil(q:get("fails"))
    end)

    -- The lines the default on_error writes to stderr while a job of `kind`
    -- with `id`, whose handler raises `message`, dies (attempts = 1).
    local function default_report(kind, id, message)
      local q = assert(env.open({ attempts = 1 }))
      local lines, stderr = {}, io.stderr
      io.stderr = { -- luacheck: ignore 122 (to read what on_error writes)
        write = function(_, ...) lines[#lines + 1] = table.concat({ ... }) end }
      local ok, err = pcall(function()
        q:handle(kind, function() error(message, 0) end)
        q:schedule(kind, 0, nil, { id = id })
        assert.is_true(wait(function() return #q:dead() == 1 end))
      end)
      io.stderr = stderr -- luacheck: ignore 122 (put back)
      assert(ok, err)
      for i = 1, #lines do lines[i] = lines[i]:gsub("\n$", "") end
      return lines
    end

    it("writes a handler's error to stderr as one line when on_error is the default", function()
      assert.same({ "hwtimer.durable: job id\\r\\n\\xFF (k\\n[crit] forged): " ..
        "two\\nlines \\x1B[31m\\xC2\\x9Bred" },
        default_report("k\n[crit] forged", "id\r\n\255", "two\nlines \27[31m\194\155red"))
    end)

    -- The C1 controls end at U+009F: U+00A0 (NO-BREAK SPACE, \194\160 in
    -- UTF-8) is text, and the default on_error's line keeps it as it is.
    it("keeps a no-break space in the default on_error's line, and escapes the last C1 control before it", function()
      assert.same({ "hwtimer.durable: job nb\194\160sp (k): no\194\160break, \\xC2\\x9Fapc" },
        default_report("k", "nb\194\160sp", "no\194\160break, \194\159apc"))
    end)
  end)

  describe("q:batch", function()
    it("stores many jobs at once: none is seen before it returns", function()
      local q = assert(env.open())
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      assert.is_true(q:batch(function(b)
        for i = 1, 1000 do b:schedule("k", i <= 10 and 0.05 or 3600, tostring(i)) end
        assert.equal(0, count(env.jobs())) -- not before the commit
      end))
      assert.equal(1000, q:pending())
      assert.equal(1000, count(env.jobs()))
      assert.is_true(wait(function() return ran == 10 end))
    end)

    it("stores nothing and raises again when fn raises", function()
      local q = assert(env.open())
      q:schedule("k", 60, nil, { id = "kept" })
      assert.has_error(function()
        q:batch(function(b)
          b:schedule("k", 0.01, nil, { id = "gone" })
          error("stop", 0)
        end)
      end, "stop")
      assert.equal(1, q:pending())
      assert.truthy(q:get("kept"))
      assert.is_nil(q:get("gone"))
      assert.has_error(function() q:batch(1) end, "bad argument #1 to 'batch' (function expected, got number)")
    end)

    -- In nginx, cqueues or copas the batch's function may yield: other
    -- coroutines run meanwhile, and what they write must not ride in (and
    -- fall out with) a batch that is not theirs.
    it_yielding("refuses other coroutines' writes while its function is yielded; claims wait for it", function()
      local ran, errors = {}, 0
      local q = assert(env.open({ on_error = function() errors = errors + 1 end }))
      q:handle("k", function(job) ran[#ran + 1] = job.id end)
      assert(q:schedule("k", 60, nil, { id = "kept" }))
      local co = coroutine.create(function()
        return q:batch(function(b)
          assert(b:schedule("k", 0, nil, { id = "inside" }))
          coroutine.yield()
          assert(b:schedule("k", 0, nil, { id = "inside 2" }))
        end)
      end)
      assert(coroutine.resume(co)) -- now yielded inside the batch
      local busy = "hwtimer.durable: a batch is open in another coroutine (q:batch's function yielded)"
      assert.same({ nil, busy }, { q:schedule("k", 0, nil, { id = "outside" }) })
      assert.same({ nil, busy }, { q:cancel("kept") })
      assert.same({ nil, busy }, { q:batch(function() error("not called") end) })
      env.timer():run(0.1) -- due jobs wait for the batch: no claim inside its transaction
      assert.same({}, ran)
      assert.equal(0, errors)
      local ok, res = coroutine.resume(co)
      assert.is_true(ok)
      assert.is_true(res)
      assert(q:schedule("k", 0, nil, { id = "outside" }))
      assert.is_true(wait(function() return #ran == 3 end))
      table.sort(ran)
      assert.same({ "inside", "inside 2", "outside" }, ran)
      assert.truthy(q:get("kept"))
      assert.equal(0, errors)
    end)

    -- A batch's coroutine that is never resumed (an nginx request aborted,
    -- a light thread killed) held the store until q:close().
    it_yielding("rolls back a batch whose function has not returned after batch_timeout", function()
      local errors, ran = {}, {}
      local q = assert(env.open({ batch_timeout = 0.2, on_error = function(e) errors[#errors + 1] = e end }))
      q:handle("k", function(job) ran[#ran + 1] = job.id end)
      local abandoned = coroutine.create(function()
        return q:batch(function(b)
          assert(b:schedule("k", 0, nil, { id = "abandoned" }))
          coroutine.yield()
        end)
      end)
      local late = coroutine.create(function()
        return q:batch(function(b)
          assert(b:schedule("k", 0, nil, { id = "late 1" }))
          coroutine.yield()
          return b:schedule("k", 0, nil, { id = "late 2" }), b:cancel("outside"), b:batch(function() end)
        end)
      end)
      assert(coroutine.resume(abandoned))
      local busy = "hwtimer.durable: a batch is open in another coroutine (q:batch's function yielded)"
      assert.same({ nil, busy }, { q:schedule("k", 0, nil, { id = "outside" }) })
      local t0 = env.now()
      assert.is_true(wait(function() return q:schedule("k", 0, nil, { id = "outside" }) ~= nil end, 3))
      assert.is_true(env.now() - t0 >= 0.15, "rolled back before batch_timeout")
      local why = "its function was still running after batch_timeout (0.2 s)"
      assert.same({ "a batch was rolled back, nothing of it stored: " .. why }, errors)
      -- the next batch, resumed after its own rollback, is refused every write
      assert(coroutine.resume(late))
      env.timer():run(0.3)
      local refused = "hwtimer.durable: this coroutine's batch was rolled back, nothing of it stored: " .. why
      local ok, res, err = coroutine.resume(late)
      assert.is_true(ok, res)
      assert.same({ nil, refused }, { res, err })
      assert.is_true(wait(function() return #ran == 1 and q:pending() == 0 end))
      assert.same({ "outside" }, ran)
      for _, id in ipairs({ "abandoned", "late 1", "late 2" }) do assert.is_nil(q:get(id), id) end
      -- and the queue's batches work again
      assert.is_true(q:batch(function(b) assert(b:schedule("k", 0, nil, { id = "after" })) end))
      assert.is_true(wait(function() return #ran == 2 end))
    end)

    it_yielding("rolls back a batch open in another coroutine when the queue is closed; refuses a close inside one",
      function()
      local q = assert(env.open({ on_error = function() end }))
      assert.has_error(function() q:batch(function(b) b:close() end) end,
        "hwtimer.durable: q:close() inside q:batch's function: close the queue once the batch has returned")
      local co = coroutine.create(function()
        return q:batch(function(b)
          assert(b:schedule("k", 0, nil, { id = "inside" }))
          coroutine.yield()
        end)
      end)
      assert(coroutine.resume(co))
      q:close()
      local ok, res, err = coroutine.resume(co)
      assert.is_true(ok)
      assert.same({ nil, "hwtimer.durable: this coroutine's batch was rolled back, nothing of it stored: " ..
        "the queue was closed while its function waited" }, { res, err })
      q = assert(env.open({ on_error = function() end }))
      assert.is_nil(q:get("inside"))
      assert.has_error(function() q.close(nil) end,
        "calling 'close' on bad self (hwtimer.durable expected, got nil)")
    end)
  end)

  describe("a due job with no handler in this process", function()
    it("stays stored and unclaimed until a handler for its kind exists", function()
      local q = assert(env.open({ sweep = 0.05 }))
      local id = q:schedule("unknown_kind", 0)
      idle(0.2)
      local job = q:get(id)
      assert.equal(0, job.attempt)
      assert.is_nil(job.leased)
      local ran
      q:handle("unknown_kind", function(j) ran = j end)
      assert.truthy(wait(function() return ran end))
      assert.equal(1, ran.attempt)
    end)

    it("stays unclaimed once its kind's handler is taken away, while the other kinds go on", function()
      local q = assert(env.open({ sweep = 0.05 }))
      local ran = {}
      for _, kind in ipairs({ "a", "b", "c" }) do q:handle(kind, function(j) ran[#ran + 1] = j.kind end) end
      q:handle("b", nil)
      local b = q:schedule("b", 0)
      for _, kind in ipairs({ "a", "c" }) do q:schedule(kind, 0) end
      assert.truthy(wait(function() return #ran == 2 end))
      idle(0.2)
      table.sort(ran)
      assert.same({ "a", "c" }, ran)
      local job = q:get(b)
      assert.equal(0, job.attempt)
      assert.is_nil(job.leased)
    end)

    -- Taken away between the claim and the start: the rows of that kind this
    -- process holds go back as they were, as a stop hands back what it has
    -- not started, not a failed try (an attempt spent, an error reported).
    it("goes back unstarted, no attempt spent, when its handler is taken away after the claim", function()
      local errors = {}
      local q = assert(env.open({ concurrency = 2, sweep = 0.05, on_error = function(err) errors[#errors + 1] = err end }))
      local ran = {}
      local ids = { q:schedule("k", 0, "1"), q:schedule("k", 0, "2") }
      q:handle("k", function(j)
        ran[#ran + 1] = j.payload
        q:handle("k", nil) -- the other row is claimed and queued by now
      end)
      assert.truthy(wait(function() return #ran == 1 end))
      idle(0.3)
      assert.same({}, errors)
      local other = ran[1] == "1" and ids[2] or ids[1]
      local job = q:get(other)
      assert.equal(0, job.attempt)
      assert.is_nil(job.leased)
      assert.is_nil(job.error)
      assert.same(1, q:pending())
      q:handle("k", function(j) ran[#ran + 1] = j.attempt end)
      assert.truthy(wait(function() return #ran == 2 end))
      assert.equal(1, ran[2])
    end)
  end)

  describe("a job due now", function()
    -- The claim's own callback runs the first job it takes: a job scheduled
    -- to run now starts in the first dispatch after it, not a dispatch later
    -- (a worker timeout armed for it would wait for the next).
    it("starts in the first dispatch after its schedule", function()
      local q = assert(env.open({ poll = 60, sweep = 60 }))
      local timer = env.timer()
      local ran
      q:handle("k", function() ran = true end)
      for round = 1, 3 do
        ran = false
        timer:run(0.05) -- (the queue idle: nothing due)
        assert(q:schedule("k", 0))
        timer:dispatch()
        assert.is_true(ran, "round " .. round .. ": not run in the first dispatch")
      end
    end)
  end)

  describe("the lease renewer", function()
    -- One renewal timeout a queue (runs.lua's take arms it where none is),
    -- however many claims come while it holds jobs: each claim arming its
    -- own would leave a chain of renewals per claim, ticking for ever while
    -- anything is held. ack_delay keeps each run's row held until the next
    -- claim writes its acknowledgement, so rows are held from the first
    -- claim on; a lease of 6 s: a renewal every 2 s.
    it("is one timeout, however many claims come while jobs are held", function()
      local q = env.quiet_open({ lease = 6, ack_delay = 30, poll = 60 })
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      for i, at in ipairs({ 0.05, 0.3, 0.55 }) do assert(q:schedule("k", at, nil, { id = "j" .. i })) end
      assert.is_true(wait(function() return ran == 3 end))
      local renew_tick = assert(q._renewer, "no renewal timeout while jobs are held"):task()
      local renewers = 0
      for _, t in ipairs(env.timer():stop()) do -- (every timeout pending, each with its task)
        if t:task() == renew_tick then renewers = renewers + 1 end
      end
      assert.equal(1, renewers)
    end)
  end)

  describe("restart", function()
    it("runs overdue jobs oldest first, in batches that keep the loop responsive", function()
      local q = assert(env.open({ batch = 200 }))
      local now = env.now()
      assert(q:batch(function(b)
        for i = 2000, 1, -1 do b:at("k", now - 100 + i * 0.01, nil, { id = tostring(i) }) end
      end))
      q:close()
      q = assert(env.open({ batch = 200 }))
      -- a timeout that re-arms itself at delay 0 runs once in every dispatch:
      -- it counts the loop's turns, whatever the machine's speed
      local timer = env.timer()
      local order, ticks, ticks_at, beating = {}, 0, {}, true
      local function tick()
        ticks = ticks + 1
        if beating then timer:schedule(0, tick) end
      end
      timer:schedule(0, tick)
      q:handle("k", function(job)
        order[#order + 1] = tonumber(job.id)
        ticks_at[#order] = ticks
      end)
      assert.is_true(wait(function() return #order == 2000 and q:pending() == 0 end, 20))
      beating = false
      for i = 1, 2000 do assert.equal(i, order[i]) end
      assert.is_true(ticks_at[2000] - ticks_at[1] >= 5, "the loop ran nothing else during the catch-up")
      assert.equal(0, q:pending())
    end)

    -- The process that died is a queue that claimed the job through its
    -- engine (as its pass would) and went away before running it.
    it("reclaims a job whose lease expired (its process died)", function()
      local q = assert(env.open({ sweep = 0.05 }))
      q:schedule("k", 0, nil, { id = "x" })
      q:close()
      local dead = assert(env.open({ poll = 60, sweep = 60 }))
      local ghost = require("hwtimer.durable").engine(dead)
      assert(ghost:handle("k", true))
      local _, n = ghost:claim({}, ghost:now(), 0.3, 10, ghost:now() + 3600)
      assert.equal(1, n)
      dead:close() -- (closing a queue writes nothing of the job: it stays leased)
      local leased_until = env.jobs().x.ready
      assert.is_true(env.jobs().x.owner ~= "")
      q = assert(env.open({ sweep = 0.05 }))
      local got, at
      q:handle("k", function(job) got, at = job, env.now() end)
      assert.truthy(wait(function() return got end))
      assert.equal(2, got.attempt)
      assert.is_true(at >= leased_until, "ran " .. (leased_until - at) .. " s before its lease expired")
    end)
  end)

  describe("due times", function()
    -- (Redis: the script's calls go in chunks, as Lua 5.1's unpack stops near
    -- 8,000 values and a script that fails halfway keeps what it wrote)
    it("takes 5,000 jobs at one instant in one batch, and claims 5,000 in one call", function()
      local q = assert(env.open({ batch = 5000, poll = 60, sweep = 60 }))
      local ran = 0
      assert(q:batch(function(b)
        for _ = 1, 5000 do b:schedule("k", 0.2 * SLOW) end
      end))
      assert.equal(5000, q:pending())
      env.check_store()
      q:handle("k", function() ran = ran + 1 end)
      assert.is_true(wait(function() return ran == 5000 end, 10 * SLOW))
      assert.is_true(wait(function() return q:pending() == 0 end))
    end)

    -- (the jobs a claim brought wait in this process for a worker; a cancel
    -- takes out the one it names, and only that one)
    it("a cancel from a handler leaves the other claimed jobs to run, and takes out the one it names", function()
      local q = assert(env.open({ poll = 60, sweep = 60 }))
      local ran = {}
      local far = assert(q:schedule("k", 3600, nil, { id = "far" }))
      q:handle("k", function(job)
        ran[#ran + 1] = job.id
        if job.id == "a" then
          assert.is_true(q:cancel(far))
          assert.is_true(q:cancel("c"))
        end
      end)
      assert(q:batch(function(b)
        for _, id in ipairs({ "a", "b", "c", "d" }) do b:schedule("k", 0, nil, { id = id }) end
      end))
      assert.is_true(wait(function() return #ran == 3 end, 2 * SLOW), table.concat(ran, " "))
      idle(0.1)
      assert.same({ "a", "b", "d" }, ran)
      assert.equal(0, q:pending())
    end)

    -- (where handlers run one after another, a claim costs one spare worker
    -- on the timer, not one per job: 200 jobs take a few timeouts in all)
    it("runs 200 jobs due at once on a few of the timer's timeouts, not one a job", function()
      local q = assert(env.open({ poll = 60, sweep = 60 }))
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      assert(q:batch(function(b)
        for _ = 1, 200 do b:schedule("k", 0) end
      end))
      local before = env.timer():stats().scheduled
      assert.is_true(wait(function() return ran == 200 end, 10 * SLOW))
      local used = env.timer():stats().scheduled - before
      assert.is_true(used < 50, used .. " timeouts scheduled for 200 jobs")
    end)

    -- (a full claim asks for the next pass at once; once the backlog is
    -- gone, the queue claims again at its poll, not a pass a dispatch)
    it("goes back to its poll once a backlog that filled its claims has run", function()
      local q = assert(env.open({ poll = 60, sweep = 60, batch = 5 }))
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      assert(q:batch(function(b)
        for _ = 1, 23 do b:schedule("k", 0) end
      end))
      assert.is_true(wait(function() return ran == 23 end, 10 * SLOW))
      local engine = require("hwtimer.durable").engine(q)
      local claims, real = 0, engine.claim
      engine.claim = function(...)
        claims = claims + 1
        return real(...)
      end
      local before = env.timer():stats().scheduled
      idle(0.3)
      engine.claim = nil -- (the engine's own again)
      local passes = env.timer():stats().scheduled - before -- (each pass asked for is a timeout)
      assert.is_true(claims <= 2, claims .. " claims in 0.3 s with nothing due and a poll of 60 s")
      assert.is_true(passes <= 5, passes .. " timeouts in 0.3 s with nothing due and a poll of 60 s")
    end)

    it("runs a job due before 1970, and the queue goes on", function()
      local q = assert(env.open())
      local ran = {}
      q:handle("k", function(job) ran[#ran + 1] = job.id end)
      assert(q:at("k", -1e6, nil, { id = "old" }))
      assert(q:at("k", -1, nil, { id = "older" })) -- (Redis: in the same slot of 2^40 us)
      env.check_store()
      assert(q:schedule("k", 0.05, nil, { id = "new" }))
      assert.is_true(wait(function() return #ran == 3 end))
      assert.same({ "old", "older", "new" }, ran)
      assert.equal(0, q:pending())
    end)

    it("runs jobs scheduled in any order by their due time, and leaves nothing behind", function()
      local q = assert(env.open())
      local now, n, order = env.now(), 600, {}
      local dues = {}
      for i = 1, n do dues[i] = now + 0.2 * SLOW + 0.3 * SLOW * ((i * 7919) % n) / n end
      assert(q:batch(function(b)
        for i = 1, n do b:at("k", dues[i], nil, { id = "o" .. i }) end
      end))
      env.check_store()
      q:handle("k", function(job) order[#order + 1] = job.due end)
      assert.is_true(wait(function() return #order == n end, 10 * SLOW))
      for i = 2, n do assert.is_true(order[i - 1] <= order[i], "out of order at " .. i) end
      assert.equal(0, q:pending())
      env.check_store(true)
    end)
  end)
end
