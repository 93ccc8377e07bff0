-- spec: alone (p99 lateness within 1 ms of ngx.timer.at's; spec/run.sh -j runs it with nothing beside it)
-- hwtimer.ngx keeps callbacks that do not wait on time while others wait on
-- I/O, beside ngx.timer.at in the same run (issue 21). One request
-- schedules `io` callbacks due over 10-59 ms, each an HTTP round trip
-- through a cosocket to an upstream nginx that answers after `hold`
-- seconds, and 1,000 that only note how late they ran, scheduled once the
-- upstream has started the handler of every round trip and due `at` seconds
-- later: after the burst's connects and the upstream's reads, while every
-- round trip waits. The 1,000's p99 lateness must stay within 1 ms of
-- ngx.timer.at's, on a fresh worker's first burst and on the next, with
-- hwtimer.ngx's default options (medians of three alternated rounds).
-- (bench/ngx.lua measures the case where the 1,000 are due amid the
-- connects, where nginx's event loop is the bound for both.) Runs in the
-- LuaJIT spec run.
--
-- Why the upstream's handlers and not the last request sent: on the first
-- burst, a fresh upstream worker was still reading and starting the 2,000
-- requests 30 ms after the last one was sent, and on this two-core machine
-- that work took the core that hwtimer's driver thread needed when the
-- 1,000 fell due: the driver woke 2-3 ms after its deadline, in most first
-- bursts (2026-11-27, docs/performance.md). That is the I/O burst's own
-- work, not a round trip that waits.
local N = require("spec.nginx")
local helpers = require("spec.helpers")
local socket = require("socket")

local CONF = [[
@HEAD@
worker_rlimit_nofile @NOFILE@;
events { worker_connections 30000; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  lua_max_pending_timers 65536;
  lua_max_running_timers 32768;
  init_worker_by_lua_block {
    package.loaded.timer = assert(require("hwtimer.ngx").new())
    package.loaded.st = {}
    -- how many /pong handlers the upstream has started, over a cosocket
    local function upstream_started()
      local sock = ngx.socket.tcp()
      sock:settimeout(5000)
      assert(sock:connect("127.0.0.1", @PONG@))
      assert(sock:send("GET /started HTTP/1.0\r\nHost: x\r\n\r\n"))
      local body = assert(sock:receive("*a"))
      sock:close()
      return assert(tonumber(body:match("\r\n\r\n(%d+)")))
    end
    -- wait until it has started `n` in all
    local function wait_started(n)
      for _ = 1, 10000 do
        if upstream_started() >= n then return end
        ngx.sleep(0.002)
      end
      error("the upstream did not start every round trip within 20 s")
    end
    package.loaded.upstream = { started = upstream_started, wait_started = wait_started }
  }
  server {
    listen 127.0.0.1:@PORT@ backlog=16384;
    location = /ping { return 200 "up"; }
    location = /burst {   # a burst of `io` cosocket callbacks and `count` that note their lateness
      content_by_lua_block {
        local now = require("hwtimer").now
        local n_io, n_count, sys = tonumber(ngx.var.arg_io), tonumber(ngx.var.arg_count), ngx.var.arg_sys
        local hold, count_at = ngx.var.arg_hold, tonumber(ngx.var.arg_at)
        local upstream = package.loaded.upstream
        local started = upstream.started()
        local st = { late = {}, io_ok = 0, io_err = 0, blocked = 0, sent = 0 }
        package.loaded.st = st
        local counting
        local function trip()
          local sock = ngx.socket.tcp()
          sock:settimeout(20000)
          local ok, err = sock:connect("127.0.0.1", @PONG@)
          if ok then ok, err = sock:send("GET /pong?hold=" .. hold .. " HTTP/1.0\r\nHost: x\r\n\r\n") end
          st.sent = st.sent + 1
          if st.sent == n_io then -- once the upstream has started every handler
            assert(ngx.timer.at(0, function(premature)
              if not premature then upstream.wait_started(started + n_io) counting() end
            end))
          end
          local body = ok and sock:receive("*a")
          sock:close()
          if body and body:find("pong", 1, true) then st.io_ok = st.io_ok + 1
          else st.io_err = st.io_err + 1 st.why = err end
        end
        local late = st.late
        local function at(delay, cb)
          if sys == "hwtimer" then
            return package.loaded.timer:schedule(delay, cb)
          end
          return ngx.timer.at(delay, cb)
        end
        -- the 1,000 once the upstream has started every round trip's handler
        -- (however long the connects and its reads took: on a slow machine
        -- they outlast a fixed instant), due `count_at` later, while every
        -- round trip waits;
        -- each on a fresh clock: ngx.timer.at counts from nginx's cached
        -- time, which a single update before the loop would leave behind by
        -- however long the loop runs (5 ms for the thousand on a fresh
        -- worker): its last callbacks would run that much before `due` and
        -- count as on time whatever the lateness that follows
        function counting()
          for _ = 1, n_count do
            if sys ~= "hwtimer" then ngx.update_time() end
            local due = now() + count_at
            -- early counts as on time: ngx.timer.at counts from a millisecond
            -- clock, and runs up to 1 ms before `due` (hwtimer never does)
            assert(at(count_at, function() late[#late + 1] = math.max(0, now() - due) end))
          end
        end
        for i = 1, n_io do
          assert(at(0.01 + (i % 50) * 0.001, trip))
        end
        ngx.say("ok")
      }
    }
    location = /result {
      content_by_lua_block {
        local st = package.loaded.st
        local late = st.late
        table.sort(late)
        local function q(p) return late[math.max(1, math.ceil(#late * p))] or -1 end
        ngx.say(("%d %d %d %.6f %.6f"):format(#late, st.io_ok, st.io_err, q(0.5), q(0.99)))
      }
    }
  }
}
]]

-- One burst on the nginx at `port`; returns the 1,000's p50 and p99
-- lateness in seconds, once every callback has run.
-- The upstream: an nginx of its own, so that neither process needs a
-- descriptor for both ends of 10,000 connections.
local UPSTREAM = [[
@HEAD@
worker_rlimit_nofile @NOFILE@;
events { worker_connections 30000; }
http {
  access_log off;
  server {
    listen 127.0.0.1:@PORT@ backlog=16384;
    location = /pong { content_by_lua_block {
      package.loaded.started = (package.loaded.started or 0) + 1
      ngx.sleep(tonumber(ngx.var.arg_hold)) ngx.print("pong")
    } }
    location = /started { content_by_lua_block { ngx.print(package.loaded.started or 0) } }
  }
}
]]

local function burst(port, sys, n_io, n_count, hold, at)
  local status, body = N.get(port, ("/burst?sys=%s&io=%d&count=%d&hold=%g&at=%g"):format(sys, n_io, n_count, hold, at), 30)
  assert.equal(200, status, body)
  local r
  for _ = 1, 600 do
    socket.sleep(0.05)
    r = N.numbers(select(2, N.get(port, "/result")))
    if r[1] == n_count and r[2] + r[3] == n_io then break end
  end
  assert.equal(n_count, r[1])
  assert.equal(n_io, r[2])    -- every round trip succeeded
  return r[4], r[5]
end

-- Two bursts on a fresh nginx for `sys`: the p99 of each.
local function two_bursts(sys, n_io, hold, at)
  local port, pong = N.free_port(), N.free_port()
  local upstream = N.start(N.config(UPSTREAM, { PORT = pong, NOFILE = N.nofile() }))
  local server = N.start(N.config(CONF, { PORT = port, PONG = pong, NOFILE = N.nofile() }))
  local ok, a, b = pcall(function()
    assert(N.wait_listening(pong, "/pong"), upstream.log())
    assert(N.wait_listening(port, "/ping"), server.log())
    local workers = server.worker_pids()
    local _, first = burst(port, sys, n_io, 1000, hold, at)
    local _, second = burst(port, sys, n_io, 1000, hold, at)
    assert.same(workers, server.worker_pids())   -- the worker survived both bursts
    local log = server.log()
    assert.is_nil(log:find("[error]", 1, true), log)
    assert.is_nil(log:find("[alert]", 1, true), log)
    return first, second
  end)
  server.stop()
  upstream.stop()
  if not ok then error(a, 0) end
  return a, b
end

local function ms(s) return ("%.1f ms"):format(s * 1000) end

-- Rounds of a fresh nginx per system, alternating which goes first: the
-- medians of each burst's p99 are compared, as the issue measured them. A
-- neighbour on this shared machine can hold up one burst by a few ms (on a
-- fresh CI machine, 2.3 ms against 1.0 in the next burst, twice in a row);
-- a runner that holds callbacks back behind waiting ones holds them `hold`
-- seconds in every round.
local ROUNDS = 3

describe("OpenResty: callbacks that do not wait stay on time amid I/O (hwtimer.ngx)", function()
  if N.skip_unless_ready(pending) then return end

  -- io callbacks, the upstream's hold, when the 1,000 are due (seconds)
  for _, case in ipairs({ { 2000, 0.3, 0.03 }, { 10000, 1.0, 0.05 } }) do
    local n_io, hold, at = case[1], case[2], case[3]
    it(("keeps 1,000 counting callbacks within 1 ms of ngx.timer.at's p99 while %d wait on cosockets"):format(n_io),
    function()
      assert.is_false(helpers.miss_twice(function()
        local h1, h2, t1, t2 = {}, {}, {}, {}
        for i = 1, ROUNDS do
          if i % 2 == 1 then
            h1[i], h2[i] = two_bursts("hwtimer", n_io, hold, at)
            t1[i], t2[i] = two_bursts("ngx", n_io, hold, at)
          else
            t1[i], t2[i] = two_bursts("ngx", n_io, hold, at)
            h1[i], h2[i] = two_bursts("hwtimer", n_io, hold, at)
          end
          print(("\n  %d waiting on cosockets: p99 lateness of 1,000, first burst / next: hwtimer.ngx %s / %s, ngx.timer.at %s / %s")
            :format(n_io, ms(h1[i]), ms(h2[i]), ms(t1[i]), ms(t2[i])))
        end
        local mh1, mh2, mt1, mt2 = helpers.median(h1), helpers.median(h2), helpers.median(t1), helpers.median(t2)
        print(("  medians of %d: hwtimer.ngx %s / %s, ngx.timer.at %s / %s"):format(ROUNDS, ms(mh1), ms(mh2), ms(mt1), ms(mt2)))
        return mh1 > mt1 + 0.001 and ("first burst, medians: hwtimer.ngx %s, ngx.timer.at %s"):format(ms(mh1), ms(mt1))
          or mh2 > mt2 + 0.001 and ("next burst, medians: hwtimer.ngx %s, ngx.timer.at %s"):format(ms(mh2), ms(mt2))
      end))
    end)
  end
end)
