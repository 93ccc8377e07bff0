local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

describe("timeout handle", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  describe("cancel()", function()
    it("returns true for a pending timeout, which then never runs", function()
      local ran, after = false, false
      local t = timer:schedule(0.005, function() ran = true end)
      assert.is_true(t:cancel())
      assert.equal("cancelled", t:state())
      -- a later timeout keeps run() going past the cancelled one's due time
      timer:schedule(0.03, function() after = true end)
      timer:run(1)
      assert.is_true(after)
      assert.is_false(ran)
    end)

    it("returns false the second time", function()
      local t = timer:schedule(1, function() end)
      assert.is_true(t:cancel())
      assert.is_false(t:cancel())
    end)

    it("returns false once the callback has run", function()
      local t = timer:schedule(0, function() end)
      timer:dispatch()
      assert.is_false(t:cancel())
      assert.equal("expired", t:state())
    end)

    it("wins over an expiry that has not been dispatched yet", function()
      local ran = false
      local t = timer:schedule(0.001, function() ran = true end)
      assert.is_true(helpers.wait_readable(timer)) -- expired on the worker
      assert.is_true(t:cancel())
      assert.equal(0, timer:dispatch())
      assert.is_false(ran)
      assert.equal(0, timer:pending())
    end)

    it("releases its callback and arguments at once, also while the handle is held", function()
      local weak = setmetatable({}, { __mode = "v" })
      local bare, cb, arg = function() end, function() end, {}
      weak[1], weak[2], weak[3] = bare, cb, arg
      local a = timer:schedule(100, bare) -- the task is the callback alone
      local b = timer:schedule(100, cb, arg) -- the task is a pack
      bare, cb, arg = nil, nil, nil -- luacheck: ignore 311 (the last references: the collector may free them)
      assert.is_true(a:cancel())
      assert.is_true(b:cancel())
      collectgarbage()
      collectgarbage()
      assert.is_nil(weak[1])
      assert.is_nil(weak[2])
      assert.is_nil(weak[3])
      assert.equal("cancelled", a:state()) -- the handles themselves live on
      assert.equal("cancelled", b:state())
    end)

    it("releases the callback of a timeout that ran, or was cancelled inside a callback, while the handle is held", function()
      local weak = setmetatable({}, { __mode = "v" })
      local ran, victim = function() end, function() end
      weak[1], weak[2] = ran, victim
      local a = timer:schedule(0, ran)
      local v = timer:schedule(100, victim)
      timer:schedule(0, function() assert.is_true(v:cancel()) end) -- cancelled inside a dispatch
      ran, victim = nil, nil -- luacheck: ignore 311 (the last references: the collector may free them)
      assert.equal(2, timer:dispatch())
      collectgarbage()
      collectgarbage()
      assert.is_nil(weak[1])
      assert.is_nil(weak[2])
      assert.same({ "expired", "cancelled" }, { a:state(), v:state() })
    end)

    -- A cancel releases the callback and its arguments at once (below,
    -- "releases the callback ... while the handle is held"); the handle's
    -- 32-byte node stays linked where it was until the timer next looks at
    -- due timeouts (dispatch, run, take, timeout, stats, wake_arm, stop) or
    -- 64 cancels later: one lock round unlinks them all (docs/api.md).
    it("frees the handle at the timer's next look at due timeouts", function()
      for _, look in ipairs({ "dispatch", "timeout", "stats", "stop" }) do
        local tm = hwtimer.new()
        local weak = setmetatable({}, { __mode = "v" })
        weak[1] = tm:schedule(100, function() end)
        assert.is_true(weak[1]:cancel())
        tm[look](tm)
        collectgarbage()
        collectgarbage()
        assert.is_nil(weak[1], look)
        tm:close()
      end
    end)

    it("no longer wakes the host: the next event is the next timeout's", function()
      local t = timer:schedule(0.01, function() end)
      timer:schedule(100, function() end)
      assert.is_true(t:cancel())
      local left = timer:timeout()
      assert.is_true(left > 50, tostring(left))
    end)

    it("frees the handles of 64 cancels with no look in between", function()
      local weak = setmetatable({}, { __mode = "v" })
      for i = 1, 64 do
        weak[i] = timer:schedule(100, function() end)
        weak[i]:cancel()
      end
      collectgarbage()
      collectgarbage()
      assert.is_nil(next(weak))
    end)

    it("a cancelled timeout whose node waits to be unlinked never runs, even once due", function()
      local ran = 0
      local t = timer:schedule(0.005, function() ran = ran + 1 end)
      assert.is_true(t:cancel())
      require("hwtimer_testutil").sleep(0.03) -- the worker moves its node to the due list
      assert.equal(0, timer:dispatch())
      assert.equal(0, ran)
      assert.is_false(t:cancel())
      assert.equal("cancelled", t:state())
      assert.is_nil(t:task())
      local r, err = t:reset(0)
      assert.is_nil(r)
      assert.matches("been cancelled", err)
      local s = timer:stats()
      assert.same({ 1, 0, 1, 0, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending, s.due })
    end)
  end)

    it("works on any timer's timeout, taken out of another's handle", function()
      -- each timer's cancel knows its own handles without a look-up; called
      -- on another timer's handle it must cancel that one, on that timer
      local other = hwtimer.new()
      local ran = 0
      local mine = timer:schedule(0.01, function() ran = ran + 1 end)
      local theirs = other:schedule(0.01, function() ran = ran + 10 end)
      local cancel = mine.cancel
      assert.is_true(cancel(theirs))
      assert.is_false(cancel(theirs))
      assert.equal("cancelled", theirs:state())
      assert.equal("pending", mine:state())
      assert.same({ 1, 0 }, { other:stats().cancelled, other:stats().pending })
      assert.same({ 0, 1 }, { timer:stats().cancelled, timer:stats().pending })
      assert.is_true(theirs.cancel(mine))
      other:run(0.05)
      timer:run(0.05)
      assert.equal(0, ran)
      other:close()
    end)

  describe("reset()", function()
    -- Outside any callback nobody has taken the timeout, so a reset moves it
    -- on the wheel (or onto the due list), and dispatch alone runs it when
    -- due: it is not kept back for a timer:done that never comes.
    it("outside a callback moves a pending timeout, which then runs when due", function()
      local ran = {}
      local later = timer:schedule(60, function() ran.later = true end)
      local now = timer:schedule(60, function() ran.now = true end)
      assert.equal(later, later:reset(0.01))
      assert.equal(now, now:reset(0))
      assert.equal(2, timer:pending())
      assert.equal(2, timer:run(10)) -- returns once nothing is pending
      assert.same({ later = true, now = true }, ran)
      assert.equal("expired", later:state())
      assert.equal("expired", now:state())
    end)
  end)

  describe("state", function()
    it("goes pending -> expired when the callback is called", function()
      local inside
      local t = timer:schedule(0.001, function(h) inside = h:state() end)
      assert.equal("pending", t:state())
      assert.is_true(t:is_pending())
      assert.is_false(t:is_expired())
      assert.is_false(t:is_cancelled())
      timer:run(2)
      assert.equal("expired", inside)
      assert.equal("expired", t:state())
      assert.is_true(t:is_expired())
      assert.is_false(t:is_pending())
    end)

    it("reports cancelled", function()
      local t = timer:schedule(1, function() end)
      t:cancel()
      assert.is_true(t:is_cancelled())
      assert.is_false(t:is_pending())
    end)

    it("only changes on the Lua thread (expired on the worker is still pending)", function()
      local t = timer:schedule(0.001, function() end)
      assert.is_true(helpers.wait_readable(timer))
      assert.equal("pending", t:state())
      timer:dispatch()
      assert.equal("expired", t:state())
    end)
  end)

  describe("deadline() and remaining()", function()
    it("gives when it is due, in hwtimer.now() seconds: the deadline rounded up to a tick", function()
      local before = hwtimer.now()
      local t = timer:schedule(2.5, function() end)
      local after = hwtimer.now()
      assert.is_true(t:deadline() >= before + 2.5)
      assert.is_true(t:deadline() <= after + 2.5 + 0.001 + 1e-6) -- tick 0.001
    end)

    it("is about now for a zero delay", function()
      local before = hwtimer.now()
      local t = timer:schedule(0, function() end)
      local after = hwtimer.now()
      -- the tick in progress when it was scheduled (tick 0.001)
      assert.is_true(t:deadline() >= before - 0.001 - 1e-6 and t:deadline() <= after + 1e-6)
      assert.equal(0, t:remaining())
    end)

    it("counts down and never goes negative", function()
      local t = timer:schedule(0.01, function() end)
      local r1 = helpers.assert_time_left(t:deadline(), function() return t:remaining() end)
      assert.is_true(r1 <= 0.01 + 0.001)
      helpers.busy(0.02)
      assert.equal(0, t:remaining())
    end)
  end)

  it("knows its timer and task", function()
    local f = function() end
    local t = timer:schedule(1, f)
    assert.equal(timer, t:timer())
    assert.equal(f, t:task())
    local got = helpers.pack(timer:schedule(1, f, "a", nil, 3):task())
    assert.equal(4, got.n)
    assert.same({ f, "a", nil, 3 }, { got[1], got[2], got[3], got[4] })
    got = helpers.pack(timer:every(1, f, "b"):task())
    assert.equal(2, got.n)
    assert.same({ f, "b" }, { got[1], got[2] })
    -- (arguments after t are ignored, as Lua's own methods ignore extra ones)
    got = helpers.pack(timer:schedule(1, f, "c"):task("x", {}, 7))
    assert.equal(2, got.n)
    assert.same({ f, "c" }, { got[1], got[2] })
  end)

  it("shows its state in tostring", function()
    local t = timer:schedule(1, function() end)
    assert.matches("^hwtimer.timeout %(pending, [%d.]+ s left%)", tostring(t))
    t:cancel()
    assert.matches("^hwtimer.timeout %(cancelled%)", tostring(t))
    local e = timer:schedule(0, function() end)
    timer:dispatch()
    assert.matches("^hwtimer.timeout %(expired%)", tostring(e))
    -- the seconds left: about those asked, and 0 (not less) once due but not yet run
    local far = timer:schedule(30, function() end)
    local left = tonumber(tostring(far):match("pending, ([%d.]+) s left"))
    assert.is_true(left > 29 and left <= 30.01, tostring(far)) -- (rounded up to the tick)
    local due = timer:schedule(0.001, function() end)
    local t0 = hwtimer.now()
    while hwtimer.now() < t0 + 0.01 do end
    assert.matches("^hwtimer.timeout %(pending, 0%.?0* s left%)", tostring(due)) -- (5.1 writes %f as %.14g)
    far:cancel()
    due:cancel()
  end)

  it("rejects a wrong self with the expected type", function()
    local t = timer:schedule(1, function() end)
    for _, m in ipairs({ "cancel", "state", "is_pending", "is_expired", "is_cancelled",
                         "deadline", "remaining", "timer", "task" }) do
      -- not a tail call: LuaJIT names the callee from its caller's frame
      local call = helpers.load("local t, x = ... local r = t." .. m .. "(x) return r")
      assert.has_error(function() call(t, timer) end,
        "bad argument #1 to '" .. m .. "' (hwtimer.timeout expected, got hwtimer.timer)")
      assert.has_error(function() call(t, io.stdout) end,
        "bad argument #1 to '" .. m .. "' (hwtimer.timeout expected, got " .. helpers.type_name(io.stdout) .. ")")
      assert.has_error(function() call(t, {}) end,
        "bad argument #1 to '" .. m .. "' (hwtimer.timeout expected, got table)")
    end
  end)
end)
