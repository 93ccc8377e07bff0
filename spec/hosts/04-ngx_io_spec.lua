-- spec: alone (requests served within p99 10 ms or 2x ngx.timer.at's; spec/run.sh -j runs it with nothing beside it)
-- hwtimer.ngx callbacks that do real I/O in a real nginx: cosockets to an
-- upstream and to a real redis-server, ngx.sleep, retry of a network call,
-- the crash reproducer of issue 10, every path that must wake the
-- dispatcher, requests served on time while the timer works, and worker exit
-- (quit and reload) with timeouts pending. Runs in the LuaJIT spec run.
local N = require("spec.nginx")
local socket = require("socket")
local helpers = require("spec.helpers")

local CONF = [[
@HEAD@
worker_rlimit_nofile @NOFILE@;
events { worker_connections 8192; }   # callbacks that wait each hold a connection or two
http {
  access_log off;
  lua_max_running_timers @MAXRUN@;
  lua_max_pending_timers 1048576;   # the peer round of /load (ngx.timer.at) holds tens of thousands
  lua_package_path "@LPATH@;/usr/share/lua/5.1/?.lua;;";
  lua_package_cpath "@CPATH@;;";
  init_worker_by_lua_block {
    package.loaded.timer = assert(require("hwtimer.ngx").new({ tick = 0.001, exit_max = @EXITMAX@, runner_runs = @RUNS@ }, 5))
    package.loaded.st = { ok = 0, err = 0, late = {}, woke = {}, rounds = 0 }
    package.loaded.small = assert(require("hwtimer.ngx").new({ max_runners = 2,
      on_error = function(err, t, tb) package.loaded.st.errs = (package.loaded.st.errs or 0) + 1
        package.loaded.st.tb = tb end }))
  }
  server {   # the upstream the callbacks talk to
    listen 127.0.0.1:@PONG@ backlog=4096;   # 2,000 connect at once: the default 511 overflows (SYNs dropped, retried after 1 s and 3 s)
    location = /pong { return 200 "pong"; }
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /crash {   # issue 10's reproducer, as a new user wrote it
      content_by_lua_block {
        package.loaded.timer:schedule(0.01, function()
          ngx.socket.tcp():connect("127.0.0.1", @CLOSED@)   -- a cosocket in a callback
        end)
        ngx.say("ok")
      }
    }
    location = /io {   # n callbacks, each an HTTP round trip to the upstream
      content_by_lua_block {
        local st, n = package.loaded.st, tonumber(ngx.var.arg_n)
        for i = 1, n do
          package.loaded.timer:schedule(0.01 + (i % 10) * 0.001, function()
            local sock = ngx.socket.tcp()
            sock:settimeout(5000)
            local ok, err = sock:connect("127.0.0.1", @PONG@)
            if ok then ok, err = sock:send("GET /pong HTTP/1.0\r\nHost: x\r\n\r\n") end
            local body
            if ok then body, err = sock:receive("*a") end
            sock:close()
            if body and body:find("pong", 1, true) then st.ok = st.ok + 1 else
              st.err = st.err + 1
              st.why = st.why or tostring(err)
            end
          end)
        end
        ngx.say("scheduled ", n)
      }
    }
    location = /redis {   # n callbacks, each an INCR on a real redis-server
      content_by_lua_block {
        local st, n = package.loaded.st, tonumber(ngx.var.arg_n)
        local redis = require("nginx.redis")
        for _ = 1, n do
          package.loaded.timer:schedule(0.005, function()
            local r = redis:new()
            r:set_timeout(5000)
            local ok = r:connect("127.0.0.1", @REDIS@)
            local v = ok and r:incr("hwtimer:count")
            if v then st.ok = st.ok + 1 else st.err = st.err + 1 end
            if ok then r:set_keepalive(10000, 16) end
          end)
        end
        ngx.say("scheduled ", n)
      }
    }
    location = /sleepy {   # one callback sleeps 0.2 s; 1,000 due with it must not wait
      content_by_lua_block {
        local hwtimer = require("hwtimer")
        local st = package.loaded.st
        st.late = {}
        package.loaded.timer:schedule(0.05, function() ngx.sleep(0.2) st.slept = true end)
        for _ = 1, 1000 do
          package.loaded.timer:schedule(0.05, function(t)
            st.late[#st.late + 1] = hwtimer.now() - t:deadline()
          end)
        end
        ngx.say("ok")
      }
    }
    location = /retry {   # a network call that fails twice, then succeeds
      content_by_lua_block {
        local hwtimer = require("hwtimer")
        local st = package.loaded.st
        st.retry = nil
        local r = hwtimer.retry(package.loaded.timer, function(attempt)
          local sock = ngx.socket.tcp()
          sock:settimeout(2000)
          local ok, err = sock:connect("127.0.0.1", attempt <= 2 and @CLOSED@ or @PONG@)
          if not ok then return nil, err end
          sock:send("GET /pong HTTP/1.0\r\nHost: x\r\n\r\n")
          local body = sock:receive("*a")
          sock:close()
          return body and body:find("pong", 1, true) and attempt
        end, { delay = 0.01, jitter = 0, on_success = function(v) st.retry = v end })
        st.r = r
        ngx.say("ok")
      }
    }
    location = /wake {   # each path that makes the next event earlier than the dispatcher's sleep
      content_by_lua_block {
        local hwtimer = require("hwtimer")
        local timer, st, kind = package.loaded.timer, package.loaded.st, ngx.var.arg_kind
        local start = hwtimer.now()
        local function note(t) st.woke[kind] = hwtimer.now() - t:deadline() end
        if kind == "schedule" then
          timer:schedule(0.05, note)
        elseif kind == "raw" then
          timer.timer:schedule(0.05, note)
        elseif kind == "every" then
          timer:every(0.05, function(t) note(t) t:cancel() end)
        elseif kind == "reset" then
          local t = timer:schedule(30, note)
          t:reset(0.05)
        elseif kind == "retry" then
          hwtimer.retry(timer.timer, function() st.woke[kind] = hwtimer.now() - start return true end)
        elseif kind == "rearm" then
          timer:schedule(0.01, function(t)
            if not st.rearmed then st.rearmed = true t:reset(0.05) else note(t) end
          end)
        end
        ngx.say("ok")
      }
    }
    location = /load {   # a request's own timer work: n timeouts, a quarter cancelled
      content_by_lua_block {
        local timer, st, n = package.loaded.timer, package.loaded.st, tonumber(ngx.var.arg_n)
        if ngx.var.arg_sys == "ngx" then   -- the peer: the same callbacks run by ngx.timer.at (which cannot cancel)
          local function count(premature) if not premature then st.peer = (st.peer or 0) + 1 end end
          for _ = 1, n * 3 / 4 do assert(ngx.timer.at(0.05 + math.random() * 0.25, count)) end
          ngx.say("ok")
          return
        end
        for i = 1, n do
          local t = timer:schedule(0.05 + math.random() * 0.25, function() st.rounds = st.rounds + 1 end)
          if i % 4 == 0 then t:cancel() end
        end
        ngx.say("ok")
      }
    }
    location = /park_full {   # the small timer's 2 runners busy for 0.5 s, and 5 timeouts far ahead
      content_by_lua_block {
        local small = package.loaded.small
        for _ = 1, 2 do small:schedule(0, function() ngx.sleep(0.5) end) end
        for i = 1, 5 do
          small:schedule(3600, function(t, id)
            ngx.log(ngx.WARN, "small at exit ", id, " state=", t:state())
          end, i)
        end
        ngx.sleep(0.05) -- (both runners under way)
        ngx.say("parked")
      }
    }
    location = /park {   # n timeouts far ahead, each logging if it runs at exit
      content_by_lua_block {
        local n = tonumber(ngx.var.arg_n)
        for i = 1, n do
          package.loaded.timer:schedule(3600, function(t, id)
            if id <= 3 then
              ngx.log(ngx.WARN, "premature run ", id, " exiting=", tostring(ngx.worker.exiting()),
                      " state=", t:state())
            end
          end, i)
        end
        ngx.say("parked ", n)
      }
    }
    location = /exitfns {   # functions for the worker's exit: one waits, one not, one taken back, one raises
      content_by_lua_block {
        local timer = package.loaded.timer
        local function say(...) ngx.log(ngx.WARN, "exit function ", table.concat({ ... }, " ")) end
        timer:at_exit(function(a, b, c)
          say("start A")
          ngx.sleep(0.3)
          say("A", a, tostring(b), c, "exiting=" .. tostring(ngx.worker.exiting()), "pending=" .. timer:pending())
        end, 1, nil, 3)
        timer:at_exit(function() say("B") end)
        local h = timer:at_exit(function() say("C") end)
        local first, second = h:cancel(), h:cancel()
        timer:at_exit(function() error("boom at exit") end)
        for _, name in ipairs({ "E", "F", "G", "H" }) do timer:at_exit(function() say("start " .. name) end) end
        local ok, err = pcall(function() local h2 = timer:at_exit(42) return h2 end) -- (the error names this line)
        ngx.say(tostring(first), " ", tostring(second), " ", tostring(ok), " ", err)
      }
    }
    location = /sleepers {   # n callbacks due at once, each waiting 2 s
      content_by_lua_block {
        for _ = 1, tonumber(ngx.var.arg_n) do
          package.loaded.timer:schedule(0, function() ngx.sleep(2) end)
        end
        ngx.say("scheduled")
      }
    }
    location = /stream {   # n callbacks due over `span` s, each waiting 1 s; their lateness kept
      content_by_lua_block {
        local hwtimer = require("hwtimer")
        local st, n, span = package.loaded.st, tonumber(ngx.var.arg_n), tonumber(ngx.var.arg_span)
        local burst = tonumber(ngx.var.arg_burst) or 1
        st.stream = {}
        for i = 1, n do
          package.loaded.timer:schedule(0.05 + span * (i - i % burst) / n, function(t)
            st.stream[#st.stream + 1] = hwtimer.now() - t:deadline()
            ngx.sleep(1)
          end)
        end
        ngx.say("scheduled")
      }
    }
    location = /stream_stats {
      content_by_lua_block {
        local late = package.loaded.st.stream or {}
        table.sort(late)
        local s = package.loaded.timer:stats()
        ngx.say(#late, " ", late[math.max(1, math.ceil(#late * 0.99))] or -1, " ", late[#late] or -1, " ",
                s.handovers, " ", ngx.timer.running_count())
      }
    }
    location = /beat {   # a periodic callback that waits 1 s in each run
      content_by_lua_block {
        package.loaded.timer:every(0.05, function(t)
          ngx.log(ngx.WARN, "beat call exiting=", tostring(ngx.worker.exiting()))
          ngx.sleep(1)
          ngx.log(ngx.WARN, "beat run ended")
        end)
        ngx.say("beating")
      }
    }
    location = /mixed {   # the pool at its maximum: callbacks that yield, raise or not
      content_by_lua_block {
        local st, small, n = package.loaded.st, package.loaded.small, tonumber(ngx.var.arg_n)
        st.mixed, st.twice, st.errs, st.overlap, st.beats, st.backlog = {}, 0, 0, 0, 0, 0
        for i = 1, n do
          small:schedule(0.01, function(t, id)
            if st.mixed[id] then st.twice = st.twice + 1 end
            st.mixed[id] = true
            if id % 3 == 0 then ngx.sleep(0.005) elseif id % 3 == 1 then error("boom " .. id) end
          end, i)
        end
        local inside = false
        small:every(0.002, function(t)
          if inside then st.overlap = st.overlap + 1 end
          inside = true
          ngx.sleep(0.01)   -- longer than the interval: the next run waits for this one
          inside = false
          st.beats = st.beats + 1
          if st.beats == 5 then t:cancel() end
        end)
        ngx.sleep(0.05)
        local s = small:stats()
        st.backlog, st.maxrunners = s.due or -1, s.runners_peak
        ngx.say("ok")
      }
    }
    location = /mixed_stats {
      content_by_lua_block {
        local st, s = package.loaded.st, package.loaded.small:stats()
        local ran = 0
        for _ in pairs(st.mixed) do ran = ran + 1 end
        ngx.say(ran, " ", st.twice, " ", st.errs, " ", st.overlap, " ", st.beats, " ", st.backlog, " ",
                st.maxrunners, " ", s.runners, " ", s.pending, " ", s.errors, " ",
                st.tb and st.tb:find("boom", 1, true) and st.tb:find("traceback", 1, true) and 1 or 0)
      }
    }
    location = /closeraw {   # a callback closes the timer itself, behind the glue's back
      content_by_lua_block {
        local d = assert(require("hwtimer.ngx").new())
        package.loaded.st.closed = false
        d:schedule(0.01, function() d.timer:close() package.loaded.st.closed = true end)
        d:schedule(0.02, function() end)
        ngx.say("ok")
      }
    }
    location = /takefault {   # take raises once (as out of memory would) on a timer still usable
      content_by_lua_block {
        local d = assert(require("hwtimer.ngx").new())
        local raw, failed, which = d.timer, false, ngx.var.arg_fn
        d.timer = setmetatable({}, { __index = function(_, k)
          local f = raw[k]
          return function(_, ...)
            if k == which and not failed then
              failed = true
              error("not enough memory")
            end
            return f(raw, ...)
          end
        end })
        local st = package.loaded.st
        st.faulted = 0
        local beats = 0
        d:every(0.005, function(t) beats = beats + 1 end) -- due first: the first done is its
        for _ = 1, 3 do d:schedule(0.01, function() st.faulted = st.faulted + 1 end) end
        ngx.sleep(0.25)
        ngx.say(st.faulted, " ", tostring(failed), " ", d.running and 1 or 0, " ", beats >= 5 and "beating" or beats)
        d:close()
      }
    }
    location = /closed {
      content_by_lua_block { ngx.say(package.loaded.st.closed and 1 or 0) }
    }
    location = /dclose {   # d:close(): stopped, its pending timeouts dropped, nothing returned
      content_by_lua_block {
        local d = assert(require("hwtimer.ngx").new())
        d:schedule(3600, function() end)
        ngx.say(select("#", d:close()), " ", tostring(d))
        local ok, err = pcall(d.schedule, d, 1, function() end)
        ngx.say(tostring(ok), " ", tostring(err):match("attempt to use a stopped timer") or tostring(err))
      }
    }
    location = /stats {
      content_by_lua_block {
        local st, s = package.loaded.st, package.loaded.timer:stats()
        local late, woke = st.late, {}
        table.sort(late)
        for k, v in pairs(st.woke) do woke[#woke + 1] = k .. "=" .. string.format("%.6f", v) end
        ngx.say(st.ok, " ", st.err, " ", #late, " ", late[math.max(1, math.ceil(#late * 0.99))] or -1,
                " ", st.slept and 1 or 0, " ", st.retry or -1, " ", s.pending, " ", s.runners, " ",
                st.rounds, " ", s.fired, " ", s.errors, " ", s.runners_peak)
        ngx.say(table.concat(woke, " "))
        ngx.say(st.why or "")
      }
    }
  }
}
]]

local function stats(port)
  local _, body = N.get(port, "/stats")
  local first, second, why = body:match("^([^\n]*)\n([^\n]*)\n([^\n]*)")
  local n = N.numbers(first)
  local woke = {}
  for k, v in second:gmatch("(%w+)=([%d%.%-e]+)") do woke[k] = tonumber(v) end
  return { ok = n[1], err = n[2], nlate = n[3], p99 = n[4], slept = n[5], retry = n[6],
           pending = n[7], runners = n[8], rounds = n[9], fired = n[10], errors = n[11], peak = n[12],
           woke = woke, why = why }
end

local function wait_for(port, pred, secs)
  local limit = socket.gettime() + (secs or 10)
  local s
  repeat
    s = stats(port)
    if pred(s) then return s end
    socket.sleep(0.02)
  until socket.gettime() > limit
  return s
end

-- CPU seconds (user + system) a process has used, from /proc.
local function cpu_seconds(pid)
  local f = assert(io.open("/proc/" .. pid .. "/stat"))
  local line = f:read("*l")
  f:close()
  local fields = {}
  for x in line:gsub("^.-%) ", ""):gmatch("%S+") do fields[#fields + 1] = x end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- utime, stime in clock ticks
end

local function p99(list)
  table.sort(list)
  return list[math.ceil(#list * 0.99)]
end

describe("OpenResty: callbacks that do I/O (hwtimer.ngx)", function()
  if N.skip_unless_ready(pending) then return end

  local ngx_, redis, port

  local function start(exit_max, max_running, runner_runs)
    port = N.free_port()
    ngx_ = N.start(N.config(CONF, { PORT = port, PONG = N.free_port(), CLOSED = N.free_port(),
                                   REDIS = redis.port, EXITMAX = exit_max or 10000,
                                   MAXRUN = max_running or 256, RUNS = runner_runs or 1000,
                                   NOFILE = N.nofile() }))
    assert(N.wait_listening(port, "/ping"), ngx_.log())
  end

  -- /stream's n callbacks (due over span s, burst at once), each waiting 1 s:
  -- /stream_stats once all have run, or after 10 s
  local function stream(n, span, burst)
    assert.equal(200, (N.get(port, ("/stream?n=%d&span=%g&burst=%d"):format(n, span, burst))))
    local m
    local limit = socket.gettime() + 10
    repeat
      socket.sleep(0.1)
      m = N.numbers(select(2, N.get(port, "/stream_stats")))
    until m[1] >= n or socket.gettime() > limit
    return m
  end

  setup(function()
    redis = N.start_redis()
    start()
  end)

  teardown(function()
    if ngx_ then ngx_.stop() end
    redis.stop()
  end)

  it("survives issue 10's reproducer: a cosocket in a callback, the worker unchanged", function()
    local before = ngx_.worker_pids()
    for _ = 1, 5 do assert.equal(200, (N.get(port, "/crash"))) end
    socket.sleep(0.3)
    for _ = 1, 5 do assert.equal(200, (N.get(port, "/crash"))) end
    socket.sleep(0.3)
    assert.same(before, ngx_.worker_pids())
    local log = ngx_.log()
    assert.is_nil(log:find("exited on signal", 1, true), log)
    assert.is_nil(log:find("yield across", 1, true), log)
  end)

  it("runs 2,000 callbacks that each make an HTTP round trip through a cosocket", function()
    local s0 = stats(port)
    assert.equal(200, (N.get(port, "/io?n=2000")))
    local s = wait_for(port, function(s) return s.ok + s.err >= s0.ok + s0.err + 2000 end, 20)
    assert.equal(s0.ok + s0.err + 2000, s.ok + s.err, "callbacks that ran")
    assert.equal(s0.err, s.err, "round trips that failed; the first: " .. s.why)
    -- each waits on its own: the 2,000 due over 10 ms overlap by hundreds
    assert.is_true(s.peak >= 100, "callbacks waiting on I/O at once: " .. s.peak)
    -- 2,000 runners: handed over to fresh dispatchers, each confirmed
    local handovers = N.numbers(select(2, N.get(port, "/stream_stats")))[4]
    assert.is_true(handovers >= 1, "handovers: " .. handovers)
    local log = ngx_.log()
    assert.is_nil(log:find("cannot hand over", 1, true), log)
  end)

  it("runs 500 callbacks that each talk to a real redis-server (lua-resty-redis)", function()
    local s0 = stats(port)
    assert.equal(200, (N.get(port, "/redis?n=500")))
    local s = wait_for(port, function(s) return s.ok + s.err >= s0.ok + s0.err + 500 end, 20)
    assert.equal(s0.ok + 500, s.ok)
    assert.equal(s0.err, s.err)
    local c = socket.tcp()
    assert(c:connect("127.0.0.1", redis.port))
    c:send("GET hwtimer:count\r\n")
    assert.equal("$3", c:receive("*l"))
    assert.equal("500", c:receive("*l"))
    c:close()
  end)

  it("keeps 1,000 callbacks on time while one sleeps 0.2 s (p99 lateness <= 5 ms)", function()
    assert.equal(200, (N.get(port, "/sleepy")))
    local s = wait_for(port, function(s) return s.nlate >= 1000 and s.slept == 1 end, 10)
    assert.equal(1000, s.nlate)
    assert.equal(1, s.slept)
    assert.is_true(s.p99 <= 0.005, "p99 lateness " .. s.p99)
  end)

  it("d:close() stops the timer: its timeouts dropped, further schedules refused", function()
    local status, body = N.get(port, "/dclose")
    assert.equal(200, status, body)
    assert.equal("0 hwtimer.ngx (stopped, 0 pending, 0 runners)\nfalse attempt to use a stopped timer\n", body)
  end)

  it("loses nothing with the pool at its maximum: callbacks that yield, raise, repeat", function()
    assert.equal(200, (N.get(port, "/mixed?n=300")))
    local m
    for _ = 1, 200 do
      m = N.numbers(select(2, N.get(port, "/mixed_stats")))
      if m[1] >= 300 and m[5] >= 5 then break end
      socket.sleep(0.02)
    end
    assert.equal(300, m[1])            -- every accepted timeout ran
    assert.equal(0, m[2])              -- none twice
    assert.equal(100, m[3])            -- every error reached on_error
    assert.equal(0, m[4])              -- a periodic run never overlaps the previous one
    assert.equal(5, m[5])
    assert.is_true(m[6] > 0, "stats showed no backlog while the pool was full: " .. m[6])
    assert.equal(2, m[7])              -- max_runners waited at once, never more
    assert.is_true(m[8] <= 2, "runners over max_runners")
    assert.equal(0, m[9])              -- nothing left pending
    assert.equal(100, m[10])           -- errors counted in stats
    assert.equal(1, m[11])             -- on_error got a traceback
  end)

  it("leaves quietly when a callback closes the timer behind the glue's back", function()
    assert.equal(200, (N.get(port, "/closeraw")))
    local closed
    for _ = 1, 100 do
      closed = select(2, N.get(port, "/closed"))
      if closed == "1\n" then break end
      socket.sleep(0.02)
    end
    assert.equal("1\n", closed)
    socket.sleep(0.1)
    local log = ngx_.log()
    assert.is_nil(log:find("stopped timer", 1, true), log)
    assert.is_nil(log:find("exited on signal", 1, true), log)
  end)

  for _, fn in ipairs({ "take", "done" }) do
    it("goes on after " .. fn .. " raised on a usable timer (out of memory): the error logged, nothing lost", function()
      local status, body = N.get(port, "/takefault?fn=" .. fn)
      assert.equal(200, status)
      assert.equal("3 true 1 beating\n", body) -- the three ran; the periodic one goes on
      local log = ngx_.log()
      assert.matches("hwtimer: [^\n]*not enough memory", log)
      -- (the runner that met the error ended as it should: no light thread died of another)
      assert.is_nil(log:find("runtime error", 1, true), log)
      assert.is_nil(log:find("thread aborted", 1, true), log)
    end)
  end

  it("retries a cosocket call that fails twice, then succeeds on the third attempt", function()
    assert.equal(200, (N.get(port, "/retry")))
    local s = wait_for(port, function(s) return s.retry > 0 end, 10)
    assert.equal(3, s.retry)
  end)

  for _, kind in ipairs({ "schedule", "raw", "every", "reset", "retry", "rearm" }) do
    it("wakes the sleeping dispatcher on time: " .. kind, function()
      -- something far ahead: the dispatcher sleeps for its max_wait (5 s)
      assert.equal(200, (N.get(port, "/load?n=1")))
      socket.sleep(0.5)
      assert.equal(200, (N.get(port, "/wake?kind=" .. kind)))
      local s = wait_for(port, function(s) return s.woke[kind] ~= nil end, 3)
      assert.is_not_nil(s.woke[kind], kind .. " never ran")
      assert.is_true(s.woke[kind] <= 0.005, kind .. " late by " .. s.woke[kind])
    end)
  end

  -- Requests' p99 while each schedules 1,000 timeouts (750 run), beside
  -- ngx.timer.at doing the same 750 in alternated rounds: at most 10 ms, or
  -- where this VM makes that impossible (10.4 and 22.2 ms in one CI run,
  -- its neighbours' doing) at most twice the peer's in the same run, as the
  -- benches hold their figures. Measured level with the peer, not ahead of
  -- it (pooled p99s: 2.2 / 4.1, 5.1 / 6.0, 4.4 / 3.9, 2.6 / 11.0, 9.5 / 4.4,
  -- 7.2 / 5.5 ms, hwtimer.ngx / ngx.timer.at).
  it("serves requests on time while the timer works (p99 <= 10 ms or 2x ngx.timer.at's doing the same, worker not pinned)", function()
    -- 300 requests with n timeouts each through sys, added to `times`; the worker's CPU share
    local function round(n, sys, times)
      local pid = ngx_.worker_pids()[1]
      local cpu0, t0 = cpu_seconds(pid), socket.gettime()
      for _ = 1, 300 do
        local status, _, took = N.get(port, "/load?n=" .. n .. "&sys=" .. sys)
        assert.equal(200, status)
        times[#times + 1] = took
      end
      socket.sleep(0.35) -- the last timeouts come due
      return (cpu_seconds(pid) - cpu0) / (socket.gettime() - t0)
    end
    -- (three rounds of each, alternated, their 900 requests pooled: one
    -- stall of the VM moves a round's p99 of 300, which is 3 requests; a
    -- miss is measured once more, as helpers.miss_twice does for the
    -- punctual specs, and a bound missed twice fails)
    assert.is_false(helpers.miss_twice(function()
      local s0 = stats(port)
      local base, peer, mine = {}, {}, {}
      local base_cpu, peer_cpu, cpu = round(0, "hwtimer", base), 0, 0
      for _ = 1, 3 do
        peer_cpu = math.max(peer_cpu, round(1000, "ngx", peer))
        cpu = math.max(cpu, round(1000, "hwtimer", mine))
      end
      local base_p99, peer_p99, p = p99(base), p99(peer), p99(mine)
      local s = wait_for(port, function(s) return s.rounds - s0.rounds >= 3 * 300 * 750 end, 10)
      assert.equal(3 * 300 * 750, s.rounds - s0.rounds)
      print(string.format("\n    requests p99 %.2f ms (ngx.timer.at doing the same: %.2f ms; no timer work: %.2f ms), " ..
        "worker CPU %.0f%% (%.0f%%, %.0f%%)", p * 1e3, peer_p99 * 1e3, base_p99 * 1e3, cpu * 100, peer_cpu * 100,
        base_cpu * 100))
      if p > math.max(0.010, 2 * peer_p99) then
        return ("request p99 %.2f ms, over 10 ms and twice ngx.timer.at's %.2f ms"):format(p * 1e3, peer_p99 * 1e3)
      end
      if cpu >= 0.9 then return "worker CPU share " .. cpu end
      return false
    end))
  end)

  it("runs pending callbacks once at quit, with ngx.worker.exiting() true, bounded by exit_max", function()
    ngx_.stop()
    ngx_ = nil
    start(1000)
    assert.equal(200, (N.get(port, "/park?n=100000")))
    assert.equal(200, (N.get(port, "/park_full")))
    local status, body = N.get(port, "/exitfns")
    assert.equal(200, status)
    assert.matches("^true false false content_by_lua%(nginx%.conf:%d+%):%d+: bad argument #1 to 'at_exit' " ..
      "%(function expected, got number%)", body)
    local master = ngx_.master_pid()
    local t0 = socket.gettime()
    ngx_.signal("quit")
    local gone
    for _ = 1, 100 do
      local alive = os.execute("kill -0 " .. master .. " 2>/dev/null")
      if not (alive == true or alive == 0) then
        gone = true
        break
      end
      socket.sleep(0.05)
    end
    local took = socket.gettime() - t0
    local log = ngx_.log()
    assert.is_true(gone, "nginx did not quit: " .. log)
    assert.is_true(took < 4, "quit took " .. took .. " s")
    assert.matches("premature run 1 exiting=true state=cancelled", log, 1, true)
    assert.matches("99000 pending timeouts dropped", log, 1, true)
    -- a timer at max_runners, its runners busy at the quit: its pending ones wait for a runner, and each runs once
    for i = 1, 5 do
      local _, times = log:gsub("small at exit " .. i .. " state=cancelled", "")
      assert.equal(1, times, "small's timeout " .. i .. " at exit: " .. log)
    end
    assert.is_nil(log:find("exited on signal", 1, true), log)
    -- the exit functions ran though exit_max dropped most timeouts: in
    -- order, the one that waits holding back none, with their arguments
    local a, b = log:find("exit function A 1 nil 3 exiting=true pending=0", 1, true), log:find("exit function B", 1, true)
    assert.is_truthy(a, log)
    assert.is_truthy(b, log)
    assert.is_true(b < a, "B waited for A")
    -- and they start in the order they were given (each one's first line)
    local at = {}
    for _, name in ipairs({ "A", "B", "E", "F", "G", "H" }) do
      at[#at + 1] = log:find("exit function " .. (name == "B" and "" or "start ") .. name, 1, true)
      assert.is_truthy(at[#at], name .. ": " .. log)
      if #at > 1 then assert.is_true(at[#at - 1] < at[#at], name .. " started before the one given before it") end
    end
    assert.is_nil(log:find("exit function C", 1, true), log)
    assert.matches("error in an exit function: [^\n]*boom at exit", log)
  end)

  it("hands pending timeouts to their callbacks at reload, but not one whose run still waits; the new worker starts empty", function()
    ngx_.stop()
    ngx_ = nil
    start()
    assert.equal(200, (N.get(port, "/park?n=10")))
    assert.equal(200, (N.get(port, "/beat")))
    for _ = 1, 100 do
      if ngx_.log():find("beat call exiting=false", 1, true) then break end
      socket.sleep(0.01)
    end
    local before = ngx_.worker_pids()
    assert.is_true(ngx_.signal("reload"))
    local after
    for _ = 1, 100 do
      after = ngx_.worker_pids()
      if #after == 1 and after[1] ~= before[1] and ngx_.log():find("premature run 3", 1, true) then
        break
      end
      socket.sleep(0.05)
    end
    assert.are_not.same(before, after)
    local log = ngx_.log()
    assert.matches("premature run 1 exiting=true state=cancelled", log, 1, true)
    assert.is_nil(log:find("exited on signal", 1, true), log)
    assert.is_true(N.wait_listening(port, "/ping"))
    assert.equal(0, stats(port).pending)
    -- the beat's run under way at the reload ends in the old worker, and is
    -- not called a second time beside it
    assert.is_nil(N.wait_gone(before, 5), "the old worker is still there")
    log = ngx_.log()
    assert.matches("beat run ended", log, 1, true)
    assert.is_nil(log:find("beat call exiting=true", 1, true), log)
    -- every pending timeout ran (10, under exit_max): no warning of any dropped
    assert.is_nil(log:find("pending timeouts dropped", 1, true), log)
  end)

  -- Callbacks that wait keep their timer contexts running: with a steady
  -- stream of them the handed-over contexts reach lua_max_running_timers,
  -- and nginx drops each fresh dispatcher after that.
  -- (a round's p99 of 4,000 is its worst burst of 200: one stall of the VM
  -- moves it, so a miss is measured once more, in a fresh nginx, as
  -- helpers.miss_twice does for the punctual specs; missed twice, it fails)
  it("keeps callbacks on time at lua_max_running_timers: a handover nginx would drop is not tried again and again", function()
    assert.is_false(helpers.miss_twice(function()
      ngx_.stop()
      ngx_ = nil
      start(10000, 4, 50) -- a handover every 50 runners: 80 tried
      local m = stream(4000, 2, 200)
      print(string.format("\n    4,000 callbacks waiting 1 s each, 200 due at once every 0.1 s, 4 running timers at most, " ..
        "runner_runs 50: lateness p99 %.1f ms, max %.1f ms, %d handovers", m[2] * 1e3, m[3] * 1e3, m[4]))
      local log = ngx_.log()
      local _, alerts = log:gsub("lua_max_running_timers are not enough", "")
      print(string.format("    handovers nginx dropped (its alerts): %d", alerts))
      assert.equal(4000, m[1])
      -- one tried a second, not one every 50 runners (each an alert in error.log)
      assert.is_true(alerts <= 5, "handovers nginx dropped: " .. alerts)
      -- and hwtimer.ngx says so once a worker, the first time (docs/hosts.md)
      local _, warned = log:gsub("hwtimer: cannot hand over to a fresh dispatcher %(this one goes on%)", "")
      assert.equal(alerts > 0 and 1 or 0, warned, log)
      assert.is_nil(log:find("without delayed events patch", 1, true), log) -- (ngx.sleep(0) in Debian's nginx)
      assert.is_nil(log:find("exited on signal", 1, true), log)
      return m[2] > 0.02 and ("p99 lateness %.1f ms, over 20 ms"):format(m[2] * 1e3)
    end))
  end)

  -- (a fresh dispatcher every runner_runs runners, however short each pass:
  -- 10 runners due at once every 20 ms, each waiting, never use up a slice)
  it("hands over to a fresh dispatcher every runner_runs runners, in passes that never use up their slice", function()
    ngx_.stop()
    ngx_ = nil
    start(10000, 256, 50)
    local m = stream(500, 1, 10)
    assert.equal(500, m[1])
    assert.is_true(m[4] >= 5, "handovers for 500 runners at runner_runs 50: " .. m[4])
    -- (and not at every pass: 50 passes here; a pass that ends for want of a due one has not used up its slice)
    assert.is_true(m[4] <= 20, "handovers for 500 runners at runner_runs 50: " .. m[4])
  end)

  -- Every handed-over context whose callbacks still wait is a running timer:
  -- at lua_max_running_timers nginx drops the exit timer's premature run.
  it("calls the pending callbacks at reload when nginx drops the exit timer (lua_max_running_timers reached)", function()
    ngx_.stop()
    ngx_ = nil
    start(10000, 4)
    assert.equal(200, (N.get(port, "/park?n=10")))
    assert.equal(200, (N.get(port, "/sleepers?n=3000")))
    socket.sleep(0.3)
    local before = ngx_.worker_pids()
    assert.is_true(ngx_.signal("reload"))
    local left = N.wait_gone(before, 10)
    local log = ngx_.log()
    assert.matches("lua_max_running_timers are not enough", log, 1, true) -- the case at hand
    assert.is_nil(left, "the old worker is still there 10 s after the reload\n" .. log)
    assert.matches("premature run 1 exiting=true state=cancelled", log, 1, true)
    assert.is_nil(log:find("exited on signal", 1, true), log)
  end)
end)
