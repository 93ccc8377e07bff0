-- Many timers, one thread (issue 12, item 5): every timer of the process is
-- driven by one driver thread, started with the first timer and joined when
-- the last one stops. These specs count threads and wake-ups in /proc.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local util = require("hwtimer_testutil")

local function gc()
  collectgarbage()
  collectgarbage()
end

-- The soft limit on descriptors: each timer still has its own pipe (2 fds).
local function fd_limit()
  local f = io.open("/proc/self/limits")
  if not f then return nil end
  local n = f:read("*a"):match("Max open files%s+(%d+)")
  f:close()
  return tonumber(n)
end

-- Every thread of this process but the main one, listed once (listing runs
-- a process, which must not fall inside a measured window).
local function other_threads()
  local pid = helpers.pid()
  local p = io.popen("ls /proc/" .. pid .. "/task")
  local paths = {}
  for tid in p:read("*a"):gmatch("%d+") do
    if tid ~= pid then paths[#paths + 1] = "/proc/" .. pid .. "/task/" .. tid .. "/status" end
  end
  p:close()
  return paths
end

local function voluntary_switches(paths)
  local total = 0
  for _, path in ipairs(paths) do
    local f = io.open(path)
    if f then -- a thread may have ended since it was listed
      total = total + tonumber(f:read("*a"):match("\nvoluntary_ctxt_switches:%s*(%d+)"))
      f:close()
    end
  end
  return total
end

-- n timers, each holding one timeout `delay` seconds ahead.
local function new_timers(n, delay)
  local timers = {}
  for i = 1, n do
    local timer = assert(hwtimer.new())
    timer:schedule(delay, function() end)
    timers[i] = timer
  end
  return timers
end

local function close_all(timers)
  for _, timer in ipairs(timers) do timer:close() end
end

describe("one driver thread for every timer", function()
  it("1,000 timers cost at most 2 threads, and closing them all gives them back", function()
    gc()
    local before = helpers.settled_thread_count()
    if not before then return pending("no /proc/self/task to count threads") end
    if fd_limit() and fd_limit() < 2100 then
      pending("needs ulimit -n of at least 2100: each timer has its own pipe")
      return
    end
    local timers = new_timers(1000, 10)
    finally(function() close_all(timers) end)
    local during = helpers.settled_thread_count()
    assert.is_true(during <= before + 2, "threads: " .. before .. " before, " .. during .. " with 1,000 timers")
    assert.is_true(during >= before, "threads: " .. before .. " before, " .. during .. " with 1,000 timers")
    close_all(timers)
    assert.equal(before, helpers.wait_thread_count(before))
  end)

  it("the driver starts with the first timer and is joined when the last one stops", function()
    gc()
    local before = helpers.settled_thread_count()
    if not before then return pending("no /proc/self/task to count threads") end
    local a, b = hwtimer.new(), hwtimer.new()
    local with_two = helpers.settled_thread_count()
    a:close()
    assert.equal(with_two, helpers.settled_thread_count()) -- b still needs it
    b:close()
    assert.equal(before, helpers.wait_thread_count(before))
    local c = hwtimer.new() -- and comes back for a new timer
    local fired = false
    c:schedule(0.01, function() fired = true end)
    assert.is_true(helpers.wait_until(c, function() return fired end, 5))
    c:close()
    assert.equal(before, helpers.wait_thread_count(before))
  end)

  it("100 idle timers cause no wake-ups", function()
    if not io.open("/proc/self/task/" .. helpers.pid() .. "/status") then
      return pending("no /proc/self/task/PID/status to read the context switches")
    end
    gc()
    local timers = new_timers(100, 60)
    finally(function() close_all(timers) end)
    util.sleep(0.05) -- let the driver see every timeout and go to sleep
    local threads = other_threads()
    assert.is_true(#threads >= 1 and #threads <= 2, #threads .. " threads besides the main one")
    local a = voluntary_switches(threads)
    util.sleep(1)
    local b = voluntary_switches(threads)
    close_all(timers)
    assert.is_true(b - a <= 1, "driver wake-ups in 1 s with 100 idle timers: " .. (b - a))
  end)

  it("100 timers with interleaved deadlines all fire on time, each exactly once", function()
    -- Timer i's k-th timeout is due at (i + 100 k) / 2 ms: consecutive
    -- deadlines belong to different timers. Ticks and wheel sizes differ, so
    -- the driver keeps workers of different tick lengths and origins in order.
    local timers, runs, due, fired = {}, {}, {}, 0
    finally(function() close_all(timers) end)
    for i = 1, 100 do
      local timer = hwtimer.new({ tick = i % 2 == 0 and 0.001 or 0.0005, wheel_size = i % 3 == 0 and 16 or 512 })
      timers[i] = timer
      for k = 0, 4 do
        local key = i .. ":" .. k
        local delay = (i + 100 * k) / 2000
        due[key] = hwtimer.now() + delay -- read before schedule: the deadline is no earlier
        timer:schedule(delay, function()
          runs[key] = (runs[key] or 0) + 1
          if runs[key] == 1 then runs[key .. "@"] = hwtimer.now() end
          fired = fired + 1
        end)
      end
    end
    local limit = hwtimer.now() + 10
    while fired < 500 and hwtimer.now() < limit do
      for i = 1, 100 do timers[i]:dispatch() end
      util.sleep(0.0005)
    end
    util.sleep(0.05)
    for i = 1, 100 do timers[i]:dispatch() end -- nothing may run twice
    close_all(timers)
    assert.equal(500, fired)
    for key, at in pairs(due) do
      assert.equal(1, runs[key], key)
      assert.is_true(runs[key .. "@"] >= at, key .. " ran early")
    end
  end)

  it("closing some timers while the driver expires others leaves the rest on time", function()
    local timers, fired = {}, {}
    finally(function() close_all(timers) end)
    for i = 1, 50 do
      local timer = hwtimer.new()
      timers[i] = timer
      for k = 1, 200 do timer:schedule(k / 1000, function() fired[i] = (fired[i] or 0) + 1 end) end
    end
    util.sleep(0.05) -- the driver is expiring all of them now
    for i = 1, 50, 2 do timers[i]:close() end
    collectgarbage()
    local limit = hwtimer.now() + 5
    local function done()
      for i = 2, 50, 2 do if (fired[i] or 0) < 200 then return false end end
      return true
    end
    while not done() and hwtimer.now() < limit do
      for i = 2, 50, 2 do timers[i]:dispatch() end
      util.sleep(0.001)
    end
    close_all(timers)
    assert.is_true(done())
    for i = 1, 50, 2 do assert.is_nil(fired[i]) end -- closed before any dispatch
  end)

  it("a forked child gets a driver of its own for its new timers", function()
    local timer = hwtimer.new()
    finally(function() timer:close() end)
    timer:schedule(10, function() end)
    local pid = util.fork()
    if pid == 0 then
      local code = 0
      if pcall(timer.schedule, timer, 1, print) then code = code + 1 end -- the parent's: raises
      timer:close()
      local mine = hwtimer.new()
      local ran = false
      mine:schedule(0.01, function() ran = true end)
      mine:run(2)
      if not ran then code = code + 2 end
      mine:close()
      util._exit(code)
    end
    assert.equal(0, util.wait(pid))
    timer:close()
  end)
end)
