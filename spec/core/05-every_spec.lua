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

  -- (each periodic run re-arms inside the dispatch: one that left the
  -- dispatch's stack short broke the callbacks after it in the same batch)
  it("runs beside others due in the same dispatch, periodic and one-shot, with and without arguments", function()
    local ran = {}
    local function note(_, tag) ran[tag] = (ran[tag] or 0) + 1 end
    local every = {}
    for i = 1, 4 do every[i] = timer:every(0.005, note, "e" .. i) end
    every[5] = timer:every({ interval = 0.005 }, note, "advanced")
    for i = 1, 3 do timer:schedule(0.005, note, "s" .. i) end
    timer:schedule(0.005, function() ran.plain = true end)
    local t0 = hwtimer.now()
    while hwtimer.now() < t0 + 0.02 do end -- all due, twice over: one dispatch runs them together
    assert.equal(9, timer:dispatch())
    for _, tag in ipairs({ "e1", "e2", "e3", "e4", "advanced", "s1", "s2", "s3" }) do assert.equal(1, ran[tag], tag) end
    assert.is_true(ran.plain)
    while hwtimer.now() < t0 + 0.04 do end
    assert.equal(5, timer:dispatch())
    assert.equal(2, ran.e4)
    for i = 1, 5 do every[i]:cancel() end
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

describe("timer:every{ first = }", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("first = 0 runs at the next dispatch, then every interval", function()
    local runs = 0
    local t = timer:every({ interval = 10, first = 0 }, function() runs = runs + 1 end)
    assert.equal(1, timer:dispatch())
    assert.equal(1, runs)
    assert.equal("pending", t:state())
    assert.is_true(t:remaining() > 9) -- the next run is one interval away
    assert.equal(0, timer:dispatch())
  end)

  it("first = secs delays the first run by exactly that, never less, without jitter", function()
    local t0 = hwtimer.now()
    local at
    local t = timer:every({ interval = 10, first = 0.05, jitter = 1 }, function()
      at = hwtimer.now()
    end)
    assert.is_true(t:deadline() >= t0 + 0.05) -- rounded up to the 1 ms tick, no jitter
    assert.is_true(t:deadline() <= hwtimer.now() + 0.05 + 0.0011)
    assert.is_true(helpers.wait_until(timer, function() return at ~= nil end, 5))
    assert.is_true(at - t0 >= 0.05)
    assert.is_true(t:remaining() > 9) -- then the interval (jitter applies from here)
  end)

  it("at a fixed rate, later runs count from the first one", function()
    local due = {}
    local t
    t = timer:every({ interval = 0.05, rate = true, first = 0.01 }, function(h)
      due[#due + 1] = h:deadline()
      if #due == 3 then t:cancel() end
    end)
    local first = t:deadline()
    timer:run(5)
    assert.equal(3, #due)
    assert.equal(first, due[1])
    -- each deadline one interval after the previous nominal start, rounded up to the 1 ms tick
    for i = 2, 3 do
      assert.near(0.05, due[i] - due[i - 1], 0.0011)
    end
  end)

  it("at a fixed rate, a run that overran skips the periods it missed, counts them, and keeps the grid", function()
    local I = 0.1 * (tonumber(os.getenv("HWT_SLOW")) or 1) -- (half of it the margin either way)
    local due = {}
    local t
    t = timer:every({ interval = I, rate = true, first = 0.01 }, function(h)
      due[#due + 1] = h:deadline()
      -- (busy until the middle of the third period: the nominal starts at
      -- +1 and +2 intervals are missed, the one at +3 is the next)
      if #due == 1 then
        local until_ = due[1] + 2.5 * I
        while hwtimer.now() < until_ do end
      else
        t:cancel()
      end
    end)
    local skipped = timer:stats().skipped
    timer:run(5 + 4 * I) -- (until the second run cancels it: 3 intervals on, longer where HWT_SLOW stretches I)
    assert.equal(2, #due)
    assert.near(3 * I, due[2] - due[1], 0.0011)
    assert.equal(skipped + 2, timer:stats().skipped)
  end)

  it("without first the first run is one interval away", function()
    local t = timer:every({ interval = 10 }, function() end)
    assert.is_true(t:remaining() > 9)
  end)
end)
