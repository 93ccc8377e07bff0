-- The wake socket (csrc/lwake.c): for a host that waits on a UDP socket of
-- its own (nginx's cosockets) instead of polling the timer's descriptor.
-- Here luasocket's UDP socket plays the host's.
local hwtimer = require("hwtimer")
local socket = require("socket")
local helpers = require("spec.helpers")

-- A host socket paired with `timer`'s wake socket.
local function paired(timer)
  local port, token = timer:wake_socket()
  assert.is_number(port)
  assert.matches("^%x+$", token)
  assert.equal(16, #token)
  local udp = socket.udp()
  assert(udp:setpeername("127.0.0.1", port))
  assert(udp:send(token))
  assert.is_true(timer:wake_pair())
  return udp
end

-- What comes to udp within `seconds`, and when (hwtimer.now()); nil when nothing.
local function receive(udp, seconds)
  udp:settimeout(seconds)
  local data = udp:receive()
  return data, hwtimer.now()
end

describe("the wake socket", function()
  local timer, udp
  before_each(function()
    timer = hwtimer.new({ tick = 0.0001 })
    timer:take_only()
  end)
  after_each(function()
    timer:close()
    if udp then udp:close() end
    udp = nil
  end)

  it("sends one datagram when a timeout falls due while the host is armed, never before", function()
    udp = paired(timer)
    local t = timer:schedule(0.05, function() end)
    assert.is_false(timer:wake_arm())
    local data, at = receive(udp, 2)
    assert.equal("!", data)
    assert.is_true(at >= t:deadline(), ("woken %.6f s before the deadline"):format(t:deadline() - at))
    assert.equal(t, timer:take())
    assert.is_nil(receive(udp, 0.05))   -- one datagram, not one a tick
  end)

  it("answers true, and sends nothing, when something is due already", function()
    udp = paired(timer)
    timer:schedule(0, function() end)
    assert.is_true(timer:wake_arm())
    assert.is_nil(receive(udp, 0.05))
  end)

  it("answers true while taken timeouts wait to be run", function()
    udp = paired(timer)
    timer:schedule(0, function() end)
    timer:schedule(0, function() end)
    assert.is_truthy(timer:take())    -- the second stays taken, not yet run
    assert.is_true(timer:wake_arm())
  end)

  it("sends nothing to a host that did not arm", function()
    udp = paired(timer)
    timer:schedule(0.01, function() end)
    assert.is_nil(receive(udp, 0.1))
    assert.is_truthy(timer:take())
  end)

  -- timer:host_timed(): the host wakes at timer:timeout() itself (nginx's
  -- timers), so the driver thread does not wake for its near deadlines: the
  -- descriptor stays quiet past one, and take at its time has it; armed, it
  -- gets its datagram at the deadline as any host.
  describe("for a host that wakes itself (host_timed)", function()
    local readable = require("hwtimer_testutil").readable

    it("leaves a near deadline to the host: the descriptor stays quiet, and take at its time has it", function()
      timer:host_timed()
      local t = timer:schedule(0.005, function() end)
      assert.is_false(readable(timer:getfd(), 0.05)) -- (a driver that woke for it makes it readable at 5 ms)
      assert.equal(0, timer:timeout())
      assert.equal(t, timer:take())
      assert.is_false(readable(timer:getfd(), 0))
    end)

    it("still brings a far timeout down for the host to take at its time", function()
      timer:host_timed()
      local t = timer:schedule(0.3, function() end) -- (a level above 0: the driver's drain)
      local got
      repeat
        local wait = timer:timeout()
        require("hwtimer_testutil").sleep(wait)
        got = timer:take()
      until got or hwtimer.now() > t:deadline() + 1
      assert.equal(t, got)
      assert.is_true(hwtimer.now() < t:deadline() + 0.1, "taken more than 0.1 s late")
    end)

    -- (the driver thread wakes for the wheel's own work alone: a driver that
    -- woke at each of 200 deadlines 1 ms apart switched 200 times or more)
    it("takes deadlines 1 ms apart at their times without the driver thread waking for each", function()
      timer:host_timed()
      local pid = helpers.pid()
      local sleep = require("hwtimer_testutil").sleep
      local before = helpers.thread_switches(pid)
      for i = 1, 200 do timer:schedule(0.002 + i * 0.001, function() end) end
      local taken, limit = 0, hwtimer.now() + 5
      while taken < 200 and hwtimer.now() < limit do
        sleep(timer:timeout() or 0.01)
        while timer:take() do taken = taken + 1 end
      end
      assert.equal(200, taken)
      local woke = helpers.thread_switches(pid) - before
      assert.is_true(woke < 50, woke .. " wake-ups of the driver thread for 200 deadlines 1 ms apart")
    end)

    it("gets its datagram at the deadline when it waits armed", function()
      timer:host_timed()
      udp = paired(timer)
      local t = timer:schedule(0.01, function() end)
      assert.is_false(timer:wake_arm())
      local data, at = receive(udp, 2)
      assert.equal("!", data)
      assert.is_true(at >= t:deadline() and at < t:deadline() + 0.5)
      assert.equal(t, timer:take())
    end)
  end)

  it("wakes an armed host when a schedule makes something due at once", function()
    udp = paired(timer)
    timer:schedule(10, function() end)
    assert.is_false(timer:wake_arm())
    local t = timer:schedule(0, function() end)
    assert.equal("!", (receive(udp, 1)))
    assert.equal(t, timer:take())
  end)

  it("wakes an armed host after a cancel emptied the due list it had been told of", function()
    udp = paired(timer)
    local first = timer:schedule(0, function() end)  -- due: the descriptor is signalled
    first:cancel()                                    -- the due list is empty again
    local t = timer:schedule(0.02, function() end)
    assert.is_false(timer:wake_arm())
    assert.equal("!", (receive(udp, 1)))
    assert.equal(t, timer:take())
  end)

  it("sends one when the timer stops, armed or not", function()
    udp = paired(timer)
    timer:schedule(10, function() end)
    timer:stop()
    assert.equal("!", (receive(udp, 1)))
  end)

  it("is armed without a datagram when no socket is paired", function()
    timer:schedule(0.01, function() end)
    assert.is_false(timer:wake_arm())
  end)

  it("pairs with the socket that sent the token, not with another sender", function()
    local port, token = timer:wake_socket()
    local other = socket.udp()
    assert(other:setpeername("127.0.0.1", port))
    assert(other:send("not the token"))
    assert(other:send("")) -- (an empty datagram: read and dropped as well)
    udp = socket.udp()
    assert(udp:setpeername("127.0.0.1", port))
    assert(udp:send(token))
    assert.is_true(timer:wake_pair())
    timer:schedule(0, function() end)
    timer:take()
    timer:schedule(0.01, function() end)
    assert.is_false(timer:wake_arm())
    assert.equal("!", (receive(udp, 1)))
    other:settimeout(0.05)
    assert.is_nil(other:receive())
    other:close()
  end)

  it("gives each socket a token of its own: 16 hex digits, another each time, another for another timer", function()
    local seen = {}
    local other = hwtimer.new()
    for i = 1, 20 do
      local _, token = (i % 2 == 0 and timer or other):wake_socket()
      assert.matches("^%x+$", token)
      assert.equal(16, #token)
      assert.is_nil(seen[token], "token " .. token .. " given twice")
      seen[token] = true
    end
    other:close()
  end)

  it("refuses to pair before its token comes, or with no socket opened", function()
    local ok, err = timer:wake_pair()
    assert.is_nil(ok)
    assert.equal("hwtimer: no wake socket to pair (call timer:wake_socket() first)", err)
    timer:wake_socket()
    ok, err = timer:wake_pair()
    assert.is_nil(ok)
    assert.equal("hwtimer: cannot pair the wake socket: its token has not come", err)
  end)

  it("pairs again: the new socket is woken, the old one no longer", function()
    local old = paired(timer)
    udp = paired(timer)
    timer:schedule(0.01, function() end)
    assert.is_false(timer:wake_arm())
    assert.equal("!", (receive(udp, 1)))
    old:settimeout(0.05)
    assert.is_nil(old:receive())
    old:close()
  end)

  -- (a daemon started with stdin closed: the wake socket may be descriptor 0)
  it("sends one when the timer stops, its socket descriptor 0, and closes that descriptor with the timer", function()
    -- (another interpreter: under a preloaded sanitizer it inherits the preload)
    if os.getenv("LD_PRELOAD") then return pending("starts another interpreter: left to the plain runs") end
    local out, ok = require("spec.helpers").run_lua([[
      local hwtimer, socket = require("hwtimer"), require("socket")
      local hold = assert(io.open("/dev/null")) -- descriptor 0 while the timer opens its eventfd
      local timer = hwtimer.new()
      hold:close()
      local port, token = timer:wake_socket() -- descriptor 0 now
      local pid = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")
      local p = io.popen("readlink /proc/" .. pid .. "/fd/0")
      print("0 is", p:read("*a"):match("socket") and "a socket" or "not a socket")
      p:close()
      local udp = socket.udp()
      assert(udp:setpeername("127.0.0.1", port))
      assert(udp:send(token))
      assert(timer:wake_pair())
      timer:stop()
      udp:settimeout(2)
      print("at stop", udp:receive() and "a datagram" or "nothing")
      udp:close()
      timer:close()
      p = io.popen("readlink /proc/" .. pid .. "/fd/0") -- (its pipe may take descriptor 0 itself)
      print("0 after close", p:read("*a"):match("socket") and "a socket" or "not a socket")
      p:close()
    ]], "<&-")
    assert.is_true(ok, out)
    assert.matches("0 is\ta socket\n", out)
    assert.matches("at stop\ta datagram\n", out)
    assert.matches("0 after close\tnot a socket\n", out) -- (closed, not left open)
  end)

  -- (a socket opened and not paired is closed by the next wake_socket(),
  -- descriptor 0 too: the new one takes its place)
  it("closes an unpaired wake socket on descriptor 0 when asked for another", function()
    if os.getenv("LD_PRELOAD") then return pending("starts another interpreter: left to the plain runs") end
    local out, ok = require("spec.helpers").run_lua([[
      local hwtimer = require("hwtimer")
      local hold = assert(io.open("/dev/null")) -- descriptor 0 while the timer opens its eventfd
      local timer = hwtimer.new()
      hold:close()
      timer:wake_socket() -- descriptor 0
      timer:wake_socket() -- closes it first, then opens the next: 0 again
      local pid = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")
      local p = io.popen("for f in /proc/" .. pid .. "/fd/*; do readlink $f; done | grep -c socket")
      print("sockets", tonumber(p:read("*a")))
      p:close()
      timer:close()
    ]], "<&-")
    assert.is_true(ok, out)
    assert.matches("sockets\t1\n", out)
  end)

  -- A host that arms from within a callback (the rest of the batch is not
  -- on the due list then) and dispatches with a limit: the timeouts left
  -- over wake it, as they keep the pipe readable.
  it("wakes a host armed during a dispatch that left timeouts over", function()
    timer:close()
    timer = hwtimer.new({ tick = 0.0001 })
    udp = paired(timer)
    for i = 1, 3 do timer:schedule(0, function() if i == 1 then timer:wake_arm() end end) end
    assert.equal(1, timer:dispatch(1))
    assert.equal("!", (receive(udp, 1)))
    assert.equal(2, timer:dispatch())
  end)

  it("raises on a stopped timer", function()
    timer:close()
    for _, m in ipairs({ "wake_socket", "wake_pair", "wake_arm", "host_timed" }) do
      assert.has_error(function() timer[m](timer) end, "attempt to use a stopped timer")
    end
  end)
end)
