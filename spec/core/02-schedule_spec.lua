local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

describe("timer:schedule", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("returns a pending timeout handle", function()
    local t = timer:schedule(1, function() end)
    assert.equal("userdata", type(t))
    assert.equal("pending", t:state())
    assert.equal(1, timer:pending())
  end)

  it("calls back with the handle and the extra arguments, on this thread", function()
    local got
    local t = timer:schedule(0.005, function(...) got = helpers.pack(...) end, "a", nil, 3)
    timer:run(2)
    assert.equal(4, got.n)
    assert.equal(t, got[1])
    assert.equal("a", got[2])
    assert.is_nil(got[3])
    assert.equal(3, got[4])
  end)

  -- (the arguments live in the handle or in a table beside it, by Lua
  -- version: a full collection between schedule and run walks them all)
  it("keeps each of 2,000 timeouts' arguments through full collections", function()
    local runs, total, n = 0, 0, 2000
    for i = 1, n do
      timer:schedule(0, function(_, a, b) runs, total = runs + 1, total + a + b[1] end, i, { i })
    end
    collectgarbage()
    collectgarbage()
    timer:run(2)
    collectgarbage()
    assert.same({ n, n * (n + 1) }, { runs, total })
  end)

  it("passes up to 200 arguments, one-shot and periodic", function()
    local args = {}
    for i = 1, 200 do args[i] = i end
    local got, every_got = nil, nil
    timer:schedule(0, function(...) got = helpers.pack(...) end, helpers.unpack(args))
    local p
    p = timer:every(0.001, function(...) every_got = helpers.pack(...); p:cancel() end,
      helpers.unpack(args))
    -- dispatched from a fresh coroutine, whose stack starts small
    coroutine.wrap(function() timer:run(2) end)()
    for _, g in ipairs({ got, every_got }) do
      assert.equal(201, g.n)
      for i = 1, 200 do assert.equal(i, g[i + 1]) end
    end
  end)

  it("accepts a callable object", function()
    local calls = 0
    local obj = setmetatable({}, { __call = function() calls = calls + 1 end })
    timer:schedule(0.001, obj)
    timer:run(2)
    assert.equal(1, calls)
  end)

  it("runs a delay <= 0 at the next dispatch", function()
    local ran = {}
    timer:schedule(0, function() ran[#ran + 1] = "zero" end)
    timer:schedule(-5, function() ran[#ran + 1] = "negative" end)
    assert.equal(2, timer:dispatch())
    assert.same({ "zero", "negative" }, ran)
  end)

  it("never fires early, and fires in deadline order", function()
    local order, early = {}, 0
    -- 5 ms apart: far more than scheduling them takes, even under valgrind
    local delays = { 0.03, 0.005, 0.02, 0.035, 0.01, 0.015, 0.025 }
    for _, d in ipairs(delays) do
      timer:schedule(d, function(t)
        if hwtimer.now() < t:deadline() then early = early + 1 end
        order[#order + 1] = d
      end)
    end
    timer:run(2)
    assert.equal(0, early)
    table.sort(delays)
    assert.same(delays, order)
  end)

  it("never fires early when scheduled from a callback, a tick or less ahead", function()
    -- Inside a callback the wheel stands at the current tick, so a delay under
    -- a tick lands on the next one: the edge where an off-by-one fires early.
    -- `due` is read before schedule reads its own clock: never later than the
    -- real deadline.
    local early, runs = 0, 0
    local function chain(_, due)
      runs = runs + 1
      if hwtimer.now() < due then early = early + 1 end
      if runs < 300 then
        local d = (runs % 7 + 1) * 0.0003 -- 0.3 to 2.1 ms: under and over a tick
        timer:schedule(d, chain, hwtimer.now() + d)
      end
    end
    timer:schedule(0, chain, 0)
    timer:run(10)
    assert.equal(300, runs)
    assert.equal(0, early)
  end)

  it("fires a deadline that lies beyond the first wheel level", function()
    local t0 = hwtimer.now()
    local fired
    local tm = hwtimer.new({ tick = 0.0001, wheel_size = 16 }) -- level 0 spans 1.6 ms
    tm:schedule(0.05, function() fired = hwtimer.now() end)
    tm:run(2)
    tm:close()
    assert.is_true(fired - t0 >= 0.05)
  end)

  it("counts pending timeouts until they run or are cancelled", function()
    local a = timer:schedule(0.001, function() end)
    timer:schedule(0.002, function() end)
    assert.equal(2, timer:pending())
    a:cancel()
    assert.equal(1, timer:pending())
    timer:run(2)
    assert.equal(0, timer:pending())
  end)

  describe("max_pending", function()
    it("refuses a timeout over the cap with nil, message and schedules nothing", function()
      local capped = hwtimer.new({ max_pending = 2 })
      assert.truthy(capped:schedule(0, function() end))
      assert.truthy(capped:schedule(1, function() end))
      local t, err = capped:schedule(0, function() error("must not run") end)
      assert.is_nil(t)
      assert.equal("too many pending timeouts (2 pending, max_pending 2)", err)
      assert.equal(2, capped:pending())
      assert.equal(1, capped:dispatch())
      assert.truthy(capped:schedule(1, function() end)) -- room again
      capped:close()
    end)
  end)

  describe("bad input", function()
    local f = function() end
    local cases = {
      { { 0 / 0, f }, "bad argument #1 to 'schedule' (finite number expected)" },
      { { math.huge, f }, "bad argument #1 to 'schedule' (finite number expected)" },
      { { -math.huge, f }, "bad argument #1 to 'schedule' (finite number expected)" },
      { { "soon", f }, "bad argument #1 to 'schedule' (number expected, got string)" },
      { { nil, f }, "bad argument #1 to 'schedule' (number expected, got nil)" },
      { { 1e10, f }, "bad argument #1 to 'schedule' (delay too large (at most 1e9 seconds))" },
      { { 1 }, "bad argument #2 to 'schedule' (function or callable object expected, got nil)" },
      { { 1, 42 }, "bad argument #2 to 'schedule' (function or callable object expected, got number)" },
      { { 1, {} }, "bad argument #2 to 'schedule' (function or callable object expected, got table)" },
    }
    for i, case in ipairs(cases) do
      it("raises for bad arguments (" .. i .. ")", function()
        assert.has_error(function() timer:schedule(helpers.unpack(case[1], 1, 2)) end, case[2])
        assert.equal(0, timer:pending())
      end)
    end

    it("takes a delay of 1e9 s itself, the longest (schedule, every, reset)", function()
      local t = assert(timer:schedule(1e9, f))
      assert.equal(t, t:reset(1e9))
      local e = assert(timer:every(1e9, f))
      assert.equal(2, timer:pending())
      t:cancel()
      e:cancel()
    end)

    it("raises for a wrong self", function()
      assert.has_error(function() timer.schedule({}, 1, f) end,
        "bad argument #1 to 'schedule' (hwtimer.timer expected, got table)")
      -- other userdata: another library's, and one of our timeout handles
      assert.has_error(function() timer.schedule(io.stdout, 1, f) end,
        "bad argument #1 to 'schedule' (hwtimer.timer expected, got " .. helpers.type_name(io.stdout) .. ")")
      local t = timer:schedule(1, f)
      assert.has_error(function() timer.schedule(t, 1, f) end,
        "bad argument #1 to 'schedule' (hwtimer.timer expected, got hwtimer.timeout)")
      assert.equal(1, timer:pending())
    end)

    it("raises for too many callback arguments", function()
      local args = {}
      for i = 1, 201 do args[i] = i end
      assert.has_error(function() timer:schedule(1, f, helpers.unpack(args)) end,
        "bad argument to 'schedule' (at most 200 callback arguments)")
    end)
  end)

  it("keeps a timeout whose handle was dropped", function()
    local fired = 0
    for _ = 1, 100 do timer:schedule(0.01, function() fired = fired + 1 end) end
    collectgarbage()
    collectgarbage()
    timer:run(2)
    assert.equal(100, fired)
  end)

  it("runs each of many timeouts exactly once", function()
    local count, seen, dup = 0, {}, 0
    for i = 1, 5000 do
      timer:schedule((i % 50) / 1000, function(_, id)
        if seen[id] then dup = dup + 1 end
        seen[id] = true
        count = count + 1
      end, i)
    end
    assert.is_true(helpers.wait_until(timer, function() return count == 5000 end, 5))
    assert.equal(0, dup)
    assert.equal(0, timer:pending())
  end)
end)
