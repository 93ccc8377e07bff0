-- hwtimer.durable with its SQLite engine: every line of the contract (issue 11)
-- against real store files in a temporary directory, the faults, and
-- processes that share a store, die with kill -9 and come back.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local sqlite = helpers.optional("hwtimer.sqlite")
local have_sqlite = sqlite ~= nil
if not have_sqlite then
  describe("hwtimer.durable", function()
    it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
  end)
  return
end
local durable = require("hwtimer.durable")

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
    dir = helpers.tempdir("hwtimer-durable")
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
    -- (the queue's refill and poll are its timer's timeouts: a timer at its
    -- max_pending that refused them would leave a queue that never runs a job)
    it("refuses a timer at its max_pending with nil, message, and opens once it has room", function()
      local full = hwtimer.new({ max_pending = 2 })
      finally(function() full:close() end)
      local a, b = full:schedule(60, function() end), full:schedule(60, function() end)
      local queue, err = durable.open(full, { path = path })
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: " .. path .. ": the timer refused the queue's timeouts: "
        .. "too many pending timeouts (2 pending, max_pending 2)", err)
      assert.equal(2, full:pending()) -- (nothing of the queue left on it)
      a:cancel()
      b:cancel()
      queue, err = durable.open(full, { path = path, sweep = 0.05 })
      assert.is_nil(err)
      local ran
      queue:handle("k", function() ran = true end)
      assert(queue:schedule("k", 0))
      full:run(0.5)
      queue:close()
      assert.is_true(ran, "the job did not run")
    end)

    -- (a timer at its max_pending may refuse the refill's next turn: here a
    -- timer object that refuses every schedule while told to)
    it("takes up its refill again once a timer that refused its next turn has room", function()
      local refusing = false
      local proxy = {
        schedule = function(_, ...)
          if refusing then return nil, "too many pending timeouts (the spec's)" end
          return timer:schedule(...)
        end,
        every = function(_, ...) return timer:every(...) end,
      }
      local queue = assert(durable.open(proxy, { path = path, window = 0.1, sweep = 60, poll = 0.02 }))
      local refills, stop = require("spec.helpers").count_calls(durable.engine(queue), "range")
      refusing = true
      timer:run(0.15) -- (a refill every 0.05 s: the next turn refused)
      refusing = false
      local before = refills()
      timer:run(0.3)
      stop()
      queue:close()
      assert.is_true(before >= 1, "no refill before the refusal")
      assert.is_true(refills() - before >= 2, (refills() - before) .. " refills in 0.3 s once the timer took them")
    end)

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
      assert.equal("hwtimer.durable: " .. path .. ": store format 7, this module reads 2", err)
    end)

    -- Format 1's table (spec/durable/format_1.lua), and two statements of a
    -- process of format 1, as hwtimer.durable wrote them before schedules
    -- (format 2).
    local FORMAT_1 = require("spec.durable.format_1")
    local CLAIM_1 = [[UPDATE hwtimer_jobs SET ready = ?3, owner = ?4, attempt = attempt + 1
      WHERE seq IN (SELECT seq FROM hwtimer_jobs WHERE queue = ?1 AND dead = 0 AND ready <= ?2
                    AND kind IN (SELECT kind FROM temp.hwtimer_handled) ORDER BY ready LIMIT ?5)
      RETURNING seq, id, kind, payload, due, attempt, every]]
    local INSERT_1 = [[INSERT OR REPLACE INTO hwtimer_jobs (queue, id, kind, payload, due, ready, every)
      VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6)]]

    local function columns(file)
      local names = {}
      for i, r in ipairs(rows(file, "SELECT name, type FROM pragma_table_info('hwtimer_jobs')")) do
        names[i] = r[1] .. " " .. r[2]
      end
      return names
    end

    it("upgrades a store of format 1 to 2, its jobs kept, and fences the processes of format 1", function()
      local db = assert(sqlite.open(path))
      assert(db:exec(FORMAT_1 .. "CREATE TEMP TABLE hwtimer_handled (kind TEXT PRIMARY KEY);" ..
        "INSERT INTO temp.hwtimer_handled VALUES ('t');"))
      local now = sqlite.now()
      local put_1 = assert(db:prepare(INSERT_1))
      assert(put_1:run("default", "plain", "k", "p", now + 3600, nil))
      assert(put_1:run("default", "tick", "t", "hb", now - 0.5, 2)) -- a periodic job of format 1
      -- a process of format 1 goes on running: its statements are prepared
      local claim_1 = assert(db:prepare(CLAIM_1))
      q = assert(open())
      assert.equal(2, query(path, "PRAGMA user_version"))
      assert.same(columns(dir .. "/new.db", assert(open({ path = dir .. "/new.db" }))), columns(path))
      -- once SQLite prepares them again for the new table, they fail: no
      -- row is claimed or written without a schedule's columns
      local r, err = claim_1:rows("default", now + 10, now + 40, "old", 10)
      assert.is_nil(r)
      assert.equal("no such column: every", err)
      r, err = put_1:run("default", "x", "t", nil, now, nil)
      assert.is_nil(r)
      assert.equal("table hwtimer_jobs has no column named every", err)
      db:close()
      assert.same({ "p", now + 3600 }, { q:get("plain").payload, q:get("plain").due })
      assert.is_nil(q:get("plain").runs) -- not a schedule
      local tick = q:get("tick")
      assert.same({ 2, "once", 0, now - 0.5, "hb" }, { tick.every, tick.missed, tick.runs, tick.scheduled_for, tick.payload })
      local ran = {}
      q:handle("t", function(job) ran[#ran + 1] = job end)
      assert.is_true(wait(function() local j = q:get("tick") return #ran == 1 and not j.leased end))
      assert.same({ now - 0.5, false, 2 }, { ran[1].scheduled_for, ran[1].late, ran[1].every })
      tick = q:get("tick")
      assert.same({ now + 1.5, 1 }, { tick.scheduled_for, tick.runs }) -- its next interval
      assert.equal(2, q:pending())
    end)

    it("refuses a database that is not a file: in memory, by any spelling, or temporary", function()
      local names = { ":memory:", "file::memory:", "file::memory:?cache=shared", "file:x?mode=memory",
        "file:x?mode=memory&cache=shared", "file:%3Amemory%3A", "file:x?m%6Fde=m%65mory", "file:/x?vfs=memdb",
        "file:", "file:?mode=rwc", "file:#frag" }
      for _, name in ipairs(names) do
        local queue, err = open({ path = name })
        assert.is_nil(queue, name)
        assert.equal("hwtimer.durable: " .. name .. ": an in-memory or temporary database, not a store: every " ..
          "job would be lost at its close (name a file)", err)
      end
      -- a file named by a URI is one
      q = assert(open({ path = "file:" .. path .. "?mode=rwc" }))
      assert.truthy(q:schedule("k", 60, nil, { id = "kept" }))
      q:close()
      q = assert(open({ path = path }))
      assert.truthy(q:get("kept"))
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
      for _, how in ipairs({ "stop", "close" }) do
        local ended = hwtimer.new()
        ended[how](ended)
        assert.has_error(function() durable.open(ended, { path = path }) end,
          "bad argument #1 to 'open' (hwtimer.timer expected, got a stopped timer)")
        assert.is_nil(io.open(path)) -- before the store was touched
      end
      -- a timer of the host's own making, with no getfd to ask, is taken as running
      local wrapper = setmetatable({}, { __index = function(_, k)
        if k == "getfd" then return nil end
        local v = timer[k]
        if type(v) ~= "function" then return v end
        return function(_, ...) return v(timer, ...) end
      end })
      local wrapped = assert(durable.open(wrapper, { path = path }))
      assert.truthy(wrapped:schedule("k", 60))
      wrapped:close()
      os.remove(path)
      assert.has_error(function() durable.open(timer, {}) end, "bad argument #2 to 'open' (option 'path' expected)")
      assert.has_error(function() durable.open(timer, { path = path, windwo = 1 }) end,
        "bad argument #2 to 'open' (unknown option 'windwo')")
      assert.has_error(function() durable.open(timer, { path = path, window = 0 }) end,
        "bad argument #2 to 'open' (option 'window': number of seconds from 0 (excluded) to 1e9 expected)")
      assert.has_error(function() durable.open(timer, { path = path, lease = -1 }) end,
        "bad argument #2 to 'open' (option 'lease': number of seconds from 0 (excluded) to 1e9 expected)")
      assert.has_error(function() durable.open(timer, { path = path, attempts = 1.5 }) end,
        "bad argument #2 to 'open' (option 'attempts': integer from 1 to 1000000000 expected)")
      -- every count is bounded: past what the store keeps, a claim failed
      -- ("datatype mismatch") at every pass after the queue had opened
      for _, c in ipairs({ { "attempts", 1e9 }, { "batch", 1e5 }, { "concurrency", 1e6 } }) do
        for _, v in ipairs({ c[2] + 1, 1e19, 2 ^ 63, math.huge, 0, -1, 0 / 0 }) do
          assert.has_error(function() durable.open(timer, { path = path, [c[1]] = v }) end,
            string.format("bad argument #2 to 'open' (option '%s': integer from 1 to %.0f expected)", c[1], c[2]))
        end
      end
      assert.has_error(function() durable.open(timer, { path = path, queue = "" }) end,
        "bad argument #2 to 'open' (option 'queue': non-empty string expected)")
      assert.has_error(function() durable.open(timer, { path = path, sync = "off" }) end,
        "bad argument #2 to 'open' (option 'sync': 'normal' or 'full' expected)")
      for _, v in ipairs({ -1e-9, 86400 + 1e-9, 0 / 0 }) do
        assert.has_error(function() durable.open(timer, { path = path, busy_timeout = v }) end,
          "bad argument #2 to 'open' (option 'busy_timeout': number of seconds from 0 to 86400 expected)")
      end
      for _, v in ipairs({ 0, 86400 }) do -- (both ends taken)
        assert(durable.open(timer, { path = path, busy_timeout = v })):close()
      end
      assert.has_error(function() durable.open(timer, { path = path, on_error = 1 }) end,
        "bad argument #2 to 'open' (option 'on_error': function expected)")
      assert.has_error(function() durable.open(timer, { path = path, backoff = { delay = -1 } }) end,
        "bad argument #2 to 'open' (option 'backoff.delay': number of seconds from 0 to 1e9 expected)")
      assert.has_error(function() durable.open(timer, { path = path, backoff = { dleay = 1 } }) end,
        "bad argument #2 to 'open' (option 'backoff': unknown key 'dleay')")
      assert.has_error(function() durable.open(timer, { path = path, redis = function() end }) end,
        "bad argument #2 to 'open' (options 'path' and 'redis' exclude each other)")
    end)

    -- (has_error strips a message's position: an error raised one level
    -- short blamed a line of hwtimer/durable.lua, not the caller's)
    it("raises its argument errors at the caller's line", function()
      q = assert(open())
      local here = "01%-sqlite_spec%.lua$"
      local cases = {
        { function() local r = durable.open(5) return r end, "bad argument #1 to 'open' (hwtimer.timer expected, got number)" },
        { function() local r = durable.open(timer, 5) return r end, "bad argument #2 to 'open' (table expected, got number)" },
        { function() local r = durable.open(timer, { path = path, nope = 1 }) return r end,
          "bad argument #2 to 'open' (unknown option 'nope')" },
        { function() local r = durable.open(timer, { path = path, lease = -1 }) return r end,
          "bad argument #2 to 'open' (option 'lease': number of seconds from 0 (excluded) to 1e9 expected)" },
        { function() local r = durable.open(timer, { path = path, backoff = { x = 1 } }) return r end,
          "bad argument #2 to 'open' (option 'backoff': unknown key 'x')" },
        { function() local r = q:schedule(nil, 1) return r end, "bad argument #1 to 'schedule' (non-empty string expected, got nil)" },
        { function() local r = q:schedule("k", 1, 5) return r end, "bad argument #3 to 'schedule' (string or nil expected, got number)" },
        { function() local r = q:schedule("k", 1, nil, { zz = 1 }) return r end, "bad argument #4 to 'schedule' (unknown option 'zz')" },
        { function() local r = q:schedule("k", 1, nil, { id = "" }) return r end,
          "bad argument #4 to 'schedule' (option 'id': non-empty string expected, got string)" },
        { function() local r = q:schedule("k") return r end,
          "bad argument #2 to 'schedule' (number of seconds from -1e9 to 1e9 expected, got nil)" },
        { function() local r = q:at(nil, 1) return r end, "bad argument #1 to 'at' (non-empty string expected, got nil)" },
        { function() local r = q:every(nil, 60) return r end, "bad argument #1 to 'every' (non-empty string expected, got nil)" },
        { function() local r = q:every("k", -1) return r end,
          "bad argument #2 to 'every' (positive number of seconds up to 1e9 expected, got -1)" },
        { function() local r = q:handle(nil) return r end, "bad argument #1 to 'handle' (non-empty string expected, got nil)" },
        { function() local r = q:cancel(5) return r end, "bad argument #1 to 'cancel' (non-empty string expected, got number)" },
        { function() local r = q:jobs({ zz = 1 }) return r end, "bad argument #1 to 'jobs' (unknown option 'zz')" },
        { function() local r = q:schedule("k", 1, {}) return r end,
          "bad argument #3 to 'schedule' (string or nil expected, got table)" },
        { function() local r = q:schedule("k", 1, nil, 5) return r end,
          "bad argument #4 to 'schedule' (table expected, got number)" },
        { function() local r = q:schedule("k", 1, nil, { key = "x" }) return r end,
          "bad argument #4 to 'schedule' (unknown option 'key')" },
        { function() local r = q:schedule("k", 1, nil, { id = 5 }) return r end,
          "bad argument #4 to 'schedule' (option 'id': non-empty string expected, got number)" },
        { function() local r = q:at("k", 1, nil, 5) return r end, "bad argument #4 to 'at' (table expected, got number)" },
        { function() local r = q.schedule({}, "k", 1) return r end,
          "calling 'schedule' on bad self (hwtimer.durable expected, got table)" },
        { function() local r = q.close({}) return r end, "calling 'close' on bad self (hwtimer.durable expected, got table)" },
        { function() local r = durable.store_up({}) return r end,
          "bad argument #1 to 'store_up' (hwtimer.durable expected, got table)" },
        { function() local r = durable.engine("q") return r end,
          "bad argument #1 to 'engine' (hwtimer.durable expected, got string)" },
      }
      for _, c in ipairs(cases) do helpers.raises_at(here, c[1], c[2]) end
      assert(q:batch(function(b)
        helpers.raises_at(here, function() local r = b:schedule(nil, 1) return r end,
          "bad argument #1 to 'schedule' (non-empty string expected, got nil)")
      end))
    end)

    it("takes sync = 'full' (FULL survives a power loss)", function()
      q = assert(open({ sync = "full" }))
      assert.equal(2, durable.engine(q).db and (function()
        local st = durable.engine(q).db:prepare("PRAGMA synchronous")
        return st:first()
      end)())
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

    -- (a row another program, or a newer build, wrote: its run cannot be begun)
    it("buries a schedule whose stored calendar this build cannot read, with why, and says so to on_error", function()
      local q1 = assert(open())
      assert(q1:every("k", "0 * * * *", "p", { id = "c" }))
      q1:close()
      local db = assert(sqlite.open(path))
      local st = assert(db:prepare("UPDATE hwtimer_jobs SET cron = 'not a cron', due = ?1, ready = ?1 WHERE id = 'c'"))
      assert.equal(1, st:run(os.time() - 1))
      db:close()
      local errors, ran = {}, false
      q = assert(open({ on_error = function(err, job) errors[#errors + 1] = { err, job and job.id } end }))
      q:handle("k", function() ran = true end)
      assert.is_true(wait(function() return #q:dead() == 1 end))
      local dead = q:dead()[1]
      assert.same({ "c", "k", "p" }, { dead.id, dead.kind, dead.payload })
      assert.matches("^cron: ", dead.error)
      assert.same({ { dead.error, "c" } }, errors)
      assert.is_false(ran)
      assert.equal(0, q:pending())
    end)

    -- (its own calls: passes, polls, acknowledgements; valgrind's turns are too slow for the steps' timing)
    local steps_title = "while the store is held to be down, tries it once a backoff step; acknowledgements wait too"
    if os.getenv("HWT_SLOW") then
      pending(steps_title .. ": in the plain runs")
    else
      it(steps_title, function()
        q = assert(open({ busy_timeout = 0.005, ack_delay = 0.2, poll = 60, sweep = 60, on_error = function() end }))
        local eng, locked, tries = durable.engine(q), nil, {}
        for _, name in ipairs({ "ack", "claim", "changes", "range", "probe", "renew" }) do
          local f = eng[name]
          eng[name] = function(...) -- (calls within 10 ms of each other: one try)
            local at = locked and hwtimer.now() - locked
            if at and (#tries == 0 or at - tries[#tries] > 0.01) then tries[#tries + 1] = at end
            return f(...)
          end
        end
        local ran = {}
        q:handle("k", function(job) ran[job.id] = true end)
        assert(q:schedule("k", 0, nil, { id = "a" }))
        assert(q:schedule("k", 0.1, nil, { id = "b" }))
        assert.is_true(wait(function() return ran.a end))
        -- a's acknowledgement waits 0.2 s; b's claim at 0.1 s fails, and so
        -- the store is held down: tried again 0.05 s on, then 0.1 s, 0.2 s ...
        local lock = assert(sqlite.open(path))
        assert(lock:exec("BEGIN EXCLUSIVE"))
        locked = hwtimer.now()
        timer:run(0.6)
        assert(lock:exec("ROLLBACK"))
        lock:close()
        locked = nil
        assert.is_true(#tries >= 2, #tries .. " tries")
        for i = 2, #tries do
          local step = 0.05 * 2 ^ (i - 2)
          assert.is_true(tries[i] - tries[i - 1] >= 0.9 * step, "tries at " .. table.concat(tries, ", ") ..
            " s: the " .. i .. "th within " .. step .. " s of the one before")
        end
        assert.is_true(wait(function() return ran.b and q:pending() == 0 end))
        assert.is_nil(q:get("a"))
      end)
    end

    it("gives nil and the store's message from get, every and schedule when its table is gone", function()
      q = assert(open({ on_error = function() end }))
      assert(q:every("k", 60, nil, { id = "s" }))
      local other = assert(sqlite.open(path))
      assert(other:exec("DROP TABLE hwtimer_jobs"))
      other:close()
      assert.same({ nil, "no such table: hwtimer_jobs" }, { q:get("s") }) -- (not "no such job": nil alone)
      assert.same({ nil, "hwtimer.durable: no such table: hwtimer_jobs" }, { q:every("k", 30, nil, { id = "s" }) })
      assert.same({ nil, "hwtimer.durable: no such table: hwtimer_jobs" }, { q:schedule("k", 1) })
      -- q:handle raises it, at its caller's line (its kinds are a table of the connection's own)
      assert(durable.engine(q).db:exec("DROP TABLE temp.hwtimer_handled"))
      helpers.raises_at("01%-sqlite_spec%.lua$", function() q:handle("k", function() end) end,
        "hwtimer.durable: no such table: temp.hwtimer_handled")
    end)

    it("writes an acknowledgement the locked store refused once it is free, with nothing else to do", function()
      -- no poll within the test: only the failed write's own retry (the
      -- backoff's step, 0.05 s, then 0.1, ...) can write it
      local reports = {}
      q = assert(open({ busy_timeout = 0.01, poll = 60, on_error = function(err)
        reports[#reports + 1] = tostring(err)
      end }))
      local lock = assert(sqlite.open(path))
      local runs, free = 0, false
      q:handle("k", function()
        runs = runs + 1
        assert(lock:exec("BEGIN EXCLUSIVE")) -- the acknowledgement after this run fails
        timer:schedule(0.2, function() assert(lock:exec("ROLLBACK")) free = true end)
      end)
      assert(q:schedule("k", 0.01, nil, { id = "acked" }))
      local t0 = hwtimer.now()
      assert.is_true(wait(function()
        return free and query(path, "SELECT count(*) FROM hwtimer_jobs WHERE id = ?", "acked") == 0
      end, 3), "the acknowledgement was not written once the store was free")
      local took = hwtimer.now() - t0
      lock:close()
      assert.is_true(took < 1.5, "written " .. took .. " s after the schedule")
      assert.equal(1, runs)
      assert.matches("acknowledge: .*database is locked", reports[1] or "")
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
    -- A renewal whose UPDATE fails (a trigger planted here raises while a
    -- flag is set: what a full disk or an I/O error does to a write) rolls
    -- its transaction back; the leases are renewed on the next try, and every
    -- job runs once. (Left open, the transaction made every later BEGIN
    -- fail: no ack, no claim, each job run again after its lease.)
    it("rolls back a renewal that fails, and renews again on the next try", function()
      -- (Lua only, on leases of 0.2 s: left out of the valgrind run, whose
      -- slowness would let them lapse)
      if os.getenv("HWT_SLOW") then return pending("runs in the plain runs of each Lua") end
      local reports, own = {}, nil
      -- the failure, once reported, is taken away (pcall: a lock left held would make that wait and fail)
      local function on_error(err)
        reports[#reports + 1] = tostring(err)
        if tostring(err):find("planted", 1, true) then
          reports[#reports + 1] = tostring(select(2, pcall(own.exec, own, "UPDATE fail_renew SET on_ = 0")))
        end
      end
      q = assert(open({ lease = 0.2, poll = 0.05, on_error = on_error }))
      own = assert(sqlite.open(path))
      own:busy_timeout(2000)
      assert(own:exec("CREATE TABLE fail_renew (on_ INTEGER); INSERT INTO fail_renew VALUES (0);"
        .. "CREATE TRIGGER planted BEFORE UPDATE OF ready ON hwtimer_jobs "
        .. "WHEN NEW.ready > OLD.ready AND (SELECT on_ FROM fail_renew) = 1 "
        .. "BEGIN SELECT RAISE(ABORT, 'planted renewal failure'); END"))
      local ran = {}
      assert(q:batch(function(b)
        for i = 1, 8 do b:at("k", os.time() - 1 + i * 2e-6, nil, { id = "j" .. i }) end
      end))
      q:handle("k", function(job)
        ran[#ran + 1] = job.id
        if job.id == "j2" then assert(own:exec("UPDATE fail_renew SET on_ = 1")) end
        require("hwtimer_testutil").sleep(0.05)
      end)
      local t0 = hwtimer.now()
      while hwtimer.now() - t0 < 3 and (#ran < 8 or q:pending() > 0) do timer:run(0.02) end
      while hwtimer.now() - t0 < 3.5 do timer:run(0.02) end -- a second run would show by now
      own:close()
      assert.same({ "j1", "j2", "j3", "j4", "j5", "j6", "j7", "j8" }, ran, table.concat(ran, " ") .. " / " .. table.concat(reports, " / "))
      assert.equal(0, q:pending())
      assert.truthy(q:schedule("k", 3600)) -- the store takes writes
      local planted = false
      for _, r in ipairs(reports) do planted = planted or tostring(r):find("planted renewal failure", 1, true) ~= nil end
      assert.is_true(planted, "the failed renewal was not reported")
    end)

    -- The queue's exit in an nginx worker (runs.exit, on nginx's sleep)
    -- while a handler still runs: its lease is renewed every third of the
    -- lease, and a renewal that failed is tried again a sixth of the lease
    -- later (not a second later: a lease of 0.6 s would run out first).
    -- Called here from inside the handler, the engine's clock advanced by
    -- the sleep, not by the wall (a busy machine changes nothing), its
    -- renewals failing and counted.
    it("at a worker's exit, tries a failed renewal again a sixth of the lease later", function()
      local reports = {}
      q = assert(open({ lease = 0.6, poll = 0.05, on_error = function(err) reports[#reports + 1] = tostring(err) end }))
      local e = durable.engine(q)
      local tries, sleeps, fake = 0, 0, nil
      local exited = false
      local function sleep(s)
        sleeps = sleeps + 1
        if sleeps > 20 then error("enough") end
        fake = fake + s
      end
      q:handle("k", function()
        fake = e:now()
        e.now = function() return fake end -- (what the queue's clock reads)
        e.renew = function() tries = tries + 1; return nil, "planted renewal failure" end
        local ok, err = pcall(require("hwtimer.durable.runs").exit, q, sleep)
        e.now, e.renew = nil, nil -- (the engine's own again)
        exited = ok or err
      end)
      assert(q:schedule("k", 0, nil, { id = "running at exit" }))
      assert.is_true(wait(function() return exited ~= false end))
      assert.is_true(exited, tostring(exited))
      assert.equal(21, sleeps)
      -- 2 s of the queue's clock, 0.1 s a sleep: a try at 0.2 s, then one
      -- every 0.1 s (0.2 at worst, rounded); tried again after 1 s, 2 in all
      assert.is_true(tries >= 8, tries .. " renewals tried in 2 s of a 0.6 s lease")
      assert.matches("planted renewal failure", reports[1] or "")
    end)
  end)

  -- q:wake() (another process said a job is due now): one poll of the
  -- store in a timeout of the queue's timer, however many wake-ups come
  -- before it runs; none once the queue is closed.
  describe("q:wake", function()
    it("polls the store once for the wake-ups before that poll, and not at all once closed", function()
      q = assert(open({ poll = 60, sweep = 60 }))
      timer:run(0.05) -- (the open's first looks are done)
      local polls = helpers.count_calls(durable.engine(q), "changes")
      for round = 1, 2 do
        for _ = 1, 5 do q:wake() end
        timer:run(0.05)
        assert.equal(round, polls())
      end
      q:close()
      q:wake()
      timer:run(0.05)
      assert.equal(2, polls())
    end)
  end)

  -- SQLite holds a batch's cancels in its transaction: they are rolled back
  -- with it (Redis sends them at once: spec/durable/runs.lua leaves them out).
  describe("q:batch", function()
    -- A job in the window cancelled inside a batch leaves the window when
    -- the batch commits (its timeout in the wheel with it), as a cancel outside does.
    it("takes a job it cancels out of the window", function()
      q = assert(open({ window = 60 }))
      local base = timer:pending()
      assert(q:schedule("k", 30, nil, { id = "in-window" }))
      assert.matches(", 1 in the window%)$", tostring(q))
      assert.is_true(q:batch(function(b) assert.is_true(b:cancel("in-window")) end))
      assert.matches(", 0 in the window%)$", tostring(q))
      assert.is_true(timer:pending() <= base)
      assert.is_nil(q:get("in-window"))
    end)

    it("cancels inside its commit: a job of the batch, and none if fn raises", function()
      q = assert(open())
      local ids = {}
      assert.is_true(q:batch(function(b)
        for i = 1, 1000 do ids[i] = b:schedule("k", 3600, tostring(i)) end
        assert.is_true(b:cancel(ids[1000]))
      end))
      assert.equal(999, q:pending())
      assert.equal(999, query(path, "SELECT count(*) FROM hwtimer_jobs"))
      assert.has_error(function()
        q:batch(function(b)
          b:cancel(ids[1])
          error("stop", 0)
        end)
      end, "stop")
      assert.equal(999, q:pending())
      assert.truthy(q:get(ids[1]))
    end)

    -- (a batch whose coroutine is never resumed held the write lock until
    -- q:close(): every other process got "database is locked")
    it("gives the write lock back to other processes once batch_timeout has passed", function()
      if _VERSION == "Lua 5.1" and not jit then
        return pending("Lua 5.1's pcall is not yieldable: there q:batch's function cannot yield")
      end
      q = assert(open({ batch_timeout = 0.2, on_error = function() end }))
      local other = assert(open({ busy_timeout = 0 })) -- a connection of its own, as another process's
      local co = coroutine.create(function()
        return q:batch(function(b)
          assert(b:schedule("k", 60, nil, { id = "abandoned" }))
          coroutine.yield()
        end)
      end)
      assert(coroutine.resume(co))
      local id, err = other:schedule("k", 60, nil, { id = "other" })
      assert.is_nil(id)
      assert.equal("hwtimer.durable: database is locked", err)
      assert.is_true(wait(function() return other:schedule("k", 60, nil, { id = "other" }) ~= nil end, 3))
      assert.equal(1, query(path, "SELECT count(*) FROM hwtimer_jobs"))
      assert.is_nil(other:get("abandoned"))
    end)
  end)

  local shared = {
    describe = describe, it = it, pending = pending, assert = assert,
    finally = function(fn) return finally(fn) end, -- (busted's, looked up while an it runs)
    open = function(opts) return open(opts) end,
    timer = function() return timer end,
    wait = function(done, secs) return wait(done, secs) end,
    now = sqlite.now,
    resolution = 0, -- a REAL column: the due time as given
    check_store = function(empty)
      assert.equal("ok", query(path, "PRAGMA integrity_check"))
      if empty then assert.equal(0, query(path, "SELECT count(*) FROM hwtimer_jobs WHERE queue = 'default'")) end
    end,
    jobs = function(queue)
      local jobs = {}
      for _, r in ipairs(rows(path, "SELECT id, coalesce(owner, ''), ready FROM hwtimer_jobs WHERE queue = ?1",
        queue or "default")) do
        jobs[r[1]] = { owner = r[2], ready = r[3] }
      end
      return jobs
    end,
    lease_end = function(id) return query(path, "SELECT ready FROM hwtimer_jobs WHERE id = ?1", id) end,
    holder = function(id) return query(path, "SELECT owner FROM hwtimer_jobs WHERE id = ?1", id) end,
    take = function(id)
      local db = assert(sqlite.open(path))
      local st = assert(db:prepare("UPDATE hwtimer_jobs SET owner = 'other', attempt = 2, ready = ready + 3600 WHERE id = ?1"))
      assert(st:run(id))
      db:close()
    end,
  }
  -- Worker processes (spec/durable/worker.lua) record their runs in runs.db
  -- beside the store.
  local lua = os.getenv("HWT_LUA") or "lua5.4"
  function shared.start_worker(lease, exit_when_empty, stall, log)
    return helpers.spawn(string.format("%s spec/durable/worker.lua '%s' '%s/runs.db' %s %s %s >'%s' 2>&1",
      lua, path, dir, lease, exit_when_empty and "1" or "0", stall and "1" or "0", log))
  end
  local function runs_rows(sql) -- none until a worker has made its table
    local db = assert(sqlite.open(dir .. "/runs.db"))
    db:busy_timeout(5)
    local st = db:prepare(sql)
    local r = st and assert(st:rows()) or {}
    db:close()
    return r
  end
  function shared.ran()
    local r = runs_rows("SELECT count(*) FROM runs")
    return r[1] and r[1][1] or 0
  end
  function shared.runs()
    local counts, by_pid = {}, {}
    for _, r in ipairs(runs_rows("SELECT id, pid FROM runs")) do
      counts[r[1]] = (counts[r[1]] or 0) + 1
      by_pid[r[2]] = (by_pid[r[2]] or 0) + 1
    end
    return counts, by_pid
  end
  -- (valgrind: 5,000, as Redis's repeat runs; 50,000 took 26 s of its run)
  shared.kill_jobs = tonumber(os.getenv("HWT_DURABLE_KILL_N") or (os.getenv("HWT_SLOW") and 5000 or 50000))
  function shared.child_open() return string.format("{ path = %q }", path) end

  require("spec.durable.shared")(shared)
end)
