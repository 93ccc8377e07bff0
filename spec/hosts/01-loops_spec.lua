-- The timer inside the event loops people use, each the real thing from
-- Debian's packages: 3,000 timeouts, every third cancelled; each survivor
-- must fire exactly once and never early, no cancelled one may fire.
local hwtimer = require("hwtimer")

local N = 3000

local function workload(timer)
  local w = { fired = 0, expected = 0, dup = 0, early = 0, cancelled_ran = 0 }
  local seen, cancelled = {}, {}
  math.randomseed(8)
  for i = 1, N do
    local t = timer:schedule(math.random() * 0.05, function(h, id)
      if cancelled[id] then w.cancelled_ran = w.cancelled_ran + 1 end
      if seen[id] then w.dup = w.dup + 1 end
      if hwtimer.now() < h:deadline() then w.early = w.early + 1 end
      seen[id] = true
      w.fired = w.fired + 1
    end, i)
    if i % 3 == 0 then
      assert(t:cancel())
      cancelled[i] = true
    else
      w.expected = w.expected + 1
    end
  end
  function w.done() return w.fired >= w.expected end
  function w.check()
    assert.equal(w.expected, w.fired)
    assert.equal(0, w.dup)
    assert.equal(0, w.early)
    assert.equal(0, w.cancelled_ran)
    assert.equal(0, timer:pending())
  end
  return w
end

local function optional(name)
  local ok, mod = pcall(require, name)
  return ok and mod or nil
end

describe("event loops", function()
  local timer
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("plain scripts: timer:run()", function()
    local w = workload(timer)
    timer:run(5)
    w.check()
  end)

  local socket = optional("socket")
  it("luasocket: socket.select({ timer }) through getfd and dirty", function()
    if not socket then return pending("luasocket is not installed for " .. _VERSION) end
    local w = workload(timer)
    local limit = hwtimer.now() + 5
    while not w.done() and hwtimer.now() < limit do
      local readable = socket.select({ timer }, nil, timer:timeout() or 1)
      if readable[1] == timer or readable[timer] then timer:dispatch() end
      timer:dispatch() -- a deadline reached as select returned
    end
    w.check()
  end)

  local uv = optional("luv")
  it("luv: require('hwtimer.luv').attach(timer), then uv.run()", function()
    if not uv then return pending("luv is not installed for " .. _VERSION) end
    local glue = require("hwtimer.luv")
    local w = workload(timer)
    local poll = glue.attach(timer)
    local guard = uv.new_timer() -- never hang the suite
    guard:start(5000, 0, function() uv.stop() end)
    while not w.done() and guard:is_active() do uv.run("once") end
    glue.detach(poll)
    guard:close()
    uv.run("nowait")
    w.check()
  end)

  -- Callbacks that do luv's own I/O: each opens a TCP connection to a luv
  -- echo server of this loop and reads its line back, the loop serving both
  -- sides; then the loop goes on (a timeout after them runs) and ends clean.
  it("luv: callbacks that make TCP round trips through luv, and the loop goes on", function()
    if not uv then return pending("luv is not installed for " .. _VERSION) end
    local glue = require("hwtimer.luv")
    local server = uv.new_tcp()
    assert(server:bind("127.0.0.1", 0))
    assert(server:listen(128, function()
      local con = uv.new_tcp()
      server:accept(con)
      con:read_start(function(_, data)
        if data then con:write(data, function() con:close() end) else con:close() end
      end)
    end))
    local port = server:getsockname().port
    local got, after, n = {}, false, 100
    local function trip(_, i)
      local c = uv.new_tcp()
      c:connect("127.0.0.1", port, function(err)
        assert(not err, err)
        c:read_start(function(_, data)
          if data then got[i] = (got[i] or "") .. data else c:close() end
        end)
        c:write("line " .. i .. "\n")
      end)
    end
    local poll = glue.attach(timer)
    for i = 1, n do timer:schedule(0.001 * (i % 10), trip, i) end
    local guard = uv.new_timer() -- never hang the suite
    guard:start(5000, 0, function() uv.stop() end)
    local function all() for i = 1, n do if got[i] ~= "line " .. i .. "\n" then return false end end return true end
    while not all() and guard:is_active() do uv.run("once") end
    timer:schedule(0.005, function() after = true end)
    while not after and guard:is_active() do uv.run("once") end
    glue.detach(poll)
    guard:close()
    server:close()
    uv.run("nowait")
    assert.is_true(all())
    assert.is_true(after)
    assert.equal(0, timer:pending())
  end)

  it("luv: attach's options are checked: only gc_step", function()
    if not uv then return pending("luv is not installed for " .. _VERSION) end
    local glue = require("hwtimer.luv")
    assert.has_error(function() glue.attach(timer, true) end,
      "bad argument #2 to 'attach' (table expected, got boolean)")
    assert.has_error(function() glue.attach(timer, { on_error = print }) end,
      "bad argument #2 to 'attach' (unknown option 'on_error')")
    -- at the caller's line (an option error named none; no timer, a luv.lua line)
    local H, here = require("spec.helpers"), "01%-loops_spec%.lua$"
    H.raises_at(here, function() local r = glue.attach(timer, { on_error = print }) return r end,
      "bad argument #2 to 'attach' (unknown option 'on_error')")
    H.raises_at(here, function() local r = glue.attach(nil) return r end,
      "bad argument #1 to 'attach' (hwtimer.timer expected, got nil)")
  end)

  local cqueues = optional("cqueues")
  it("cqueues: require('hwtimer.cqueues').attach(timer, cq), then cq:loop()", function()
    if not cqueues then return pending("cqueues is not installed for " .. _VERSION) end
    local glue = require("hwtimer.cqueues")
    local cq = cqueues.new()
    local w = workload(timer)
    local attached = glue.attach(timer, cq)
    cq:wrap(function() -- stop once done (or after 5 s)
      local limit = cqueues.monotime() + 5
      while not w.done() and cqueues.monotime() < limit do cqueues.sleep(0.01) end
      attached.detach()
    end)
    assert(cq:loop())
    w.check()
  end)

  it("cqueues: cqueues.poll(timer) directly, in a controller's coroutine", function()
    if not cqueues then return pending("cqueues is not installed for " .. _VERSION) end
    local cq = cqueues.new()
    local w = workload(timer)
    cq:wrap(function()
      local limit = cqueues.monotime() + 5
      while not w.done() and cqueues.monotime() < limit do
        cqueues.poll(timer)
        timer:dispatch()
      end
    end)
    assert(cq:loop())
    w.check()
  end)

  local copas = optional("copas")
  it("copas: require('hwtimer.copas').step(timer) beside a copas TCP server", function()
    if not copas or not socket then return pending("copas is not installed for " .. _VERSION) end
    local glue = require("hwtimer.copas")
    local server = assert(socket.bind("127.0.0.1", 0))
    local _, port = server:getsockname()
    local echoed = {}
    copas.addserver(server, function(skt)
      skt = copas.wrap(skt)
      local line = skt:receive("*l")
      if line then skt:send(line .. "\n") end
    end)
    copas.addthread(function()
      for i = 1, 3 do
        local raw = socket.tcp()
        assert(copas.connect(raw, "127.0.0.1", port))
        local c = copas.wrap(raw)
        c:send("ping " .. i .. "\n")
        echoed[#echoed + 1] = c:receive("*l")
        raw:close()
      end
    end)
    local w = workload(timer)
    local limit = hwtimer.now() + 5
    while (not w.done() or #echoed < 3) and hwtimer.now() < limit do glue.step(timer) end
    w.check()
    assert.same({ "ping 1", "ping 2", "ping 3" }, echoed)
  end)
end)
