-- Starting a real nginx (Debian's nginx + libnginx-mod-http-lua) and a real
-- redis-server for the specs: each on a free loopback port, with its own
-- prefix, stopped by its pid. nginx runs LuaJIT, so the specs that use this
-- run in the LuaJIT spec run, where HWT_NGX_CPATH points at the module built
-- for LuaJIT.
local socket = require("socket")

local N = {}

N.cpath = os.getenv("HWT_NGX_CPATH")
N.lpath = os.getenv("HWT_NGX_PATH")
N.nginx = "/usr/sbin/nginx"
N.lua_module = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
N.ndk_module = "/usr/lib/nginx/modules/ndk_http_module.so"

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end
N.exists = exists

N.ready = rawget(_G, "jit") and N.cpath and N.lpath and exists(N.nginx) and exists(N.lua_module)
  and true or false

--- In a describe block, given busted's pending (it lives in the spec
-- file's environment): true, with a pending test saying why, when this run
-- cannot start nginx (the specs that need it run in the LuaJIT run).
function N.skip_unless_ready(pending)
  if N.ready then return false end
  pending("needs LuaJIT, nginx and its Lua module: runs in the LuaJIT spec run with Debian's nginx " ..
          "and libnginx-mod-http-lua")
  return true
end

--- A process that exited is not alive, even while it waits as a zombie for
-- its parent (here PID 1, which may reap late) to collect it.
function N.alive(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  local line = f and f:read("*l")
  if f then f:close() end
  local state = line and line:match("^.-%) (%a)")
  return state ~= nil and state ~= "Z"
end

--- Wait up to `secs` for every process of `pids` to be gone; the first one
-- still alive then, or nil.
function N.wait_gone(pids, secs)
  local limit = socket.gettime() + secs
  for _, pid in ipairs(pids) do
    while N.alive(pid) and socket.gettime() < limit do socket.sleep(0.05) end
    if N.alive(pid) then return pid end
  end
end

function N.free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return port
end

-- One HTTP/1.0 GET; returns the status, the body and the seconds it took.
function N.get(port, path, timeout)
  local c = socket.tcp()
  c:settimeout(timeout or 5)
  local t0 = socket.gettime()
  assert(c:connect("127.0.0.1", port))
  c:send("GET " .. path .. " HTTP/1.0\r\nHost: localhost\r\n\r\n")
  local body = c:receive("*a")
  c:close()
  assert(body, "no reply to " .. path)
  local status = tonumber(body:match("^HTTP/%d%.%d (%d+)"))
  return status, body:match("\r\n\r\n(.*)$"), socket.gettime() - t0
end

function N.numbers(s)
  local t = {}
  for n in s:gmatch("-?[%d%.]+") do t[#t + 1] = tonumber(n) end
  return t
end

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

-- Servers daemonize (their own session: out of the process group that
-- spec/run.sh kills when a spec file runs past its time). Each one a spec
-- starts is written to $HWT_SPEC_SERVERS, and spec/run.sh stops by its pid
-- whichever is still running when the file ends, however it ended.
local function record(pid)
  local path = os.getenv("HWT_SPEC_SERVERS")
  if not (pid and path) then return end
  local f = io.open(path, "a")
  if f then
    f:write(pid, "\n")
    f:close()
  end
end

local function read_pid(path)
  local f = io.open(path)
  local pid = f and f:read("*n")
  if f then f:close() end
  return pid
end
N.read_pid = read_pid

-- What every config here starts with: one worker, a daemon with its pid in
-- the prefix, warnings in logs/error.log, the Lua module loaded.
local HEAD = [[
worker_processes 1;
daemon on;
master_process on;
pid logs/nginx.pid;
error_log logs/error.log warn;
load_module @NDK@;
load_module @LUA@;]]

-- @HEAD@ in a config becomes HEAD; @NDK@, @LUA@, @LPATH@, @CPATH@ the module
-- paths; the workers run as the test's user (as root, nginx would switch
-- them to `nobody`, who may not read a checkout such as a 0700 temp dir).
function N.config(conf, vars)
  local all = { NDK = N.ndk_module, LUA = N.lua_module, LPATH = N.lpath, CPATH = N.cpath }
  for k, v in pairs(vars or {}) do all[k] = tostring(v) end
  conf = conf:gsub("@HEAD@", HEAD):gsub("@(%u+)@", all)
  local p = io.popen("id -un")
  local user = p:read("*l")
  p:close()
  return (conf:gsub("worker_processes (%d+);", "worker_processes %1;\nuser " .. user .. ";", 1))
end

-- Start nginx with `conf` (after N.config) in a fresh prefix. Returns an
-- object: prefix, log() (error.log so far), master_pid(), worker_pids(),
-- signal(cmd) (nginx -s cmd), stop().
function N.start(conf)
  local prefix = os.tmpname()
  os.remove(prefix)
  assert(sh("mkdir -p " .. prefix .. "/logs " .. prefix .. "/conf"))
  local f = assert(io.open(prefix .. "/conf/nginx.conf", "w"))
  f:write(conf)
  f:close()
  local cmd = string.format("%s -p %s -c conf/nginx.conf", N.nginx, prefix)
  assert(sh(cmd .. " 2>" .. prefix .. "/logs/start.log"), "nginx did not start")
  record(read_pid(prefix .. "/logs/nginx.pid"))
  local self = { prefix = prefix }
  function self.log()
    local lf = io.open(prefix .. "/logs/error.log")
    local s = lf and lf:read("*a") or ""
    if lf then lf:close() end
    return s
  end
  function self.master_pid() return read_pid(prefix .. "/logs/nginx.pid") end
  function self.worker_pids()
    local pids, master = {}, self.master_pid()
    local p = io.popen("pgrep -P " .. tostring(master))
    for line in p:lines() do pids[#pids + 1] = tonumber(line) end
    p:close()
    table.sort(pids)
    return pids
  end
  function self.signal(sig)
    return sh(cmd .. " -s " .. sig .. " 2>/dev/null")
  end
  function self.stop()
    local pid = self.master_pid()
    self.signal("stop")
    for _ = 1, 40 do
      if not pid or not sh("kill -0 " .. pid .. " 2>/dev/null") then break end
      socket.sleep(0.05)
    end
    if pid then sh("kill -9 -" .. pid .. " 2>/dev/null") end -- its process group, if any is left
    sh("rm -rf " .. prefix)
  end
  return self
end

--- As many descriptors as a process here may have, up to 65536: for
-- worker_rlimit_nofile where callbacks open thousands of cosockets at once.
function N.nofile()
  local p = io.popen("ulimit -Hn")
  local n = tonumber(p:read("*l")) or 65536
  p:close()
  return math.min(n, 65536)
end

function N.wait_listening(port, path)
  for _ = 1, 100 do
    if pcall(N.get, port, path or "/") then return true end
    socket.sleep(0.05)
  end
  return false
end

--- One command to a redis-server on a loopback port, in its protocol (no
-- client library needed); returns the reply (a string, number, list or nil),
-- raises on an error reply.
function N.redis_cmd(port, ...)
  local c = socket.tcp()
  c:settimeout(5)
  assert(c:connect("127.0.0.1", port))
  local out = { "*" .. select("#", ...) }
  for _, a in ipairs({ ... }) do
    a = tostring(a)
    out[#out + 1] = "$" .. #a
    out[#out + 1] = a
  end
  assert(c:send(table.concat(out, "\r\n") .. "\r\n"))
  local function read()
    local line = assert(c:receive("*l"))
    local kind, rest = line:sub(1, 1), line:sub(2)
    if kind == "+" then return rest end
    if kind == "-" then error(rest) end
    if kind == ":" then return tonumber(rest) end
    local n = tonumber(rest)
    if n < 0 then return nil end
    if kind == "$" then return assert(c:receive(n + 2)):sub(1, n) end
    local list = {}
    for i = 1, n do list[i] = read() end
    return list
  end
  local reply = read()
  c:close()
  return reply
end

--- redis-lua (Debian lua-redis: plain Lua on luasocket, its package lists
-- Lua 5.1-5.3, so on 5.4 it is found through 5.3's path), or nil.
function N.redis_lua()
  if not pcall(require, "redis") then
    package.path = package.path .. ";/usr/share/lua/5.3/?.lua"
  end
  local ok, redis = pcall(require, "redis")
  return ok and redis or nil
end

-- One redis-server on a free loopback port (and a unix socket in its
-- directory, redis.sock), no persistence, daemonized with its pid in its own
-- directory; `extra` adds options. Returns { port =, pid =, dir =, socket = }.
local function redis_server(extra, port, dir)
  port = port or N.free_port()
  if not dir then
    dir = os.tmpname()
    os.remove(dir)
    assert(sh("mkdir -p " .. dir))
  end
  assert(sh(string.format("redis-server --bind 127.0.0.1 --port %d --save '' --appendonly no " ..
    "--unixsocket %s/redis.sock --unixsocketperm 700 " ..
    "--daemonize yes --dir %s --pidfile %s/redis.pid --logfile %s/redis.log %s", port, dir, dir, dir, dir,
    extra or "")))
  local pid
  for _ = 1, 100 do
    pid = read_pid(dir .. "/redis.pid")
    local c = socket.tcp()
    c:settimeout(0.2)
    if pid and c:connect("127.0.0.1", port) then c:close() break end
    c:close()
    socket.sleep(0.05)
  end
  record(pid)
  return { port = port, pid = pid, dir = dir, socket = dir .. "/redis.sock" }
end

-- Stop servers { pid =, dir = } (all signalled first, then waited for);
-- their directories are removed unless `keep`.
local function stop_redis(servers, keep)
  for _, s in ipairs(servers) do
    if s.pid then sh("kill " .. s.pid .. " 2>/dev/null") end
  end
  for _, s in ipairs(servers) do
    for _ = 1, 60 do
      if not s.pid or not sh("kill -0 " .. s.pid .. " 2>/dev/null") then break end
      socket.sleep(0.05)
    end
    if not keep then sh("rm -rf " .. s.dir) end
  end
end

-- A redis-server for a spec: { port =, socket =, dir =, stop = fn, restart = fn }
-- (stopped by its pid; restart([pause]): its data saved, stopped, `pause`
-- seconds down, then started again on the same port with that data);
-- `extra`: more of redis-server's options (a password, TLS; restart() is
-- for a server without a password).
function N.start_redis(extra)
  local node = redis_server(extra)
  local self = { port = node.port, socket = node.socket, dir = node.dir }
  function self.stop() stop_redis({ node }) end
  function self.restart(pause)
    assert(sh("redis-cli -p " .. self.port .. " save >/dev/null"))
    stop_redis({ node }, true)
    if pause then socket.sleep(pause) end
    node = redis_server(extra, self.port, node.dir)
  end
  return self
end

-- A redis-server with an append-only file fsynced at every write, that can
-- be killed and started again on the same port and directory (start_redis's
-- has no persistence): { port =, start = fn, kill9 = fn, stop = fn }; not
-- running until start().
function N.persistent_redis()
  local dir = os.tmpname()
  os.remove(dir)
  assert(sh("mkdir -p " .. dir))
  local s = { port = N.free_port(), dir = dir }
  local function wait_exit()
    for _ = 1, 100 do
      if not sh("kill -0 " .. s.pid .. " 2>/dev/null") then return true end
      socket.sleep(0.05)
    end
    return false
  end
  function s.start()
    assert(sh(string.format("redis-server --bind 127.0.0.1 --port %d --save '' --appendonly yes " ..
      "--appendfsync always --daemonize yes --dir %s --pidfile %s/redis.pid --logfile %s/redis.log",
      s.port, dir, dir, dir)))
    local redis = assert(N.redis_lua(), "redis-lua")
    for _ = 1, 100 do
      s.pid = read_pid(dir .. "/redis.pid")
      -- ready once it answers (it says LOADING while it replays the file)
      if s.pid and pcall(function() return redis.connect("127.0.0.1", s.port):ping() end) then
        return record(s.pid)
      end
      socket.sleep(0.05)
    end
    error("redis-server did not start")
  end
  function s.kill9()
    sh("kill -9 " .. s.pid)
    assert(wait_exit(), "redis-server outlived kill -9")
    os.remove(dir .. "/redis.pid")
  end
  function s.stop()
    if s.pid and sh("kill " .. s.pid .. " 2>/dev/null") then wait_exit() end
    sh("rm -rf '" .. dir .. "'")
  end
  return s
end

-- A Redis Cluster of `n` masters (default 3) on loopback ports, slots
-- shared by redis-cli --cluster create. Returns { ports = {...}, stop = fn },
-- or nil, message (no redis-cli, or the cluster did not form: then stopped).
function N.start_redis_cluster(n)
  if not sh("command -v redis-cli >/dev/null 2>&1") then return nil, "redis-cli missing" end
  local nodes, addrs, ports = {}, {}, {}
  for i = 1, n or 3 do
    nodes[i] = redis_server("--cluster-enabled yes --cluster-config-file nodes.conf")
    ports[i], addrs[i] = nodes[i].port, "127.0.0.1:" .. nodes[i].port
  end
  local function ok_everywhere() -- every node sees every slot served
    for _, port in ipairs(ports) do
      local p = io.popen("redis-cli -p " .. port .. " cluster info 2>/dev/null")
      local info = p:read("*a")
      p:close()
      if not info:find("cluster_state:ok", 1, true) then return false end
    end
    return true
  end
  if sh("redis-cli --cluster create " .. table.concat(addrs, " ") ..
        " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1") then
    for _ = 1, 100 do
      if ok_everywhere() then
        return { ports = ports, stop = function() stop_redis(nodes) end }
      end
      socket.sleep(0.05)
    end
  end
  stop_redis(nodes)
  return nil, "the cluster of " .. #nodes .. " nodes did not form"
end

return N
