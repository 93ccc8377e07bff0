-- bench/ngx.lua: hwtimer.ngx against ngx.timer.at in one real nginx (one
-- worker, Debian's nginx + libnginx-mod-http-lua, LuaJIT), each figure the
-- median of RUNS runs:
--   W6a  callbacks per second, n timeouts due at one instant `ahead` seconds
--        after the scheduling loop starts (0.2 s, and 10 ms: due before the
--        loop ends), callbacks that do not yield (they count); measured from
--        the moment the last timeout is both due and scheduled (or the first
--        callback, if sooner) to the last callback, so that the figure does
--        not swing with how long the scheduling loop took;
--   W6b  callbacks per second, each one HTTP round trip through a cosocket to
--        a loopback server in the same nginx, measured the same way;
--   W6d  p99 lateness of 1,000 counting callbacks due in 50 ms amid 2,000
--        due over 10-59 ms that each make such a round trip (issue 21's
--        case), on a fresh worker's first burst and on the next;
--   W6c  the worker's RSS growth with 10^6 timeouts pending far ahead, and how
--        many ngx.timer.at could hold (lua_max_pending_timers set to 2^20).
-- usage (make bench runs it): lua5.4 bench/ngx.lua [runs] [scale]
--        (bench/compare.lua):   lua5.4 bench/ngx.lua one count|io N AHEAD
-- with HWT_NGX_PATH / HWT_NGX_CPATH pointing at lua/ and build/jit/;
-- HWT_BENCH_NGX_OPTS='{ slice = 0.05 }' gives hwtimer.ngx.new options (a Lua
-- table constructor) for weighing one against the defaults.
-- The round trips go to an upstream of its own (UPSTREAM, below).
package.path = "./?.lua;" .. package.path
local N = require("spec.nginx")
local socket = require("socket")

local RUNS = tonumber(arg[1]) or 3
local SCALE = tonumber(arg[2]) or 1 -- (both unused by `one`, below)
if not (N.cpath and N.lpath and N.exists(N.nginx) and N.exists(N.lua_module)) then
  print("bench/ngx.lua: needs nginx, libnginx-mod-http-lua and HWT_NGX_PATH/HWT_NGX_CPATH")
  os.exit(0)
end

local CONF = [[
@HEAD@
worker_rlimit_nofile 65536;
events { worker_connections 30000; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  lua_max_pending_timers 1048576;
  lua_max_running_timers 4096;
  init_worker_by_lua_block {
    package.loaded.timer = assert(require("hwtimer.ngx").new(@OPTS@))
    package.loaded.st = { n = 0, first = 0, last = 0, start = 0 }
    package.loaded.round_trip = function()   -- one HTTP round trip to /pong; true if answered
      local sock = ngx.socket.tcp()
      sock:settimeout(10000)
      local ok = sock:connect("127.0.0.1", @PONG@)
      if ok then ok = sock:send("GET /pong HTTP/1.0\r\nHost: x\r\n\r\n") end
      if ok then ok = sock:receive("*a") end
      sock:close()
      return ok
    end
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /run {   # n callbacks through `sys`, all due `ahead` s after the loop starts, doing `work`
      content_by_lua_block {
        local now = require("hwtimer").now
        local st, n, sys, work = package.loaded.st, tonumber(ngx.var.arg_n), ngx.var.arg_sys, ngx.var.arg_work
        local ahead = tonumber(ngx.var.arg_ahead)
        st.n, st.first, st.last, st.failed = 0, 0, 0, 0
        local function count()
          if st.n == 0 then st.first = now() end
          st.n = st.n + 1
          st.last = now()
        end
        local round_trip = package.loaded.round_trip
        local function trip()
          if not round_trip() then st.failed = st.failed + 1 end
          count()
        end
        local cb = work == "io" and trip or count
        ngx.update_time()
        local due = now() + ahead
        if sys == "hwtimer" then
          local timer = package.loaded.timer
          for _ = 1, n do timer:schedule(math.max(0, due - now()), cb) end
        else
          -- nginx counts every delay from its cached time, which stays put
          -- through this loop: the same delay is the same instant for all
          local at = ngx.timer.at
          for _ = 1, n do
            local ok, err = at(ahead, cb)
            if not ok then ngx.say("refused: ", err) return end
          end
        end
        st.start = math.max(now(), due)
        ngx.say("ok")
      }
    }
    location = /burst {   # W6d: 2,000 round trips due over 10-59 ms, 1,000 counting due in 50 ms
      content_by_lua_block {
        local now = require("hwtimer").now
        local sys = ngx.var.arg_sys
        local st = { late = {}, io = 0 }
        package.loaded.burst = st
        local function at(delay, cb)
          if sys == "hwtimer" then return package.loaded.timer:schedule(delay, cb) end
          return ngx.timer.at(delay, cb)
        end
        local round_trip = package.loaded.round_trip
        local function trip()
          round_trip()
          st.io = st.io + 1
        end
        ngx.update_time()
        for _ = 1, 1000 do
          local due = now() + 0.05
          -- early counts as on time: ngx.timer.at may run up to 1 ms early
          assert(at(0.05, function() st.late[#st.late + 1] = math.max(0, now() - due) end))
        end
        for i = 1, 2000 do assert(at(0.01 + (i % 50) * 0.001, trip)) end
        ngx.say("ok")
      }
    }
    location = /burst_result {
      content_by_lua_block {
        local st = package.loaded.burst
        table.sort(st.late)
        ngx.say(("%d %d %.6f"):format(#st.late, st.io, st.late[math.max(1, math.ceil(#st.late * 0.99))] or -1))
      }
    }
    location = /park {   # n timeouts an hour ahead
      content_by_lua_block {
        local n, sys = tonumber(ngx.var.arg_n), ngx.var.arg_sys
        local function cb() end
        if sys == "hwtimer" then
          local timer = package.loaded.timer
          for _ = 1, n do timer:schedule(3600, cb) end
          ngx.say(n)
        else
          for i = 1, n do
            local ok = ngx.timer.at(3600, cb)
            if not ok then ngx.say(i - 1) return end
          end
          ngx.say(n)
        end
      }
    }
    location = /result {
      content_by_lua_block {
        local st = package.loaded.st
        ngx.say(("%d %.6f %d"):format(st.n, st.last - math.min(st.start, st.first), st.failed))
      }
    }
  }
}
]]

-- The upstream of the round trips: an nginx of its own (one worker), as an
-- upstream or a Redis is another process, so that the figures are the timer
-- worker's work (its callbacks' half of each round trip) and not also the
-- answering half, which is the same for both systems (before 2026-12-07 the
-- same worker served both ends, about twice the work a callback).
local UPSTREAM = [[
@HEAD@
events { worker_connections 30000; }
http {
  access_log off;
  server {
    listen 127.0.0.1:@PONG@ backlog=4096;   # 2,000 connect at once: none dropped
    location = /pong { return 200 "pong"; }
  }
}
]]
local upstream, pong -- started once, at the first run; stopped at the end

local function rss_kb(pid)
  local f = assert(io.open("/proc/" .. pid .. "/status"))
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

local function start()
  if not upstream then
    pong = N.free_port()
    upstream = N.start(N.config(UPSTREAM, { PONG = pong }))
    assert(N.wait_listening(pong, "/pong"), upstream.log())
  end
  local port = N.free_port()
  while pong == port do port = N.free_port() end -- (a port let go may come back: two servers on one would merge)
  local ngx_ = N.start(N.config(CONF, { PORT = port, PONG = pong, OPTS = os.getenv("HWT_BENCH_NGX_OPTS") or "" }))
  assert(N.wait_listening(port, "/ping"), ngx_.log())
  return ngx_, port
end

-- Callbacks per second for one run: the n callbacks' span, first to last.
-- Run f(port) against a fresh nginx, stopped (by its pid) whatever happens.
local function with_nginx(f)
  local ngx_, port = start()
  local ok, a, b = pcall(f, port, ngx_)
  ngx_.stop()
  if not ok then error(a, 0) end
  return a, b
end

local function rate(sys, work, n, ahead)
  local r = with_nginx(function(port)
    local status, body = N.get(port, ("/run?n=%d&sys=%s&work=%s&ahead=%g"):format(n, sys, work, ahead), 60)
    assert(status == 200 and body == "ok\n", body)
    local got
    for _ = 1, 600 do
      socket.sleep(0.05)
      got = N.numbers(select(2, N.get(port, "/result")))
      if got[1] >= n then break end
    end
    return got
  end)
  assert(r[1] == n and r[3] == 0, ("%s %s: %d of %d ran, %d failed"):format(sys, work, r[1], n, r[3]))
  return n / r[2]
end

-- W6d: the p99 lateness of the 1,000 on a fresh worker's first burst and on the next.
local function bursts(sys)
  return with_nginx(function(port)
    local p = {}
    for i = 1, 2 do
      assert(select(2, N.get(port, "/burst?sys=" .. sys, 30)) == "ok\n")
      local r
      for _ = 1, 600 do
        socket.sleep(0.05)
        r = N.numbers(select(2, N.get(port, "/burst_result")))
        if r[1] == 1000 and r[2] == 2000 then break end
      end
      assert(r[1] == 1000 and r[2] == 2000, sys .. ": the burst did not finish")
      p[i] = r[3]
    end
    return p
  end)
end

local function parked(sys, n)
  return with_nginx(function(port, ngx_)
    local pid = ngx_.worker_pids()[1]
    local before = rss_kb(pid)
    local held = 0
    local chunk = math.min(n, 100000)
    while held < n do
      local want = math.min(chunk, n - held)
      local _, body = N.get(port, ("/park?n=%d&sys=%s"):format(want, sys), 120)
      local got = tonumber(body)
      held = held + got
      if got < want then break end
    end
    return held, (rss_kb(pid) - before) / 1024
  end)
end

local function median(list)
  table.sort(list)
  return list[math.ceil(#list / 2)]
end

-- The two systems' runs alternate, so that a slow stretch of this shared
-- machine falls on both.
local function measure2(f, g)
  local a, b = {}, {}
  for i = 1, RUNS do
    a[i] = f()
    b[i] = g()
  end
  return median(a), a, median(b), b
end

local function millions(list)
  local out = {}
  for i, v in ipairs(list) do out[i] = ("%.3g"):format(v / 1e6) end
  return table.concat(out, " ")
end

-- One figure of hwtimer.ngx alone, for bench/compare.lua (which points
-- HWT_NGX_PATH / HWT_NGX_CPATH at each build in turn):
--   lua5.4 bench/ngx.lua one count|io N AHEAD [hwtimer|ngx]   prints callbacks_per_s=...
if arg[1] == "one" then
  local work, n, ahead, sys = arg[2], tonumber(arg[3]), tonumber(arg[4]), arg[5] or "hwtimer"
  assert((work == "count" or work == "io") and n and ahead and (sys == "hwtimer" or sys == "ngx"),
         "usage: bench/ngx.lua one count|io N AHEAD [hwtimer|ngx]")
  local ok, r = pcall(rate, sys, work, n, ahead)
  if upstream then upstream.stop() end
  if not ok then error(r, 0) end
  print(("system=%s workload=%s callbacks_per_s=%.0f"):format(sys == "ngx" and "ngx.timer.at" or "hwtimer.ngx", work, r))
  os.exit(0)
end

local lines = {}
local function report(fmt, ...)
  local line = fmt:format(...)
  print(line)
  lines[#lines + 1] = line
end

-- Every figure, the upstream stopped by its pid whatever happens.
local function main()
  local n_fast, n_io, n_park = math.floor(200000 * SCALE), math.floor(2000 * SCALE), math.floor(1000000 * SCALE)
  report("hwtimer.ngx bench: medians of %d runs, scale %g, %s", RUNS, SCALE, os.date("!%Y-%m-%d %H:%M UTC"))
  for _, w in ipairs({ { "W6a", "count", n_fast, 0.2 }, { "W6a", "count", n_fast, 0.01 },
                       { "W6b", "io", n_io, 0.2 }, { "W6b", "io", math.floor(n_io / 4), 0.2 } }) do
    local h, hr, t, tr = measure2(function() return rate("hwtimer", w[2], w[3], w[4]) end,
                                  function() return rate("ngx", w[2], w[3], w[4]) end)
    report("%s %-5s callbacks/s, %d due at once %g s ahead: hwtimer.ngx %.3gM (runs %s), " ..
      "ngx.timer.at %.3gM (runs %s), ratio %.2fx",
      w[1], w[2], w[3], w[4], h / 1e6, millions(hr), t / 1e6, millions(tr), h / t)
  end
  do
    local h1, h2, t1, t2 = {}, {}, {}, {}
    for i = 1, RUNS do
      local h, t = bursts("hwtimer"), bursts("ngx")
      h1[i], h2[i], t1[i], t2[i] = h[1], h[2], t[1], t[2]
    end
    local function ms(list)
      local out = {}
      for i, v in ipairs(list) do out[i] = ("%.1f"):format(v * 1000) end
      return table.concat(out, " ")
    end
    report("W6d p99 lateness of 1,000 counting amid 2,000 cosocket round trips, first burst / next (ms): " ..
      "hwtimer.ngx %.1f / %.1f (runs %s / %s), ngx.timer.at %.1f / %.1f (runs %s / %s)",
      median(h1) * 1000, median(h2) * 1000, ms(h1), ms(h2), median(t1) * 1000, median(t2) * 1000, ms(t1), ms(t2))
  end
  local hh, hg = parked("hwtimer", n_park)
  local th, tg = parked("ngx", n_park)
  report("W6c %d pending an hour ahead: hwtimer.ngx holds %d, RSS +%.0f MB (%.0f B each); " ..
    "ngx.timer.at holds %d, RSS +%.0f MB (%.0f B each)",
    n_park, hh, hg, hg * 1048576 / math.max(hh, 1), th, tg, tg * 1048576 / math.max(th, 1))
end
local ok, err = pcall(main)
if upstream then upstream.stop() end
if not ok then error(err, 0) end

if SCALE >= 1 and RUNS >= 3 then
  local f = assert(io.open("bench/results_ngx.txt", "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
end
