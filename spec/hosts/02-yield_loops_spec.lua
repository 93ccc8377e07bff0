-- spec: alone (p99 lateness under 50 ms in real loops; spec/run.sh -j runs it with nothing beside it)
-- Callbacks that yield to their event loop: cqueues and copas sockets for
-- real, on loopback (127.0.0.1 only), through hwtimer.cqueues and
-- hwtimer.copas. Each spec fails if callbacks ran below timer:dispatch()
-- (where a yield is an error) or if one blocked callback held back the rest.
local hwtimer = require("hwtimer")

local function optional(name)
  local ok, mod = pcall(require, name)
  return ok and mod or nil
end

-- p-th percentile of a list of numbers.
local function percentile(list, p)
  local s = {}
  for i, v in ipairs(list) do s[i] = v end
  table.sort(s)
  return s[math.max(1, math.ceil(#s * p))]
end

-- 100 plain callbacks due in 0.02 s, beside one that waits: each one's
-- lateness goes into `late`, and on_last(now) runs after the hundredth.
local function hundred_due(timer, late, on_last)
  local count = 0
  for _ = 1, 100 do
    timer:schedule(0.02, function(t)
      late[#late + 1] = hwtimer.now() - t:deadline()
      count = count + 1
      if count == 100 then on_last(hwtimer.now()) end
    end)
  end
end

-- The glue's gc_step beside callbacks doing the host's own I/O: the
-- automatic collector is stopped with ~3 MB of garbage left behind, so only
-- the glue's steps in the loop's idle gaps can free it. Returns the KB freed
-- while drive() runs; the collector runs again afterwards.
local function freed_while(drive)
  collectgarbage()
  collectgarbage()
  collectgarbage("stop")
  local junk = {} -- luacheck: ignore 241 (garbage made for the collector, never read)
  for i = 1, 30000 do junk[i] = { i, tostring(i), { i } } end
  junk = nil -- luacheck: ignore 311 (the last reference: the garbage to free)
  local before = collectgarbage("count")
  local ok, err = pcall(drive)
  local freed = before - collectgarbage("count")
  collectgarbage("restart")
  assert(ok, err)
  return freed
end

local cqueues = optional("cqueues")

describe("hwtimer.cqueues: callbacks may yield to cqueues", function()
  if not cqueues then
    it("needs cqueues", function() pending("cqueues is not installed for " .. _VERSION) end)
    return
  end
  local csocket = require("cqueues.socket")
  local glue = require("hwtimer.cqueues")
  local timer, cq, errors, attached

  -- An echo server on the controller: one line in, the same line out.
  -- (Lua 5.1 cannot yield inside a for-iterator: plain loops here.)
  local server = {}
  function server.start()
    local srv = assert(csocket.listen({ host = "127.0.0.1", port = 0, backlog = 512 }))
    assert(srv:listen())
    local _, _, port = srv:localname()
    server.port, server.stop = port, false
    cq:wrap(function()
      while not server.stop do
        local con = srv:accept(0.02)
        if con then
          cq:wrap(function()
            while true do
              local line = con:read("*l")
              if not line then break end
              con:write(line, "\n")
              con:flush()
            end
            con:close()
          end)
        end
      end
      srv:close()
    end)
  end

  -- One round trip to the echo server.
  local function echo(text)
    local c = assert(csocket.connect("127.0.0.1", server.port))
    assert(c:write(text, "\n"))
    assert(c:flush())
    local line = c:read("*l")
    c:close()
    return line
  end

  -- Step the controller until it is empty, an error, or `secs` pass.
  local function run(secs)
    local limit = hwtimer.now() + (secs or 10)
    while not cq:empty() do
      if hwtimer.now() > limit then return nil, "timed out" end
      local ok, err = cq:step(0.05)
      if not ok then return nil, err end
    end
    return true
  end

  -- Detach and stop the server once done() holds (checked every 10 ms).
  local function finish_when(done)
    cq:wrap(function()
      local limit = hwtimer.now() + 10
      while not done() and hwtimer.now() < limit do cqueues.sleep(0.01) end
      attached.detach()
      server.stop = true
    end)
  end

  local function record(err, t, trace) errors[#errors + 1] = { err = err, t = t, trace = trace } end

  -- N callbacks, due `spacing` apart from 5 ms on, each an echo round trip;
  -- the controller runs until every one has its answer. Returns the answers.
  local function round_trips(N, spacing)
    local got = {}
    server.start()
    for i = 1, N do
      timer:schedule(0.005 + i * spacing, function(_, id) got[id] = echo("line " .. id) end, i)
    end
    finish_when(function()
      for i = 1, N do if not got[i] then return false end end
      return true
    end)
    assert(run())
    return got
  end

  before_each(function()
    timer = hwtimer.new()
    cq = cqueues.new()
    errors = {}
    attached = glue.attach(timer, cq, { on_error = record })
  end)
  after_each(function()
    attached.detach()
    timer:close()
  end)

  it("200 callbacks each connect, send a line and read its echo", function()
    local N = 200
    local got = round_trips(N, 0)
    for i = 1, N do assert.equal("line " .. i, got[i]) end
    assert.same({}, errors)
    assert.equal(N, timer:stats().fired)
  end)

  it("with gc_step, 200 callbacks spread over 0.3 s each make a round trip; the gaps collect", function()
    attached.detach()
    attached = glue.attach(timer, cq, { gc_step = 0.002, on_error = record })
    local N, got = 200, nil
    local freed = freed_while(function() got = round_trips(N, 0.0015) end)
    for i = 1, N do assert.equal("line " .. i, got[i]) end
    assert.same({}, errors)
    assert.equal(N, timer:stats().fired)
    assert.is_true(freed > 1000, ("freed %.0f KB"):format(freed))
  end)

  it("a callback that sleeps 0.2 s holds back none of the 100 due with it", function()
    local late, sleeper_done, others_done = {}, nil, nil
    timer:schedule(0.02, function()
      cqueues.sleep(0.2)
      sleeper_done = hwtimer.now()
    end)
    hundred_due(timer, late, function(at) others_done = at end)
    finish_when(function() return sleeper_done ~= nil end)
    assert(run())
    assert.same({}, errors)
    assert.equal(100, #late)
    assert.truthy(sleeper_done and others_done and others_done < sleeper_done)
    assert.is_true(percentile(late, 0.99) < 0.05, "p99 lateness " .. percentile(late, 0.99))
    assert.is_true(percentile(late, 0) >= 0, "early")
  end)

  -- A callback waits (wait(cond) gives true when signalled, false after its
  -- 2 s) and one due in the same batch signals: the signal must not be lost,
  -- and the waiter wakes at once. The batch waits for the waiter's carrier to
  -- start (its handoff), not for that wait's 1 s backstop.
  local function signalled_in_same_batch(wait)
    local cond = require("cqueues.condition").new()
    local woken, waited
    timer:schedule(0.01, function()
      local t0 = hwtimer.now()
      woken = wait(cond)
      waited = hwtimer.now() - t0
    end)
    timer:schedule(0.01, function() cond:signal() end)
    finish_when(function() return woken ~= nil end)
    assert(run())
    assert.same({}, errors)
    assert.is_true(woken, "the signal was lost: the wait ended after " .. tostring(waited) .. " s")
    assert.is_true(waited < 0.2, "the signal came " .. waited .. " s after the wait began")
  end

  it("a callback waiting on a condition gets the signal of one due in the same batch", function()
    signalled_in_same_batch(function(cond) return cond:wait(2) end)
  end)

  -- (an object polled through its pollfd, which gives a condition, as a
  -- cqueues.promise does: the same care as for the condition itself)
  it("a callback waiting on an object whose pollfd is a condition gets its signal from one in the same batch", function()
    signalled_in_same_batch(function(cond)
      local waitable = { pollfd = function() return cond end }
      return cqueues.poll(waitable, 2) == waitable -- (the object itself when signalled; nothing after 2 s)
    end)
  end)

  it("a timer attached again after detach() keeps its wake-up while a callback waits", function()
    attached.detach()
    attached = glue.attach(timer, cq, { on_error = record })
    local slept, ran_at, t0
    timer:schedule(0.01, function()
      cqueues.sleep(0.5)
      slept = true
    end)
    cq:wrap(function()
      cqueues.sleep(0.1) -- the first attachment's coroutine has left by now; the sleeper waits
      t0 = hwtimer.now()
      timer:schedule(0.05, function() ran_at = hwtimer.now() end)
    end)
    finish_when(function() return slept and ran_at ~= nil end)
    assert(run())
    assert.same({}, errors)
    local late = ran_at - (t0 + 0.05)
    assert.is_true(late >= 0 and late < 0.2, "ran " .. late .. " s late")
  end)

  it("detach() from a callback: the callbacks due with it wait for the next attachment", function()
    local ran = {}
    for i = 1, 5 do -- (due at once, all five: a loop under load can cross a tick between 5 ms delays)
      timer:schedule(0, function()
        ran[#ran + 1] = i
        if #ran == 1 then attached.detach() end
      end)
    end
    assert(run())
    assert.equal(1, #ran)
    assert.equal(4, timer:pending())
    attached = glue.attach(timer, cq, { on_error = record })
    finish_when(function() return #ran == 5 end)
    assert(run())
    assert.equal(5, #ran)
    assert.equal(0, timer:pending())
    assert.same({}, errors)
  end)

  it("an error before or after a yield reaches on_error with the handle and a traceback", function()
    local t1 = timer:schedule(0.005, function() cqueues.sleep(0.01); error("after a yield") end)
    local t2 = timer:schedule(0.005, function() error({ code = 7 }) end)
    finish_when(function() return #errors == 2 end)
    assert(run())
    assert.equal(2, #errors)
    local by_t = {}
    for _, e in ipairs(errors) do by_t[e.t] = e end
    assert.truthy(by_t[t1] and by_t[t2])
    assert.matches("after a yield", by_t[t1].err)
    assert.matches("stack traceback", by_t[t1].trace)
    assert.matches("02%-yield_loops_spec", by_t[t1].trace)
    assert.same({ code = 7 }, by_t[t2].err)
    assert.matches("error object is a table value", by_t[t2].trace)
    assert.equal(2, timer:stats().errors)
  end)

  it("a periodic timeout whose callback yields starts its next period only when it returns", function()
    local running, overlap, runs, ends = 0, 0, 0, {}
    local starts = {}
    local t = timer:every(0.01, function()
      running = running + 1
      if running > 1 then overlap = overlap + 1 end
      runs = runs + 1
      starts[runs] = hwtimer.now()
      cqueues.sleep(0.03)
      ends[runs] = hwtimer.now()
      running = running - 1
    end)
    finish_when(function() return runs >= 4 and running == 0 end)
    assert(run())
    t:cancel()
    assert.equal(0, overlap)
    for i = 2, runs do
      assert.is_true(starts[i] >= ends[i - 1] + 0.01 - 1e-3, "run " .. i .. " started too soon")
    end
  end)

  it("runs every accepted timeout exactly once: yielding, erroring, cancelled or not", function()
    server.start()
    math.randomseed(20)
    local N, ran, cancelled, expected = 600, {}, {}, 0
    for i = 1, N do
      local kind = i % 4
      local t = timer:schedule(math.random() * 0.05, function(_, id)
        ran[id] = (ran[id] or 0) + 1
        if kind == 0 then cqueues.sleep(math.random() * 0.02)
        elseif kind == 1 then echo("x")
        elseif kind == 2 then error("planned") end
      end, i)
      if i % 7 == 0 then
        assert(t:cancel())
        cancelled[i] = true
      else
        expected = expected + 1
      end
    end
    finish_when(function() return timer:pending() == 0 and attached.running() == 0 end)
    assert(run())
    local n = 0
    for i = 1, N do
      if cancelled[i] then assert.is_nil(ran[i]) else assert.equal(1, ran[i]); n = n + 1 end
    end
    assert.equal(expected, n)
    local s = timer:stats()
    assert.equal(expected, s.fired)
    assert.equal(#errors, s.errors)
    local planned = 0
    for i = 1, N do if i % 4 == 2 and not cancelled[i] then planned = planned + 1 end end
    assert.equal(planned, #errors)
  end)

  it("timer:close() from a callback ends cq:loop() without error", function()
    timer:schedule(0.01, function(t) t:timer():close() end)
    timer:schedule(5, function() end) -- still pending: the wait had a timeout
    assert.same({ true }, { cq:loop() })
    attached.detach() -- harmless after close
  end)

  it("timer:close() from a callback that yielded first ends cq:loop() without error", function()
    timer:schedule(0.01, function(t)
      cqueues.sleep(0.02)
      t:timer():close()
    end) -- nothing else pending: the attached coroutine waits with no timeout
    assert.same({ true }, { cq:loop(5) })
    assert.is_true(cq:empty())
    attached.detach()
  end)

  -- While a callback waits, the glue waits on its wake condition and
  -- timer:timeout() only (not the descriptor): detach must signal it, or the
  -- glue sleeps on to the next deadline, a minute here.
  it("detach() while a callback waits ends the glue at once, not when the callback or the next deadline comes", function()
    timer:schedule(60, function() end)
    timer:schedule(0.005, function() cqueues.sleep(1) end)
    local left -- the controller's coroutines 0.2 s after the detach: the callback's and this one
    cq:wrap(function()
      cqueues.sleep(0.05)
      attached.detach()
      cqueues.sleep(0.2)
      left = cq:count()
    end)
    assert(run(5))
    assert.equal(2, left)
  end)

  it("detach() then timer:close() from another coroutine ends cq:loop() without error", function()
    timer:schedule(0.3, function() end) -- the glue is waiting on the timer's descriptor
    cq:wrap(function()
      cqueues.sleep(0.02)
      attached.detach()
      timer:close()
    end)
    assert.same({ true }, { cq:loop(5) })
    assert.is_true(cq:empty())
  end)

  it("a schedule made while the glue sleeps, sooner than its wait, runs on time", function()
    timer:schedule(3, function() end) -- the glue sleeps up to 3 s
    local late
    cq:wrap(function()
      cqueues.sleep(0.05)
      timer:schedule(0.02, function(t)
        late = hwtimer.now() - t:deadline()
        attached.detach()
      end)
    end)
    assert(run())
    assert.truthy(late)
    assert.is_true(late >= 0 and late < 0.02, "late by " .. tostring(late))
  end)

  it("opts.dispatch runs callbacks with timer:dispatch(): a yield is an error there", function()
    attached.detach()
    attached = glue.attach(timer, cq, { dispatch = true })
    local ran = 0
    timer:schedule(0.005, function() ran = ran + 1 end)
    finish_when(function() return ran == 1 end)
    assert(run())
    assert.equal(1, ran)
  end)

  it("holds on to nothing once detached: a dropped timer is collected", function()
    local t2 = hwtimer.new()
    local a2, cq2 = glue.attach(t2)
    local ran = false
    t2:schedule(0.005, function() cqueues.sleep(0.005); ran = true; a2.detach() end)
    assert(cq2:loop(5))
    assert.is_true(ran and cq2:empty())
    local ref = setmetatable({ t2 }, { __mode = "v" })
    t2, a2 = nil, nil -- luacheck: ignore 311 (the last references: the timer may be collected)
    collectgarbage()
    collectgarbage()
    assert.is_nil(ref[1])
  end)

  it("rejects bad options naming them", function()
    assert.has_error(function() glue.attach(timer, cq, { batch = 0 }) end,
      "bad argument #3 to 'attach' (option 'batch': positive integer expected)")
    assert.has_error(function() glue.attach(timer, cq, { batch = math.huge, dispatch = true }) end,
      "bad argument #3 to 'attach' (option 'batch': positive integer expected)")
    assert.has_error(function() glue.attach(timer, cq, { on_error = 1 }) end,
      "bad argument #3 to 'attach' (option 'on_error': function expected)")
    assert.has_error(function() glue.attach(timer, cq, { bogus = true }) end,
      "bad argument #3 to 'attach' (unknown option 'bogus')")
    assert.has_error(function() glue.attach(timer, cq, { dispatch = 1 }) end,
      "bad argument #3 to 'attach' (option 'dispatch': boolean expected)")
    assert.has_error(function() glue.attach(timer, cq, 5) end,
      "bad argument #3 to 'attach' (table expected, got number)")
    assert.has_error(function() glue.attach(nil, cq) end,
      "bad argument #1 to 'attach' (hwtimer.timer expected, got nil)")
    assert.has_error(function() glue.attach(timer, { on_error = print }) end,
      "bad argument #2 to 'attach' (cqueues controller expected, got table)")
    -- at the caller's line (an option error named none: a tail call took a level)
    local H, here = require("spec.helpers"), "02%-yield_loops_spec%.lua$"
    H.raises_at(here, function() local r = glue.attach(timer, cq, { bogus = true }) return r end,
      "bad argument #3 to 'attach' (unknown option 'bogus')")
    H.raises_at(here, function() local r = glue.attach(nil, cq) return r end,
      "bad argument #1 to 'attach' (hwtimer.timer expected, got nil)")
    H.raises_at(here, function() local r = glue.attach(timer, 5) return r end,
      "bad argument #2 to 'attach' (cqueues controller expected, got number)")
  end)
end)

local copas = optional("copas")
local socket = optional("socket")

describe("hwtimer.copas: callbacks may use copas sockets", function()
  if not copas or not socket then
    it("needs copas", function() pending("copas is not installed for " .. _VERSION) end)
    return
  end
  local glue = require("hwtimer.copas")
  local timer, errors, opts, port

  -- One echo server for the whole block (copas keeps its servers for good).
  local function echo_server()
    local server = assert(socket.bind("127.0.0.1", 0, 1024))
    local _, p = server:getsockname()
    copas.addserver(server, function(skt)
      skt = copas.wrap(skt)
      while true do
        local line = skt:receive("*l")
        if not line then break end
        skt:send(line .. "\n")
      end
    end)
    return p
  end

  local function connect()
    local raw = socket.tcp()
    assert(copas.connect(raw, "127.0.0.1", port))
    return copas.wrap(raw), raw
  end

  local function echo(c, text)
    c:send(text .. "\n")
    return c:receive("*l")
  end

  -- Step until done() holds or `secs` pass.
  local function step_until(done, secs)
    local limit = hwtimer.now() + (secs or 10)
    while not done() and hwtimer.now() < limit do glue.step(timer, 0.01, opts) end
    return done()
  end

  before_each(function()
    port = port or echo_server()
    timer = hwtimer.new()
    errors = {}
    opts = { on_error = function(err, t, trace) errors[#errors + 1] = { err = err, t = t, trace = trace } end }
  end)
  after_each(function() timer:close() end)

  -- N callbacks, the i-th due at delay(i), each a round trip on its own
  -- connection; steps until all are back and checks every line.
  local function round_trips(N, delay)
    local got, n = {}, 0
    for i = 1, N do
      timer:schedule(delay(i), function(_, id)
        local c, raw = connect()
        got[id] = echo(c, "line " .. id)
        raw:close()
        n = n + 1
      end, i)
    end
    assert.is_true(step_until(function() return n == N end))
    for i = 1, N do assert.equal("line " .. i, got[i]) end
    assert.same({}, errors)
  end

  it("200 callbacks each connect, send a line and read its echo", function()
    round_trips(200, function() return 0.005 end)
  end)

  it("with gc_step, 200 callbacks spread over 0.3 s each make a round trip; the gaps collect", function()
    opts.gc_step = 0.002
    local freed = freed_while(function() round_trips(200, function(i) return 0.005 + i * 0.0015 end) end)
    assert.is_true(freed > 1000, ("freed %.0f KB"):format(freed))
  end)

  it("a connection kept by one callback is still open for the next", function()
    local kept, answers = nil, {}
    timer:every(0.01, function(t)
      if not kept then kept = connect() end
      answers[#answers + 1] = echo(kept, "again " .. #answers)
      if #answers == 3 then t:cancel() end
    end)
    assert.is_true(step_until(function() return #answers == 3 end))
    assert.same({ "again 0", "again 1", "again 2" }, answers)
    assert.same({}, errors)
  end)

  it("a callback waiting 0.2 s for a reply holds back none of the 100 due with it", function()
    -- a server that answers only when told to
    local slow = assert(socket.bind("127.0.0.1", 0))
    local _, slow_port = slow:getsockname()
    local held
    copas.addserver(slow, function(skt)
      held = copas.wrap(skt)
      held:receive("*l")
      while held do copas.receive(skt, 0) end -- never returns data: waits for the close below
    end)
    local late, waiter_done, others_done = {}, nil, nil
    timer:schedule(0.02, function()
      local raw = socket.tcp()
      assert(copas.connect(raw, "127.0.0.1", slow_port))
      local c = copas.wrap(raw)
      c:send("wait\n")
      c:receive("*l") -- until the server's side is closed
      waiter_done = hwtimer.now()
      raw:close()
    end)
    hundred_due(timer, late, function(at) others_done = at end)
    timer:schedule(0.22, function()
      local h = held
      held = nil
      h.socket:close()
    end)
    assert.is_true(step_until(function() return waiter_done ~= nil end))
    slow:close()
    assert.same({}, errors)
    assert.equal(100, #late)
    assert.truthy(others_done < waiter_done)
    assert.is_true(waiter_done - others_done > 0.15)
    assert.is_true(percentile(late, 0.99) < 0.05, "p99 lateness " .. percentile(late, 0.99))
  end)

  it("an error after a yield reaches on_error with the handle and a traceback", function()
    local t = timer:schedule(0.005, function()
      local c, raw = connect()
      echo(c, "x")
      raw:close()
      error("after a yield")
    end)
    assert.is_true(step_until(function() return #errors == 1 end))
    assert.equal(t, errors[1].t)
    assert.matches("after a yield", errors[1].err)
    assert.matches("stack traceback", errors[1].trace)
    assert.equal(1, timer:stats().errors)
  end)

  it("a periodic timeout whose callback yields never overlaps itself", function()
    local running, overlap, runs = 0, 0, 0
    local t = timer:every(0.005, function()
      running = running + 1
      if running > 1 then overlap = overlap + 1 end
      local c, raw = connect()
      echo(c, "tick")
      raw:close()
      runs = runs + 1
      running = running - 1
    end)
    assert.is_true(step_until(function() return runs >= 5 end))
    t:cancel()
    assert.equal(0, overlap)
  end)

  it("keeps nothing of a timer between steps: a dropped timer is collected", function()
    local t2 = hwtimer.new()
    local n = 0
    t2:schedule(0.005, function() local c, raw = connect(); echo(c, "x"); raw:close(); n = n + 1 end)
    t2:schedule(0.005, function() n = n + 1 end)
    local limit = hwtimer.now() + 5
    while n < 2 and hwtimer.now() < limit do glue.step(t2, 0.01, opts) end
    assert.equal(2, n)
    local ref = setmetatable({ t2 }, { __mode = "v" })
    t2 = nil -- luacheck: ignore 311 (the last reference: the timer may be collected)
    collectgarbage()
    collectgarbage()
    assert.is_nil(ref[1])
  end)

  it("rejects bad options naming them, in step and in loop", function()
    assert.has_error(function() glue.step(timer, 0.01, { batch = 1.5 }) end,
      "bad argument #3 to 'step' (option 'batch': positive integer expected)")
    assert.has_error(function() glue.loop(timer, 0.01, { batch = math.huge }) end,
      "bad argument #3 to 'loop' (option 'batch': positive integer expected)")
    assert.has_error(function() glue.step(timer, 0.01, { on_error = "x" }) end,
      "bad argument #3 to 'step' (option 'on_error': function expected)")
    assert.has_error(function() glue.loop(timer, 0.01, { bogus = true }) end,
      "bad argument #3 to 'loop' (unknown option 'bogus')")
    assert.has_error(function() glue.loop(timer, 0.01, "fast") end,
      "bad argument #3 to 'loop' (table expected, got string)")
    assert.has_error(function() glue.step(timer, -1) end,
      "bad argument #2 to 'step' (non-negative number of seconds expected)")
    -- (at the caller's line: step's own check raises past itself)
    require("spec.helpers").raises_at("02%-yield_loops_spec", function() local r = glue.step(timer, -1) return r end,
      "bad argument #2 to 'step' (non-negative number of seconds expected)")
    assert.has_error(function() glue.step(timer, { batch = 10 }) end,
      "bad argument #2 to 'step' (non-negative number of seconds expected)")
    for _, v in ipairs({ math.huge, 0 / 0 }) do -- (a wait for ever is no wait copas can make: nil is)
      assert.has_error(function() glue.step(timer, v) end,
        "bad argument #2 to 'step' (non-negative number of seconds expected)")
    end
    assert.has_error(function() glue.loop(nil) end,
      "bad argument #1 to 'loop' (hwtimer.timer expected, got nil)")
  end)

  it("runs more callbacks than a step's batch over the next steps, in order", function()
    local ran = {}
    for i = 1, 25 do timer:schedule(0.001 * (i % 3), function() ran[#ran + 1] = i end) end
    local o = { batch = 10, on_error = opts.on_error }
    local limit, n = hwtimer.now() + 5, 0
    while #ran < 25 and hwtimer.now() < limit do
      local started = glue.step(timer, 0.01, o)
      assert.is_true(started <= 10, "a step started " .. started)
      n = n + started
    end
    assert.equal(25, #ran)
    assert.equal(25, n)
    assert.same({}, errors)
  end)

  it("loop(timer) returns once a callback closes the timer", function()
    local n = 0
    timer:schedule(0.01, function() local c, raw = connect(); echo(c, "x"); raw:close(); n = n + 1 end)
    timer:schedule(0.05, function(t) t:timer():close() end)
    glue.loop(timer, 0.01, opts)
    assert.equal(1, n)
    assert.same({}, errors) -- (the close is no callback's error)
    assert.equal(0, glue.step(timer)) -- harmless after close
  end)
end)
