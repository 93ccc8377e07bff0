local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local util = require("hwtimer_testutil")

local function gc()
  collectgarbage()
  collectgarbage()
end

describe("timer:stop", function()
  it("returns the timeouts that never ran, now cancelled", function()
    local timer = hwtimer.new()
    local ran = timer:schedule(0, function() end)
    timer:dispatch()
    local a = timer:schedule(10, function() end)
    local b = timer:schedule(0, function() end) -- due, not dispatched
    local c = timer:every(1, function() end)
    local list = timer:stop()
    assert.equal(3, #list)
    local set = {}
    for _, t in ipairs(list) do set[t] = true end
    assert.is_true(set[a] and set[b] and set[c])
    for _, t in ipairs(list) do assert.equal("cancelled", t:state()) end
    assert.equal("expired", ran:state())
    assert.equal(0, timer:pending())
  end)

  it("lists the due timeouts first (a host that calls only some of them at exit calls those)", function()
    local timer = hwtimer.new()
    local f = function() end
    for _ = 1, 50 do timer:schedule(5 + math.random() * 100, f) end
    local due = {}
    for i = 1, 3 do due[timer:schedule(0, f)] = i end
    helpers.wait_readable(timer, 5) -- made due by the worker, not dispatched
    for _ = 1, 50 do timer:schedule(5 + math.random() * 100, f) end
    local list = timer:stop()
    assert.equal(103, #list)
    for i = 1, 3 do assert.is_truthy(due[list[i]], "entry " .. i .. " is not a due one") end
  end)

  it("hands the timeouts back with their callbacks and arguments (t:task())", function()
    local timer = hwtimer.new()
    local function f() end
    local function g() end
    local a = timer:schedule(10, f, "x", 2)
    local p = timer:every(1, g)
    local list = timer:stop()
    assert.equal(2, #list)
    assert.same({ f, "x", 2 }, { a:task() })
    assert.same({ g }, { p:task() })
  end)

  it("is idempotent", function()
    local timer = hwtimer.new()
    timer:schedule(1, function() end)
    assert.equal(1, #timer:stop())
    assert.same({}, timer:stop())
    timer:close()
  end)

  it("makes the timer refuse further use", function()
    local timer = hwtimer.new()
    timer:stop()
    for _, m in ipairs({ "schedule", "every", "dispatch", "run", "getfd", "pollfd",
                         "events", "timeout", "dirty" }) do
      assert.has_error(function() timer[m](timer, 1, print) end,
        "attempt to use a stopped timer")
    end
    assert.equal(0, timer:pending())
    assert.matches("^hwtimer.timer %(stopped%)", tostring(timer))
  end)

  it("works from inside a callback, and nothing else runs", function()
    local timer = hwtimer.new()
    local list, later = nil, 0
    timer:schedule(0, function() list = timer:stop() end)
    timer:schedule(0, function() later = later + 1 end)
    local p = timer:every(0.001, function() later = later + 1 end)
    assert.equal(1, timer:dispatch())
    assert.equal(2, #list)
    assert.equal(0, later)
    assert.equal("cancelled", p:state())
  end)

  it("ends a periodic timeout that stops its own timer", function()
    local timer = hwtimer.new()
    local runs = 0
    local p = timer:every(0.001, function() runs = runs + 1; timer:close() end)
    helpers.wait_until(timer, function() return runs > 0 end, 5)
    assert.equal(1, runs)
    assert.equal("cancelled", p:state())
  end)
end)

describe("timer:close", function()
  it("stops without a list and is safe to call twice", function()
    local timer = hwtimer.new()
    local t = timer:schedule(1, function() end)
    assert.equal(0, select("#", timer:close())) -- (nothing returned: stop's list is stop's)
    assert.equal(0, select("#", timer:close()))
    assert.equal("cancelled", t:state())
    assert.has_error(function() timer:schedule(1, print) end, "attempt to use a stopped timer")
  end)

  it("takes extra arguments (as __close gives it) and still cancels every timeout, returning nothing", function()
    local timer = hwtimer.new()
    local t = timer:schedule(1, function() end, "a", "b")
    local p = timer:every(0.5, function() end)
    assert.equal(0, select("#", timer:close("x", {}, 3)))
    assert.same({ "cancelled", "cancelled" }, { t:state(), p:state() })
    assert.equal(0, timer:pending())
  end)

  it("runs for a to-be-closed variable", function()
    if _VERSION < "Lua 5.4" then return pending("to-be-closed variables need Lua 5.4") end
    local chunk = load([[
      local hwtimer, box = ...
      do
        local timer <close> = hwtimer.new()
        box.timeout = timer:schedule(1, function() end)
      end
    ]])
    local box = {}
    chunk(hwtimer, box)
    assert.equal("cancelled", box.timeout:state())
  end)
end)

describe("garbage collection", function()
  it("a collected timer stops its thread", function()
    gc()
    local before = helpers.settled_thread_count()
    if not before then return pending("no /proc/self/task to count threads") end
    local timer = hwtimer.new() -- luacheck: ignore 231 (held, then dropped: only its thread is counted)
    assert.equal(before + 1, helpers.wait_thread_count(before + 1))
    timer = nil
    gc()
    assert.equal(before, helpers.wait_thread_count(before))
  end)

  it("a collected timer with pending timeouts frees them all", function()
    helpers.assert_dropped_timer_frees(1000, 1)
  end)

  it("a handle keeps its timer alive", function()
    local t
    do
      local timer = hwtimer.new()
      t = timer:schedule(0.001, function() end)
    end
    gc()
    local timer = t:timer()
    assert.equal(1, timer:run(2))
    assert.equal("expired", t:state())
    timer:close()
  end)
end)

describe("fork", function()
  it("raises a clear error in the child instead of hanging", function()
    local timer = hwtimer.new()
    local t = timer:schedule(10, function() end)
    local beat = timer:every({ interval = 10, first = 0 }, function() end)
    helpers.wait_readable(timer, 5)
    assert.equal(beat, timer:take()) -- taken before the fork, done after it
    local pid = util.fork()
    if pid == 0 then
      local code = 0
      local function expect_error(f, ...)
        local ok, err = pcall(f, ...)
        if ok or not tostring(err):find("forked child", 1, true) then code = code + 1 end
      end
      expect_error(timer.schedule, timer, 1, print)
      expect_error(timer.dispatch, timer)
      expect_error(timer.run, timer, 1)
      expect_error(t.cancel, t)
      expect_error(timer.done, timer, beat)
      timer:close() -- must not join a thread that is not there
      util._exit(code)
    end
    assert.equal(0, util.wait(pid))
    -- the parent's timer is untouched
    assert.equal("pending", t:state())
    assert.is_true(t:cancel())
    timer:done(beat)
    assert.is_true(beat:remaining() > 9)
    timer:close()
  end)
end)
