-- reset, fixed rate and jitter, retry, stats and lateness.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

describe("t:reset([delay])", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("moves a pending timeout's deadline, later or earlier, keeping the handle", function()
    local at
    local t = timer:schedule(0.01, function() at = hwtimer.now() end)
    local t0 = hwtimer.now()
    assert.equal(t, t:reset(0.08))
    assert.equal(1, timer:pending())
    timer:run(2)
    assert.is_true(at - t0 >= 0.08)
    local early = timer:schedule(5, function() at = hwtimer.now() end)
    t0 = hwtimer.now()
    early:reset(0.01)
    timer:run(2)
    assert.is_true(at - t0 >= 0.01 and at - t0 < 1)
  end)

  it("refuses a timeout that already ran, or was cancelled: its callback is released", function()
    local runs = 0
    local t = timer:schedule(0, function() runs = runs + 1 end)
    timer:dispatch()
    assert.equal("expired", t:state())
    local r, err = t:reset(0.005)
    assert.is_nil(r)
    assert.equal("cannot reset a timeout that has run: its callback was released (schedule a new one)", err)
    assert.equal("expired", t:state())
    assert.is_nil(t:task())
    local c = timer:schedule(0, function() runs = runs + 1 end)
    assert.is_true(c:cancel())
    r, err = c:reset(0)
    assert.is_nil(r)
    assert.matches("that has been cancelled", err)
    assert.equal("cancelled", c:state())
    timer:run(0.02)
    assert.equal(1, runs)
    assert.equal(0, timer:pending())
  end)

  it("re-arms, inside its own callback, a timeout cancelled there", function()
    local runs = 0
    timer:schedule(0, function(h)
      runs = runs + 1
      if runs == 1 then
        assert.is_false(h:cancel()) -- a one-shot is already expired in its callback
        assert.equal(h, h:reset(0.001))
      end
    end)
    timer:run(2)
    assert.equal(2, runs)
    assert.equal(0, timer:pending())
  end)

  it("works from the timeout's own callback", function()
    local runs = 0
    timer:schedule(0, function(t)
      runs = runs + 1
      if runs < 3 then t:reset(0.001) end
    end)
    timer:run(2)
    assert.equal(3, runs)
    assert.equal(0, timer:pending())
  end)

  it("keeps many resets of one timeout to one pending run (idle-timeout use)", function()
    local runs = 0
    local t = timer:schedule(0.05, function() runs = runs + 1 end)
    for _ = 1, 10000 do t:reset(0.05) end
    assert.equal(1, timer:pending())
    timer:run(2)
    assert.equal(1, runs)
  end)

  it("reuses a periodic timeout's interval; a one-shot needs a delay", function()
    local runs = 0
    local p = timer:every(0.5, function() runs = runs + 1 end)
    local before = hwtimer.now()
    p:reset() -- one interval from now, not from when it was scheduled
    local after = hwtimer.now()
    assert.is_true(p:deadline() >= before + 0.5, "due " .. p:deadline() - before .. " s on")
    assert.is_true(p:deadline() <= after + 0.5 + 0.001, "due " .. p:deadline() - after .. " s on")
    assert.equal(1, timer:pending())
    p:reset(0.002) -- a delay moves the next run; the interval stays
    assert.is_true(helpers.wait_until(timer, function() return runs >= 1 end, 5))
    local d = p:deadline() -- the run after: one interval (0.5 s) after the last was due
    assert.is_true(d - hwtimer.now() > 0.3, "next run " .. d - hwtimer.now() .. " s on")
    assert.is_true(d - hwtimer.now() <= 0.5 + 0.001, "next run " .. d - hwtimer.now() .. " s on")
    assert.equal(1, runs)
    p:cancel()
    local o = timer:schedule(1, function() end)
    assert.has_error(function() local r = o:reset() return r end,
      "bad argument #1 to 'reset' (delay expected (a one-shot timeout has no interval to reuse))")
    assert.has_error(function() local r = o:reset(0 / 0) return r end,
      "bad argument #1 to 'reset' (finite number expected)")
  end)

  it("is refused over max_pending, and on a stopped timer", function()
    local capped = hwtimer.new({ max_pending = 1 })
    local r, err
    local a = capped:schedule(0, function(h)
      capped:schedule(1, function() end) -- the one pending timeout the cap allows
      r, err = h:reset(1)
    end)
    capped:dispatch()
    assert.is_nil(r)
    assert.matches("too many pending timeouts", err)
    assert.equal("expired", a:state())
    assert.equal(1, capped:pending())
    capped:close()
    assert.has_error(function() local x = a:reset(1) return x end, "attempt to use a stopped timer")
  end)
end)

describe("timer:every{ interval, rate, jitter }", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  -- Timing is read from t:deadline() (the due time of the run in progress), so a
  -- slow host (valgrind) that runs late skips periods but cannot fail the test.
  it("fixed rate: runs start an interval apart however long each run takes", function()
    local due, starts, ends = {}, {}, {}
    local p
    p = timer:every({ interval = 0.02, rate = true }, function(t)
      starts[#starts + 1] = hwtimer.now()
      due[#due + 1] = t:deadline()
      helpers.busy(0.01) -- half an interval: fixed delay would drift by this much a run
      ends[#ends + 1] = hwtimer.now()
      if #due == 6 then p:cancel() end
    end)
    timer:run(5)
    assert.equal(6, #due)
    for i = 2, 6 do
      local periods = (due[i] - due[1]) / 0.02
      -- fixed delay would put runs 0.03 s apart plus lateness: off the grid
      assert.is_true(math.abs(periods - math.floor(periods + 0.5)) < 0.001 / 0.02 + 1e-6,
        "run " .. i .. " is off the period grid by " .. (periods % 1) * 0.02 .. " s")
      assert.is_true(due[i] > due[i - 1], "two runs in one period")
      assert.is_true(starts[i] >= due[i], "run " .. i .. " started early")
      -- a run that ended well before the next period must not skip it
      if ends[i - 1] < due[i - 1] + 0.02 - 0.005 then
        assert.is_true(math.abs(due[i] - due[i - 1] - 0.02) < 1e-6, "run " .. i .. " skipped a period")
      end
    end
  end)

  it("fixed rate: missed periods are skipped, never run in a burst", function()
    local starts, slow_end = {}, nil
    local p
    p = timer:every({ interval = 0.01, rate = true }, function()
      starts[#starts + 1] = hwtimer.now()
      if #starts == 1 then
        helpers.busy(0.055) -- misses five periods
        slow_end = hwtimer.now()
      end
      if #starts == 3 then p:cancel() end
    end)
    timer:run(5)
    assert.equal(3, #starts)
    -- run 2 is due at the first period after the slow run ended and run 3 a
    -- period later, however late run 2 itself started; a burst runs both at once
    assert.is_true(starts[2] >= slow_end)
    assert.is_true(starts[3] - slow_end >= 0.01 - 1e-6, "burst after the slow run")
  end)

  it("jitter delays each run by up to jitter x interval, never less than the interval", function()
    local gaps, last = {}, nil
    local p
    p = timer:every({ interval = 0.01, jitter = 0.5 }, function()
      local now = hwtimer.now()
      if last then gaps[#gaps + 1] = now - last end
      last = now
      if #gaps == 20 then p:cancel() end
    end)
    timer:run(5)
    local lo, hi = math.huge, 0
    for _, g in ipairs(gaps) do lo, hi = math.min(lo, g), math.max(hi, g) end
    assert.is_true(lo >= 0.01, "a run came early: " .. lo)
    assert.is_true(hi > lo + 0.001, "no spread at all")
  end)

  -- Each series raises in every run and is cancelled from its 19th: it must
  -- have run 19 times, each due where its options say (read from deadline()).
  local TICK, IV, J = 0.001, 0.005, 0.5
  local function erring_series(opts)
    local raised, due, ends = 0, {}, {}
    local tm = hwtimer.new({ tick = TICK, on_error = function() raised = raised + 1 end })
    local p
    p = tm:every(opts, function(t)
      due[#due + 1] = t:deadline()
      if #due == 19 then p:cancel() end
      ends[#ends + 1] = hwtimer.now()
      error("run " .. #due)
    end)
    tm:run(10)
    local left = tm:pending()
    tm:close()
    assert.equal(19, #due, "the series stopped after " .. #due .. " runs")
    assert.equal(19, raised)
    assert.equal(0, left)
    assert.equal("cancelled", p:state())
    return due, ends
  end

  -- how far d lies past the nearest grid point at or below it (grid from base)
  local function off_grid(d, base)
    local k = math.floor((d - base) / IV + 1e-6)
    return d - base - k * IV, k
  end

  it("a series at a fixed rate goes on after its callback raises, on its grid", function()
    local due = erring_series({ interval = IV, rate = true })
    for i = 2, 19 do
      local off, k = off_grid(due[i], due[1])
      assert.is_true(k >= i - 1, "run " .. i .. " came before its period")
      assert.is_true(off < 1e-6 or IV - off < 1e-6, "run " .. i .. " is " .. off .. " s off the grid")
    end
  end)

  it("a jittered series goes on after its callback raises, an interval or more after each run", function()
    local due, ends = erring_series({ interval = IV, jitter = J })
    local lo, hi = math.huge, -math.huge
    for i = 2, 19 do
      assert.is_true(due[i] >= ends[i - 1] + IV - 1e-9, "run " .. i .. " came early")
      local extra = due[i] - ends[i - 1] - IV
      lo, hi = math.min(lo, extra), math.max(hi, extra)
    end
    -- (read from the deadlines: the host's lateness does not spread them)
    assert.is_true(hi - lo > TICK, "no jitter: each run " .. lo .. " to " .. hi .. " s past an interval")
  end)

  it("a jittered series at a fixed rate goes on after its callback raises, its jitter not accumulated", function()
    local due, offs = erring_series({ interval = IV, rate = true, jitter = J, first = IV }), {}
    for i = 2, 19 do
      local off, k = off_grid(due[i], due[1])
      assert.is_true(k >= i - 1, "run " .. i .. " came before its period")
      assert.is_true(off <= J * IV + TICK + 1e-6, "run " .. i .. " is " .. off .. " s past its period")
      offs[#offs + 1] = off
    end
    table.sort(offs)
    assert.is_true(offs[#offs] - offs[1] >= TICK - 1e-6, "no jitter: every run " .. offs[1] .. " s past its period")
  end)

  it("reset(delay) moves a periodic's next run by delay; the interval stays", function()
    for _, opts in ipairs({ 0.5, { interval = 0.5, rate = true }, { interval = 0.5, jitter = 0.2 } }) do
      local runs, at = 0, nil
      local p = timer:every(opts, function() runs, at = runs + 1, hwtimer.now() end)
      local before = hwtimer.now()
      p:reset(0.02)
      local after = hwtimer.now()
      assert.is_true(p:deadline() >= before + 0.02, "due " .. p:deadline() - before .. " s on")
      assert.is_true(p:deadline() <= after + 0.02 + 0.001, "due " .. p:deadline() - after .. " s on")
      assert.is_true(helpers.wait_until(timer, function() return runs == 1 end, 5))
      assert.is_true(at >= before + 0.02, "ran early")
      local next_in = p:deadline() - at -- an interval on (plus jitter), not 0.02
      assert.is_true(next_in > 0.3 and next_in <= 0.5 * 1.2 + 0.001, "next run " .. next_in .. " s on")
      if type(opts) == "table" and opts.rate then -- fixed rate: the periods count from the reset's run
        local from_reset = p:deadline() - 0.52
        assert.is_true(from_reset >= before and from_reset <= after + 0.001,
          "next run " .. (p:deadline() - before) .. " s after the reset, not 0.52")
      end
      p:cancel()
    end
  end)

  it("rejects bad options", function()
    local f = function() end
    assert.has_error(function() local r = timer:every({}, f) return r end,
      "bad argument #1 to 'every' (field 'interval': positive number of seconds expected)")
    assert.has_error(function() local r = timer:every({ interval = 1, jitter = 2 }, f) return r end,
      "bad argument #1 to 'every' (field 'jitter': number from 0 to 1 expected)")
    assert.has_error(function() local r = timer:every({ interval = -1 }, f) return r end,
      "bad argument #1 to 'every' (field 'interval': positive number of seconds expected)")
    assert.has_error(function() local r = timer:every({ interval = 0 / 0 }, f) return r end,
      "bad argument #1 to 'every' (field 'interval': positive number of seconds expected)")
    -- the bounds: an interval above 0 up to 1e9 s, a first run from 0 s
    for _, opts in ipairs({ { interval = 0 }, { interval = 1e9 + 1 } }) do
      assert.has_error(function() local r = timer:every(opts, f) return r end,
        "bad argument #1 to 'every' (field 'interval': positive number of seconds expected)")
    end
    assert.has_error(function() local r = timer:every({ interval = 1, first = -1e-9 }, f) return r end,
      "bad argument #1 to 'every' (field 'first': non-negative number of seconds expected)")
    assert.equal(0, timer:pending())
    for _, opts in ipairs({ { interval = 1e9 }, { interval = 1e-9 }, { interval = 1, first = 0 },
                            { interval = 1, first = 1e9 } }) do
      assert.is_true(timer:every(opts, f):cancel())
    end
  end)
end)

describe("timer:stats([since_last]) and t:lateness()", function()
  it("counts everything exactly and reports lateness", function()
    local timer = hwtimer.new({ on_error = function() end })
    local lateness = {}
    -- lateness read between two clock reads: it lies between them less the
    -- deadline, so it cannot be clamped to 0 when a timeout runs early
    for i = 1, 20 do
      timer:schedule(i / 1000, function(t)
        local t0 = hwtimer.now()
        local l = t:lateness()
        lateness[#lateness + 1] = { t0 - t:deadline(), l, hwtimer.now() - t:deadline() }
      end)
    end
    timer:schedule(0, function() error("x") end)
    timer:schedule(10, function() end):cancel()
    local p = timer:schedule(10, function() end)
    timer:run(1)
    local s = timer:stats()
    assert.same({ 23, 21, 1, 1, 1 }, { s.scheduled, s.fired, s.cancelled, s.errors, s.pending })
    assert.is_true(s.late_p50 >= 0 and s.late_p50 <= s.late_p99 and s.late_p99 <= s.late_max)
    assert.is_true(s.late_max < 1)
    assert.equal(20, #lateness)
    for _, l in ipairs(lateness) do
      assert.is_true(l[1] >= 0, "ran " .. -l[1] .. " s early")
      assert.is_true(l[2] >= l[1] - 1e-9 and l[2] <= l[3] + 1e-9, "lateness " .. l[2] .. " outside " .. l[1] .. ".." .. l[3])
    end
    assert.equal(0, p:lateness()) -- not due yet
    local w = timer:stats(true)
    assert.equal(23, w.scheduled)
    w = timer:stats(true) -- the window starts again
    assert.same({ 0, 0, 0, 0, 1 }, { w.scheduled, w.fired, w.cancelled, w.errors, w.pending })
    assert.equal(23, timer:stats().scheduled) -- the lifetime figures stay
    timer:close()
  end)
end)

describe("hwtimer.retry", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("retries with backoff until fn succeeds", function()
    local calls, times, got = 0, {}, nil
    local r = hwtimer.retry(timer, function(n)
      calls = calls + 1
      times[n] = hwtimer.now()
      if n < 3 then error("down") end
      return "up"
    end, { delay = 0.01, factor = 2, jitter = 0, on_success = function(v, n) got = { v, n } end })
    timer:run(5)
    assert.equal(3, calls)
    assert.same({ "up", 3 }, got)
    assert.equal("succeeded", r:state())
    assert.equal(3, r:attempts())
    assert.is_true(times[2] - times[1] >= 0.01)
    assert.is_true(times[3] - times[2] >= 0.02) -- doubled
  end)

  it("gives up after the attempts, reporting each failure", function()
    local failures = {}
    local r = hwtimer.retry(timer, function() return nil, "no" end, {
      attempts = 3, delay = 0.001,
      on_failure = function(err, n, last) failures[#failures + 1] = { err, n, last } end })
    timer:run(5)
    assert.equal("failed", r:state())
    assert.same({ { "no", 1, false }, { "no", 2, false }, { "no", 3, true } }, failures)
  end)

  it("can be cancelled between attempts", function()
    local calls = 0
    local r = hwtimer.retry(timer, function() calls = calls + 1 end, { delay = 10 })
    timer:dispatch() -- the first attempt fails (returns nothing)
    assert.is_true(r:cancel())
    assert.is_false(r:cancel())
    assert.equal("cancelled", r:state())
    assert.equal(1, calls)
    assert.equal(0, timer:pending())
  end)

  it("rejects bad arguments", function()
    assert.has_error(function() local r = hwtimer.retry(timer, 42) return r end,
      "bad argument #2 to 'retry' (function or callable object expected, got number)")
    assert.has_error(function() local r = hwtimer.retry(timer, print, { attempts = 0 }) return r end,
      "bad argument #3 to 'retry' (option 'attempts': positive integer expected)")
  end)
end)
