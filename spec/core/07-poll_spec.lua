local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

describe("polling the timer", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("exposes the pipe's read end", function()
    local fd = timer:getfd()
    assert.equal("number", type(fd))
    assert.equal(math.floor(fd), fd)
    assert.is_true(fd >= 0)
    assert.equal(fd, timer:pollfd())
    assert.equal("r", timer:events())
    assert.is_false(timer:dirty())
  end)

  describe("timeout()", function()
    it("is nil when nothing is pending", function()
      assert.is_nil(timer:timeout())
    end)

    it("is never later than the next deadline", function()
      -- The deadline rounded up to a tick, or, for a far one, the start of
      -- its slot above level 0.
      local t = timer:schedule(0.5, function() end)
      timer:schedule(2, function() end)
      local before = hwtimer.now()
      local left = timer:timeout()
      assert.is_true(left > 0 and left <= t:deadline() - before + 1e-6, tostring(left))
    end)

    it("tells a near deadline to within a tick", function()
      local t = timer:schedule(0.003, function() end)
      helpers.assert_time_left(t:deadline(), function() return timer:timeout() end)
    end)

    it("tells a near deadline to within a tick after the timer sat idle", function()
      -- An idle worker does not advance the wheel; scheduling must not place
      -- a short timeout as if no time had passed (a level too high, with
      -- timeout() reporting the move down instead of the deadline).
      local tm = hwtimer.new({ tick = 0.001, wheel_size = 16 }) -- level 0: 16 ms
      require("hwtimer_testutil").sleep(0.1)
      local t = tm:schedule(0.005, function() end)
      local ok, err = pcall(helpers.assert_time_left, t:deadline(), function() return tm:timeout() end)
      tm:close()
      assert(ok, err)
    end)

    it("tells a deadline in level 0's next block, not the block's end", function()
      -- Blocks of 64 ms from the timer's start: scheduled within 57 ms of
      -- new(), a 70 ms timeout lies in the second block. Where level 0's
      -- rings swap, nothing is due: a host told to wake there wakes for nothing.
      local tm = hwtimer.new({ tick = 0.001, wheel_size = 64 })
      local t = tm:schedule(0.070, function() end)
      local ok, err = pcall(helpers.assert_time_left, t:deadline(), function() return tm:timeout() end)
      tm:close()
      assert(ok, err)
    end)

    it("tells a far deadline to within a tick, not the worker's move down a level", function()
      -- Level 0 of 16 ms: a timeout 0.2 s ahead sits in a level-1 slot of 16
      -- ticks, which the worker moves down during the 16 ms before that slot
      -- begins. A host woken for the move, or at the slot's start, would
      -- find nothing due.
      for k = 0, 7 do
        local tm = hwtimer.new({ tick = 0.001, wheel_size = 16 })
        local t = tm:schedule(0.2 + k * 0.002, function() end)
        local ok, err = pcall(helpers.assert_time_left, t:deadline(), function() return tm:timeout() end)
        tm:close()
        assert(ok, k .. ": " .. tostring(err))
      end
    end)

    it("is the earliest far deadline left once an earlier one in its slot is cancelled, or sooner", function()
      -- The slot keeps the cancelled deadline as its bound until it empties:
      -- never later than the deadline left.
      local tm = hwtimer.new({ tick = 0.001, wheel_size = 16 })
      local a = tm:schedule(0.2, function() end)
      local b = tm:schedule(0.201, function() end)
      a:cancel()
      local before = hwtimer.now()
      local left = tm:timeout()
      tm:close()
      assert.is_true(left <= b:deadline() - before + 1e-6 and left > 0.15, tostring(left))
    end)

    it("is 0 when something is due", function()
      timer:schedule(0, function() end)
      assert.equal(0, timer:timeout())
    end)

    it("is 0 only when something is due: the worker's own events are not the host's", function()
      -- 16 slots of 0.1 ms a level: a level enters a new span every 1.6 ms,
      -- an event the worker handles and after which nothing may be due. A
      -- host told 0 then would call in a loop, against the worker's lock.
      -- The host spins until it has taken all 200 (due 50-190 ms on), so
      -- that a worker slowed down (valgrind, a busy machine) only makes it
      -- spin longer: under valgrind beside other load the worker's moves
      -- down lagged their times by 50-80 ms.
      local tm = hwtimer.new({ tick = 0.0001, wheel_size = 16 })
      tm:take_only()
      for i = 1, 200 do tm:schedule(0.05 + i * 0.0007, function() end) end
      local taken, empty = 0, 0
      local limit = hwtimer.now() + 2 * (tonumber(os.getenv("HWT_SLOW")) or 1)
      while taken < 200 and hwtimer.now() < limit do
        if tm:timeout() == 0 then
          local t = tm:take()
          if t then
            tm:done(t)
            taken = taken + 1
          else
            empty = empty + 1
          end
        end
      end
      tm:close()
      assert.equal(200, taken)
      assert.equal(0, empty)
    end)

    -- A host that asks timeout() before it waits on the descriptor (luv's
    -- prepare handle does, for gc_step) and dispatches only when it becomes
    -- readable. Asking right at a deadline, the host takes what is due before
    -- the worker has woken for it (the worker then finds nothing to
    -- announce): the descriptor must still be readable, or the host waits
    -- with callbacks due and nothing that will wake it.
    it("leaves the descriptor readable when it is 0", function()
      local testutil = require("hwtimer_testutil")
      local fd = timer:getfd()
      local ran = 0
      for i = 1, 100 do timer:schedule(0.002 * i, function() ran = ran + 1 end) end
      local zeros, silent, stop = 0, 0, hwtimer.now() + 5
      while ran < 100 and hwtimer.now() < stop do
        local gap = timer:timeout()
        if gap == 0 then
          zeros = zeros + 1
          if not testutil.readable(fd, 0) then silent = silent + 1 end
        end
        if testutil.readable(fd, 0) then timer:dispatch() end
      end
      assert.equal(100, ran)
      assert.is_true(zeros > 0)
      assert.equal(0, silent)
    end)

    -- The same moment made certain: the worker's thread held (in a signal
    -- handler) from before the deadline until after the host asked, so the
    -- host alone takes what is due. The race above goes the worker's way on
    -- some machines every time (a CI run of 2026-11-28).
    it("leaves the descriptor readable when the host takes before the worker wakes", function()
      local testutil = require("hwtimer_testutil")
      local slow = tonumber(os.getenv("HWT_SLOW")) or 1
      local fd, ran = timer:getfd(), 0
      -- (this thread stalled until the deadline, the worker took it first:
      -- the descriptor readable before the host asked; tried again)
      for attempt = 1, 5 do
        timer:schedule(0.03 * slow, function() ran = ran + 1 end)
        testutil.sleep(0.005 * slow) -- the worker asleep again after the schedule woke it
        local held = testutil.hold_threads()
        local early = testutil.readable(fd, 0)
        testutil.sleep(0.04 * slow)
        local ok, gap = pcall(timer.timeout, timer)
        local readable = testutil.readable(fd, 0)
        testutil.release_threads()
        assert.is_true(held >= 1)
        assert.is_true(ok, gap)
        assert.equal(0, gap)
        assert.is_true(readable)
        assert.equal(1, timer:dispatch())
        assert.equal(attempt, ran)
        if not early then break end
        assert.is_true(attempt < 5, "the worker took the deadline first in 5 attempts of 5")
      end
    end)
  end)

  describe("run()", function()
    it("returns how many ran, once nothing is pending", function()
      for i = 1, 10 do timer:schedule(i / 1000, function() end) end
      assert.equal(10, timer:run())
      assert.equal(0, timer:pending())
    end)

    it("returns after the given seconds while timeouts remain", function()
      timer:schedule(60, function() end)
      local t0, cpu0 = hwtimer.now(), os.clock()
      assert.equal(0, timer:run(0.2))
      local took, cpu = hwtimer.now() - t0, os.clock() - cpu0
      assert.is_true(took >= 0.2 and took < 1.5, tostring(took))
      assert.equal(1, timer:pending())
      -- and slept meanwhile (os.clock: the process's CPU time, every thread):
      -- a wait that spins costs about the whole wait
      assert.is_true(cpu < took / 4, ("%.3f s of CPU in a wait of %.3f s"):format(cpu, took))
    end)

    it("sleeps until the next timeout without a time limit too", function()
      timer:schedule(0.3, function() end)
      local t0, cpu0 = hwtimer.now(), os.clock()
      assert.equal(1, timer:run())
      local took, cpu = hwtimer.now() - t0, os.clock() - cpu0
      assert.is_true(took >= 0.3, tostring(took))
      assert.is_true(cpu < took / 4, ("%.3f s of CPU in a wait of %.3f s"):format(cpu, took))
    end)

    it("takes a time limit up to 1e9 s, the longest delay", function()
      assert.equal(0, timer:run(1e9)) -- (nothing pending: at once)
      assert.equal(0, timer:run(0))
    end)

    it("rejects a bad time limit", function()
      assert.has_error(function() timer:run(-1) end,
        "bad argument #1 to 'run' (non-negative number of seconds expected)")
      assert.has_error(function() timer:run(0 / 0) end,
        "bad argument #1 to 'run' (finite number expected)")
      assert.has_error(function() timer:run("x") end,
        "bad argument #1 to 'run' (number expected, got string)")
    end)
  end)

  describe("with luasocket's select", function()
    local ok, socket = pcall(require, "socket")
    if not ok then
      it("needs luasocket", function() pending("luasocket is not installed for " .. _VERSION) end)
      return
    end

    it("wakes when a timeout is due and not before", function()
      timer:schedule(0.05, function() end)
      local r = socket.select({ timer }, nil, 0.01)
      assert.equal(0, #r)
      r = socket.select({ timer }, nil, 2)
      assert.equal(timer, r[1])
      assert.equal(1, timer:dispatch())
      r = socket.select({ timer }, nil, 0)
      assert.equal(0, #r) -- drained: nothing more to read
    end)

    -- (a host that waits on the descriptor alone, with no time limit, must
    -- find it readable for a timeout due at once, from anywhere: here an
    -- I/O handler of its loop, outside any callback)
    it("is readable at once for a timeout scheduled due now, and for a reset to 0", function()
      timer:schedule(0, function() end)
      local r = socket.select({ timer }, nil, 0)
      assert.equal(timer, r[1])
      assert.equal(1, timer:dispatch())
      local t = timer:schedule(60, function() end)
      t:reset(0)
      r = socket.select({ timer }, nil, 0)
      assert.equal(timer, r[1])
      assert.equal(1, timer:dispatch())
    end)
  end)

  it("shows pending counts in tostring", function()
    timer:schedule(1, function() end)
    assert.matches("^hwtimer.timer %(running, 1 pending%)", tostring(timer))
  end)

  it("sleeps tickless: no wake-ups while nothing is due", function()
    -- The worker thread's voluntary context switches must not grow while one
    -- timeout sits a minute ahead (a ticking wheel would switch ~100 times).
    local f = io.open("/proc/self/task")
    if not f then return pending("no /proc/self/task to read the worker's context switches") end
    f:close()
    local pid = helpers.pid()
    local p = io.popen("ls /proc/" .. pid .. "/task")
    local tids = {}
    for tid in p:read("*a"):gmatch("%d+") do
      if tid ~= pid then tids[#tids + 1] = tid end -- not this (main) thread
    end
    p:close()
    assert.equal(1, #tids) -- the worker
    local function switches()
      local total = 0
      for _, tid in ipairs(tids) do
        local st = assert(io.open("/proc/" .. pid .. "/task/" .. tid .. "/status"))
        total = total + tonumber(st:read("*a"):match("\nvoluntary_ctxt_switches:%s*(%d+)"))
        st:close()
      end
      return total
    end
    timer:schedule(60, function() end)
    timer:run(0.01)
    local a = switches()
    helpers.busy(0.2)
    local b = switches()
    assert.is_true(b - a <= 1, "worker wake-ups while idle: " .. (b - a))
  end)
end)
