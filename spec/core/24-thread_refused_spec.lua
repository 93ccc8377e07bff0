-- A machine out of threads or memory refuses the C thread that drives the
-- timers, its condition variable, or the SQLite checkpoint's thread: the
-- call says so (nil, message), nothing crashes, and the next try works.
-- Each case runs in another interpreter with csrc/test/failthread.c
-- preloaded, which fails the first calls of one function.
local helpers = require("spec.helpers")

local SHIM = "build/c/failthread.so"

-- Run `code` in another interpreter whose first `times` calls of `call`
-- fail; returns its output and whether it exited 0.
local function run_failing(call, times, code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local p = io.popen(string.format("LD_PRELOAD=%s HWT_FAIL_CALL=%s HWT_FAIL_TIMES=%d %s %s 2>&1; echo \"exit=$?\"",
    SHIM, call, times, os.getenv("HWT_LUA") or "lua5.4", path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out, out:match("exit=(%d+)%s*$") == "0"
end

-- Two new() in a row: the first refused (and what it leaves open), the
-- second runs a timeout.
local NEW_TWICE = [[
  local hwtimer = require("hwtimer")
  local testutil = require("hwtimer_testutil")
  local function open_fds()
    local n = 0
    for fd = 0, 1023 do if testutil.is_open(fd) then n = n + 1 end end
    return n
  end
  local before = open_fds()
  local t, err = hwtimer.new()
  print("first:", t == nil and "nil" or "a timer", err)
  print("descriptors the refused timer left open:", open_fds() - before)
  local timer = assert(hwtimer.new())
  local ran = false
  timer:schedule(0.01, function() ran = true end)
  timer:run(1) -- (until nothing is pending)
  print("second ran a timeout:", ran)
  timer:stop()
]]

describe("a thread the system refuses", function()
  -- (under a preloaded sanitizer the child inherits that preload: plain runs
  -- only; busted takes no pending in a before_each)
  if os.getenv("LD_PRELOAD") then
    pending("preloads a shim: left to the plain runs")
    return
  end
  before_each(function()
    local f = io.open(SHIM)
    assert.is_truthy(f, SHIM .. " is built by make test-spec")
    f:close()
  end)

  it("makes hwtimer.new() give nil, message when the C thread cannot start, and the next new() works", function()
    local out, ok = run_failing("pthread_create", 1, NEW_TWICE)
    assert.is_true(ok, out)
    assert.matches("first:\tnil\thwtimer: cannot start timer: Resource temporarily unavailable", out, 1, true)
    assert.matches("descriptors the refused timer left open:\t0\n", out, 1, true) -- (its pipe closed)
    assert.matches("second ran a timeout:\ttrue", out, 1, true)
  end)

  for _, call in ipairs({ "pthread_cond_init", "pthread_condattr_init" }) do
    it("makes hwtimer.new() give nil, message when the thread's condition variable cannot be made (" .. call .. ")",
      function()
      local out, ok = run_failing(call, 1, NEW_TWICE)
      assert.is_true(ok, out)
      assert.matches("first:\tnil\thwtimer: cannot start timer: Resource temporarily unavailable", out, 1, true)
      assert.matches("descriptors the refused timer left open:\t0\n", out, 1, true) -- (its pipe closed)
      assert.matches("second ran a timeout:\ttrue", out, 1, true)
    end)
  end

  it("leaves a SQLite store to checkpoint inline when its checkpoint thread cannot start", function()
    if not helpers.optional("hwtimer.sqlite") then return pending("hwtimer.sqlite is not built") end
    local dir = helpers.tempdir("hwt-ckpt")
    local out, ok = run_failing("pthread_create", 1, [[
      local sqlite = require("hwtimer.sqlite")
      local db = assert(sqlite.open("]] .. dir .. [[/ck.db"))
      assert(db:exec("PRAGMA journal_mode = WAL; CREATE TABLE t (x)"))
      print("first:", db:checkpoint_in_background(10))
      assert(db:exec("INSERT INTO t VALUES (1)"))
      print("second:", db:checkpoint_in_background(10))
      db:close()
    ]])
    os.execute("rm -rf " .. dir)
    assert.is_true(ok, out)
    assert.matches("first:\tnil\tcannot start the checkpoint's thread", out, 1, true)
    assert.matches("second:\ttrue", out, 1, true)
  end)
end)
