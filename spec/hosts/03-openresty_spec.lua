-- hwtimer.ngx inside a real nginx (Debian's nginx + libnginx-mod-http-lua),
-- started on a loopback port with its own prefix and config, always stopped
-- after. Requests schedule 10,000 timeouts (a quarter cancelled); a later
-- request reads back how many fired and how many were cancelled: both exact.
-- Then what the glue adds to the timer: its options' messages, its error
-- lines, and the timer methods its object forwards (count, for retry).
-- nginx runs LuaJIT, so this runs in the LuaJIT spec run, where the module
-- built for LuaJIT is on HWT_NGX_CPATH.
local N = require("spec.nginx")
local socket = require("socket")
local helpers = require("spec.helpers")

local CONF = [[
@HEAD@
events { worker_connections 64; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  lua_max_pending_timers 16;   # one per timeout would never fit
  lua_socket_read_timeout 300ms; # (the waker's read must not time out: it sets its own)
  init_worker_by_lua_block {
    package.loaded.hwt_state = {
      timer = assert(require("hwtimer.ngx").new({ tick = 0.001 })),
      scheduled = 0, cancelled = 0, fired = 0, early = 0, twice = 0, seen = {},
    }
    package.loaded.hwt_broken = assert(require("hwtimer.ngx").new({
      on_error = function() error("handler broke") end,
    }))
    package.loaded.hwt_plain = assert(require("hwtimer.ngx").new({ wake_socket = false }))
    package.loaded.hwt_spaced = { d = assert(require("hwtimer.ngx").new()), fired = 0 }
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /schedule {
      content_by_lua_block {
        local hwtimer = require("hwtimer")
        local st = package.loaded.hwt_state
        local n = tonumber(ngx.var.arg_n)
        for i = 1, n do
          local id = st.scheduled + 1
          local t = assert(st.timer:schedule(math.random() * 0.3, function(h, key)
            if st.seen[key] then st.twice = st.twice + 1 end
            st.seen[key] = true
            if hwtimer.now() < h:deadline() then st.early = st.early + 1 end
            st.fired = st.fired + 1
          end, id))
          st.scheduled = id
          if i % 4 == 0 and t:cancel() then st.cancelled = st.cancelled + 1 end
        end
        ngx.say(st.scheduled, " ", st.cancelled)
      }
    }
    location = /spaced {   # n timeouts 1 ms apart, due from 20 ms on; then /spaced_fired
      content_by_lua_block {
        local sp = package.loaded.hwt_spaced
        sp.fired = 0
        for i = 1, tonumber(ngx.var.arg_n) do
          assert(sp.d:schedule(0.02 + i * 0.001, function() sp.fired = sp.fired + 1 end))
        end
        ngx.say("ok")
      }
    }
    location = /spaced_fired { content_by_lua_block { ngx.say(package.loaded.hwt_spaced.fired) } }
    location = /burst {   # n counting callbacks due at one instant: how many ran, and the handovers meanwhile
      content_by_lua_block {
        local sp, n = package.loaded.hwt_spaced, tonumber(ngx.var.arg_n)
        local ran, before = 0, sp.d:stats().handovers
        for _ = 1, n do assert(sp.d:schedule(0.05, function() ran = ran + 1 end)) end
        for _ = 1, 200 do
          if ran == n then break end
          ngx.sleep(0.01)
        end
        ngx.say(ran, " ", sp.d:stats().handovers - before)
      }
    }
    location = /sparse {   # 3 series every 0.3 s for 1.25 s: runs, the dispatcher's sleeps and those that woke to nothing
      content_by_lua_block {
        local d, runs = package.loaded.hwt_spaced.d, 0
        local s0, series = d:stats(), {}
        for i = 1, 3 do
          series[i] = assert(d:every({ interval = 0.3, first = 0.1 * i }, function() runs = runs + 1 end))
        end
        ngx.sleep(1.25)
        for i = 1, 3 do series[i]:cancel() end
        local s1 = d:stats()
        ngx.say(runs, " ", s1.wakeups - s0.wakeups, " ", s1.empty_wakeups - s0.empty_wakeups)
      }
    }
    location = /every {   # the table form of every, through the dispatcher
      content_by_lua_block {
        local st = package.loaded.hwt_state
        st.beats = 0
        local t, err = st.timer:every({ interval = 0.005, rate = true, jitter = 0.2 }, function(h)
          st.beats = st.beats + 1
          if st.beats == 5 then h:cancel() end
        end)
        ngx.say(t and "ok" or ("refused: " .. tostring(err)))
      }
    }
    location = /beats {
      content_by_lua_block { ngx.say(package.loaded.hwt_state.beats or -1) }
    }
    location = /options {   # the messages of new's argument checks, one a line
      content_by_lua_block {
        local new = require("hwtimer.ngx").new
        local cases = {
          { { max_runners = -1 } }, { { max_runners = 2.5 } }, { { max_runners = 1 } }, { "x" },
          { nil, 0 }, { { slice = 0 / 0 } }, { { ticks = 1 } }, { { wake_socket = 1 } },
        }
        -- the defaults docs/hosts.md gives
        local d = assert(new())
        ngx.say("defaults: ", d.runner_runs, " ", d.slice, " ", d.max_wait, " ", d.exit_max, " ", d.exit_time, " ",
          tostring(d.wake_socket), " ", tostring(d.max_runners))
        d:close()
        for _, c in ipairs(cases) do
          local ok, err = pcall(function() local d2 = new(c[1], c[2]) return d2 end) -- (the error names this line)
          local at = tostring(err):match("^content_by_lua%(nginx%.conf:%d+%):%d+: ") and "" or "(not the caller's line) "
          ngx.say(ok and "accepted" or at .. (tostring(err):gsub("^[^\n]-:%d+: ", "")))
          if ok then err:close() end
        end
      }
    }
    location = /raise {   # a callback that raises: to the default on_error, or to one that raises too
      content_by_lua_block {
        local d = ngx.var.arg_broken and package.loaded.hwt_broken or package.loaded.hwt_state.timer
        d:schedule(0.001, function() error("kaput") end)
        ngx.say("ok")
      }
    }
    location = /wake {   # a timeout on each timer; then whether each wakes on its wake socket
      content_by_lua_block {
        local now = require("hwtimer").now
        local st = package.loaded.hwt_state
        st.woke = {}
        for _, name in ipairs({ "hwt_state", "hwt_plain" }) do
          local d = name == "hwt_state" and st.timer or package.loaded[name]
          local due = now() + 0.02
          d:schedule(0.02, function() st.woke[#st.woke + 1] = now() >= due and name or "early" end)
          ngx.say(name, " ", tostring(d:stats().wake_socket))
        end
      }
    }
    location = /woke {
      content_by_lua_block { table.sort(package.loaded.hwt_state.woke) ngx.say(table.concat(package.loaded.hwt_state.woke, " ")) }
    }
    location = /errors {
      content_by_lua_block {
        ngx.say(package.loaded.hwt_state.timer:stats().errors, " ",
                package.loaded.hwt_broken:stats().errors)
      }
    }
    location = /retry {   # hwtimer.retry on the glue's object: an attempt fails, the next succeeds
      content_by_lua_block {
        local st = package.loaded.hwt_state
        local n = 0
        assert(require("hwtimer").retry(st.timer, function() n = n + 1 return n >= 2 end,
          { delay = 0.005, jitter = 0, on_success = function(_, attempt) st.retried = attempt end }))
        ngx.say("ok")
      }
    }
    location = /retry_stats {
      content_by_lua_block {
        local st, s = package.loaded.hwt_state, package.loaded.hwt_state.timer:stats()
        ngx.say(st.retried or -1, " ", s.retry_started, " ", s.retry_succeeded, " ", s.retry_failed)
      }
    }
    location = /stats {
      content_by_lua_block {
        local st = package.loaded.hwt_state
        ngx.say(st.scheduled, " ", st.cancelled, " ", st.fired, " ", st.early, " ",
                st.twice, " ", st.timer:pending())
      }
    }
  }
}
]]

local function get(port, path)
  local status, body = N.get(port, path)
  return status, body
end

describe("OpenResty: hwtimer.ngx in a real nginx", function()
  if N.skip_unless_ready(pending) then return end

  local server, port

  setup(function()
    port = N.free_port()
    server = N.start(N.config(CONF, { PORT = port }))
    N.wait_listening(port, "/stats")
  end)

  teardown(function() server.stop() end)

  it("runs 10,000 timeouts exactly, with cancels, on one nginx timer", function()
    for _ = 1, 10 do
      local status, body = get(port, "/schedule?n=1000")
      assert.equal(200, status, body)
    end
    local stats
    for _ = 1, 100 do
      stats = N.numbers(select(2, get(port, "/stats")))
      if stats[3] + stats[2] >= stats[1] then break end
      socket.sleep(0.05)
    end
    local scheduled, cancelled, fired, early, twice, pending = stats[1], stats[2], stats[3],
      stats[4], stats[5], stats[6]
    assert.equal(10000, scheduled)
    assert.equal(2500, cancelled)
    assert.equal(7500, fired)
    assert.equal(0, early)
    assert.equal(0, twice)
    assert.equal(0, pending)
    local log = server.log()
    assert.is_nil(log:find("[error]", 1, true), log)
  end)

  it("runs a periodic timeout given as a table, cancelled from its callback", function()
    local status, body = get(port, "/every")
    assert.equal(200, status, body)
    assert.equal("ok\n", body)
    local beats
    for _ = 1, 100 do
      beats = tonumber((select(2, get(port, "/beats"))))
      if beats == 5 then break end
      socket.sleep(0.02)
    end
    assert.equal(5, beats)
  end)

  it("new() names a bad argument as hwtimer.new does", function()
    local status, body = get(port, "/options")
    assert.equal(200, status, body)
    assert.equal(table.concat({
      "defaults: 1000 0.002 1 10000 1 true " .. tostring(math.huge),
      "bad argument #1 to 'new' (option 'max_runners': positive integer expected)",
      "bad argument #1 to 'new' (option 'max_runners': positive integer expected)",
      "accepted", -- (max_runners = 1: one callback in progress at a time)
      "bad argument #1 to 'new' (table expected, got string)",
      "bad argument #2 to 'new' (positive number of seconds expected)",
      "bad argument #1 to 'new' (option 'slice': non-negative number expected)",
      "bad argument #1 to 'new' (unknown option 'ticks')",
      "bad argument #1 to 'new' (option 'wake_socket': boolean expected)",
    }, "\n") .. "\n", body)
  end)

  it("wakes on the timer's wake socket by default, on nginx's timers with wake_socket = false", function()
    local status, body = get(port, "/wake")
    assert.equal(200, status, body)
    assert.equal("hwt_state true\nhwt_plain false\n", body)
    local woke
    for _ = 1, 100 do
      woke = select(2, get(port, "/woke"))
      if woke ~= "\n" then break end
      socket.sleep(0.02)
    end
    socket.sleep(0.05)
    assert.equal("hwt_plain hwt_state\n", select(2, get(port, "/woke")))
  end)

  -- (hwtimer.ngx's timer is host_timed, and the dispatcher arms its datagram
  -- only for a wait of 2 ms or more or after a burst: a driver thread that
  -- woke at each of these deadlines, or sent a datagram for each, cost a
  -- thousand health checks spread over 0.5 s twice the CPU of ngx.timer.every)
  it("runs timeouts due 1 ms apart without the driver thread waking for each", function()
    local pid = server.worker_pids()[1]
    local function driver_switches() return helpers.thread_switches(pid) end
    local before = driver_switches()
    assert.equal(200, (get(port, "/spaced?n=400")))
    local fired
    for _ = 1, 100 do
      socket.sleep(0.02)
      fired = tonumber((select(2, get(port, "/spaced_fired"))))
      if fired == 400 then break end
    end
    assert.equal(400, fired)
    local woke = driver_switches() - before
    assert.is_true(woke < 100, woke .. " wake-ups of the driver thread for 400 deadlines 1 ms apart")
  end)

  -- (a runner reads the clock every 32nd callback and ends its slice after
  -- `slice`, 2 ms: 2,000 callbacks that only count take about that long)
  it("runs a burst of 2,000 quick callbacks in a few slices, not one each 32", function()
    local status, body = get(port, "/burst?n=2000")
    assert.equal(200, status, body)
    local ran, handovers = body:match("^(%d+) (%d+)\n$")
    assert.equal(2000, tonumber(ran), body)
    assert.is_true(tonumber(handovers) <= 10, handovers .. " handovers for 2,000 callbacks due at once")
  end)

  -- Each run is due 0.3 s ahead, above level 0 (51.2 ms blocks): the
  -- driver thread moves it down during the block before its own. The
  -- dispatcher sleeps to the run itself, not to that move.
  it("sleeps to the deadlines of sparse periodic timeouts, not to the wheel's moves", function()
    local status, body = get(port, "/sparse")
    assert.equal(200, status, body)
    local runs, sleeps, empty = body:match("^(%d+) (%d+) (%d+)\n$")
    assert.is_true(tonumber(runs) >= 10 and tonumber(runs) <= 12, body)
    assert.is_true(tonumber(sleeps) >= tonumber(runs), body)
    assert.is_true(tonumber(empty) <= 3, empty .. " of " .. sleeps .. " sleeps woke to nothing due for " .. runs .. " runs")
  end)

  it("logs nothing while the timers wait on their wake sockets with nothing due", function()
    local before = #server.log()
    socket.sleep(1.5) -- five of the read timeouts nginx is given here
    local log = server.log():sub(before + 1)
    assert.is_nil(log:find("timed out", 1, true), log)
    assert.is_nil(log:find("[error]", 1, true), log)
  end)

  it("logs a callback's error, and an on_error's own, as timer:dispatch() does; both count", function()
    assert.equal(200, (get(port, "/raise")))
    assert.equal(200, (get(port, "/raise?broken=1")))
    local errors
    for _ = 1, 100 do
      errors = N.numbers(select(2, get(port, "/errors")))
      if errors[1] >= 1 and errors[2] >= 1 then break end
      socket.sleep(0.02)
    end
    assert.same({ 1, 1 }, errors)
    local log = server.log()
    assert.matches("hwtimer: error in timeout callback: [^\n]*kaput\nstack traceback:", log)
    assert.matches("hwtimer: error in on_error: [^\n]*handler broke", log)
  end)

  it("forwards count: hwtimer.retry on the glue's object counts in its stats", function()
    assert.equal(200, (get(port, "/retry")))
    local s
    for _ = 1, 100 do
      s = N.numbers(select(2, get(port, "/retry_stats")))
      if s[1] ~= -1 then break end
      socket.sleep(0.02)
    end
    assert.same({ 2, 1, 1, 0 }, s)
  end)

  it("examples/openresty/nginx.conf runs as documented", function()
    if not N.cpath:find("build/jit", 1, true) then
      return pending("the example loads build/jit; this run tests an installed rock")
    end
    local f = assert(io.open("examples/openresty/nginx.conf"))
    local conf = f:read("*a"):gsub("8089", tostring(N.free_port()))
    f:close()
    local example_port = tonumber(conf:match("listen 127%.0%.0%.1:(%d+)"))
    local example = N.start(N.config(conf))
    local ok, err = pcall(function()
      N.wait_listening(example_port, "/stats")
      local status, body = get(example_port, "/later?after=0.05")
      assert.equal(200, status, body)
      assert.matches("scheduled, due in", body, 1, true)
      local stats
      for _ = 1, 50 do
        stats = select(2, get(example_port, "/stats"))
        if stats:find("fired 1", 1, true) then break end
        socket.sleep(0.05)
      end
      assert.matches("fired 1, pending 0", stats, 1, true)
      local metrics
      for _ = 1, 50 do   -- published each second
        metrics = select(2, get(example_port, "/metrics"))
        if metrics:find('hwtimer_timeouts_fired_total{timer="main",worker="0"} 1\n', 1, true) then break end
        socket.sleep(0.05)
      end
      assert.matches('\nhwtimer_timeouts_fired_total{timer="main",worker="0"} 1\n', metrics, 1, true)
      local ok, out = require("spec.helpers").promtool(metrics)
      assert.is_true(ok, out)
    end)
    example.stop()
    assert(ok, err)
  end)
end)

-- A worker that cannot open its wake socket (no file descriptor left while
-- the waker starts: they are held from just after new() until 0.3 s later)
-- says why, once, and runs its timeouts on nginx's timers.
local NO_FD = [[
@HEAD@
worker_rlimit_nofile 64;
events { worker_connections 16; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  init_worker_by_lua_block {
    package.loaded.d = assert(require("hwtimer.ngx").new())
    local held = {}
    repeat
      local f = io.open("/dev/null")
      held[#held + 1] = f
    until not f
    ngx.timer.at(0.3, function() for _, f in ipairs(held) do f:close() end end)
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /run { content_by_lua_block {
      local d, ran = package.loaded.d, 0
      for _ = 1, 3 do d:schedule(0.01, function() ran = ran + 1 end) end
      ngx.sleep(0.2)
      ngx.say(ran, " ", tostring(d:stats().wake_socket))
    } }
  }
}
]]

describe("OpenResty: hwtimer.ngx without a wake socket", function()
  if N.skip_unless_ready(pending) then return end

  it("says why in error.log, once, and runs its timeouts on nginx's timers", function()
    local port = N.free_port()
    local server = N.start(N.config(NO_FD, { PORT = port }))
    local ok, err = pcall(function()
      N.wait_listening(port, "/run")
      assert.equal("3 false\n", select(2, get(port, "/run")))
      local log = server.log()
      local _, lines = log:gsub("no wake socket", "")
      assert.equal(1, lines, log)
      assert.matches("[warn]", log, 1, true)
      assert.matches("hwtimer: no wake socket, waking on nginx's millisecond timers: "
        .. "hwtimer: cannot open a wake socket: Too many open files", log, 1, true)
    end)
    server.stop()
    assert(ok, err)
  end)
end)
