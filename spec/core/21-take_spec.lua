-- timer:take and timer:done, the way hosts whose callbacks may yield run
-- them (hwtimer.ngx, hwtimer.cqueues, hwtimer.copas): a timeout is never
-- handed out again while its callback runs; a reset from there arms the
-- next run at done, due when the reset said; done releases what finished,
-- a reset and a cancel in between included; and a finalizer that stops the
-- timer in the middle of a schedule gets an error, not a crash.
local hwtimer = require("hwtimer")
local util = require("hwtimer_testutil")

-- The next due timeout and its callback, waiting up to `secs` for one.
local function take_within(timer, secs)
  local deadline = hwtimer.now() + secs
  repeat
    local t, cb = timer:take()
    if t then return t, cb end
    util.sleep(0.001)
  until hwtimer.now() > deadline
end

local function check_identity(timer)
  local s = timer:stats()
  assert.equal(s.scheduled, s.fired + s.cancelled + s.pending)
  return s
end

describe("take and done", function()
  local timer
  before_each(function()
    timer = hwtimer.new({ tick = 0.001 })
    timer:take_only()
  end)
  after_each(function() timer:close() end)

  it("done(t, false) counts an error; done(t, true) and done(t) do not", function()
    for _, ok in ipairs({ false, true, "none" }) do
      timer:schedule(0, function() end)
      local t = assert(take_within(timer, 2))
      local before = timer:stats().errors
      if ok == "none" then timer:done(t) else timer:done(t, ok) end
      assert.equal(before + (ok == false and 1 or 0), timer:stats().errors, tostring(ok))
    end
  end)

  it("a take_only timer refuses dispatch and run; a plain one refuses take inside a dispatched callback", function()
    local why = "hwtimer: this timer's callbacks are run by its host's glue (take_only): dispatch and run are " ..
      "not available"
    assert.has_error(function() timer:dispatch() end, why)
    assert.has_error(function() timer:run(0) end, why)
    local plain, err = hwtimer.new(), nil
    plain:schedule(0, function() err = select(2, pcall(plain.take, plain)) end)
    plain:run(0.01)
    assert.equal("hwtimer: take called from inside a dispatched callback", err)
    plain:close()
  end)

  it("reset(0) of a taken timeout: due again at done, its deadline the tick that has begun", function()
    local t = timer:schedule(0.005, function() end)
    assert.equal(t, take_within(timer, 2))
    local old = t:deadline()
    local until_ = hwtimer.now() + 0.05
    while hwtimer.now() < until_ do end -- (the host's callback works 50 ms)
    local before = hwtimer.now()
    assert(t:reset(0))
    local dl = t:deadline()
    assert.is_true(dl >= before - 0.002 and dl <= hwtimer.now(),
      ("deadline %.4f s after the old one, reset at %.4f"):format(dl - old, before - old))
    timer:done(t)
    assert.equal(t, take_within(timer, 2))
    timer:done(t)
  end)

  it("done refuses what is not a timeout of this timer, naming what it got", function()
    local other = hwtimer.new()
    local theirs = other:schedule(10, function() end)
    local function refused(v, got)
      local ok, err = pcall(function() local r = timer:done(v) return r end) -- (no tail call: it names done)
      assert.is_false(ok)
      assert.equal("bad argument #1 to 'done' (hwtimer.timeout of this timer expected, got " .. got .. ")",
        tostring(err):gsub("^[^:]*:%d+: ", ""))
    end
    refused(nil, "nil")
    refused("t", "string")
    refused({}, "table")
    refused(timer, "hwtimer.timer")
    refused(theirs, "hwtimer.timeout")
    other:close()
  end)

  it("never hands out a timeout while its callback runs: a reset there arms the run at done", function()
    local t0 = timer:schedule(0, function() end)
    local t = take_within(timer, 2)
    assert.equal(t0, t)
    assert.equal(t, t:reset(0.005))         -- the callback resets itself, then waits on I/O
    assert.is_nil(take_within(timer, 0.05)) -- due meanwhile, but its run is not done
    assert.equal("pending", t:state())
    assert.equal(1, timer:pending())
    timer:done(t)
    assert.equal(t, take_within(timer, 2))  -- the reset's run, due already
    timer:done(t)
    assert.equal("expired", t:state())
    assert.is_nil(t:task())
    local s = check_identity(timer)
    assert.same({ 2, 2, 0, 0 }, { s.scheduled, s.fired, s.cancelled, s.pending })
  end)

  it("runs the reset's run when the reset said, not earlier, however soon done comes", function()
    timer:schedule(0, function() end)
    local t = take_within(timer, 2)
    local at = hwtimer.now()
    t:reset(0.1)
    local left = t:remaining()
    assert.is_true(left > 0.09 and left <= 0.1 + 0.001, tostring(left)) -- (rounded up to the 1 ms tick)
    timer:done(t)
    assert.equal(t, take_within(timer, 2))
    assert.is_true(hwtimer.now() - at >= 0.1, "ran " .. (hwtimer.now() - at) .. " s after the reset")
    timer:done(t)
  end)

  it("keeps a periodic timeout going when its callback reset it and waited past that", function()
    local t = timer:every({ interval = 10, first = 0 }, function() end)
    assert.equal(t, take_within(timer, 2))
    t:reset(0.005)
    assert.is_nil(take_within(timer, 0.05))
    timer:done(t)
    assert.equal(t, take_within(timer, 2)) -- the reset's run
    timer:done(t)                          -- then its next period, 10 s on
    assert.equal("pending", t:state())
    local left = t:remaining()
    assert.is_true(left > 9 and left <= 10 + 0.001, tostring(left))
    check_identity(timer)
  end)

  it("hands back a taken, reset timeout at stop, and done then releases it", function()
    timer:schedule(0, function() end)
    local t = take_within(timer, 2)
    t:reset(5)
    local list = timer:stop()
    assert.same({ t }, list)
    assert.equal("cancelled", t:state())
    timer:done(t)
    assert.is_nil(t:task())
  end)

  it("releases a timeout reset then cancelled by its callback at done, and it stays cancelled", function()
    local cb = function() end
    local refs = setmetatable({ cb = cb }, { __mode = "v" })
    timer:schedule(0, cb)
    cb = nil -- luacheck: ignore 311 (the last reference: the timeout holds cb alone)
    local t = take_within(timer, 2)
    assert.equal(t, t:reset(5))
    assert.is_true(t:cancel())
    timer:done(t)
    assert.equal("cancelled", t:state())
    assert.is_nil(t:task())
    assert.is_nil(t:reset(1)) -- cancel said true: it never runs
    assert.equal(0, timer:pending())
    collectgarbage()
    collectgarbage()
    assert.is_nil(refs.cb, "the callback is still held")
    assert.is_nil(take_within(timer, 0.02))
    check_identity(timer)
  end)
end)

describe("a finalizer that stops the timer", function()
  it("inside a schedule's allocation gets an error from that schedule, not a crash", function()
    local timer = hwtimer.new()
    local stopped = false
    local function finalizer()
      stopped = true
      timer:close()
    end
    do -- garbage with a finalizer (5.1 and LuaJIT: a proxy; tables have no __gc there)
      local proxy = rawget(_G, "newproxy")
      if proxy then
        getmetatable(proxy(true)).__gc = finalizer
      else
        setmetatable({}, { __gc = finalizer })
      end
    end
    local f = function() end
    local err
    for _ = 1, 1000000 do -- the handles' allocations run the collector, and it the finalizer
      local ok, e = pcall(timer.schedule, timer, 1, f)
      if not ok then
        err = e
        break
      end
    end
    assert.is_true(stopped, "the finalizer never ran")
    assert.matches("stopped timer", tostring(err))
    assert.equal(0, timer:pending())
  end)
end)
