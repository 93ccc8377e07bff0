-- bench/durable_ngx.lua: hwtimer.durable on Redis in nginx, where many
-- requests schedule at once, beside BullMQ with as many adds at once.
--   lua5.4 bench/durable_ngx.lua [runs] [seconds]   (make bench: 3 5; 1 1 takes ~11 s)
-- Each run starts a redis-server (loopback, no persistence) and an nginx of
-- 4 workers (Debian's nginx + its Lua module, LuaJIT) afresh; in each
-- worker 64 callers (ngx.timer.at contexts: coroutines of the worker, as
-- requests are) schedule one durable job after another through
-- lua-resty-redis for `seconds`, each waiting for its own answer. Figure:
-- jobs stored per second, and the round trips (`add` calls) they took.
-- Runs alternate with bench/bullmq/delayed.js --concurrent 64 (64
-- concurrent queue.add calls, delayed jobs, on a redis-server of its own);
-- medians and their ratio, against the target of 3x.
-- Needs HWT_NGX_PATH / HWT_NGX_CPATH pointing at lua/ and build/jit/.
package.path = "./?.lua;./lua/?.lua;" .. package.path
local N = require("spec.nginx")
local scripts = require("hwtimer.durable.redis_scripts")
local socket = require("socket")

local RUNS = tonumber(arg[1]) or 3
local SECS = tonumber(arg[2]) or 5
local WORKERS, CALLERS = 4, 64

if not (N.cpath and N.lpath and N.exists(N.nginx) and N.exists(N.lua_module)) then
  print("bench/durable_ngx.lua: skipped, needs nginx, libnginx-mod-http-lua and HWT_NGX_PATH/HWT_NGX_CPATH")
  os.exit(0)
end
if not os.execute("command -v redis-server >/dev/null 2>&1") then
  print("bench/durable_ngx.lua: skipped, needs redis-server")
  os.exit(0)
end

local CONF = [[
@HEAD@
events { worker_connections 4096; }
http {
  access_log off;
  lua_package_path "@LPATH@;/usr/share/lua/5.1/?.lua;;";
  lua_package_cpath "@CPATH@;;";
  lua_shared_dict st 1m;
  lua_max_running_timers 4096;
  init_worker_by_lua_block {
    local timer = assert(require("hwtimer.ngx").new())
    local st = ngx.shared.st
    require("hwtimer.durable.ngx").open("q", timer, { prefix = "bench", redis = function()
      local r = require("nginx.redis"):new()
      r:set_timeout(10000)
      local ok, err = r:connect("127.0.0.1", @REDIS@)
      if not ok then return nil, err end
      return r
    end }, function() st:incr("opened", 1, 0) end)
    -- one caller: schedules until `stop`, one after another
    local function caller(premature, q, stop)
      if premature then return end
      local n, failed = 0, 0
      while ngx.now() < stop do
        if q:schedule("far", 3600) then n = n + 1 else failed = failed + 1 end
        ngx.update_time()
      end
      st:incr("jobs", n, 0)
      st:incr("failed", failed, 0)
      st:incr("done", 1, 0)
    end
    -- each worker starts its callers at the time /go set
    local started = 0
    local function watch(premature)
      if premature then return end
      local go, stop = st:get("go"), st:get("stop")
      if go and go > started and ngx.now() >= go then
        started = go
        local q = require("hwtimer.durable.ngx").get("q", 0)
        for _ = 1, @CALLERS@ do assert(ngx.timer.at(0, caller, q, stop)) end
      end
    end
    assert(ngx.timer.every(0.002, watch))
  }
  server {
    listen 127.0.0.1:@PORT@ reuseport;
    location = /go { content_by_lua_block {
      local st, secs = ngx.shared.st, tonumber(ngx.var.arg_secs)
      ngx.update_time()
      st:set("jobs", 0) st:set("failed", 0) st:set("done", 0)
      st:set("stop", ngx.now() + 0.1 + secs)
      st:set("go", ngx.now() + 0.1)
      ngx.say("ok")
    } }
    location = /stats { content_by_lua_block {
      local st = ngx.shared.st
      ngx.say(st:get("opened") or 0, " ", st:get("done") or 0, " ", st:get("jobs") or 0, " ", st:get("failed") or 0)
    } }
  }
}
]]

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

local function redis_cli(port, cmd)
  local p = io.popen("redis-cli -p " .. port .. " " .. cmd)
  local out = p:read("*a")
  p:close()
  return out
end

local function stats(port)
  local _, body = N.get(port, "/stats")
  local t = N.numbers(body)
  return { opened = t[1], done = t[2], jobs = t[3], failed = t[4] }
end

-- CPU seconds so far: the redis-server's (INFO cpu), nginx's workers' (/proc).
local function cpu(redis, nginx)
  local info = redis_cli(redis.port, "info cpu")
  local r = tonumber(info:match("used_cpu_user:([%d.]+)")) + tonumber(info:match("used_cpu_sys:([%d.]+)"))
  local w = 0
  for _, pid in ipairs(nginx.worker_pids()) do
    local f = io.open("/proc/" .. pid .. "/stat")
    local fields = {}
    for x in f:read("*l"):gsub("^.-%) ", ""):gmatch("%S+") do fields[#fields + 1] = x end
    f:close()
    w = w + (tonumber(fields[12]) + tonumber(fields[13])) / 100 -- utime, stime (clock ticks)
  end
  return { redis = r, nginx = w }
end

-- One run of ours: jobs stored per second, add calls, failures.
local function ours()
  local redis = N.start_redis()
  local port = N.free_port()
  local nginx
  local ok, res = pcall(function()
    nginx = N.start(N.config(CONF, { PORT = port, REDIS = redis.port, CALLERS = CALLERS })
      :gsub("worker_processes 1;", "worker_processes " .. WORKERS .. ";", 1))
    assert(N.wait_listening(port, "/stats"), nginx.log())
    for _ = 1, 200 do
      if stats(port).opened >= WORKERS then break end
      socket.sleep(0.05)
    end
    assert(stats(port).opened >= WORKERS, "the queues did not open: " .. nginx.log())
    -- RPUSH calls (one per add call) and the scripts' time in Redis (us)
    local calls = function()
      local info = redis_cli(redis.port, "info commandstats")
      return tonumber(info:match("cmdstat_rpush:calls=(%d+)")) or 0,
        tonumber(info:match("cmdstat_evalsha:calls=%d+,usec=(%d+)")) or 0
    end
    local before, usec0 = calls()
    local cpu0 = cpu(redis, nginx)
    N.get(port, "/go?secs=" .. SECS)
    socket.sleep(SECS + 0.2)
    local s
    for _ = 1, 200 do
      s = stats(port)
      if s.done >= WORKERS * CALLERS then break end
      socket.sleep(0.05)
    end
    assert(s.done >= WORKERS * CALLERS, "callers still running: " .. s.done .. " done")
    local cpu1 = cpu(redis, nginx)
    -- the jobs stored: the intake moved in (its entries hold many jobs), then the count
    local tag = require("hwtimer.durable.redis").base("bench", "default")
    N.redis_cmd(redis.port, "EVAL", scripts.drain, 4, tag .. ":j", tag .. ":kinds", tag .. ":dead", tag .. ":meta")
    local pending = tonumber(N.redis_cmd(redis.port, "HGET", tag .. ":meta", "jobs")) or 0
    local intake = N.redis_cmd(redis.port, "LLEN", tag .. ":incoming")
    local after, usec1 = calls()
    return { rate = s.jobs / SECS, jobs = s.jobs, failed = s.failed, trips = after - before,
             scripts = (usec1 - usec0) / 1e6,
             stored = pending + intake, redis_cpu = cpu1.redis - cpu0.redis, nginx_cpu = cpu1.nginx - cpu0.nginx }
  end)
  if nginx then nginx.stop() end
  redis.stop()
  if not ok then error(res, 0) end
  return res
end

-- One run of BullMQ's: adds per second, or nil and why not.
local BULLMQ = "bench/bullmq/node_modules/bullmq/package.json"
local function bullmq()
  if not (N.exists(BULLMQ) and sh("command -v node >/dev/null 2>&1")) then
    return nil, "needs node and bench/bullmq's packages (make bench-bullmq installs them)"
  end
  local p = io.popen(string.format("node bench/bullmq/delayed.js --concurrent %d %s 2>&1", CALLERS, SECS))
  local out = p:read("*a")
  p:close()
  local rate = tonumber(out:match("(%d+)%s*$"))
  if not rate then return nil, "bench/bullmq/delayed.js failed: " .. out end
  return rate
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  return n % 2 == 1 and s[(n + 1) / 2] or (s[n / 2] + s[n / 2 + 1]) / 2
end

print(string.format("== hwtimer.durable (Redis engine) in nginx: %d workers x %d callers scheduling at once, " ..
  "lua-resty-redis; beside BullMQ, %d adds at once; %d runs of %g s, alternated", WORKERS, CALLERS, CALLERS, RUNS, SECS))
local rates, peer, why = {}, {}, nil
for run = 1, RUNS do
  local r = ours()
  rates[run] = r.rate
  print(string.format("durable (Redis) in nginx, %d workers x %d concurrent schedules: %.0f jobs/s stored " ..
    "(%d jobs in %g s, %d failed; %d add calls, %.1f jobs a round trip; %d in the store after; " ..
    "CPU per job: redis-server %.1f us (%.1f in the scripts), nginx workers %.1f us)",
    WORKERS, CALLERS, r.rate, r.jobs, SECS, r.failed, r.trips, r.jobs / math.max(1, r.trips), r.stored,
    r.redis_cpu / r.jobs * 1e6, r.scripts / r.jobs * 1e6, r.nginx_cpu / r.jobs * 1e6))
  local b
  b, why = bullmq()
  if b then
    peer[#peer + 1] = b
    print(string.format("bullmq delayed adds, %d at once: %.0f /s", CALLERS, b))
  end
end
if #peer > 0 then
  local ours_m, peer_m = median(rates), median(peer)
  print(string.format("durable (Redis) in nginx vs BullMQ, %d at once: medians %.0f vs %.0f jobs/s: %.2fx " ..
    "(target 3x: %s)", CALLERS, ours_m, peer_m, ours_m / peer_m, ours_m >= 3 * peer_m and "met" or "missed"))
else
  print(string.format("durable (Redis) in nginx: median %.0f jobs/s; BullMQ skipped: %s", median(rates), why))
end
