-- timer:wakeup(fn): the hook of a host that sleeps until timer:timeout()
-- on something other than the pipe (nginx). It is called when something
-- becomes due before the host's planned wake-up, and only then: a host that
-- is awake (no timeout() asked since the hook was set, or since the hook
-- last ran) has nothing to be woken from.
local hwtimer = require("hwtimer")

describe("timer:wakeup", function()
  local timer, woken
  local function nop() end
  before_each(function()
    timer = hwtimer.new({ tick = 0.001 })
    woken = 0
  end)
  after_each(function() timer:stop() end)

  -- (wakeup() alone is wakeup(nil); a value after fn is not the hook)
  it("is removed by wakeup() with no argument, and set to fn whatever follows it", function()
    timer:schedule(10, nop)
    timer:wakeup(function() woken = woken + 1 end, "not the hook")
    timer:timeout()
    timer:schedule(0.5, nop)
    assert.are.equal(1, woken)
    timer:wakeup()
    timer:timeout()
    timer:schedule(0.1, nop)
    assert.are.equal(1, woken)
  end)

  it("is not called for schedules made while the host is awake", function()
    timer:wakeup(function() woken = woken + 1 end)
    timer:schedule(0, nop)
    timer:schedule(0.5, nop)
    timer:every(0.2, nop)
    assert.are.equal(0, woken)
  end)

  it("is called once for a schedule due before the planned wake-up, not for the next", function()
    timer:schedule(10, nop)
    timer:wakeup(function() woken = woken + 1 end)
    timer:timeout() -- (the host plans to wake in 10 s)
    timer:schedule(0.5, nop)
    assert.are.equal(1, woken)
    timer:schedule(0, nop) -- (the host has been woken: it is awake)
    assert.are.equal(1, woken)
  end)

  -- A host told 0 dispatches at once: it is awake, whichever way the timer
  -- found the work due (in its own list, or taken at the wheel's event).
  it("is not called after timeout() said 0", function()
    for _, wait in ipairs({ 0.01, 0.004 }) do -- (past the deadline, rounded up to the tick)
      timer:schedule(0.002, nop)
      timer:wakeup(function() woken = woken + 1 end)
      local t0 = hwtimer.now()
      while hwtimer.now() < t0 + 0.002 + wait do end
      assert.are.equal(0, timer:timeout())
      timer:schedule(0, nop)
      timer:schedule(0.001, nop)
      assert.are.equal(0, woken, "after a wait of " .. wait .. " s")
      timer:wakeup(nil)
      timer:dispatch()
    end
  end)

  -- (the first timeout() takes the one due at once into the timer's own
  -- list; the second says 0 from there)
  it("is not called after timeout() said 0 again for a timeout not yet run", function()
    timer:wakeup(function() woken = woken + 1 end)
    timer:schedule(0, nop)
    assert.are.equal(0, timer:timeout())
    assert.are.equal(0, timer:timeout())
    timer:schedule(0, nop)
    timer:schedule(0.001, nop)
    assert.are.equal(0, woken)
  end)

  it("is called once for a reset that brings a timeout before the planned wake-up", function()
    local t = timer:schedule(10, nop)
    timer:wakeup(function() woken = woken + 1 end)
    timer:timeout() -- (the host plans to wake in 10 s)
    assert.equal(t, t:reset(20)) -- (later: nothing to wake for)
    assert.are.equal(0, woken)
    timer:timeout()
    assert.equal(t, t:reset(0.5))
    assert.are.equal(1, woken)
    assert.equal(t, t:reset(0.2)) -- (the host has been woken: it is awake)
    assert.are.equal(1, woken)
  end)

  -- A host told nil sleeps until woken: any schedule then is before its
  -- wake-up, however far ahead, and one due now too.
  it("is called for any schedule after timeout() said nothing is pending", function()
    timer:wakeup(function() woken = woken + 1 end)
    for round, delay in ipairs({ 3600, 0 }) do
      assert.is_nil(timer:timeout())
      local t = timer:schedule(delay, nop)
      assert.are.equal(round, woken, "a schedule " .. delay .. " s ahead")
      t:cancel()
      timer:dispatch()
    end
  end)

  it("is not called for a schedule due after the planned wake-up", function()
    timer:schedule(1, nop)
    timer:wakeup(function() woken = woken + 1 end)
    timer:timeout()
    timer:schedule(5, nop)
    assert.are.equal(0, woken)
  end)

  -- A host whose callbacks may yield (take and done, hwtimer.ngx) sleeps
  -- while a periodic callback still runs in a thread of its own: the next
  -- run that done arms before the planned wake-up must wake it, or the
  -- periodic waits for the host's later deadline.
  it("is called once when done() arms a periodic's next run before the planned wake-up", function()
    timer:take_only()
    timer:schedule(10, nop)
    local p = timer:every(0.002, nop)
    local t
    local t0 = hwtimer.now()
    repeat t = timer:take() until t or hwtimer.now() > t0 + 2
    assert.equal(p, t)
    timer:wakeup(function() woken = woken + 1 end)
    assert.is_true(timer:timeout() > 5) -- (the periodic runs: the host plans to wake in 10 s)
    timer:done(t)
    assert.are.equal(1, woken)
    assert.is_true(timer:timeout() < 0.1)
    p:cancel()
  end)

  -- (the hook is glue, not a callback: an error in it is printed to stderr,
  -- once a call, and the schedule that called it stands)
  it("that raises is reported on stderr, and the schedule that called it stands", function()
    local out, ok = require("spec.helpers").run_lua([[
      local timer = require("hwtimer").new({ tick = 0.001 })
      timer:schedule(10, function() end)
      timer:wakeup(function() error("refused by the hook", 0) end)
      timer:timeout()
      local t = timer:schedule(0.5, function() end)
      io.stdout:write(tostring(t ~= nil), " ", timer:pending(), "\n")
      timer:stop()
    ]])
    assert.is_true(ok, out)
    assert.equal("hwtimer: error in wakeup hook: refused by the hook\ntrue 2\nexit=0\n", out)
  end)

  -- (without a hook nothing is called, whatever timeout() answered: nil for
  -- nothing pending, a wait, or 0; stderr stays silent)
  it("absent, is never called: schedules after each answer of timeout() print nothing", function()
    local out, ok = require("spec.helpers").run_lua([[
      local timer = require("hwtimer").new({ tick = 0.001 })
      local function nop() end
      assert(timer:timeout() == nil)
      timer:schedule(0, nop)
      timer:schedule(0.5, nop)
      timer:dispatch()
      assert(timer:timeout() > 0)
      local t = timer:schedule(0.2, nop)
      t:reset(0)
      timer:every(0.01, nop)
      timer:stop()
      io.stdout:write("done\n")
    ]])
    assert.is_true(ok, out)
    assert.equal("done\nexit=0\n", out)
  end)

  it("set anew, forgets the wake-up the host planned before", function()
    timer:schedule(10, nop)
    timer:wakeup(function() woken = woken + 100 end)
    timer:timeout()
    timer:wakeup(function() woken = woken + 1 end)
    timer:schedule(0, nop)
    timer:schedule(0.5, nop)
    assert.are.equal(0, woken)
  end)
end)
