-- A job another process of the machine stores due now in the same SQLite
-- file starts at once where a listener (hwtimer.durable.sqlite_wake:
-- inotify on the file's directory) watches it, not at the next poll (issue
-- 43): the queue polls every 5 s here, so a start within half a second can
-- only come from the wake-up. The other process is a fresh interpreter.
local hwtimer = require("hwtimer")
local sqlite = require("spec.helpers").optional("hwtimer.sqlite")
local ok_sqlite = sqlite ~= nil
local testutil = require("hwtimer_testutil")
local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1
local POLL = 5 * SLOW -- (a start within SLOW / 2 seconds can only be the wake-up)

describe("hwtimer.durable.sqlite_wake: wake-ups from another process's writes", function()
  if not ok_sqlite then
    it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
    return
  end
  local durable = require("hwtimer.durable")
  local wake = require("hwtimer.durable.sqlite_wake")
  local core = require("hwtimer.core")
  local dir, path, timer, q, ran

  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    path = dir .. "/jobs.db"
    timer = hwtimer.new()
    q = assert(durable.open(timer, { path = path, poll = POLL, sweep = POLL }))
    ran = {}
    q:handle("count", function(job) ran[job.id] = core.now() end)
  end)
  after_each(function()
    q:close()
    timer:close()
    os.execute("rm -rf " .. dir)
  end)

  -- Another interpreter that stores `n` jobs due now, 50 ms apart, after
  -- `wait` seconds, and writes "id monotonic-seconds" for each (just before
  -- its schedule) to a file; started in the background.
  local function other_process(n, wait)
    local out = dir .. "/other.txt"
    local code = string.format([[
      local hwtimer, durable, core = require("hwtimer"), require("hwtimer.durable"), require("hwtimer.core")
      local sleep = require("hwtimer_testutil").sleep
      local timer = hwtimer.new()
      local q = assert(durable.open(timer, { path = %q, poll = 5 }))
      local f = assert(io.open(%q, "w"))
      sleep(%g)
      for _ = 1, %d do
        local t0 = core.now()
        f:write(assert(q:schedule("count", 0)), " ", string.format("%%.6f", t0), "\n")
        f:flush()
        sleep(0.05)
      end
      f:close()
      q:close()
      timer:close()
    ]], path, out, wait, n)
    local script = dir .. "/other.lua"
    local f = assert(io.open(script, "w"))
    f:write(code)
    f:close()
    assert(os.execute(string.format("%s %s >%s/other.log 2>&1 &", os.getenv("HWT_LUA") or "lua5.4", script, dir)))
    return function()
      local list = {}
      local rf = io.open(out)
      if not rf then return list end
      for line in rf:lines() do
        local id, t0 = line:match("^(%S+) (%S+)$")
        if id then list[#list + 1] = { id = id, t0 = tonumber(t0) } end
      end
      rf:close()
      return list
    end
  end

  local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
  end

  -- Run `turn` until the other process's `n` jobs have all run (10 s at
  -- most); each job's seconds from its schedule to its start.
  local function lates(n, scheduled, turn)
    local limit = core.now() + 10 * SLOW
    while core.now() < limit and not (#scheduled() == n and count(ran) == n) do turn() end
    local list = scheduled()
    assert.equal(n, #list, "the other process stored " .. #list .. " of " .. n .. " jobs")
    local out = {}
    for i, j in ipairs(list) do
      assert.truthy(ran[j.id], "job " .. i .. " did not run")
      out[i] = ran[j.id] - j.t0
    end
    return out
  end

  it("in a luv loop: each job another process stores due now starts within half a second (the poll is 5 s)", function()
    local uv = require("luv")
    local poll = require("hwtimer.luv").attach(timer)
    local l = wake.luv(assert(wake.listen(q)), uv)
    local tick = uv.new_timer() -- (so that uv.run("once") returns often)
    tick:start(10, 10, function() end)
    local scheduled = other_process(10, 0.3)
    for i, late in ipairs(lates(10, scheduled, function() uv.run("once") end)) do
      assert.is_true(late < 0.5 * SLOW, "job " .. i .. " started " .. late .. " s after its schedule")
    end
    l:close()
    tick:stop()
    tick:close()
    require("hwtimer.luv").detach(poll)
    uv.run("nowait")
  end)

  it("in cqueues: the listener is pollable", function()
    local cqueues = require("cqueues")
    local cq = cqueues.new()
    local attached = require("hwtimer.cqueues").attach(timer, cq)
    local l = assert(wake.listen(q))
    cq:wrap(function() while l:step() do cqueues.poll(l) end end)
    local scheduled = other_process(10, 0.3)
    for i, late in ipairs(lates(10, scheduled, function() assert(cq:step(0.01)) end)) do
      assert.is_true(late < 0.5 * SLOW, "job " .. i .. " started " .. late .. " s after its schedule")
    end
    l:close()
    assert(cq:step(0))
    attached.detach()
  end)

  it("counts a write of the file itself and of its -wal, and of no name that only starts alike", function()
    local base = dir .. "/plain.db"
    local function write(name)
      local f = assert(io.open(name, "a"))
      f:write("x")
      f:close()
    end
    write(base)
    local w = assert(sqlite.watch(base))
    for _, name in ipairs({ "plain.d", "plain.dbx", "plain.db-wa", "plain.db-walx", "plain.db-shm" }) do
      write(dir .. "/" .. name)
      assert.equal(0, w:drain(), name)
    end
    write(dir .. "/plain.dbx")
    write(base) -- (a journal mode other than WAL writes the file itself; read after another's event)
    assert.is_true(w:drain() > 0, "the file")
    write(base .. "-wal")
    assert.is_true(w:drain() > 0, "its -wal")
    w:close()
  end)

  -- (a daemon that closed its stdin gets descriptor 0 for the next one it opens)
  it("watches on descriptor 0 too, in a process whose stdin is closed", function()
    local out, ok = require("spec.helpers").run_lua(([[
      local sqlite = require("hwtimer.sqlite")
      local w = assert(sqlite.watch(%q))
      print("fd", w:getfd())
      local db = assert(sqlite.open(%q))
      assert(db:exec("CREATE TABLE IF NOT EXISTS t0 (a)"))
      db:close()
      print("writes seen", w:drain() > 0)
      w:close()
    ]]):format(path, path), "0<&-")
    assert.is_true(ok, out)
    assert.matches("fd\t0\nwrites seen\ttrue\n", out)
  end)

  it("takes a write of the file or its -wal only, and says why it cannot listen", function()
    local w = assert(sqlite.watch(path))
    assert.equal(0, w:drain())
    local f = assert(io.open(dir .. "/jobs.dbx", "w")) -- (a name that starts alike)
    f:write("x")
    f:close()
    assert.equal(0, w:drain())
    local other = assert(sqlite.open(path))
    assert(other:exec("CREATE TABLE IF NOT EXISTS t (a)"))
    assert.is_true(w:drain() > 0)
    other:close()
    local fd = w:getfd()
    assert.is_true(testutil.is_open(fd))
    assert.equal(0, select("#", w:close())) -- (nothing returned)
    assert.is_false(testutil.is_open(fd), "the watch's descriptor is still open")
    assert.equal(0, select("#", w:close())) -- (and again: nothing to do)
    local closed_ok, closed_err = pcall(w.getfd, w)
    assert.is_false(closed_ok)
    assert.matches("attempt to use a closed watch", closed_err, 1, true)
    local no, err = sqlite.watch(dir .. "/missing/jobs.db")
    assert.is_nil(no)
    assert.matches("cannot watch .*missing/jobs.db: No such file or directory", err)
    assert.has_error(function() sqlite.watch(dir .. "/") end)
    -- a directory name of 4,096 bytes (PATH_MAX with its NUL) is refused as an argument; one less goes to the kernel
    assert.has_error(function() sqlite.watch(("d"):rep(4096) .. "/jobs.db") end,
      "bad argument #1 to 'watch' (path of a file expected)")
    local long, why = sqlite.watch(("d"):rep(4095) .. "/jobs.db")
    assert.is_nil(long)
    assert.matches("^cannot watch d+/jobs.db: ", why)
    -- a file name of 255 bytes (NAME_MAX) is watched; one of 256 is no file's name
    local named = assert(sqlite.watch(dir .. "/" .. ("n"):rep(255)))
    named:close()
    assert.has_error(function() sqlite.watch(dir .. "/" .. ("n"):rep(256)) end,
      "bad argument #1 to 'watch' (path of a file expected)")
    local l = assert(wake.listen(q))
    l:close()
    assert.is_false(l:step())
    assert.is_nil(l:getfd())
    assert.has_error(function() wake.listen({}) end) -- (not a queue: durable.engine's argument error)
  end)
end)
