-- bench/ngx_health.lua: active health checks in nginx, the case
-- lua-resty-healthcheck users meet ("too many pending timers"). nginx with 2
-- workers and nginx's default timer limits (lua_max_pending_timers 1024,
-- lua_max_running_timers 256); each worker checks TARGETS targets every 0.5 s,
-- each check a cosocket GET to an upstream (an nginx of its own, so that its
-- CPU is not counted) that answers in 5 ms. Per way of starting the checks:
--   hwtimer-spread   d:every({ interval = 0.5, rate = true, first = spread }, check, i)
--   hwtimer-loop     d:every(0.5, check, i) for each target in one loop (the port a user writes first)
--   hwtimer-nowake   hwtimer-spread with wake_socket = false
--   ngx-stagger      ngx.timer.every(0.5, check, i), started spread over one interval
--   ngx-loop         ngx.timer.every(0.5, check, i) for each target in one loop
-- figures over a WINDOW-second window after a 2 s warm-up: checks a second
-- per target, the gaps between a target's checks (minus 0.5 s: p50, p99,
-- max), CPU a worker (user + system, the worker's every thread, from /proc;
-- "thread": the part of it that is not the worker's main thread, hwtimer's
-- driver thread), and error.log's lines.
--
-- usage: lua5.4 bench/ngx_health.lua [runs] [window] [targets] [modes, comma-separated]
-- with HWT_NGX_PATH / HWT_NGX_CPATH pointing at lua/ and build/jit/;
-- HWT_PROFILE='perf record -g -p {pid} -o /tmp/p.{mode} -- sleep {secs}' runs
-- that command on one worker through each window.
package.path = "./?.lua;" .. package.path
local N = require("spec.nginx")
local socket = require("socket")

local RUNS = tonumber(arg[1]) or 3
local WINDOW = tonumber(arg[2]) or 10
local TARGETS = tonumber(arg[3]) or 1000
local MODES = {}
for m in (arg[4] or "hwtimer-spread,hwtimer-loop,hwtimer-nowake,ngx-stagger,ngx-loop"):gmatch("[^,]+") do
  MODES[#MODES + 1] = m
end
local WARM = 2
if not (N.cpath and N.lpath and N.exists(N.nginx) and N.exists(N.lua_module)) then
  print("bench/ngx_health.lua: needs nginx, libnginx-mod-http-lua and HWT_NGX_PATH/HWT_NGX_CPATH")
  os.exit(0)
end

local UPSTREAM = [[
@HEAD@
events { worker_connections 8192; }
http {
  access_log off;
  server {
    listen 127.0.0.1:@PORT@ backlog=4096;
    location = /ping { return 200 "up"; }
    location = /health { content_by_lua_block { ngx.sleep(0.005) ngx.print("ok") } }
  }
}
]]

-- The checker. Each worker keeps its own figures and, once its window has
-- passed, leaves them in the shared dict for /result.
local CHECKER = [[
@HEAD@
events { worker_connections 8192; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  lua_shared_dict results 1m;
  init_worker_by_lua_block {
    local now = require("hwtimer").now
    local mode, targets, warm, window = "@MODE@", @TARGETS@, @WARM@, @WINDOW@
    local start = now() + warm
    local stop = start + window
    local last, gaps, checks, failed = {}, {}, 0, 0
    local report
    local function check(i)
      local t = now()
      if report and t >= stop + 0.6 then report() end
      if t >= start and t < stop then
        checks = checks + 1
        if last[i] then gaps[#gaps + 1] = t - last[i] end
      end
      last[i] = t
      local sock = ngx.socket.tcp()
      sock:settimeout(2000)
      local ok = sock:connect("127.0.0.1", @UP@)
      if ok then ok = sock:send("GET /health HTTP/1.0\r\nHost: up\r\n\r\n") end
      if ok then ok = sock:receive("*a") end
      sock:close()
      if not ok then failed = failed + 1 end
    end
    local d
    if mode:match("^hwtimer") then
      d = assert(require("hwtimer.ngx").new({ wake_socket = mode ~= "hwtimer-nowake" }))
      for i = 1, targets do
        if mode == "hwtimer-loop" then
          assert(d:every(0.5, function(_, k) check(k) end, i))
        else
          assert(d:every({ interval = 0.5, rate = true, first = (i - 1) * 0.5 / targets },
                         function(_, k) check(k) end, i))
        end
      end
    else
      local function run(premature, k) if not premature then check(k) end end
      for i = 1, targets do
        if mode == "ngx-loop" then
          ngx.timer.every(0.5, run, i)
        else
          ngx.timer.at((i - 1) * 0.5 / targets, function(premature)
            if not premature then ngx.timer.every(0.5, run, i) run(false, i) end
          end)
        end
      end
    end
    -- The figures, once the window has passed, written by the first check
    -- after it: not by a timer of their own, which nginx drops where
    -- ngx.timer.every's checks fill lua_max_running_timers (ngx-loop).
    function report()
      report = nil
      table.sort(gaps)
      local function q(p) return #gaps > 0 and (gaps[math.max(1, math.ceil(#gaps * p))] - 0.5) * 1000 or -1 end
      local s = d and d:stats() or {}
      ngx.shared.results:set("w" .. ngx.worker.id(), ("%d %d %.3f %.3f %.3f %d %d %d %d"):format(
        checks, failed, q(0.5), q(0.99), q(1), s.handovers or 0, s.runners_peak or 0,
        s.wakeups or 0, s.empty_wakeups or 0))
    end
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /result {
      content_by_lua_block {
        local a, b = ngx.shared.results:get("w0"), ngx.shared.results:get("w1")
        ngx.print(a and b and (a .. "\n" .. b) or "")
      }
    }
  }
}
]]

local function cpu_secs(pid, tid)
  local f = io.open("/proc/" .. pid .. (tid and ("/task/" .. tid) or "") .. "/stat")
  if not f then return 0 end
  local s = f:read("*a")
  f:close()
  local fields = {}
  for x in s:match("%) (.*)"):gmatch("%S+") do fields[#fields + 1] = x end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100
end

-- CPU seconds of a worker's threads other than its main one (the timer's driver thread).
local function other_threads_secs(pid)
  local total = 0
  local p = io.popen("ls /proc/" .. pid .. "/task 2>/dev/null")
  for tid in p:read("*a"):gmatch("%d+") do
    if tonumber(tid) ~= pid then total = total + cpu_secs(pid, tid) end
  end
  p:close()
  return total
end

local function two_workers(conf)
  return conf:gsub("worker_processes 1;", "worker_processes 2;", 1)
end

local function one_run(mode, up_port)
  local port = N.free_port()
  local ngx_ = N.start(two_workers(N.config(CHECKER, { PORT = port, UP = up_port, MODE = mode,
    TARGETS = TARGETS, WARM = WARM, WINDOW = WINDOW })))
  local ok, res = pcall(function()
    assert(N.wait_listening(port, "/ping"), ngx_.log())
    local pids = ngx_.worker_pids()
    assert(#pids == 2, "expected 2 workers")
    socket.sleep(WARM)
    local c0 = { cpu_secs(pids[1]), cpu_secs(pids[2]) }
    local d0 = other_threads_secs(pids[1]) + other_threads_secs(pids[2])
    local t0 = socket.gettime()
    local profile = os.getenv("HWT_PROFILE") -- a command run on the first worker over the window
    if profile then
      local cmd = profile:gsub("{pid}", pids[1]):gsub("{mode}", mode):gsub("{secs}", WINDOW)
      os.execute(cmd .. " >/dev/null 2>&1 &")
    end
    socket.sleep(WINDOW)
    local c1 = { cpu_secs(pids[1]), cpu_secs(pids[2]) }
    local d1 = other_threads_secs(pids[1]) + other_threads_secs(pids[2])
    local secs = socket.gettime() - t0
    local body
    for _ = 1, 100 do
      socket.sleep(0.1)
      body = select(2, N.get(port, "/result"))
      if body ~= "" then break end
    end
    assert(body ~= "", mode .. ": no result")
    local r = { cpu = ((c1[1] - c0[1]) + (c1[2] - c0[2])) / 2 / secs * 100, thread = (d1 - d0) / 2 / secs * 100 }
    local rows = {}
    for line in body:gmatch("[^\n]+") do rows[#rows + 1] = N.numbers(line) end
    r.rate = (rows[1][1] + rows[2][1]) / 2 / WINDOW / TARGETS
    r.failed = rows[1][2] + rows[2][2]
    r.p50, r.p99, r.max = math.max(rows[1][3], rows[2][3]), math.max(rows[1][4], rows[2][4]),
      math.max(rows[1][5], rows[2][5])
    r.handovers, r.peak = rows[1][6] + rows[2][6], math.max(rows[1][7], rows[2][7])
    -- the dispatchers' sleeps and those that woke to nothing due, since nginx started
    r.wakeups, r.empty = rows[1][8] + rows[2][8], rows[1][9] + rows[2][9]
    local n = 0
    for _ in ngx_.log():gmatch("[^\n]+") do n = n + 1 end
    r.log_lines = n
    return r
  end)
  ngx_.stop()
  if not ok then error(res, 0) end
  return res
end

local function median(list)
  local c = {}
  for i, v in ipairs(list) do c[i] = v end
  table.sort(c)
  return c[math.ceil(#c / 2)]
end

local up_port = N.free_port()
local upstream = N.start(N.config(UPSTREAM, { PORT = up_port }))
assert(N.wait_listening(up_port, "/ping"), upstream.log())
local results = {}
local ok, err = pcall(function()
  for r = 1, RUNS do -- the modes alternate run by run: a slow stretch falls on each
    for _, mode in ipairs(MODES) do
      local x = one_run(mode, up_port)
      io.stderr:write(("[%s run %d] cpu %.1f %% a worker, %.2f checks/s a target, gaps p99 %+.1f ms\n")
        :format(mode, r, x.cpu, x.rate, x.p99))
      results[mode] = results[mode] or {}
      table.insert(results[mode], x)
    end
  end
end)
upstream.stop()
if not ok then error(err, 0) end

print(("health checks in nginx: 2 workers x %d targets every 0.5 s, a cosocket GET answered in 5 ms; " ..
  "medians of %d runs of %g s, %s"):format(TARGETS, RUNS, WINDOW, os.date("!%Y-%m-%d %H:%M UTC")))
print(("%-16s %12s %8s %14s %20s %11s %10s %10s %14s"):format("start", "CPU/worker", "thread", "checks/s/target",
  "gap-0.5s p50/p99/max", "error.log", "handovers", "runners", "sleeps/empty"))
for _, mode in ipairs(MODES) do
  local list = results[mode]
  local function m(k)
    local v = {}
    for i, x in ipairs(list) do v[i] = x[k] end
    return median(v)
  end
  local cpus = {}
  for i, x in ipairs(list) do cpus[i] = ("%.1f"):format(x.cpu) end
  print(("%-16s %10.1f %% %6.1f %% %14.2f %8.1f/%.1f/%.1f ms %11d %10d %10d %7d/%-6d   (CPU runs: %s)"):format(mode,
    m("cpu"), m("thread"), m("rate"), m("p50"), m("p99"), m("max"), m("log_lines"), m("handovers"), m("peak"),
    m("wakeups"), m("empty"), table.concat(cpus, " ")))
end
