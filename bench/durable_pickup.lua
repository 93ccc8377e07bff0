-- bench/durable_pickup.lua: how soon a durable job due now starts in
-- another process that handles its kind (issue 43, item 4), on Redis.
--   luajit bench/durable_pickup.lua [jobs]   (make bench: 300)
-- This process (redis-lua) schedules `jobs` jobs due now, one at a time,
-- 23 ms apart (so they land at every point of the poll's period), and times
-- each from just before q:schedule to its handler's first line, both read
-- on the machine's monotonic clock (hwtimer.core.now; the handler writes
-- its reading to a Redis list). Handled in turn by:
--   nginx (2 workers, lua-resty-redis, hwtimer.durable.ngx), wake-ups on;
--   the same nginx with wake = false (the 50 ms poll alone);
--   a plain Lua process (redis-lua) in timer:run, which has no listener;
--   a plain Lua process in a luv loop with hwtimer.durable.redis_wake;
-- and on SQLite, one file, the last two again (hwtimer.durable.sqlite_wake).
-- Needs HWT_NGX_PATH / HWT_NGX_CPATH pointing at lua/ and build/jit/ for
-- the nginx rows.
package.path = "./?.lua;./lua/?.lua;" .. package.path
local N = require("spec.nginx")
local socket = require("socket")
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local core = require("hwtimer.core")

local JOBS = tonumber(arg[1]) or 300
local redis = N.redis_lua()
if not (redis and os.execute("command -v redis-server >/dev/null 2>&1")) then
  print("bench/durable_pickup.lua: skipped, needs redis-server and redis-lua")
  os.exit(0)
end
local with_nginx = N.cpath and N.lpath and N.exists(N.nginx) and N.exists(N.lua_module)

local CONF = [[
@HEAD@
events { worker_connections 1024; }
http {
  access_log off;
  lua_package_path "@LPATH@;/usr/share/lua/5.1/?.lua;;";
  lua_package_cpath "@CPATH@;;";
  init_worker_by_lua_block {
    local core = require("hwtimer.core")
    local timer = assert(require("hwtimer.ngx").new())
    local function connect()
      local r = require("nginx.redis"):new()
      r:set_timeout(5000)
      local ok, err = r:connect("127.0.0.1", @REDIS@)
      if not ok then return nil, err end
      return r
    end
    require("hwtimer.durable.ngx").open("q", timer, { redis = connect, prefix = "pick", wake = @WAKE@, attempts = 1,
      on_error = function(err) if not tostring(err):find("dies", 1, true) then ngx.log(ngx.ERR, err) end end },
      function(q)
        q:handle("pick", function(job)
          local at = core.now()
          local r = assert(connect())
          if job.payload == "die" and r:get("revived:" .. job.id) ~= "1" then -- (for q:retry: dead first)
            r:set_keepalive(10000, 16)
            error("dies")
          end
          assert(r:rpush("ledger", string.format("%s %.6f", job.id, at)))
          r:set_keepalive(10000, 16)
        end)
      end)
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ready { content_by_lua_block {
      ngx.say(require("hwtimer.durable.ngx").get("q", 5) and "open" or "not open")
    } }
  }
}
]]

-- The plain Lua consumer: the same handler, in a process of its own.
local PLAIN = [[
package.path = "./lua/?.lua;" .. package.path .. ";/usr/share/lua/5.3/?.lua" -- (redis-lua on 5.4)
local redis = require("redis")
local hwtimer, durable, core = require("hwtimer"), require("hwtimer.durable"), require("hwtimer.core")
local port, path = tonumber(arg[1]), arg[3] -- (the ledger is in Redis; the jobs in `path` when given)
local timer = hwtimer.new()
local q = assert(durable.open(timer, path and { path = path, attempts = 1, on_error = function() end } or
  { redis = function() return redis.connect("127.0.0.1", port) end, prefix = "pick", attempts = 1,
    on_error = function() end })) -- (the dying jobs' errors are expected)
local wake = require(path and "hwtimer.durable.sqlite_wake" or "hwtimer.durable.redis_wake")
local ledger = redis.connect("127.0.0.1", port)
q:handle("pick", function(job)
  local at = core.now()
  if job.payload == "die" and ledger:get("revived:" .. job.id) ~= "1" then error("dies") end -- (for q:retry)
  ledger:rpush("ledger", string.format("%s %.6f", job.id, at))
end)
ledger:set("plain_ready", "1")
if arg[2] == "luv" then -- a luv loop, and the listener
  local uv = require("luv")
  local poll = require("hwtimer.luv").attach(timer)
  local l = wake.luv(assert(wake.listen(q)), uv)
  local check = uv.new_timer()
  check:start(200, 200, function() if ledger:get("plain_stop") == "1" then uv.stop() end end)
  uv.run()
  l:close()
  check:close()
  require("hwtimer.luv").detach(poll)
  uv.run("nowait") -- (the handles' close callbacks: luv crashes at exit without them)
else
  while ledger:get("plain_stop") ~= "1" do timer:run(0.2) end
end
q:close()
timer:close()
]]

local function pct(sorted, p) return sorted[math.max(1, math.ceil(#sorted * p))] end

-- How a job is made due now, from here: ready(q, c) does what comes first
-- (returns the id, or nil and the id when nothing is left to do), go(q, id)
-- makes it due and is timed.
local WAYS = {
  schedule = { go = function(q) return assert(q:schedule("pick", 0)) end },
  run_now = { -- a job due in an hour, run now
    ready = function(q) return assert(q:schedule("pick", 3600)) end,
    go = function(q, id) assert(q:run_now(id)) return id end },
  retry = { -- a job that died (its one attempt failed in the other process), tried again
    ready = function(q, c, timer)
      local id = assert(q:schedule("pick", 0, "die"))
      local limit = socket.gettime() + 5
      repeat
        socket.sleep(0.005)
        timer:run(0)
        local job = q:get(id)
      until job and job.dead or socket.gettime() > limit
      c:set("revived:" .. id, "1")
      return id
    end,
    go = function(q, id) assert(q:retry(id)) return id end },
}

-- The lateness (seconds, sorted) of JOBS jobs made due here (WAYS[way]).
local function measure(port, path, way)
  local c = redis.connect("127.0.0.1", port)
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, path and { path = path } or
    { redis = function() return redis.connect("127.0.0.1", port) end, prefix = "pick" }))
  local t0, late = {}, {}
  local w = WAYS[way or "schedule"]
  for i = 1, JOBS do
    local id = w.ready and w.ready(q, c, timer)
    local at = core.now()
    t0[w.go(q, id)] = at
    socket.sleep(0.023)
    if i % 50 == 0 then timer:run(0) end -- (the queue's own timeouts)
  end
  local limit = socket.gettime() + 5
  local lines
  repeat
    lines = c:lrange("ledger", 0, -1)
    if #lines < JOBS then socket.sleep(0.05) end
  until #lines >= JOBS or socket.gettime() > limit
  for _, line in ipairs(lines) do
    local id, at = line:match("^(%S+) (%S+)")
    if t0[id] then late[#late + 1] = tonumber(at) - t0[id] end
  end
  c:del("ledger")
  q:close()
  timer:close()
  table.sort(late)
  return late
end

local function row(label, late, engine, way)
  print(string.format("durable (%s) due-now pickup, %s%s: %d of %d jobs, p50 %.2f ms, p99 %.2f ms, max %.2f ms",
    engine or "Redis", label, way and way ~= "schedule" and ", q:" .. way or "", #late, JOBS,
    pct(late, 0.5) * 1e3, pct(late, 0.99) * 1e3, late[#late] * 1e3))
end

-- What the wake-up costs the scheduling process: q:schedule of due-now
-- jobs of a kind it does not run (the PUBLISH after each write), with wake
-- on and off, alternated, 5,000 jobs a round, median of 3 rounds each.
local function schedule_cost(port)
  local function rate(wake)
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = function() return redis.connect("127.0.0.1", port) end,
      prefix = "cost", wake = wake }))
    local t0 = core.now()
    for _ = 1, 5000 do assert(q:schedule("pick", 0)) end
    local r = 5000 / (core.now() - t0)
    q:close()
    timer:close()
    redis.connect("127.0.0.1", port):flushall()
    return r
  end
  local on, off = {}, {}
  for i = 1, 3 do
    if i % 2 == 1 then on[i], off[i] = rate(true), rate(false) else off[i], on[i] = rate(false), rate(true) end
  end
  table.sort(on)
  table.sort(off)
  print(string.format("durable (Redis) q:schedule of due-now jobs another process runs: %.0f /s with wake-ups, " ..
    "%.0f /s with wake = false (%.2fx; medians of 3 alternated rounds of 5,000)", on[2], off[2], on[2] / off[2]))
end

print(string.format("== hwtimer.durable (Redis): a job due now, from q:schedule in this process to its " ..
  "handler in another (%d jobs 23 ms apart, poll 0.05 s)", JOBS))
local server = N.start_redis()
local ok, err = pcall(function()
  schedule_cost(server.port)
  if with_nginx then
    for _, wake in ipairs({ "true", "false" }) do
      local port = N.free_port()
      local nginx = N.start(N.config(CONF, { PORT = port, REDIS = server.port, WAKE = wake })
        :gsub("worker_processes 1;", "worker_processes 2;", 1))
      local fine, e = pcall(function()
        for _ = 1, 2 do assert(select(2, N.get(port, "/ready", 10)) == "open\n", "the queue did not open") end
        socket.sleep(0.2)
        for _, way in ipairs(wake == "true" and { "schedule", "run_now", "retry" } or { "schedule" }) do
          row(wake == "true" and "nginx, 2 workers, wake-ups" or "nginx, 2 workers, wake = false (poll)",
            measure(server.port, nil, way), nil, way)
        end
      end)
      nginx.stop()
      if not fine then error(e, 0) end
    end
  else
    print("durable (Redis) due-now pickup in nginx: skipped, needs nginx, libnginx-mod-http-lua and HWT_NGX_*")
  end
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PLAIN)
  f:close()
  local c = redis.connect("127.0.0.1", server.port)
  local lua = arg[-1] or "luajit"
  local db = os.tmpname() .. ".db"
  local runs = { { "run" }, { "luv" } }
  if pcall(require, "hwtimer.sqlite") then
    runs[3], runs[4] = { "run", db }, { "luv", db }
  else
    print("durable (SQLite) due-now pickup: skipped, hwtimer.sqlite not built")
  end
  for _, r in ipairs(runs) do
    local host, file = r[1], r[2]
    c:del("plain_ready", "plain_stop")
    local child = io.popen(string.format("%s %s %d %s %s 2>&1", lua, path, server.port, host, file or ""))
    local limit = socket.gettime() + 10
    while c:get("plain_ready") ~= "1" and socket.gettime() < limit do socket.sleep(0.05) end
    socket.sleep(0.2)
    local wake = file and "hwtimer.durable.sqlite_wake" or "hwtimer.durable.redis_wake"
    for _, way in ipairs(host == "luv" and { "schedule", "run_now", "retry" } or { "schedule" }) do
      row(host == "luv" and "a plain Lua process, luv loop, " .. wake or
        "a plain Lua process, timer:run (no listener: the poll)", measure(server.port, file, way),
        file and "SQLite", way)
    end
    c:set("plain_stop", "1")
    io.write(child:read("*a"))
    child:close()
  end
  os.remove(db)
  os.remove(db .. "-wal")
  os.remove(db .. "-shm")
  os.remove(path)
end)
server.stop()
if not ok then error(err, 0) end
