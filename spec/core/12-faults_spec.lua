-- Faults, each with its expected outcome: a clear error or a documented
-- result, never a crash, a hang, a leak or a lost timeout.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local util = require("hwtimer_testutil")

describe("faults", function()
  describe("errors in callbacks, of every kind", function()
    local huge = string.rep("x", 1024 * 1024)
    local kinds = {
      { "a string", "boom" },
      { "a table", { code = 42 } },
      { "nil", nil },
      { "a huge message", huge },
      { "a number", 7 },
      { "a function", print },
    }
    for _, kind in ipairs(kinds) do
      it("goes to on_error as it was raised: " .. kind[1], function()
        local got, handle, after = "unset", nil, false
        local timer = hwtimer.new({ on_error = function(err, t) got, handle = err, t end })
        local t = timer:schedule(0, function() error(kind[2], 0) end)
        timer:schedule(0, function() after = true end)
        assert.equal(2, timer:dispatch())
        assert.equal(kind[2], got)
        assert.equal(t, handle)
        assert.is_true(after)
        timer:close()
      end)
    end

    it("prints a huge message by default without trouble", function()
      local out, ok = helpers.run_lua([[
        local timer = require("hwtimer").new()
        timer:schedule(0, function() error(string.rep("y", 1024 * 1024), 0) end)
        print("ran", timer:dispatch())
      ]])
      assert.is_true(ok)
      assert.matches("ran\t1", out, 1, true)
      assert.is_true(#out > 1024 * 1024)
    end)
  end)

  describe("a coroutine yield from a callback", function()
    it("is an error for on_error, outside a coroutine", function()
      local got
      local timer = hwtimer.new({ on_error = function(err) got = err end })
      timer:schedule(0, function() coroutine.yield() end)
      assert.equal(1, timer:dispatch())
      assert.matches("yield", tostring(got))
      timer:close()
    end)

    it("is an error for on_error when dispatch runs in a coroutine", function()
      local got, after = nil, false
      local timer = hwtimer.new({ on_error = function(err) got = err end })
      timer:schedule(0, function() coroutine.yield("escaped") end)
      timer:schedule(0, function() after = true end)
      local co = coroutine.create(function() return timer:dispatch() end)
      local ok, n = coroutine.resume(co)
      assert.is_true(ok)
      assert.equal(2, n) -- the yield did not escape: dispatch returned
      assert.matches("yield", tostring(got))
      assert.is_true(after)
      timer:close()
    end)
  end)

  it("max_pending: at its limit every() is refused too, nothing half-made", function()
    local timer = hwtimer.new({ max_pending = 1 })
    assert.truthy(timer:every(1, function() end))
    local t, err = timer:every(1, function() end)
    assert.is_nil(t)
    assert.matches("too many pending timeouts", err)
    assert.equal(1, timer:pending())
    assert.equal(1, #timer:stop())
  end)

  it("the pipe's read end closed behind the timer's back: timeouts still run", function()
    -- Documented result: dispatch still takes what is due (the hand-off does
    -- not depend on the byte), so nothing is lost; waiting on the pipe is
    -- what breaks, and run() degrades to polling a closed descriptor.
    local timer = hwtimer.new()
    finally(function() timer:close() end) -- closing an fd already closed is harmless
    assert.is_true(util.close(timer:getfd()))
    local fired = 0
    for i = 1, 50 do timer:schedule(i / 1000, function() fired = fired + 1 end) end
    local limit = hwtimer.now() + 10
    while fired < 50 and hwtimer.now() < limit do
      timer:dispatch()
      util.sleep(0.001)
    end
    assert.equal(50, fired)
  end)

  it("a timer collected with 100,000 timeouts pending frees them and its thread", function()
    helpers.assert_dropped_timer_frees(100000, 1000)
  end)

  it("closing the state while the worker runs: finalizers stop it, the process exits", function()
    local out, ok = helpers.run_lua([[
      local hwtimer = require("hwtimer")
      local timers = {}
      for k = 1, 4 do
        local timer = hwtimer.new()
        for i = 1, 10000 do timer:schedule((i % 100) / 1000, function() end) end
        timer:every(0.001, function() end)
        timers[k] = timer
      end
      timers[1]:run(0.05)
      print("closing")
      if _VERSION ~= "Lua 5.1" and not rawget(_G, "jit") then os.exit(0, true) end
      -- 5.1 and LuaJIT: lua.c closes the state when the script ends
    ]])
    assert.is_true(ok, out)
    assert.matches("closing", out, 1, true)
  end)
end)
