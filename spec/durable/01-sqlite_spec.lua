-- hwtimer.durable with its SQLite engine: every line of the contract (issue 11)
-- against real store files in a temporary directory, the faults, and
-- processes that share a store, die with kill -9 and come back.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local have_sqlite, sqlite = pcall(require, "hwtimer.sqlite")
if not have_sqlite then
  describe("hwtimer.durable", function()
    it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
  end)
  return
end
local durable = require("hwtimer.durable")
local wall = sqlite.now
-- Upper bounds on lateness are for a host that runs at speed; under valgrind
-- (make check-valgrind sets HWT_SLOW) everything is tens of times slower.
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1
local sleep = require("hwtimer_testutil").sleep

local function shell(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

local function tempdir()
  local dir = shell("mktemp -d /tmp/hwtimer-durable.XXXXXX"):gsub("%s+$", "")
  assert(dir ~= "", "mktemp -d failed (a child process cannot start here)")
  return dir
end

local function write_file(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

-- One value of a query on its own connection (a second process's view).
local function query(path, sql, ...)
  local db = assert(sqlite.open(path))
  db:busy_timeout(5)
  local st = assert(db:prepare(sql))
  local r = { st:first(...) }
  db:close()
  return helpers.unpack(r)
end

local function rows(path, sql, ...)
  local db = assert(sqlite.open(path))
  db:busy_timeout(5)
  local st = assert(db:prepare(sql))
  local r, n = st:rows(...)
  db:close()
  return assert(r, n), n
end

describe("hwtimer.durable", function()
  local timer, dir, path, q
  local open_queues

  local function open(opts)
    opts = opts or {}
    opts.path = opts.path or path
    local queue, err = durable.open(timer, opts)
    if queue then open_queues[#open_queues + 1] = queue end
    return queue, err
  end

  before_each(function()
    timer = hwtimer.new()
    dir = tempdir()
    path = dir .. "/timers.db"
    open_queues = {}
  end)

  after_each(function()
    for _, o in ipairs(open_queues) do o:close() end
    timer:close()
    os.execute("rm -rf '" .. dir .. "'")
  end)

  local function wait(done, secs) return helpers.wait_until(timer, done, secs or 5) end

  describe("durable.open", function()
    it("makes a store in a new file and opens it again", function()
      q = assert(open())
      assert.matches("^hwtimer.durable %(.*timers.db, queue default, 0 in the window%)$", tostring(q))
      assert.equal(0, q:pending())
      q:close()
      assert.equal("hwtimer.durable (closed)", tostring(q))
      q = assert(open())
      assert.equal(1213682756, query(path, "PRAGMA application_id"))
      assert.equal("wal", query(path, "PRAGMA journal_mode"))
    end)

    it("refuses a corrupt file", function()
      write_file(path, string.rep("this is not an SQLite file. ", 200))
      local queue, err = open()
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: " .. path .. ": file is not a database", err)
    end)

    it("refuses another program's SQLite file and leaves it as it was", function()
      local db = assert(sqlite.open(path))
      assert(db:exec("CREATE TABLE accounts (id INTEGER PRIMARY KEY)"))
      db:close()
      local queue, err = open()
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: " .. path .. ": not a hwtimer.durable store (it holds other tables)", err)
      assert.equal("delete", query(path, "PRAGMA journal_mode"))
      write_file(path, "")
      db = assert(sqlite.open(path))
      assert(db:exec("PRAGMA application_id = 42"))
      db:close()
      queue, err = open()
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: " .. path .. ": not a hwtimer.durable store (application_id 42)", err)
    end)

    it("refuses a store of another format", function()
      assert(open()):close()
      local db = assert(sqlite.open(path))
      assert(db:exec("PRAGMA user_version = 7"))
      db:close()
      local queue, err = open()
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: " .. path .. ": store format 7, this module reads 1", err)
    end)

    it("returns nil, message when the file cannot be opened", function()
      local queue, err = open({ path = dir .. "/no/such/dir/timers.db" })
      assert.is_nil(queue)
      -- SQLite's words, then where and who: an nginx worker runs as nginx's `user`
      assert.matches("^hwtimer.durable: .*/no/such/dir/timers.db: unable to open database file " ..
        "%(the directory .*/no/such/dir must exist and be writable by [^ ]+ %(uid %d+%), the user this process runs as", err)
    end)

    it("raises on bad arguments, naming them", function()
      assert.has_error(function() durable.open(nil, { path = path }) end,
        "bad argument #1 to 'open' (hwtimer.timer expected, got nil)")
      assert.has_error(function() durable.open(timer) end, "bad argument #2 to 'open' (table expected, got nil)")
      assert.has_error(function() durable.open(timer, {}) end, "bad argument #2 to 'open' (option 'path' expected)")
      assert.has_error(function() durable.open(timer, { path = path, windwo = 1 }) end,
        "bad argument #2 to 'open' (unknown option 'windwo')")
      assert.has_error(function() durable.open(timer, { path = path, window = 0 }) end,
        "bad argument #2 to 'open' (option 'window': number of seconds from 0 (excluded) to 1e9 expected)")
      assert.has_error(function() durable.open(timer, { path = path, lease = -1 }) end,
        "bad argument #2 to 'open' (option 'lease': number of seconds from 0 (excluded) to 1e9 expected)")
      assert.has_error(function() durable.open(timer, { path = path, attempts = 1.5 }) end,
        "bad argument #2 to 'open' (option 'attempts': positive integer expected)")
      assert.has_error(function() durable.open(timer, { path = path, queue = "" }) end,
        "bad argument #2 to 'open' (option 'queue': non-empty string expected)")
      assert.has_error(function() durable.open(timer, { path = path, sync = "off" }) end,
        "bad argument #2 to 'open' (option 'sync': 'normal' or 'full' expected)")
      assert.has_error(function() durable.open(timer, { path = path, on_error = 1 }) end,
        "bad argument #2 to 'open' (option 'on_error': function expected)")
      assert.has_error(function() durable.open(timer, { path = path, backoff = { delay = -1 } }) end,
        "bad argument #2 to 'open' (option 'backoff.delay': number of seconds from 0 to 1e9 expected)")
      assert.has_error(function() durable.open(timer, { path = path, backoff = { dleay = 1 } }) end,
        "bad argument #2 to 'open' (option 'backoff': unknown key 'dleay')")
      assert.has_error(function() durable.open(timer, { path = path, redis = function() end }) end,
        "bad argument #2 to 'open' (options 'path' and 'redis' exclude each other)")
    end)

    it("takes sync = 'full' (FULL survives a power loss)", function()
      q = assert(open({ sync = "full" }))
      assert.equal(2, durable.engine(q).db and (function()
        local st = durable.engine(q).db:prepare("PRAGMA synchronous")
        return st:first()
      end)())
    end)
  end)

  describe("q:schedule", function()
    it("runs the handler with the job once it is due, never earlier", function()
      q = assert(open())
      local got, at
      q:handle("close_order", function(job) got, at = job, wall() end)
      local before = wall()
      local id = assert(q:schedule("close_order", 0.2, "order 17"))
      assert.is_string(id)
      assert.equal(24, #id)
      assert.truthy(wait(function() return got end))
      assert.equal(id, got.id)
      assert.equal("close_order", got.kind)
      assert.equal("order 17", got.payload)
      assert.equal(1, got.attempt)
      assert.is_true(got.due >= before + 0.2 and got.due <= before + 0.25)
      assert.is_true(at >= got.due, "ran early")
      assert.is_nil(q:get(id))
      assert.equal(0, q:pending())
    end)

    it("is durable when it returns: a second connection sees the job", function()
      q = assert(open())
      local id = q:schedule("k", 60, nil, { id = "order-1" })
      assert.equal("order-1", id)
      assert.equal(1, query(path, "SELECT count(*) FROM hwtimer_jobs WHERE id = 'order-1'"))
    end)

    it("replaces the job when opts.id exists", function()
      q = assert(open())
      local runs = {}
      q:handle("k", function(job) runs[#runs + 1] = job.payload end)
      q:schedule("k", 0.1, "first", { id = "x" })
      q:schedule("k", 0.2, "second", { id = "x" })
      assert.equal(1, q:pending())
      assert.equal("second", q:get("x").payload)
      wait(function() return false end, 0.4)
      assert.same({ "second" }, runs)
    end)

    it("takes a delay of 0 or less as due now", function()
      q = assert(open())
      local n = 0
      q:handle("k", function() n = n + 1 end)
      q:schedule("k", 0)
      q:schedule("k", -5)
      assert.is_true(wait(function() return n == 2 end))
    end)

    -- Ids in the order they were made keep the store's id index growing at
    -- its right edge (docs/durable.md: batched schedules).
    it("makes ids of 24 hex digits, unique, that sort in the order they were made", function()
      q = assert(open())
      local ids, seen = {}, {}
      assert(q:batch(function(b)
        for i = 1, 20000 do ids[i] = b:schedule("k", 3600) end
      end))
      for i, id in ipairs(ids) do
        assert.matches("^%x+$", id)
        assert.equal(24, #id)
        assert.is_nil(seen[id], "id made twice: " .. id)
        seen[id] = true
        if i > 1 then assert.is_true(id > ids[i - 1], ids[i - 1] .. " then " .. id) end
      end
      local t0 = math.floor(wall() * 1000)
      assert.is_true(math.abs(tonumber(ids[#ids]:sub(1, 12), 16) - t0) < 60000 * SLOW, "time part")
      assert.equal(20000, q:pending())
    end)

    it("raises on bad arguments, naming them", function()
      q = assert(open())
      assert.has_error(function() q:schedule(nil, 1) end,
        "bad argument #1 to 'schedule' (non-empty string expected, got nil)")
      assert.has_error(function() q:schedule("", 1) end,
        "bad argument #1 to 'schedule' (non-empty string expected, got string)")
      assert.has_error(function() q:schedule("k", "1") end,
        "bad argument #2 to 'schedule' (finite number of seconds up to 1e9 expected, got string)")
      assert.has_error(function() q:schedule("k", 0 / 0) end)
      assert.has_error(function() q:schedule("k", 1e10) end,
        "bad argument #2 to 'schedule' (finite number of seconds up to 1e9 expected, got 1e+10)")
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
    it("runs at epoch seconds; stored due times are wall clock", function()
      q = assert(open())
      local got
      q:handle("k", function(job) got = job end)
      local when = wall() + 0.15
      local id = q:at("k", when, "p")
      assert.near(os.time(), q:get(id).due, 2)
      assert.equal(when, q:get(id).due)
      assert.truthy(wait(function() return got end))
      assert.equal(when, got.due)
      assert.has_error(function() q:at("k", "soon") end, "bad argument #2 to 'at' (finite number expected, got string)")
      assert.has_error(function() q:at("k", math.huge) end, "bad argument #2 to 'at' (finite number expected, got inf)")
    end)
  end)

  describe("q:every", function()
    it("runs a durable periodic job until cancelled", function()
      q = assert(open())
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
      wait(function() return false end, 0.3)
      assert.equal(n, #runs)
      assert.has_error(function() q:every("tick", 0) end,
        "bad argument #2 to 'every' (positive number of seconds up to 1e9 expected, got 0)")
    end)

    it("runs once, not once per period, after missing several", function()
      q = assert(open())
      local id = q:every("tick", 0.1)
      local due = q:get(id).due
      q:close()
      sleep(0.55) -- five periods with no process
      q = assert(open())
      local runs, first_at = {}, nil
      q:handle("tick", function(job)
        runs[#runs + 1] = job
        first_at = first_at or wall()
      end)
      assert.is_true(wait(function() return #runs >= 1 end, 1))
      wait(function() return false end, 0.05)
      assert.equal(due, runs[1].due)
      for i = 2, #runs do -- any later run is of a period after the restart
        assert.is_true(runs[i].due > first_at - 0.002, "a missed period ran again")
      end
      local next_due = q:get(id).due
      assert.is_true(next_due > first_at and next_due <= wall() + 0.1)
      -- a whole number of periods after `due`, within what a double holds
      -- at epoch magnitude (~2.4e-7 s; 1e-6 periods failed once)
      local periods = (next_due - due) / 0.1
      assert.near(math.floor(periods + 0.5), periods, 1e-4)
    end)
  end)

  describe("q:cancel", function()
    it("returns true once, and the job never runs", function()
      q = assert(open())
      local ran = false
      q:handle("k", function() ran = true end)
      local id = q:schedule("k", 0.1)
      assert.is_true(q:cancel(id))
      assert.is_false(q:cancel(id))
      assert.is_false(q:cancel("unknown"))
      assert.is_nil(q:get(id))
      -- past its due time and the sweep (1 s), either of which would run it
      wait(function() return false end, 1.3)
      assert.is_false(ran)
      assert.has_error(function() q:cancel(nil) end, "bad argument #1 to 'cancel' (non-empty string expected, got nil)")
    end)
  end)

  describe("q:get, q:pending", function()
    it("shows a job, nil once ran or unknown; counts all processes' jobs", function()
      q = assert(open())
      local q2 = assert(open())
      local id = q:schedule("k", 30, "p", { id = "a" })
      q2:schedule("k", 30, nil, { id = "b" })
      assert.equal(2, q:pending())
      assert.equal(2, q2:pending())
      local job = q:get(id)
      assert.same({ "a", "k", "p", 0 }, { job.id, job.kind, job.payload, job.attempt })
      assert.is_nil(job.dead)
      assert.is_nil(job.every)
      assert.is_nil(q:get("nope"))
      assert.has_error(function() q:get(1) end, "bad argument #1 to 'get' (non-empty string expected, got number)")
    end)

    it("keeps queues apart in one store", function()
      q = assert(open({ queue = "mail" }))
      local q2 = assert(open({ queue = "billing" }))
      q:schedule("k", 30, nil, { id = "same" })
      q2:schedule("k", 30, "other", { id = "same" })
      assert.equal(1, q:pending())
      assert.is_nil(q:get("same").payload)
      assert.equal("other", q2:get("same").payload)
    end)
  end)

  describe("retries and dead jobs", function()
    it("retries a failing job with backoff, then it is dead, kept until cancelled", function()
      local errors = {}
      q = assert(open({ attempts = 3, backoff = { delay = 0.05, factor = 2 },
        on_error = function(err, job) errors[#errors + 1] = { err, job } end }))
      local attempts, times = {}, {}
      q:handle("k", function(job)
        attempts[#attempts + 1] = job.attempt
        times[#times + 1] = wall()
        error("refused " .. job.attempt, 0)
      end)
      local id = q:schedule("k", 0, "p")
      assert.is_true(wait(function() return #q:dead() == 1 end))
      assert.same({ 1, 2, 3 }, attempts)
      assert.is_true(times[2] - times[1] >= 0.05 - 0.005)
      assert.is_true(times[3] - times[2] >= 0.1 - 0.005)
      assert.equal(3, #errors)
      assert.equal("refused 3", errors[3][1])
      assert.equal(id, errors[3][2].id)
      local dead = q:dead()[1]
      assert.same({ id, "k", "p", 3, true, "refused 3" }, { dead.id, dead.kind, dead.payload, dead.attempt, dead.dead, dead.error })
      assert.is_true(q:get(id).dead)
      assert.equal(0, q:pending())
      wait(function() return false end, 0.2)
      assert.equal(3, #attempts)
      assert.is_true(q:cancel(id))
      assert.same({}, q:dead())
      assert.is_nil(q:get(id))
    end)

    it("runs a job again after an error until it succeeds", function()
      q = assert(open({ backoff = { delay = 0.01 }, on_error = function() end }))
      local n = 0
      q:handle("k", function() n = n + 1; assert(n >= 3, "not yet") end)
      q:schedule("k", 0, nil, { id = "x" })
      assert.is_true(wait(function() return n == 3 and q:pending() == 0 end))
      assert.is_nil(q:get("x"))
      assert.same({}, q:dead())
    end)
  end)

  describe("q:batch", function()
    it("stores many jobs in one commit", function()
      q = assert(open())
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      local ids = {}
      assert.is_true(q:batch(function(b)
        for i = 1, 1000 do ids[i] = b:schedule("k", i <= 10 and 0.05 or 3600, tostring(i)) end
        b:cancel(ids[1000])
      end))
      assert.equal(999, q:pending())
      assert.equal(999, query(path, "SELECT count(*) FROM hwtimer_jobs"))
      assert.is_true(wait(function() return ran == 10 end))
    end)

    it("rolls back and raises when fn raises", function()
      q = assert(open())
      q:schedule("k", 60, nil, { id = "kept" })
      assert.has_error(function()
        q:batch(function(b)
          b:schedule("k", 0.01, nil, { id = "gone" })
          b:cancel("kept")
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
    it("refuses other coroutines' writes while its function is yielded; claims wait for it", function()
      if _VERSION == "Lua 5.1" and not jit then
        return pending("Lua 5.1's pcall is not yieldable: there q:batch's function cannot yield")
      end
      local ran, errors = {}, 0
      q = assert(open({ on_error = function() errors = errors + 1 end }))
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
      timer:run(0.1) -- due jobs wait for the batch: no claim inside its transaction
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
  end)

  describe("a due job with no handler in this process", function()
    it("stays stored and unclaimed until a handler for its kind exists", function()
      q = assert(open({ sweep = 0.05 }))
      local id = q:schedule("unknown_kind", 0)
      wait(function() return false end, 0.2)
      local job = q:get(id)
      assert.equal(0, job.attempt)
      assert.is_nil(job.leased)
      local ran
      q:handle("unknown_kind", function(j) ran = j end)
      assert.truthy(wait(function() return ran end))
      assert.equal(1, ran.attempt)
    end)
  end)

  describe("restart", function()
    it("runs overdue jobs oldest first, in batches that keep the loop responsive", function()
      q = assert(open({ batch = 200 }))
      local now = wall()
      q:batch(function(b)
        for i = 2000, 1, -1 do b:at("k", now - 100 + i * 0.01, nil, { id = tostring(i) }) end
      end)
      q:close()
      q = assert(open({ batch = 200 }))
      -- a timeout that re-arms itself at delay 0 runs once in every dispatch:
      -- it counts the loop's turns, whatever the machine's speed
      local order, ticks, ticks_at, beating = {}, 0, {}, true
      local function tick()
        ticks = ticks + 1
        if beating then timer:schedule(0, tick) end
      end
      timer:schedule(0, tick)
      local beat = { cancel = function() beating = false end }
      q:handle("k", function(job)
        order[#order + 1] = tonumber(job.id)
        ticks_at[#order] = ticks
      end)
      assert.is_true(wait(function() return #order == 2000 and q:pending() == 0 end))
      beat:cancel()
      for i = 1, 2000 do assert.equal(i, order[i]) end
      assert.is_true(ticks_at[2000] - ticks_at[1] >= 5, "the loop ran nothing else during the catch-up")
      assert.equal(0, q:pending())
    end)

    it("reclaims a job whose lease expired (its process died)", function()
      q = assert(open({ sweep = 0.05 }))
      q:schedule("k", 0, nil, { id = "x" })
      q:close()
      -- a process claimed it and died: leased for 0.3 s more
      local leased_until = wall() + 0.3
      local db = assert(sqlite.open(path))
      assert(db:exec(string.format("UPDATE hwtimer_jobs SET owner = 'ghost', attempt = 1, ready = %.6f",
        leased_until)))
      db:close()
      q = assert(open({ sweep = 0.05 }))
      local got, at
      q:handle("k", function(job) got, at = job, wall() end)
      assert.truthy(wait(function() return got end))
      assert.equal(2, got.attempt)
      assert.is_true(at >= leased_until, "ran " .. (leased_until - at) .. " s before its lease expired")
    end)
  end)

  describe("faults", function()
    it("gives nil, message when the store is locked, and loses nothing accepted", function()
      q = assert(open({ busy_timeout = 0.05, on_error = function() end }))
      local ran = {}
      q:handle("k", function(job) ran[job.id] = true end)
      assert(q:schedule("k", 0.3, nil, { id = "before" }))
      local lock = assert(sqlite.open(path))
      assert(lock:exec("BEGIN EXCLUSIVE"))
      local id, err = q:schedule("k", 0.1, nil, { id = "during" })
      assert.is_nil(id)
      assert.equal("hwtimer.durable: database is locked", err)
      assert.has_no_error(function() q:get("before") end)
      assert(lock:exec("ROLLBACK"))
      lock:close()
      assert(q:schedule("k", 0.1, nil, { id = "after" }))
      assert.is_true(wait(function() return ran.before and ran.after end))
      assert.is_nil(ran.during)
      assert.equal(0, q:pending())
    end)

    it("reports a store that stays down at most once a second, with the count held back", function()
      local reports = {}
      q = assert(open({ busy_timeout = 0, poll = 0.01, on_error = function(err, job)
        reports[#reports + 1] = { err = tostring(err), job = job }
      end }))
      local ran = false
      q:handle("k", function() ran = true end)
      assert(q:schedule("k", 0.05, nil, { id = "due while locked" }))
      local lock = assert(sqlite.open(path))
      assert(lock:exec("BEGIN EXCLUSIVE"))
      local t0 = hwtimer.now()
      while hwtimer.now() - t0 < 1.5 do timer:run(0.05) end -- a claim retry every 0.05 s, a poll every 0.01 s
      assert(lock:exec("ROLLBACK"))
      lock:close()
      assert.is_true(#reports >= 1 and #reports <= 2, #reports .. " reports in 1.5 s")
      for _, r in ipairs(reports) do assert.is_nil(r.job) end
      assert.matches("database is locked", reports[1].err)
      if #reports == 2 then assert.matches("%(and %d+ store errors in the last 1 s%)$", reports[2].err) end
      assert.is_true(wait(function() return ran end)) -- nothing accepted is lost
    end)

    it("gives nil, message when the disk is full, and loses nothing accepted", function()
      q = assert(open())
      local ok = 0
      -- a store that may grow by a few pages only: SQLite's disk-full path
      assert(durable.engine(q).db:exec("PRAGMA max_page_count = " .. (query(path, "PRAGMA page_count") + 3)))
      local id, err
      for i = 1, 2000 do
        id, err = q:schedule("k", 3600, string.rep("x", 200), { id = "j" .. i })
        if not id then break end
        ok = ok + 1
      end
      assert.is_nil(id)
      assert.equal("hwtimer.durable: database or disk is full", err)
      assert.is_true(ok > 0)
      q:close()
      q = assert(open())
      assert.equal(ok, q:pending())
      assert.truthy(q:get("j" .. ok))
    end)

    it("reports a handler's error to on_error with the job", function()
      local got
      q = assert(open({ attempts = 1, on_error = function(err, job) got = { err, job } end }))
      q:handle("k", function() error("bad job", 0) end)
      q:schedule("k", 0, nil, { id = "x" })
      assert.truthy(wait(function() return got end))
      assert.equal("bad job", got[1])
      assert.equal("x", got[2].id)
    end)
  end)

  describe("acknowledgements", function()
    local function count(where)
      return query(path, "SELECT count(*) FROM hwtimer_jobs" .. (where and (" WHERE " .. where) or ""))
    end

    it("wait for the next claim, which writes them; reads of jobs write them first", function()
      -- (no poll or sweep: either would claim, and write them, on its own)
      q = assert(open({ ack_delay = 30, poll = 60, sweep = 60 }))
      local ran = {}
      q:handle("k", function(job) ran[#ran + 1] = job.id end)
      assert(q:schedule("k", 0.05, nil, { id = "a" }))
      assert(q:schedule("k", 0.3, nil, { id = "b" }))
      assert.is_true(wait(function() return #ran == 1 end))
      assert.equal(1, count("id = 'a' AND owner IS NOT NULL")) -- ran, still leased
      assert.is_true(wait(function() return #ran == 2 end))
      assert.equal(0, count("id = 'a'")) -- written with b's claim
      assert.equal(1, count("id = 'b'"))
      assert.is_nil(q:get("b"))
      assert.equal(0, count())
      assert.equal(0, q:pending())
    end)

    it("are written after ack_delay when no claim comes, and at once with ack_delay = 0", function()
      for _, delay in ipairs({ 0.05, 0 }) do
        local queue = assert(open({ ack_delay = delay, queue = "q" .. delay }))
        local ran
        queue:handle("k", function() ran = true end)
        assert(queue:schedule("k", 0.02))
        assert.is_true(wait(function() return ran end))
        if delay == 0 then assert.equal(0, count()) end
        assert.is_true(wait(function() return count() == 0 end, 2))
      end
    end)

    it("are written at once when the timer was stopped during the pass", function()
      -- (in nginx: a worker exiting while a pass waits on a cosocket)
      local errors = {}
      timer = hwtimer.new({ on_error = function(err) errors[#errors + 1] = tostring(err) end })
      q = assert(open({ ack_delay = 30 }))
      local stopped
      q:handle("k", function() stopped = timer:stop() end)
      assert(q:schedule("k", 0.02))
      local limit = hwtimer.now() + 5
      while not stopped and hwtimer.now() < limit do timer:run(0.005) end
      assert.truthy(stopped)
      assert.same({}, errors)
      assert.equal(0, count())
    end)

    it("are written by close, and by cancel, which then finds the job gone", function()
      q = assert(open({ ack_delay = 30 }))
      local ran = 0
      q:handle("k", function() ran = ran + 1 end)
      local due = sqlite.now() + 0.05
      assert(q:batch(function(b) -- due together: one claim
        b:at("k", due, nil, { id = "a" })
        b:at("k", due, nil, { id = "b" })
      end))
      assert.is_true(wait(function() return ran == 2 end))
      assert.equal(2, count())
      assert.is_false(q:cancel("a"))
      assert.equal(0, count())
      assert(q:schedule("k", 0.02, nil, { id = "c" }))
      assert.is_true(wait(function() return ran == 3 end))
      assert.equal(1, count())
      q:close()
      assert.equal(0, count())
    end)
  end)

  local shared = {
    describe = describe, it = it, pending = pending, assert = assert,
    open = function(opts) return open(opts) end,
    timer = function() return timer end,
    wait = function(done, secs) return wait(done, secs) end,
    now = sqlite.now,
    lease_end = function(id) return query(path, "SELECT ready FROM hwtimer_jobs WHERE id = ?1", id) end,
    holder = function(id) return query(path, "SELECT owner FROM hwtimer_jobs WHERE id = ?1", id) end,
    take = function(id)
      local db = assert(sqlite.open(path))
      local st = assert(db:prepare("UPDATE hwtimer_jobs SET owner = 'other', attempt = 2, ready = ready + 3600 WHERE id = ?1"))
      assert(st:run(id))
      db:close()
    end,
  }
  require("spec.durable.leases")(shared)
  require("spec.durable.cancel")(shared)
  require("spec.durable.window")(shared)
  require("spec.durable.contract")(shared)
  describe("q:handle, q:close", function()
    it("raises on bad arguments and after close", function()
      q = assert(open())
      assert.has_error(function() q:handle(1, print) end, "bad argument #1 to 'handle' (non-empty string expected, got number)")
      assert.has_error(function() q:handle("k", 1) end, "bad argument #2 to 'handle' (function expected, got number)")
      local base = timer:pending()
      q:schedule("k", 5)
      q:close()
      q:close()
      assert.is_true(timer:pending() < base)
      for _, m in ipairs({ "schedule", "at", "every", "cancel", "get", "pending", "dead", "handle", "batch" }) do
        assert.has_error(function() q[m](q, "k", 1) end, "attempt to use a closed queue")
      end
    end)
  end)

  ---------------------------------------------------------------------------
  -- Processes
  ---------------------------------------------------------------------------

  local lua = os.getenv("HWT_LUA") or "lua5.4"

  -- Start spec/durable/worker.lua in the background; returns its pid.
  local function start_worker(runs, lease, exit_when_empty, log)
    local cmd = string.format("%s spec/durable/worker.lua '%s' '%s' %s %s >'%s' 2>&1 & echo $!",
      lua, path, runs, lease, exit_when_empty and "1" or "0", log)
    return (shell(cmd):match("%d+"))
  end

  local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true or
    os.execute("kill -0 " .. pid .. " 2>/dev/null") == 0 end

  local function wait_exit(pid, secs)
    local limit = hwtimer.now() + secs
    while alive(pid) and hwtimer.now() < limit do sleep(0.05) end
    return not alive(pid)
  end

  local function count_runs(runs) -- 0 until the worker has made its table
    local db = assert(sqlite.open(runs))
    db:busy_timeout(5)
    local st = db:prepare("SELECT count(*) FROM runs")
    local n = st and st:first() or 0
    db:close()
    return n
  end

  local function store_jobs(n, spread)
    local s = assert(open())
    local now = wall()
    assert(s:batch(function(b)
      for i = 1, n do b:at("job", now + spread * i / n, nil, { id = "j" .. i }) end
    end))
    s:close()
  end

  it("kill -9 in the middle of 50,000 jobs: after a restart every job ran, twice only if in flight", function()
    local n = tonumber(os.getenv("HWT_DURABLE_KILL_N") or "50000")
    local runs = dir .. "/runs.db"
    store_jobs(n, 0.5)
    local pid = start_worker(runs, 1, false, dir .. "/w1.log")
    local limit = hwtimer.now() + 60
    while count_runs(runs) < n / 3 and hwtimer.now() < limit do sleep(0.01) end
    os.execute("kill -9 " .. pid)
    assert.is_true(wait_exit(pid, 5))
    local ran_before = count_runs(runs)
    assert.is_true(ran_before >= n / 3 and ran_before < n, "killed after " .. ran_before .. " runs")
    local in_flight = {}
    for _, r in ipairs(rows(path, "SELECT id FROM hwtimer_jobs WHERE owner IS NOT NULL")) do in_flight[r[1]] = true end
    pid = start_worker(runs, 1, true, dir .. "/w2.log")
    assert.is_true(wait_exit(pid, 90), "the restarted worker did not finish")
    local counts = {}
    for _, r in ipairs(rows(runs, "SELECT id, count(*) FROM runs GROUP BY id")) do counts[r[1]] = r[2] end
    local dup, missing, flight = 0, 0, 0
    for _ in pairs(in_flight) do flight = flight + 1 end
    for i = 1, n do
      local c = counts["j" .. i]
      if not c then missing = missing + 1
      elseif c > 1 then
        dup = dup + 1
        assert.is_true(in_flight["j" .. i], "j" .. i .. " ran twice but was not in flight")
      end
    end
    assert.equal(0, missing)
    assert.equal(0, query(path, "SELECT count(*) FROM hwtimer_jobs"))
    assert.is_true(dup <= flight)
    print(string.format("\n    kill -9 after %d of %d runs: %d in flight, %d ran twice", ran_before, n, flight, dup))
  end)

  it("three processes on one store run every job exactly once", function()
    local n = 6000
    local runs = dir .. "/runs.db"
    store_jobs(n, 1.5)
    local pids = {}
    for i = 1, 3 do pids[i] = start_worker(runs, 30, true, dir .. "/w" .. i .. ".log") end
    for i = 1, 3 do assert.is_true(wait_exit(pids[i], 60), "worker " .. i .. " did not finish") end
    local counts, by_pid = {}, {}
    for _, r in ipairs(rows(runs, "SELECT id, pid FROM runs")) do
      counts[r[1]] = (counts[r[1]] or 0) + 1
      by_pid[r[2]] = (by_pid[r[2]] or 0) + 1
    end
    for i = 1, n do assert.equal(1, counts["j" .. i], "j" .. i) end
    local procs = 0
    for _ in pairs(by_pid) do procs = procs + 1 end
    assert.is_true(procs >= 2, "one process ran every job")
  end)

  it("opens a store of jobs over a year (10^6 on Lua 5.4) within the window's memory", function()
    local n = helpers.full_size() and 1000000 or 100000
    local s = assert(open())
    local now = wall()
    assert(s:batch(function(b)
      for i = 1, n do b:at("far", now + 3600 + i * 315.36, nil) end
    end))
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
      local q = assert(durable.open(timer, { path = %q }))
      q:handle("far", function() end)
      timer:run(0.3)
      collectgarbage()
      print("pending", q:pending(), "in wheel", timer:pending(), "rss growth kB", rss() - before)
    ]], path))
    assert.is_true(ok, out)
    local pend, wheel, growth = out:match("pending%s+(%d+)%s+in wheel%s+(%d+)%s+rss growth kB%s+(%-?%d+)")
    assert.equal(n, tonumber(pend), out)
    assert.is_true(tonumber(wheel) <= 3, out)
    assert.is_true(tonumber(growth) < 8 * 1024, out)
  end)
end)
