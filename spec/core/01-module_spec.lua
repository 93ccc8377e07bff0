local hwtimer = require("hwtimer")

describe("hwtimer module", function()
  it("has a version", function()
    assert.equal("0.1.0", hwtimer._VERSION)
  end)

  describe("now()", function()
    it("returns monotonic seconds as a number", function()
      local a = hwtimer.now()
      local b = hwtimer.now()
      assert.is_number(a)
      assert.is_true(b >= a)
    end)

    it("is the system's monotonic clock (CLOCK_MONOTONIC) in seconds", function()
      local monotonic = require("hwtimer_testutil").monotonic
      for _ = 1, 3 do
        local a = monotonic()
        local t = hwtimer.now()
        local b = monotonic()
        assert.is_true(t >= a - 1e-7 and t <= b + 1e-7, ("now() %.9f, the clock %.9f to %.9f"):format(t, a, b))
      end
    end)

    it("advances with real time", function()
      local a = hwtimer.now()
      local t0 = os.clock()
      while os.clock() - t0 < 0.02 do end
      assert.is_true(hwtimer.now() - a >= 0.015)
    end)
  end)

  -- (not in the API: hwtimer.durable.redis_client tells a suspended
  -- machine by the two clocks drawing apart)
  describe("core.boot_now()", function()
    it("returns one number, seconds of a clock that keeps pace with now() while the machine runs", function()
      local core = require("hwtimer.core")
      assert.equal(1, select("#", core.boot_now()))
      assert.equal(1, select("#", core.now()))
      local apart = core.boot_now() - core.now()
      local t0 = os.clock()
      while os.clock() - t0 < 0.05 do end
      local drift = core.boot_now() - core.now() - apart
      assert.is_true(math.abs(drift) < 0.005, drift .. " s drawn apart in 0.05 s")
    end)
  end)
end)

describe("hwtimer.new", function()
  local timer
  after_each(function()
    if timer then timer:close() end
    timer = nil
  end)

  it("makes a running timer with defaults", function()
    timer = hwtimer.new()
    assert.equal(0, timer:pending())
    assert.matches("^hwtimer.timer %(running, 0 pending%)", tostring(timer))
  end)

  it("accepts every option", function()
    timer = hwtimer.new({ tick = 0.01, wheel_size = 100, max_pending = 5,
                          on_error = function() end })
    assert.equal(0, timer:pending())
  end)

  it("accepts a callable object as on_error", function()
    timer = hwtimer.new({ on_error = setmetatable({}, { __call = function() end }) })
    assert.equal(0, timer:pending())
  end)

  it("accepts every wheel size from 1 to 4096", function()
    for _, size in ipairs({ 1, 2, 3, 63, 64, 65, 512, 4095, 4096 }) do
      local t = hwtimer.new({ wheel_size = size })
      local fired = false
      t:schedule(0.002, function() fired = true end)
      t:run(2)
      t:close()
      assert.is_true(fired, "wheel_size " .. size)
    end
  end)

  local bad = {
    { "a string", "bad argument #1 to 'new' (table expected, got string)" },
    { { tick = 0 }, "bad argument #1 to 'new' (option 'tick': number of seconds from 1e-6 to 3600 expected)" },
    { { tick = -1 }, "bad argument #1 to 'new' (option 'tick': number of seconds from 1e-6 to 3600 expected)" },
    { { tick = 0 / 0 }, "bad argument #1 to 'new' (option 'tick': number of seconds from 1e-6 to 3600 expected)" },
    { { tick = math.huge }, "bad argument #1 to 'new' (option 'tick': number of seconds from 1e-6 to 3600 expected)" },
    { { tick = "1" }, "bad argument #1 to 'new' (option 'tick': number of seconds from 1e-6 to 3600 expected)" },
    { { wheel_size = 0 }, "bad argument #1 to 'new' (option 'wheel_size': integer from 1 to 4096 expected)" },
    { { wheel_size = 4097 }, "bad argument #1 to 'new' (option 'wheel_size': integer from 1 to 4096 expected)" },
    { { wheel_size = 2.5 }, "bad argument #1 to 'new' (option 'wheel_size': integer from 1 to 4096 expected)" },
    { { wheel_size = "big" }, "bad argument #1 to 'new' (option 'wheel_size': integer from 1 to 4096 expected)" },
    { { max_pending = -1 }, "bad argument #1 to 'new' (option 'max_pending': non-negative integer expected)" },
    { { max_pending = 1.5 }, "bad argument #1 to 'new' (option 'max_pending': non-negative integer expected)" },
    { { on_error = 42 }, "bad argument #1 to 'new' (option 'on_error': function or callable object expected)" },
    { { on_error = {} }, "bad argument #1 to 'new' (option 'on_error': function or callable object expected)" },
    { { ticks = 1 }, "bad argument #1 to 'new' (unknown option 'ticks')" },
    { { 1 }, "bad argument #1 to 'new' (option names must be strings)" },
  }
  for i, case in ipairs(bad) do
    it("rejects bad options (" .. i .. ")", function()
      assert.has_error(function() hwtimer.new(case[1]) end, case[2])
    end)
  end
end)
