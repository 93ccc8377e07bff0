-- bench/durable_drain.lua: Redis's CPU a job for the Redis engine's fast
-- path, as nginx's workers drive it: `add` calls of 32 jobs with fresh ids
-- (one argument each), the intake moved in (`drain`) after every 16 calls,
-- into a store that grows to N jobs (default 5x10^5), all of one kind, due
-- an hour on, in order. Figures from INFO (used_cpu_user + used_cpu_sys)
-- and INFO commandstats, on a redis-server of its own (loopback, no
-- persistence, stopped by its pid).
--   lua5.4 bench/durable_drain.lua [N]      (needs build/5.4: make LUA_VERSION=5.4)
package.path = "./?.lua;./lua/?.lua;" .. package.path
package.cpath = "./build/5.4/?.so;" .. package.cpath
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local N = require("spec.nginx")

local TOTAL = tonumber(arg[1]) or 500000
local CALL, CALLS = 32, 16 -- jobs an add call, add calls a drain
local redis = N.redis_lua()
if not (redis and os.execute("command -v redis-server >/dev/null 2>&1")) then
  print("bench/durable_drain.lua: skipped, needs redis-server and redis-lua (Debian lua-redis)")
  os.exit(0)
end

local server = N.start_redis()
local ok, err = pcall(function()
  local c = redis.connect("127.0.0.1", server.port)
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { redis = c, prefix = "drain" }))
  local e = durable.engine(q)
  local function cpu()
    local info = c:info("cpu")
    local s = info.cpu or info
    return tonumber(s.used_cpu_user) + tonumber(s.used_cpu_sys)
  end
  local function drain_usec()
    local cs = c:info("commandstats")
    cs = cs.commandstats or cs
    local v = cs.cmdstat_evalsha
    return type(v) == "table" and tonumber(v.usec) or tonumber(tostring(v):match("usec=(%d+)"))
  end
  local t0, done, in_drains = cpu(), 0, 0
  while done < TOTAL do
    for _ = 1, CALLS do
      e.batch = {}
      for _ = 1, CALL do e:put(q._new_id(), "far", "payload-10", 3600 + done * 1e-4, true, nil, true) end
      local jobs = e.batch
      e.batch = nil
      assert(e:run("add", table.concat(jobs)))
      done = done + CALL
    end
    local u = drain_usec()
    assert(e:run("drain"))
    in_drains = in_drains + drain_usec() - u
  end
  local t = cpu() - t0
  print(string.format("durable (Redis) fast path, adds of %d jobs, a drain every %d adds, store grown to %d jobs: " ..
    "Redis CPU %.2f us a job, of which the drains %.2f us (commandstats)", CALL, CALLS, done,
    t / done * 1e6, in_drains / done))
  q:close()
  timer:close()
end)
server.stop()
if not ok then error(err, 0) end
