local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

describe("timer:dispatch", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("returns 0 at once when nothing is due", function()
    timer:schedule(10, function() end)
    local t0 = hwtimer.now()
    assert.equal(0, timer:dispatch())
    assert.is_true(hwtimer.now() - t0 < 0.5)
  end)

  it("runs at most max callbacks and keeps the rest for the next call", function()
    local ran = 0
    for _ = 1, 5 do timer:schedule(0, function() ran = ran + 1 end) end
    assert.equal(2, timer:dispatch(2))
    assert.equal(2, ran)
    assert.equal(0, timer:timeout()) -- the rest is due now
    assert.equal(0, timer:dispatch(0))
    assert.equal(3, timer:dispatch())
    assert.equal(5, ran)
  end)

  it("keeps the pipe readable while callbacks are left over", function()
    for _ = 1, 3 do timer:schedule(0, function() end) end
    assert.equal(1, timer:dispatch(1))
    -- a host that polls timer:getfd() sees the two that are left
    assert.is_true(require("hwtimer_testutil").readable(timer:getfd(), 0))
    -- run() polls the pipe: it must not sleep on the two that are left
    local t0 = hwtimer.now()
    assert.equal(2, timer:run(5))
    assert.is_true(hwtimer.now() - t0 < 1)
  end)

  it("never runs a timeout scheduled by a callback in the same call", function()
    local inner = 0
    timer:schedule(0, function()
      timer:schedule(0, function() inner = inner + 1 end)
      timer:schedule(-1, function() inner = inner + 1 end)
    end)
    assert.equal(1, timer:dispatch())
    assert.equal(0, inner)
    assert.equal(2, timer:dispatch())
    assert.equal(2, inner)
  end)

  it("lets a callback cancel a timeout due in the same batch", function()
    local ran = {}
    local second
    timer:schedule(0, function() ran[#ran + 1] = 1; assert(second:cancel()) end)
    second = timer:schedule(0, function() ran[#ran + 1] = 2 end)
    timer:schedule(0, function() ran[#ran + 1] = 3 end)
    assert.equal(2, timer:dispatch())
    assert.same({ 1, 3 }, ran)
    assert.equal("cancelled", second:state())
  end)

  it("refuses to run from inside a callback", function()
    local err
    timer:schedule(0, function()
      local ok, e = pcall(timer.dispatch, timer)
      err = not ok and e
    end)
    timer:dispatch()
    assert.equal("hwtimer: dispatch called from inside a timeout callback", err)
  end)

  it("rejects a negative max", function()
    assert.has_error(function() timer:dispatch(-1) end,
      "bad argument #1 to 'dispatch' (non-negative integer expected)")
  end)

  describe("errors in callbacks", function()
    it("go to on_error(err, timeout) and dispatch carries on", function()
      local seen = {}
      local tm = hwtimer.new({ on_error = function(err, t) seen[#seen + 1] = { err, t } end })
      local ran = 0
      local obj = {}
      local a = tm:schedule(0, function() error("boom", 0) end)
      tm:schedule(0, function() ran = ran + 1 end)
      local c = tm:schedule(0, function() error(obj) end)
      tm:schedule(0, function() ran = ran + 1 end)
      assert.equal(4, tm:dispatch())
      assert.equal(2, ran)
      assert.equal(2, #seen)
      assert.same({ "boom", a }, seen[1])
      assert.equal(obj, seen[2][1])
      assert.equal(c, seen[2][2])
      assert.equal("expired", a:state())
      tm:close()
    end)

    -- The message handler makes the traceback's message from a copy of a
    -- number error: on_error gets the number itself, not a string made of it.
    it("give on_error a number error as the number raised", function()
      local seen = {}
      local tm = hwtimer.new({ on_error = function(err) seen[#seen + 1] = err end })
      tm:schedule(0, function() error(42, 0) end) -- level 0: 5.1 would prefix a position
      tm:schedule(0, function() error(2.5, 0) end)
      assert.equal(2, tm:dispatch())
      assert.equal(2, #seen)
      assert.equal("number", type(seen[1]))
      assert.equal(42, seen[1])
      assert.equal("number", type(seen[2]))
      assert.equal(2.5, seen[2])
      tm:close()
    end)

    it("survive an error inside on_error", function()
      local out, ok = helpers.run_lua([[
        local hwtimer = require("hwtimer")
        local tm = hwtimer.new({ on_error = function() error("handler broke", 0) end })
        local ran = 0
        tm:schedule(0, function() error("first", 0) end)
        tm:schedule(0, function() ran = ran + 1 end)
        print("dispatched", tm:dispatch(), "ran", ran)
      ]])
      assert.is_true(ok, out)
      assert.matches("hwtimer: error in on_error: handler broke", out, 1, true)
      assert.matches("dispatched\t2\tran\t1", out, 1, true)
    end)

    it("are printed with a traceback by default", function()
      local out, ok = helpers.run_lua([[
        local hwtimer = require("hwtimer")
        local tm = hwtimer.new()
        local function failing() error("kaput") end
        tm:schedule(0, failing)
        tm:schedule(0, function() error(setmetatable({}, { __tostring = function() return "custom" end })) end)
        tm:schedule(0, function() error() end)
        tm:schedule(0, function() error(42, 0) end) -- (a number: its digits, then the traceback)
        print("dispatched", tm:dispatch())
      ]])
      assert.is_true(ok, out)
      assert.matches("hwtimer: error in timeout callback: [^\n]*kaput", out)
      assert.matches("stack traceback:", out, 1, true)
      assert.matches(":3: in function", out, 1, true) -- the failing line
      assert.matches("hwtimer: error in timeout callback: custom", out, 1, true)
      assert.matches("(error object is a nil value)", out, 1, true)
      assert.matches("hwtimer: error in timeout callback: 42\nstack traceback:", out, 1, true)
      assert.matches("dispatched\t4", out, 1, true)
    end)
  end)
end)
