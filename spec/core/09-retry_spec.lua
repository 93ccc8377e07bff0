-- hwtimer.retry: every retry ends in a final state and says why; the time
-- limit, the retry_if predicate, last_error, next_attempt, __tostring; bad
-- arguments; timers that are proxy objects; fn that yields.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

-- Run the timer for up to `secs` or until r has ended.
local function settle(timer, r, secs)
  helpers.wait_until(timer, function() return r:state() ~= "running" end, secs or 2)
end

local function fail() return nil, "down" end

describe("hwtimer.retry ends in a final state", function()
  local timer, timer_errors
  before_each(function()
    timer_errors = {}
    timer = hwtimer.new({ on_error = function(err) timer_errors[#timer_errors + 1] = err end })
  end)
  after_each(function() timer:close() end)

  it("when on_failure raises: the retry goes on, the error goes to on_error", function()
    local seen, hook_errors, r = {}, {}, nil
    r = hwtimer.retry(timer, fail, {
      attempts = 3, delay = 0.001, jitter = 0,
      on_failure = function(_, n) seen[#seen + 1] = n; error("hook " .. n, 0) end,
      on_error = function(err, rr) hook_errors[#hook_errors + 1] = err; assert(rr == r) end,
    })
    settle(timer, r)
    assert.same({ "failed", "attempts used up" }, { r:state() })
    assert.same({ 1, 2, 3 }, seen)
    assert.same({ "hook 1", "hook 2", "hook 3" }, hook_errors)
    assert.same({}, timer_errors)
  end)

  it("when on_failure raises and there is no on_error: the timer's on_error gets it", function()
    local r = hwtimer.retry(timer, fail, {
      attempts = 2, delay = 0.001, on_failure = function() error("hook", 0) end })
    settle(timer, r)
    assert.equal("failed", r:state())
    assert.same({ "hook", "hook" }, timer_errors)
  end)

  it("when max_pending refuses a later attempt: failed, the refusal reaches on_error", function()
    local capped_errors = {}
    local capped = hwtimer.new({ max_pending = 1,
      on_error = function(err) capped_errors[#capped_errors + 1] = tostring(err) end })
    local refusals, last_flags = {}, {}
    local r = hwtimer.retry(capped, function()
      capped:schedule(10, function() end) -- takes the only slot
      return nil, "down"
    end, {
      on_failure = function(err, n, last) last_flags[#last_flags + 1] = { err, n, last } end,
      on_error = function(err) refusals[#refusals + 1] = err end,
    })
    capped:dispatch()
    local state, reason = r:state()
    assert.equal("failed", state)
    assert.matches("too many pending timeouts", reason)
    assert.equal(1, #refusals)
    assert.matches("too many pending timeouts", refusals[1])
    assert.same({ { "down", 1, true } }, last_flags) -- on_failure knew it was the last
    assert.is_nil(r:next_attempt())
    assert.same({}, capped_errors) -- (on_error took it: nothing raised to the timer)
    capped:close()
  end)

  -- (a timer object whose schedule raises for a reason of its own, not a
  -- stop: the retry fails with that error, which on_error is told)
  it("when the timer's schedule raises: failed with that error, which reaches on_error", function()
    local calls, errors = 0, {}
    local proxy = {
      schedule = function(_, ...)
        calls = calls + 1
        if calls > 1 then error("the proxy's schedule broke", 0) end
        return timer:schedule(...)
      end,
    }
    local r = hwtimer.retry(proxy, fail, { delay = 0, on_error = function(err) errors[#errors + 1] = err end })
    settle(timer, r)
    assert.same({ "failed", "the proxy's schedule broke" }, { r:state() })
    assert.same({ "the proxy's schedule broke" }, errors)
  end)

  it("when max_pending refuses and there is no on_error: the timer's on_error gets the refusal", function()
    local got
    local capped = hwtimer.new({ max_pending = 1, on_error = function(err) got = err end })
    local r = hwtimer.retry(capped, function() capped:schedule(10, print) end)
    capped:dispatch()
    assert.equal("failed", r:state())
    assert.matches("too many pending timeouts", got)
    capped:close()
  end)

  for _, how in ipairs({ "stop", "close" }) do
    it("when its timer:" .. how .. "() runs with an attempt pending: cancelled, 'timer stopped'", function()
      local calls = 0
      local r = hwtimer.retry(timer, function() calls = calls + 1 end, { delay = 5 })
      timer:dispatch()
      assert.equal("running", r:state())
      timer[how](timer)
      assert.same({ "cancelled", "timer stopped" }, { r:state() })
      assert.is_nil(r:next_attempt())
      assert.is_false(r:cancel())
      assert.equal(1, calls)
      assert.matches("cancelled: timer stopped", tostring(r), 1, true)
    end)
  end

  it("when fn stops its own timer: cancelled, not raised", function()
    local r = hwtimer.retry(timer, function() timer:stop() return nil, "down" end)
    timer:dispatch()
    assert.same({ "cancelled", "timer stopped" }, { r:state() })
    assert.same({}, timer_errors)
  end)

  -- (the count of a settled retry on a timer its fn stopped: not an error)
  for _, how in ipairs({ "stop", "close" }) do
    it("when fn " .. how .. "s its own timer and succeeds: succeeded, not raised", function()
      local r = hwtimer.retry(timer, function() timer[how](timer) return true end)
      timer:dispatch()
      assert.equal("succeeded", (r:state()))
      assert.same({}, timer_errors)
    end)
  end

  -- (a stop the retry has not looked at yet: cancel and next_attempt look first)
  it("after its timer stopped: next_attempt() is nil and cancel() is false, 'timer stopped' kept", function()
    local r = hwtimer.retry(timer, fail, { delay = 10 })
    timer:dispatch()
    assert.is_number(r:next_attempt())
    timer:stop()
    assert.is_nil(r:next_attempt())
    assert.is_false(r:cancel())
    assert.same({ "cancelled", "timer stopped" }, { r:state() })
    local other = hwtimer.new() -- (cancel() the first call after the stop)
    local r2 = hwtimer.retry(other, fail, { delay = 10 })
    other:dispatch()
    other:stop()
    assert.is_false(r2:cancel())
    assert.same({ "cancelled", "timer stopped" }, { r2:state() })
  end)

  it("when fn stops its own timer and fails its last attempt: failed, not raised", function()
    local r = hwtimer.retry(timer, function() timer:stop() return nil, "down" end, { attempts = 1 })
    timer:dispatch()
    assert.same({ "failed", "attempts used up" }, { r:state() })
    assert.same({}, timer_errors)
  end)

  it("when fn stops the timer before its first attempt ran (stop from outside)", function()
    local r = hwtimer.retry(timer, fail)
    timer:stop()
    assert.same({ "cancelled", "timer stopped" }, { r:state() })
    assert.equal(0, r:attempts())
  end)

  it("when cancelled from inside fn: stays cancelled even if fn then succeeds", function()
    local r
    r = hwtimer.retry(timer, function() assert.is_true(r:cancel()) return true end)
    timer:dispatch()
    assert.same({ "cancelled", "cancelled" }, { r:state() })
    assert.equal(0, timer:pending())
  end)

  it("when on_success raises: succeeded, the error goes to on_error", function()
    local got
    local r = hwtimer.retry(timer, function() return "v" end, {
      on_success = function() error("oops", 0) end, on_error = function(e) got = e end })
    timer:dispatch()
    assert.same({ "succeeded" }, { r:state() })
    assert.equal("oops", got)
  end)

  it("when on_error itself raises: the timer's on_error gets that", function()
    local r = hwtimer.retry(timer, fail, { attempts = 1,
      on_failure = function() error("first", 0) end, on_error = function() error("second", 0) end })
    timer:dispatch()
    assert.equal("failed", r:state())
    assert.same({ "second" }, timer_errors)
  end)
end)

describe("hwtimer.retry options", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("max_time: gives up once the next wait would end past the limit", function()
    local t0 = hwtimer.now()
    local lasts = {}
    local r = hwtimer.retry(timer, fail, { attempts = 1000, delay = 0.01, factor = 1, jitter = 0,
      max_time = 0.055, on_failure = function(_, n, last) lasts[n] = last end })
    settle(timer, r, 5)
    local took = hwtimer.now() - t0
    assert.same({ "failed", "time limit" }, { r:state() })
    assert.is_true(took < 1, "took " .. took)
    -- attempts at 0, 10, 20, ... ms: at most six fit in 55 ms; the second is
    -- due at 10 ms, well inside the limit, so at least two ran
    assert.is_true(r:attempts() >= 2 and r:attempts() <= 6, "attempts: " .. r:attempts())
    assert.is_true(lasts[r:attempts()])
    for n = 1, r:attempts() - 1 do assert.is_false(lasts[n]) end
  end)

  -- The waits each failure leaves before the next attempt, as next_attempt()
  -- tells them in on_failure (the next attempt is scheduled by then).
  local function waits(opts, n)
    local got, r = {}, nil
    opts.on_failure = function(_, k)
      local due = r:next_attempt()
      got[k] = due and due - hwtimer.now()
    end
    opts.attempts = opts.attempts or n + 1
    r = hwtimer.retry(timer, fail, opts)
    helpers.wait_until(timer, function() return #got >= n or r:state() ~= "running" end, 5)
    r:cancel()
    return got, r
  end
  local function near(want, got, what) assert.is_true(got and math.abs(got - want) < 0.002, what .. ": " .. tostring(got)) end

  -- (docs/api.md: attempts 5, delay 0.1 s, factor 2, max_delay 30 s, jitter 0.1)
  it("waits delay * factor^(n-1), capped at max_delay, with the documented defaults", function()
    local w = waits({ jitter = 0 }, 1)
    near(0.1, w[1], "the default delay")
    w = waits({ delay = 0.01, jitter = 0 }, 3)
    near(0.01, w[1], "first wait")
    near(0.02, w[2], "second wait (factor 2)")
    near(0.04, w[3], "third wait")
    w = waits({ delay = 0.01, factor = 4000, jitter = 0 }, 2)
    near(30, w[2], "second wait (40 s, capped at the default 30)")
    w = waits({ delay = 0.01, factor = 4000, jitter = 0, max_delay = 5 }, 2)
    near(5, w[2], "second wait (capped at max_delay 5)")
    local r = hwtimer.retry(timer, fail, { delay = 0 })
    settle(timer, r)
    assert.same({ "failed", "attempts used up" }, { r:state() })
    assert.equal(5, r:attempts())
  end)

  it("takes up to `jitter` of each wait off at random: the default 0.1, and 0.5", function()
    for _, case in ipairs({ { nil, 9 }, { 0.5, 5 } }) do
      local seen = {}
      for i = 1, 40 do
        local r = hwtimer.retry(timer, fail, { delay = 10, jitter = case[1] })
        timer:dispatch() -- (the first attempt fails: the second is due in 10 s less jitter)
        -- (next_attempt is the timeout's deadline, on a tick boundary: up to
        -- a tick, 1 ms here, past 10 s when the draw took next to nothing off)
        local wait = r:next_attempt() - hwtimer.now()
        assert.is_true(wait >= case[2] - 0.01 and wait <= 10.001, "wait " .. wait .. " with jitter " .. tostring(case[1]))
        seen[math.floor(wait * 10)] = true
        r:cancel()
        assert.equal(0, timer:pending(), "after retry " .. i)
      end
      assert.is_true(helpers.count(seen) > 3, "the waits are not spread")
    end
  end)

  it("max_time = 0: one attempt, then no more", function()
    local r = hwtimer.retry(timer, fail, { max_time = 0 })
    timer:dispatch()
    assert.same({ "failed", "time limit" }, { r:state() })
    assert.equal(1, r:attempts())
  end)

  it("retry_if(err, attempt): an error it rejects ends the retry", function()
    local asked = {}
    local r = hwtimer.retry(timer, function(n)
      if n < 3 then error({ temporary = true }) end
      error({ temporary = false })
    end, { delay = 0.001, retry_if = function(err, n)
      asked[#asked + 1] = n
      return err.temporary
    end })
    settle(timer, r)
    assert.same({ "failed", "not retryable" }, { r:state() })
    assert.equal(3, r:attempts())
    assert.same({ 1, 2, 3 }, asked)
    assert.is_false(r:last_error().temporary)
  end)

  it("retry_if is not asked once the attempts are used up; if it raises, failed with that", function()
    local asked = 0
    local r = hwtimer.retry(timer, fail, { attempts = 1,
      retry_if = function() asked = asked + 1 return true end })
    timer:dispatch()
    assert.equal(0, asked)
    assert.same({ "failed", "attempts used up" }, { r:state() })
    local got
    local r2 = hwtimer.retry(timer, fail, { retry_if = function() error("bad predicate", 0) end,
      on_error = function(e) got = e end })
    timer:dispatch()
    assert.same({ "failed", "bad predicate" }, { r2:state() })
    assert.equal("bad predicate", got)
  end)

  it("r:last_error(): nil before a failure, then the last failure's error", function()
    local seen, r = {}, nil
    r = hwtimer.retry(timer, function(n)
      seen[n] = r:last_error() or "none"
      if n == 1 then error("raised", 0) end
      if n == 2 then return false, "returned" end
      if n == 3 then return nil end
      return "ok"
    end, { delay = 0.001 })
    assert.is_nil(r:last_error())
    settle(timer, r)
    -- fn's error, its second value, or "failed" when it returned no error
    assert.same({ "none", "raised", "returned", "failed" }, seen)
    assert.equal("succeeded", r:state())
    assert.equal("failed", r:last_error()) -- a success keeps the error before it
  end)

  it("r:next_attempt(): the next attempt's due time, nil while one runs and at the end", function()
    local inside
    local r
    local before = hwtimer.now()
    r = hwtimer.retry(timer, function() inside = r:next_attempt() return nil end,
      { attempts = 2, delay = 0.2, jitter = 0 })
    local first = r:next_attempt()
    assert.is_true(first >= before - 0.002 and first <= hwtimer.now() + 0.002, "first " .. first)
    local t0 = hwtimer.now()
    timer:dispatch()
    local t1 = hwtimer.now()
    assert.is_nil(inside)
    local due = r:next_attempt()
    assert.is_true(due >= t0 + 0.2 and due <= t1 + 0.2 + 0.002, "due " .. due - t1)
    settle(timer, r)
    assert.is_true(hwtimer.now() >= due)
    assert.is_nil(r:next_attempt())
  end)

  it("tostring(r) shows the state, the attempts, the next attempt and the last error", function()
    local r = hwtimer.retry(timer, fail, { attempts = 2, delay = 5 })
    assert.matches("^hwtimer%.retry %(running, 0 attempts, next in 0%.0%d%d s%)$", tostring(r))
    timer:dispatch()
    assert.matches("^hwtimer%.retry %(running, 1 attempt, next in [345]%.%d+ s, last error: down%)$",
      tostring(r))
    r:cancel()
    assert.equal("hwtimer.retry (cancelled, 1 attempt, last error: down)", tostring(r))
    local ok = hwtimer.retry(timer, function() return 1 end)
    timer:dispatch()
    assert.equal("hwtimer.retry (succeeded, 1 attempt)", tostring(ok))
  end)

  it("tostring(r) and its ending hold when fn or retry_if raise error objects without a text", function()
    local silent = setmetatable({}, { __tostring = function() end })
    local raising = setmetatable({}, { __tostring = function() error("no text") end })
    local r = hwtimer.retry(timer, function() error(silent) end, { attempts = 2, delay = 5 })
    timer:dispatch()
    assert.equal(silent, r:last_error())
    assert.matches("last error: %(an error object, table, whose __tostring gave no text%)%)$", tostring(r))
    local errors = {}
    local judged = hwtimer.retry(timer, fail, { attempts = 3, delay = 0,
      retry_if = function() error(raising) end, on_error = function(e) errors[#errors + 1] = e end })
    settle(timer, judged)
    local state, reason = judged:state()
    assert.equal("failed", state)
    assert.equal(raising, reason)
    assert.same({ raising }, errors)
    assert.equal("hwtimer.retry (failed: (an error object, table, whose __tostring gave no text), 1 attempt, " ..
      "last error: down)", tostring(judged))
    r:cancel()
  end)
end)

describe("hwtimer.retry arguments", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("names a bad timer, Lua style", function()
    assert.has_error(function() local r = hwtimer.retry(nil, print) return r end,
      "bad argument #1 to 'retry' (hwtimer.timer expected, got nil)")
    assert.has_error(function() local r = hwtimer.retry(42, print) return r end,
      "bad argument #1 to 'retry' (hwtimer.timer expected, got number)")
    assert.has_error(function() local r = hwtimer.retry({}, print) return r end,
      "bad argument #1 to 'retry' (hwtimer.timer expected, got table)")
    assert.has_error(function() local r = hwtimer.retry(io.stdout, print) return r end,
      "bad argument #1 to 'retry' (hwtimer.timer expected, got " .. helpers.type_name(io.stdout) .. ")")
  end)

  it("names a bad fn or options table", function()
    assert.has_error(function() local r = hwtimer.retry(timer, nil) return r end,
      "bad argument #2 to 'retry' (function or callable object expected, got nil)")
    assert.has_error(function() local r = hwtimer.retry(timer, print, 5) return r end,
      "bad argument #3 to 'retry' (table expected, got number)")
  end)

  -- (has_error ignores where a message says it was raised: a level off by
  -- one blamed a line of the caller's caller, and passed)
  it("raises its argument errors at the caller's line", function()
    for _, call in ipairs({
      function() local r = hwtimer.retry(io.stdout, print) return r end,
      function() local r = hwtimer.retry(timer, nil) return r end,
      function() local r = hwtimer.retry(timer, print, 5) return r end,
      function() local r = hwtimer.retry(timer, print, { tries = 3 }) return r end,
    }) do
      local ok, err = pcall(call)
      assert.is_false(ok)
      assert.matches("09%-retry_spec%.lua:%d+: bad argument #%d to 'retry'", err)
    end
  end)

  it("rejects unknown option keys, naming the key", function()
    assert.has_error(function() local r = hwtimer.retry(timer, print, { tries = 3 }) return r end,
      "bad argument #3 to 'retry' (unknown option 'tries')")
    local key = setmetatable({}, { __tostring = function() error("no text") end })
    assert.has_error(function() local r = hwtimer.retry(timer, print, { [key] = 3 }) return r end,
      "bad argument #3 to 'retry' (unknown option '(an error object, table, whose __tostring gave no text)')")
    assert.equal(0, timer:pending()) -- nothing was scheduled
  end)

  it("rejects bad option values, naming the option", function()
    local cases = {
      { { delay = -1 }, "option 'delay': number of seconds from 0 to 1e9 expected" },
      { { max_delay = 2e9 }, "option 'max_delay': number of seconds from 0 to 1e9 expected" },
      { { max_time = 0 / 0 }, "option 'max_time': number of seconds from 0 to 1e9 expected" },
      { { factor = 0 }, "option 'factor': positive number expected" },
      { { factor = math.huge }, "option 'factor': positive number expected" },
      { { jitter = 1.5 }, "option 'jitter': number from 0 to 1 expected" },
      { { attempts = 2.5 }, "option 'attempts': positive integer expected" },
      { { retry_if = true }, "option 'retry_if': function expected" },
      { { on_error = "x" }, "option 'on_error': function expected" },
    }
    for _, c in ipairs(cases) do
      assert.has_error(function() local r = hwtimer.retry(timer, print, c[1]) return r end,
        "bad argument #3 to 'retry' (" .. c[2] .. ")")
    end
  end)

  it("accepts each option's bounds themselves (0 and 1e9 seconds, a jitter of 0 and 1)", function()
    local cases = {
      { delay = 0 }, { delay = 1e9 }, { max_delay = 0 }, { max_delay = 1e9 }, { max_time = 0 }, { max_time = 1e9 },
      { jitter = 0 }, { jitter = 1 }, { delay = 1e9, max_delay = 1e9, max_time = 1e9, jitter = 1 },
    }
    for _, opts in ipairs(cases) do
      local r = hwtimer.retry(timer, fail, opts)
      assert.equal("running", r:state())
      assert.is_true(r:cancel())
    end
    assert.equal(0, timer:pending())
    for _, name in ipairs({ "delay", "max_delay", "max_time" }) do
      assert.has_error(function() local r = hwtimer.retry(timer, fail, { [name] = 1e9 + 1 }) return r end,
        "bad argument #3 to 'retry' (option '" .. name .. "': number of seconds from 0 to 1e9 expected)")
    end
  end)

  it("accepts any object with a schedule method (the OpenResty glue's proxy table)", function()
    local counted = {}
    local proxy = {
      schedule = function(_, ...) return timer:schedule(...) end,
      count = function(self, name) assert(self.schedule); counted[#counted + 1] = name end,
    }
    local r = hwtimer.retry(proxy, function(n) return n == 2 end, { delay = 0.001 })
    local r2 = hwtimer.retry(proxy, fail, { attempts = 1 })
    settle(timer, r)
    settle(timer, r2)
    assert.equal("succeeded", r:state())
    assert.equal("failed", r2:state())
    table.sort(counted)
    assert.same({ "retry_failed", "retry_started", "retry_started", "retry_succeeded" }, counted)
  end)

  -- (a proxy's handles may lack deadline(): the due time is then now + the wait)
  it("tells the next attempt's time for a proxy whose handles have no deadline()", function()
    local proxy = {
      schedule = function(_, ...)
        local t = timer:schedule(...)
        return { state = function() return t:state() end, cancel = function() return t:cancel() end }
      end,
    }
    local r = hwtimer.retry(proxy, fail, { delay = 5, jitter = 0 })
    assert.is_true(math.abs(r:next_attempt() - hwtimer.now()) < 0.01) -- (the first: at once)
    timer:dispatch()
    local wait = r:next_attempt() - hwtimer.now()
    assert.is_true(wait > 4.9 and wait <= 5, "next attempt in " .. wait .. " s")
    r:cancel()
  end)

  it("counts retries in the timer's stats when the timer has timer:count", function()
    if not timer.count then return pending("timer:count is not in this build") end
    local before = timer:stats()
    hwtimer.retry(timer, function() return true end)
    hwtimer.retry(timer, fail, { attempts = 1 })
    hwtimer.retry(timer, fail):cancel()
    timer:dispatch()
    local s = timer:stats()
    assert.equal(3, s.retry_started - (before.retry_started or 0))
    assert.equal(1, s.retry_succeeded - (before.retry_succeeded or 0))
    assert.equal(1, s.retry_failed - (before.retry_failed or 0))
  end)

  it("returns nil, message when the timer refuses the first attempt", function()
    local capped = hwtimer.new({ max_pending = 1 })
    capped:schedule(10, print)
    local r, err = hwtimer.retry(capped, print)
    assert.is_nil(r)
    assert.matches("too many pending timeouts", err)
    capped:close()
  end)
end)

describe("hwtimer.retry in a host that runs callbacks in coroutines", function()
  -- PUC Lua 5.1's pcall cannot be yielded across; 5.2+ and LuaJIT's can.
  local yieldable = not (_VERSION == "Lua 5.1" and not rawget(_G, "jit"))

  it("lets fn yield (the host resumes it later)", function()
    if not yieldable then return pending("pcall is not yieldable in PUC Lua 5.1") end
    local timer = hwtimer.new()
    local r = hwtimer.retry(timer, function(n)
      coroutine.yield("waiting")
      return n == 2
    end, { delay = 0.001 })
    local parked = {}
    -- a host in the style of the OpenResty glue: take, run in a coroutine, done
    local sleep = require("hwtimer_testutil").sleep
    local limit = hwtimer.now() + 2
    while r:state() == "running" and hwtimer.now() < limit do
      sleep(0.001)
      local t, cb, a = timer:take()
      while t do
        local co = coroutine.create(cb)
        assert(coroutine.resume(co, t, a))
        parked[#parked + 1] = { co, t }
        t, cb, a = timer:take()
      end
      for i = #parked, 1, -1 do
        local co, pt = parked[i][1], parked[i][2]
        local ok, err = coroutine.resume(co)
        assert(ok, err)
        if coroutine.status(co) == "dead" then
          table.remove(parked, i)
          timer:done(pt, ok)
        end
      end
    end
    assert.equal("succeeded", r:state())
    assert.equal(2, r:attempts())
    timer:close()
  end)
end)
