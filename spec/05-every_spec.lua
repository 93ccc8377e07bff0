local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

describe("timer:every", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("runs repeatedly with the same handle and arguments", function()
    local runs, handles = 0, {}
    local t = timer:every(0.002, function(h, x)
      runs = runs + 1
      handles[h] = x
    end, "arg")
    assert.is_true(helpers.wait_until(timer, function() return runs >= 5 end, 5))
    assert.same({ [t] = "arg" }, handles)
    assert.equal("pending", t:state())
    assert.equal(1, timer:pending())
  end)

  it("uses a fixed delay: the next run is scheduled after the callback returns", function()
    local starts, ends = {}, {}
    local t
    t = timer:every(0.01, function()
      starts[#starts + 1] = hwtimer.now()
      helpers.busy(0.02) -- a slow callback, longer than the interval
      ends[#ends + 1] = hwtimer.now()
      if #starts == 3 then t:cancel() end
    end)
    timer:run(5)
    assert.equal(3, #starts)
    for i = 2, 3 do
      assert.is_true(starts[i] - ends[i - 1] >= 0.01, "run " .. i .. " started too soon")
    end
  end)

  it("keeps running after an error in one run", function()
    local errors, runs = 0, 0
    local tm = hwtimer.new({ on_error = function() errors = errors + 1 end })
    local t = tm:every(0.001, function()
      runs = runs + 1
      if runs % 2 == 1 then error("odd run") end
    end)
    assert.is_true(helpers.wait_until(tm, function() return runs >= 4 end, 5))
    assert.equal(runs - math.floor(runs / 2), errors)
    assert.equal("pending", t:state())
    tm:close()
  end)

  it("ends when cancelled from inside its callback", function()
    local runs, result = 0, nil
    local t = timer:every(0.001, function(h)
      runs = runs + 1
      if runs == 3 then result = h:cancel() end
    end)
    timer:run(2) -- returns once nothing is pending
    assert.equal(3, runs)
    assert.is_true(result)
    assert.equal("cancelled", t:state())
    assert.equal(0, timer:pending())
  end)

  it("ends when cancelled from outside", function()
    local runs = 0
    local t = timer:every(0.001, function() runs = runs + 1 end)
    helpers.wait_until(timer, function() return runs >= 2 end, 5)
    assert.is_true(t:cancel())
    local seen = runs
    timer:run(0.02)
    assert.equal(seen, runs)
    assert.is_false(t:cancel())
  end)

  it("rejects an interval that is not a positive finite number", function()
    local f = function() end
    assert.has_error(function() timer:every(0, f) end,
      "bad argument #1 to 'every' (positive interval expected)")
    assert.has_error(function() timer:every(-1, f) end,
      "bad argument #1 to 'every' (positive interval expected)")
    assert.has_error(function() timer:every(0 / 0, f) end,
      "bad argument #1 to 'every' (finite number expected)")
    assert.has_error(function() timer:every(1, "f") end,
      "bad argument #2 to 'every' (function or callable object expected, got string)")
  end)
end)
