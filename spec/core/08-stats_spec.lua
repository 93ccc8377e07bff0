-- timer:stats(): counts of runs for which scheduled = fired + cancelled +
-- pending holds at every moment; due, callback time, skipped periods, the
-- retry counts (timer:count); on_error's traceback; the warning a timer
-- collected with timeouts pending prints.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local f = function() end
local COUNTS = { "scheduled", "fired", "cancelled", "pending", "errors", "skipped", "due",
                 "retry_started", "retry_succeeded", "retry_failed" }

-- The identity, checked wherever it is called from (inside callbacks too).
local function check_identity(timer, where)
  local s = timer:stats()
  assert(s.scheduled == s.fired + s.cancelled + s.pending,
    string.format("%s: scheduled %d ~= fired %d + cancelled %d + pending %d", where or "",
      s.scheduled, s.fired, s.cancelled, s.pending))
  return s
end

describe("timer:stats()", function()
  local timer, raised
  -- Callbacks' errors are collected and checked after each spec: an assert
  -- inside a callback (check_identity) goes to on_error, and would be lost.
  -- The one deliberate error is "x".
  before_each(function()
    raised = {}
    timer = hwtimer.new({ on_error = function(err) raised[#raised + 1] = tostring(err) end })
  end)
  after_each(function()
    timer:close()
    for _, err in ipairs(raised) do
      assert(err:match("^.*:%d+: x$"), "a callback raised: " .. err)
    end
  end)

  it("returns every count as an integer", function()
    timer:schedule(0, f)
    timer:dispatch()
    local s = timer:stats()
    for _, k in ipairs(COUNTS) do
      assert.equal("number", type(s[k]), k)
      assert.equal(math.floor(s[k]), s[k], k)
      if math.type then assert.equal("integer", math.type(s[k]), k) end
      assert.equal(s[k], s[k] + 0, k)
      assert.is_nil(tostring(s[k]):find("%."), k .. " prints as " .. tostring(s[k]))
    end
    for _, k in ipairs({ "cb_time", "cb_max", "late_p50", "late_p99", "late_max", "late_sum" }) do
      assert.equal("number", type(s[k]), k)
      assert.is_true(s[k] >= 0, k)
    end
  end)

  it("one-shots: scheduled = fired + cancelled + pending", function()
    local a = timer:schedule(0, f)
    timer:schedule(0, function() check_identity(timer, "in a one-shot") end)
    timer:schedule(10, f):cancel()
    timer:schedule(10, f)
    timer:schedule(0, function() error("x") end)
    local s = check_identity(timer)
    assert.same({ 5, 0, 1, 4 }, { s.scheduled, s.fired, s.cancelled, s.pending })
    assert.equal(3, timer:dispatch())
    s = check_identity(timer)
    assert.same({ 5, 3, 1, 1, 1 }, { s.scheduled, s.fired, s.cancelled, s.pending, s.errors })
    assert.is_false(a:cancel()) -- already ran: nothing counted
    assert.equal(1, timer:stats().cancelled)
  end)

  it("periodic series: each run counts once, the identity holds inside the callback", function()
    local runs, t = 0, nil
    t = timer:every(0.001, function()
      runs = runs + 1
      check_identity(timer, "in run " .. runs)
      -- a series is pending as a timeout, its next run not yet scheduled
      assert.equal(1, timer:pending())
      if runs == 4 then t:cancel() end -- from inside: no run armed, nothing cancelled
    end)
    assert.is_true(helpers.wait_until(timer, function() return runs == 4 end, 5))
    local s = check_identity(timer)
    assert.same({ 4, 4, 0, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
    assert.equal(0, timer:pending())
  end)

  it("a series cancelled between runs counts its armed run as cancelled", function()
    local runs = 0
    local t = timer:every(0.001, function() runs = runs + 1 end)
    while runs < 2 do -- one run a dispatch: the next is armed after the callback
      assert.is_true(helpers.wait_readable(timer, 5))
      timer:dispatch()
    end
    assert.equal(2, runs)
    check_identity(timer)
    assert.is_true(t:cancel())
    local s = check_identity(timer)
    assert.same({ 3, 2, 1, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
  end)

  it("resets: moving an armed run counts nothing, arming a new one counts one", function()
    local t = timer:schedule(10, f)
    t:reset(20) -- armed: a move
    assert.same({ 1, 1 }, { timer:stats().scheduled, timer:stats().pending })
    t:cancel()
    local r, err = t:reset(0) -- cancelled: its callback is released, so refused, counting nothing
    assert.is_nil(r)
    assert.matches("cancelled", err)
    local s = check_identity(timer)
    assert.same({ 1, 0, 1, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
    local again = true
    timer:schedule(0, function(h)
      if again then again = false; h:reset(0) end -- ran, inside its callback: a new run
    end)
    timer:dispatch()
    check_identity(timer)
    timer:dispatch()
    s = check_identity(timer)
    assert.same({ 3, 2, 1, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
    -- a one-shot re-armed from its own callback, twice (the second is a move)
    local once
    once = timer:schedule(0, function(h)
      if not once then return end
      once = nil
      h:reset(10)
      h:reset(5)
      check_identity(timer, "in the callback")
    end)
    timer:dispatch()
    s = check_identity(timer)
    assert.same({ 5, 3, 1, 1 }, { s.scheduled, s.fired, s.cancelled, s.pending })
  end)

  it("a periodic run reset from its own callback arms one run, not two", function()
    local runs, t = 0, nil
    t = timer:every(0.001, function(h)
      runs = runs + 1
      if runs == 1 then h:reset(0.002) end
      check_identity(timer, "in run " .. runs)
      if runs == 3 then t:cancel() end
    end)
    assert.is_true(helpers.wait_until(timer, function() return runs == 3 end, 5))
    local s = check_identity(timer)
    assert.same({ 3, 3, 0, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
  end)

  it("stop cancels every armed run; a periodic one stopped from its callback has none", function()
    for _ = 1, 5 do timer:schedule(10, f) end
    timer:every(10, f)
    local inner
    inner = timer:every(0.001, function() timer:stop() end)
    assert.is_true(helpers.wait_until(timer, function() return timer:pending() == 0 end, 5))
    local s = check_identity(timer)
    assert.same({ 7, 1, 6, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
    assert.equal("cancelled", inner:state())
  end)

  it("take and done: a taken one-shot keeps its callback until done, so it may reset itself", function()
    timer:take_only()
    local runs = 0
    local function cb(h)
      runs = runs + 1
      if runs == 1 then assert.equal(h, h:reset(0)) end
    end
    timer:schedule(0, cb, "a")
    local t, got, a = timer:take()
    assert.equal(cb, got)
    assert.equal("a", a)
    got(t, a) -- the host runs it: it re-arms itself
    timer:done(t)
    assert.equal("pending", t:state())
    local t2, got2 = timer:take()
    assert.equal(t, t2)
    got2(t2)
    timer:done(t2)
    assert.equal(2, runs)
    assert.equal("expired", t:state())
    assert.is_nil(t:task()) -- done: released
    assert.is_nil(t:reset(0))
    local s = check_identity(timer)
    assert.same({ 2, 2, 0, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
  end)

  it("take and done: a taken periodic run is fired, its next one scheduled at done", function()
    local t = timer:every({ interval = 10, first = 0 }, f)
    local got = timer:take()
    assert.equal(t, got)
    local s = check_identity(timer)
    assert.same({ 1, 1, 0 }, { s.scheduled, s.fired, s.pending })
    assert.equal(1, timer:pending())
    timer:done(t)
    s = check_identity(timer)
    assert.same({ 2, 1, 1 }, { s.scheduled, s.fired, s.pending })
  end)

  it("counts due timeouts not yet dispatched", function()
    for _ = 1, 7 do timer:schedule(0, f) end
    timer:schedule(0.01, f)
    timer:schedule(10, f)
    assert.is_true(timer:stats().due >= 7)
    -- a forgotten dispatch: the worker makes the 10 ms one due as well
    local deadline = hwtimer.now() + 5
    while timer:stats().due < 8 and hwtimer.now() < deadline do helpers.wait_readable(timer, 0.01) end
    assert.equal(8, timer:stats().due)
    timer:dispatch(3)
    assert.equal(5, timer:stats().due) -- left over after dispatch(max)
    timer:dispatch()
    assert.equal(0, timer:stats().due)
    timer:stop()
    assert.equal(0, timer:stats().due)
  end)

  it("times callbacks: total and longest", function()
    timer:schedule(0, function() helpers.busy(0.03) end)
    for _ = 1, 10 do timer:schedule(0, f) end
    timer:dispatch()
    local s = timer:stats()
    assert.is_true(s.cb_time >= 0.03, "cb_time " .. s.cb_time)
    assert.is_true(s.cb_max >= 0.02, "cb_max " .. s.cb_max) -- at the coarse clock's resolution
    assert.is_true(s.cb_max <= s.cb_time + 0.005)
    assert.is_true(s.cb_time < 10)
  end)

  -- (each callback timed from its own start: the longest of four in one
  -- dispatch is one of them, not the four together)
  it("times each callback of a dispatch on its own", function()
    for _ = 1, 4 do timer:schedule(0, function() helpers.busy(0.03) end) end
    assert.equal(4, timer:dispatch())
    local s = timer:stats()
    assert.is_true(s.cb_time >= 0.12, "cb_time " .. s.cb_time)
    assert.is_true(s.cb_max >= 0.02 and s.cb_max < 0.07, "cb_max " .. s.cb_max .. " of four callbacks of 0.03 s")
  end)

  it("does not count on_error's time as a callback's", function()
    local tm = hwtimer.new({ on_error = function() helpers.busy(0.05) end })
    tm:schedule(0, function() error("x") end)
    tm:dispatch()
    local s = tm:stats()
    assert.is_true(s.cb_time < 0.04, "cb_time " .. s.cb_time)
    assert.equal(1, s.errors)
    tm:close()
  end)

  it("counts the periods a fixed rate skips", function()
    local runs, t = 0, nil
    t = timer:every({ interval = 0.01, rate = true }, function()
      runs = runs + 1
      if runs == 1 then helpers.busy(0.035) end -- misses at least 3 periods
      if runs == 2 then t:cancel() end
    end)
    timer:stats(true) -- (the window starts here)
    timer:run(5)
    local s = check_identity(timer)
    assert.equal(2, runs)
    assert.is_true(s.skipped >= 3, "skipped " .. s.skipped)
    assert.equal(s.skipped, timer:stats(true).skipped) -- (the window since saw them all)
    -- a fixed delay never skips
    local tm = hwtimer.new()
    local n, p = 0, nil
    p = tm:every(0.005, function() n = n + 1; helpers.busy(0.02); if n == 2 then p:cancel() end end)
    tm:run(5)
    assert.equal(0, tm:stats().skipped)
    tm:close()
  end)

  it("counts retries through timer:count", function()
    timer:count("retry_started")
    timer:count("retry_started")
    timer:count("retry_succeeded")
    timer:count("retry_failed")
    local s = timer:stats()
    assert.same({ 2, 1, 1 }, { s.retry_started, s.retry_succeeded, s.retry_failed })
    assert.same({ 0, 0 }, { s.scheduled, s.fired }) -- nothing else moves
  end)

  it("has one window per timer: stats(true) starts it again for every reader", function()
    timer:schedule(0, f)
    timer:dispatch()
    local a = timer:stats(true) -- reader A
    assert.same({ 1, 1 }, { a.scheduled, a.fired })
    timer:schedule(0, f)
    timer:dispatch()
    local b = timer:stats(true) -- reader B sees only what followed A's call
    assert.same({ 1, 1 }, { b.scheduled, b.fired })
    local life = timer:stats()
    assert.same({ 2, 2 }, { life.scheduled, life.fired })
    -- over a window, scheduled - fired - cancelled is the change in pending
    timer:schedule(10, f)
    local w = timer:stats(true)
    assert.equal(1, w.scheduled - w.fired - w.cancelled)
    assert.equal(1, w.pending)
  end)
end)

describe("timer:lateness()", function()
  -- Lateness the test decides: taken runs, each at least `late` seconds past
  -- its deadline (rounded up to the tick). Returns the runs' lateness as
  -- bounds {lo, hi}: read just before take and just after it.
  local function late_runs(timer, lates)
    timer:take_only()
    local runs = {}
    for _, late in ipairs(lates) do
      local t = timer:schedule(0.001, f)
      local due = t:deadline()
      while hwtimer.now() < due + late do end
      local lo = hwtimer.now() - due
      assert.equal(t, timer:take())
      runs[#runs + 1] = { lo, hwtimer.now() - due }
      timer:done(t)
    end
    return runs
  end

  it("counts runs at most each power-of-two bound late, cumulatively, with their sum and number", function()
    local timer = hwtimer.new({ tick = 0.0001 })
    -- (0.004 and 0.0076: in the top quarter below a bound, 2^22 and 2^23 ns)
    local runs = late_runs(timer, { 0.0002, 0.0002, 0.003, 0.003, 0.003, 0.04, 0.004, 0.0076 })
    local buckets, sum, count = timer:lateness()
    timer:close()
    assert.equal(8, count)
    if math.type then assert.equal("integer", math.type(count)) end
    local lo, hi = 0, 0
    for _, r in ipairs(runs) do lo, hi = lo + r[1], hi + r[2] end
    assert.is_true(sum >= lo - 1e-9 and sum <= hi + 1e-9, ("sum %.6f, runs %.6f to %.6f"):format(sum, lo, hi))
    assert.equal(23, #buckets)
    assert.equal(8191e-9, buckets[1][1])            -- 2^13 - 1 ns: 8 us
    assert.equal(34359738367e-9, buckets[23][1])    -- 2^35 - 1 ns: 34 s
    local prev_le, prev = 0, 0
    for i, b in ipairs(buckets) do
      assert.is_true(b[1] > prev_le and b[2] >= prev, "bucket " .. i)
      prev_le, prev = b[1], b[2]
      local surely, maybe = 0, 0  -- runs surely under the bound, and maybe
      for _, r in ipairs(runs) do
        if r[2] <= b[1] then surely = surely + 1 end
        if r[1] <= b[1] then maybe = maybe + 1 end
      end
      assert.is_true(b[2] >= surely and b[2] <= maybe,
        ("bucket %d (%.6f s): %d, expected %d to %d"):format(i, b[1], b[2], surely, maybe))
    end
    assert.equal(8, buckets[23][2])
  end)

  it("puts stats' p99 among the late runs and p50 among the many barely late", function()
    local timer = hwtimer.new({ tick = 1e-5 })
    for _ = 1, 100 do -- due now, run at once: a few microseconds late
      timer:schedule(0, f)
      timer:dispatch()
    end
    for _ = 1, 5 do -- run 2 ms after they were due
      timer:schedule(0, f)
      local t0 = hwtimer.now()
      while hwtimer.now() < t0 + 0.002 do end
      timer:dispatch()
    end
    local st = timer:stats()
    timer:close()
    assert.equal(105, st.fired)
    assert.is_true(st.late_p99 >= 0.002, ("p99 %.6f s"):format(st.late_p99))
    assert.is_true(st.late_p50 < 0.001, ("p50 %.6f s"):format(st.late_p50))
  end)

  it("counts a timeout due at once from when it was scheduled, not from the timer's start", function()
    local timer = hwtimer.new({ tick = 0.001 })
    local t0 = hwtimer.now()
    while hwtimer.now() < t0 + 0.2 do end -- the timer is 0.2 s old
    local before = hwtimer.now()
    local t = timer:schedule(0, f)
    -- due in the tick it was scheduled in
    assert.is_true(t:deadline() <= hwtimer.now() and t:deadline() > before - 0.0021,
      ("deadline %.4f s before the schedule"):format(before - t:deadline()))
    assert.equal(1, timer:dispatch())
    local _, sum, count = timer:lateness()
    timer:close()
    assert.equal(1, count)
    assert.is_true(sum < 0.1, ("%.3f s late"):format(sum))
  end)

  it("is empty for a timer that ran nothing, and still answers after stop", function()
    local timer = hwtimer.new()
    local buckets, sum, count = timer:lateness()
    assert.equal(0, count)
    assert.equal(0, sum)
    for _, b in ipairs(buckets) do assert.equal(0, b[2]) end
    timer:stop()
    assert.equal(0, select(3, timer:lateness()))
  end)
end)

describe("on_error(err, timeout, traceback)", function()
  it("gets the error as raised, the handle and a traceback string", function()
    local got = {}
    local timer = hwtimer.new({ on_error = function(...) got[#got + 1] = { ... } end })
    local errobj = { code = 7 }
    local function raise_it() error(errobj) end
    local a = timer:schedule(0, function() raise_it() end)
    local b = timer:schedule(0, function() error("plain", 0) end)
    local c = timer:schedule(0, function() local x; return x.y end) -- luacheck: ignore 221 (indexes nil: raises)
    assert.equal(3, timer:dispatch())
    assert.equal(3, #got)
    assert.equal(errobj, got[1][1])
    assert.equal(a, got[1][2])
    assert.equal("string", type(got[1][3]))
    assert.matches("stack traceback:", got[1][3], 1, true)
    assert.matches("raise_it", got[1][3], 1, true) -- where it was raised
    assert.matches("(error object is a table value)", got[1][3], 1, true)
    assert.same({ "plain", b }, { got[2][1], got[2][2] })
    -- its first frame is `error`, where the callback raised (not the handler's own)
    assert.equal(1, got[2][3]:find("plain\nstack traceback:\n\t[C]: in function 'error'\n", 1, true), got[2][3])
    assert.equal(c, got[3][2])
    assert.matches("attempt to index", got[3][3], 1, true)
    timer:close()
  end)

  it("gets one for a periodic run's error, and the series goes on", function()
    local tbs = {}
    local timer = hwtimer.new({ on_error = function(_, _, tb) tbs[#tbs + 1] = tb end })
    local t = timer:every(0.001, function() error("tick") end)
    assert.is_true(helpers.wait_until(timer, function() return #tbs >= 2 end, 5))
    t:cancel()
    for _, tb in ipairs(tbs) do assert.matches("tick\nstack traceback:", tb, 1, true) end
    timer:close()
  end)

  it("by default the traceback is printed to stderr", function()
    local out, ok = helpers.run_lua([[
      local timer = require("hwtimer").new()
      local function deep_in_here() error("kaboom") end
      timer:schedule(0, function() deep_in_here() end)
      print("ran", timer:dispatch())
      timer:close()
    ]])
    assert.is_true(ok, out)
    assert.matches("hwtimer: error in timeout callback: [^\n]*kaboom\nstack traceback:", out)
    assert.matches("deep_in_here", out, 1, true)
  end)
end)

describe("a timer collected with timeouts pending", function()
  local warning = "hwtimer: timer collected with 3 pending timeouts; they will never run "
    .. "(close or stop it to drop them quietly)"

  local function run(body)
    return helpers.run_lua([[
      local hwtimer = require("hwtimer")
      local function make()
        local timer = hwtimer.new()
        timer:schedule(10, print)
        timer:schedule(20, print)
        timer:every(5, print)
        ]] .. body .. [[
      end
      make()
      collectgarbage()
      collectgarbage()
      io.stdout:write("collected\n")
      io.stdout:flush()
      os.exit(0, false)
    ]])
  end

  it("warns once on stderr", function()
    local out, ok = run("")
    assert.is_true(ok, out)
    local first = out:find(warning, 1, true)
    assert.truthy(first, out)
    assert.is_nil(out:find(warning, first + 1, true)) -- once
    assert.truthy(out:find("collected", first, true)) -- at the collection, not at exit
  end)

  it("stays quiet after close or stop, or with nothing pending", function()
    for _, body in ipairs({ "timer:close()", "timer:stop()", "timer:stop(); timer:close()",
                            "for _, t in ipairs(timer:stop()) do end" }) do
      local out, ok = run(body)
      assert.is_true(ok, out)
      assert.truthy(out:find("collected\n", 1, true), body)
      assert.is_nil(out:find("hwtimer:", 1, true), body .. ": " .. out)
    end
    local out = helpers.run_lua([[
      local function make() local timer = require("hwtimer").new(); timer:schedule(0, print):cancel() end
      make(); collectgarbage(); collectgarbage()
    ]])
    assert.is_nil(out:find("hwtimer:", 1, true), out)
  end)

  it("stays quiet for a <close> timer (Lua 5.4)", function()
    if _VERSION ~= "Lua 5.4" then return pending("<close> is Lua 5.4") end
    local out, ok = helpers.run_lua([[
      local hwtimer = require("hwtimer")
      do
        local timer <close> = hwtimer.new()
        timer:schedule(10, print)
      end
      collectgarbage(); collectgarbage()
    ]])
    assert.is_true(ok, out)
    assert.is_nil(out:find("hwtimer:", 1, true), out)
  end)
end)
