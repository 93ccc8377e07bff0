-- hwtimer.sqlite, the SQLite binding under hwtimer.durable: its statements
-- and its checkpoint thread. Nothing here starts a child process, so that
-- make check-tsan can run it (a shell started with TSan preloaded crashes):
-- store files are os.tmpname() paths.
local hwtimer = require("hwtimer")

local sqlite = require("spec.helpers").optional("hwtimer.sqlite")
local have_sqlite = sqlite ~= nil
if not have_sqlite then
  describe("hwtimer.sqlite", function()
    it("is built", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
  end)
  return
end
local durable = require("hwtimer.durable")

local function remove_store(path)
  for _, suffix in ipairs({ "", "-wal", "-shm" }) do os.remove(path .. suffix) end
end

-- One value of a query on its own connection.
local function query(path, sql)
  local db = assert(sqlite.open(path))
  local r = { assert(db:prepare(sql)):first() }
  db:close()
  return (table.unpack or unpack)(r)
end

describe("hwtimer.sqlite", function()
  local path, timer, q

  before_each(function()
    path = os.tmpname() -- an empty file: SQLite takes it for an empty database
    timer = hwtimer.new()
  end)

  after_each(function()
    if q then q:close() end
    q = nil
    timer:close()
    remove_store(path)
  end)

  local function wal_size()
    local f = io.open(path .. "-wal")
    if not f then return 0 end
    local n = f:seek("end")
    f:close()
    return n
  end

  -- (its whole surface: the store's connections, the clock, the file watch
  -- hwtimer.durable.sqlite_wake listens with, and the library's version)
  it("gives open, now, watch and the SQLite version it runs on", function()
    assert.is_function(sqlite.open)
    assert.is_function(sqlite.now)
    assert.is_function(sqlite.watch)
    assert.matches("^3%.%d+%.%d+", sqlite.sqlite_version)
  end)

  it("sets busy_timeout to the nearest millisecond, as SQLite reads it back", function()
    local db = assert(sqlite.open(":memory:"))
    for _, c in ipairs({ { 0, 0 }, { 0.05, 50 }, { 0.0015, 2 }, { 0.0014, 1 }, { 2.5, 2500 }, { 86400, 86400000 } }) do
      db:busy_timeout(c[1])
      assert.equal(c[2], (assert(db:prepare("PRAGMA busy_timeout")):first()), c[1] .. " s")
    end
    assert.has_error(function() db:busy_timeout(-1) end,
      "bad argument #1 to 'busy_timeout' (number of seconds from 0 to 86400 expected)")
    db:close()
  end)

  it("prepares nothing from a text without a statement, saying so, and refuses bad SQL with SQLite's message",
    function()
    local db = assert(sqlite.open(":memory:"))
    for _, sql in ipairs({ "", "   ", "-- a comment", "/* another */" }) do
      assert.same({ n = 2, nil, "no statement in the text" }, table.pack and table.pack(db:prepare(sql))
        or { n = select("#", db:prepare(sql)), db:prepare(sql) }, sql)
    end
    local st, err = db:prepare("SELEC 1")
    assert.is_nil(st)
    assert.matches("syntax error", err, 1, true)
    db:close()
  end)

  it("binds, steps and resets in one call; a bad value raises and leaves no binding behind", function()
    local db = assert(sqlite.open(":memory:"))
    assert(db:exec("CREATE TABLE t (a TEXT, b TEXT)"))
    local ins = assert(db:prepare("INSERT INTO t VALUES (?1, ?2)"))
    local n, rowid = ins:run("x", "y")
    assert.equal(1, n)
    assert.equal(1, rowid)
    assert.has_error(function() ins:run("gone" .. ("-"):rep(40), {}) end,
      "bad argument #2 to 'run' (nil, boolean, number or string expected, got table)")
    collectgarbage()
    collectgarbage()
    rowid = select(2, ins:run()) -- binds nothing: both NULL, not the string of the failed call
    assert.equal(2, rowid)
    local sel = assert(db:prepare("SELECT a, b FROM t WHERE rowid = ?1"))
    assert.same({ "x", "y" }, { sel:first(1) })
    local a, b = sel:first(2)
    assert.is_nil(a)
    assert.is_nil(b)
    -- each call binds afresh: none given binds NULL, not the last call's
    assert.same({ "x", "y" }, { sel:first(1) })
    assert.is_nil((sel:first()))
    -- as many values as parameters, and no more
    assert.equal(1, (ins:run("p", "q")))
    assert.has_error(function() ins:run("p", "q", "r") end, "too many values to bind (3 for 2 parameters)")
    assert.has_error(function() sel:first(1, 2) end, "too many values to bind (2 for 1 parameters)")
    assert.equal(4, select(2, ins:run("p")))
    db:close()
  end)

  it("tells the last insert's rowid and the last statement's changes", function()
    local db = assert(sqlite.open(":memory:"))
    assert.equal(0, db:last_insert_rowid()) -- no insert yet
    assert(db:exec("CREATE TABLE t (a TEXT); INSERT INTO t VALUES ('x'), ('y'), ('z')"))
    assert.equal(3, db:last_insert_rowid())
    assert.equal(3, db:changes())
    assert(db:exec("UPDATE t SET a = 'w' WHERE rowid < 3"))
    assert.equal(2, db:changes())
    assert.equal(3, db:last_insert_rowid()) -- an UPDATE leaves it as it was
    assert(db:exec("INSERT INTO t (rowid, a) VALUES (10, 'v')"))
    assert.equal(10, db:last_insert_rowid())
    db:close()
  end)

  it("names itself; binds booleans as 1 and 0; refuses a finalized statement and a closed database", function()
    local db = assert(sqlite.open(":memory:"))
    assert.equal("hwtimer.sqlite.db (:memory:)", tostring(db))
    local st = assert(db:prepare("SELECT ?1, ?2"))
    assert.equal("hwtimer.sqlite.stmt (SELECT ?1, ?2)", tostring(st))
    assert.same({ 1, 0 }, { st:first(true, false) })
    assert.is_true(st:bind(1, false))
    assert.is_true(st:step())
    assert.equal(0, st:column(1))
    st:reset()
    local ok, err = db:exec("SELEKT 1")
    assert.is_nil(ok)
    assert.equal('near "SELEKT": syntax error', err)
    st:finalize()
    assert.equal("hwtimer.sqlite.stmt (finalized)", tostring(st))
    assert.has_error(function() st:step() end, "attempt to use a finalized statement")
    local other = assert(db:prepare("SELECT 1"))
    db:close()
    assert.equal("hwtimer.sqlite.db (closed)", tostring(db))
    assert.equal("hwtimer.sqlite.stmt (finalized)", tostring(other))
    assert.has_error(function() db:exec("SELECT 1") end, "attempt to use a closed database")
    assert.has_error(function() other:step() end, "attempt to use a closed database")
    local named = assert(sqlite.open(path))
    assert.equal("hwtimer.sqlite.db (" .. path .. ")", tostring(named))
    named:close()
  end)

  it("steps a row at a time: bind, step, column, reset", function()
    local db = assert(sqlite.open(":memory:"))
    assert(db:exec("CREATE TABLE t (a INTEGER, b TEXT); INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, NULL)"))
    local st = assert(db:prepare("SELECT a, b FROM t WHERE a >= ?1 ORDER BY a"))
    assert.is_true(st:bind(1, 2))
    local got = {}
    while st:step() do got[#got + 1] = { st:column(1), st:column(2) } end
    assert.same({ { 2, "two" }, { 3, nil } }, got)
    assert.has_error(function() st:column(3) end, "bad argument #1 to 'column' (column index out of range)")
    assert.has_error(function() st:bind(2, 1) end, "bad argument #1 to 'bind' (parameter index out of range)")
    st:reset() -- bindings cleared: ?1 is NULL, nothing is >= NULL
    assert.is_false(st:step())
    st:reset()
    assert.is_true(st:bind(1, 1))
    assert.is_true(st:step())
    assert.same({ 1, "one" }, { st:column(1), st:column(2) })
    -- a parameter bound again, to nil, is NULL: nil binds, it does not keep the value before it
    st:reset()
    assert.is_true(st:bind(1, 1))
    assert.is_true(st:bind(1, nil))
    assert.is_false(st:step())
    db:close()
  end)

  it("checkpoints on a thread of its own, and bounds the WAL under back-to-back commits", function()
    q = assert(durable.open(timer, { path = path }))
    local db, payload, n, largest = require("hwtimer.durable").engine(q).db, string.rep("x", 1000), 0, 0
    local rounds, finishes = db:checkpoints()
    assert.equal(0, rounds)
    assert.equal(0, finishes)
    repeat -- the WAL's bound is 16,000 pages (64 MB); ~4 pages a commit here
      for _ = 1, 500 do
        assert(q:schedule("far", 3600, payload))
        n = n + 1
      end
      largest = math.max(largest, wal_size())
      rounds, finishes = db:checkpoints()
    until finishes >= 2 or n >= 40000
    assert.is_true(rounds >= 2, "rounds " .. rounds)
    assert.equal(2, finishes)
    assert.is_true(largest <= 66 * 2 ^ 20, "WAL of " .. largest .. " bytes")
    assert.equal(n, q:pending())
    q:close()
    assert.equal(n, query(path, "SELECT count(*) FROM hwtimer_jobs"))
  end)

  -- The hook asks for a round when a commit takes the WAL to the mark; once
  -- the WAL has started over (a commit below the mark after a round copied
  -- it all), the next time it reaches the mark is a round's again, not only
  -- half a mark past where the last round found it. Counted, not timed: each
  -- UPDATE of the one row is one WAL frame, the WAL starts over at the first
  -- commit after a round that copied every frame, and nothing commits while
  -- a round runs.
  it("asks for a round each time the WAL, started over, reaches the mark", function()
    local sleep = require("hwtimer_testutil").sleep
    local MARK = 20
    local db = assert(sqlite.open(path))
    assert.equal("wal", (db:prepare("PRAGMA journal_mode=WAL"):first()))
    assert(db:exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 0)"))
    local busy, log, copied = db:prepare("PRAGMA wal_checkpoint(PASSIVE)"):first()
    assert.same({ 0, log }, { busy, copied }) -- all copied: the next commit starts the WAL over
    assert.is_true(db:checkpoint_in_background(MARK))
    local up = assert(db:prepare("UPDATE t SET v = v + 1"))
    local function rounds_when(n) -- the rounds, once n have run (or 10 s have passed)
      local deadline = hwtimer.now() + 10
      while db:checkpoints() < n and hwtimer.now() < deadline do sleep(0.002) end
      return (db:checkpoints())
    end
    for round = 1, 3 do
      for _ = 1, MARK do assert.equal(1, (up:run())) end -- the WAL: 1 frame, ... MARK frames
      assert.equal(round, rounds_when(round), "rounds after " .. round * MARK .. " commits")
    end
    assert.equal(0, select(2, db:checkpoints())) -- and none inline
    db:close()
  end)

  -- A WAL that cannot start over (a reader holds it) asks for the next
  -- round once it has grown by half the mark since the last one: at
  -- exactly that many frames, not one more.
  it("asks for another round when a WAL a reader holds has grown half the mark since the last", function()
    local sleep = require("hwtimer_testutil").sleep
    local MARK = 20
    local db = assert(sqlite.open(path))
    assert.equal("wal", (db:prepare("PRAGMA journal_mode=WAL"):first()))
    assert(db:exec("CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO t VALUES (1, 0)"))
    assert(db:prepare("PRAGMA wal_checkpoint(TRUNCATE)"):first())
    assert.is_true(db:checkpoint_in_background(MARK))
    local up = assert(db:prepare("UPDATE t SET v = v + 1"))
    assert.equal(1, (up:run())) -- (the WAL's first frame, before the reader)
    local reader = assert(sqlite.open(path))
    assert(reader:exec("BEGIN"))
    assert.equal(1, (reader:prepare("SELECT v FROM t"):first()))
    local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1
    local function rounds_when(n, secs)
      local deadline = hwtimer.now() + (secs or 2) * SLOW
      while db:checkpoints() < n and hwtimer.now() < deadline do sleep(0.002) end
      return (db:checkpoints())
    end
    for _ = 2, MARK do assert.equal(1, (up:run())) end -- the WAL at the mark: a round
    assert.equal(1, rounds_when(1))
    for _ = 1, MARK / 2 - 1 do assert.equal(1, (up:run())) end
    assert.equal(1, rounds_when(2, 0.3), "a round before the WAL grew half the mark") -- (none comes)
    assert.equal(1, (up:run())) -- half the mark since the round's: the next one
    assert.equal(2, rounds_when(2), "no round once the WAL grew half the mark since the last")
    assert(reader:exec("COMMIT"))
    reader:close()
    db:close()
  end)

  -- A commit that takes a short WAL past the bound (16 marks) at once asks
  -- the thread for a round; only one that finds the WAL past it again with a
  -- round done or due checkpoints inline.
  it("asks its thread for a round where one commit takes a short WAL past the bound", function()
    local sleep = require("hwtimer_testutil").sleep
    local MARK = 4
    local db = assert(sqlite.open(path))
    assert.equal("wal", (db:prepare("PRAGMA journal_mode=WAL"):first()))
    assert(db:exec("CREATE TABLE t (v BLOB)"))
    assert.is_true(db:checkpoint_in_background(MARK))
    local add = assert(db:prepare("INSERT INTO t VALUES (zeroblob(4000))")) -- a page or more each
    local function big_commit() -- more than 16 x MARK pages in one commit
      assert(db:exec("BEGIN"))
      for _ = 1, 20 * MARK do assert(add:run()) end
      assert(db:exec("COMMIT"))
    end
    big_commit()
    local deadline = hwtimer.now() + 10
    while db:checkpoints() < 1 and hwtimer.now() < deadline do sleep(0.002) end
    assert.same({ 1, 0 }, { db:checkpoints() }, "a round, none inline")
    big_commit() -- past the bound again, a round done since the WAL was short: inline
    assert.equal(1, select(2, db:checkpoints()))
    db:close()
  end)

  it("checkpoints in the background only with a file, and raises on a bad page count", function()
    local mem = assert(sqlite.open(":memory:"))
    local ok, err = mem:checkpoint_in_background(1000)
    assert.is_nil(ok)
    assert.equal("no file to checkpoint", err)
    assert.is_nil(mem:checkpoints())
    assert.has_error(function() mem:checkpoint_in_background(0) end,
      "bad argument #1 to 'checkpoint_in_background' (page count from 1 to 1e9 expected)")
    mem:close()
  end)
end)
