-- hwtimer.ngx inside a real nginx (Debian's nginx + libnginx-mod-http-lua),
-- started on a loopback port with its own prefix and config, always stopped
-- after. Requests schedule 10,000 timeouts (a quarter cancelled); a later
-- request reads back how many fired and how many were cancelled: both exact.
-- nginx runs LuaJIT, so this runs in the LuaJIT spec run, where the module
-- built for LuaJIT is on HWT_NGX_CPATH.
local cpath = os.getenv("HWT_NGX_CPATH")
local lpath = os.getenv("HWT_NGX_PATH")
local nginx = "/usr/sbin/nginx"
local lua_module = "/usr/lib/nginx/modules/ngx_http_lua_module.so"
local ndk_module = "/usr/lib/nginx/modules/ndk_http_module.so"

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local ready = rawget(_G, "jit") and cpath and lpath and exists(nginx) and exists(lua_module)

local CONF = [[
worker_processes 1;
daemon on;
master_process on;
pid logs/nginx.pid;
error_log logs/error.log warn;
load_module @NDK@;
load_module @LUA@;
events { worker_connections 64; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  lua_max_pending_timers 16;   # one per timeout would never fit
  init_worker_by_lua_block {
    package.loaded.hwt_state = {
      timer = assert(require("hwtimer.ngx").new({ tick = 0.001 })),
      scheduled = 0, cancelled = 0, fired = 0, early = 0, twice = 0, seen = {},
    }
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

local function free_port()
  local socket = require("socket")
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return port
end

local function get(port, path)
  local socket = require("socket")
  local c = socket.tcp()
  c:settimeout(5)
  assert(c:connect("127.0.0.1", port))
  c:send("GET " .. path .. " HTTP/1.0\r\nHost: localhost\r\n\r\n")
  local body = c:receive("*a")
  c:close()
  local status = tonumber(body:match("^HTTP/%d%.%d (%d+)"))
  return status, body:match("\r\n\r\n(.*)$")
end

local function numbers(s)
  local t = {}
  for n in s:gmatch("%d+") do t[#t + 1] = tonumber(n) end
  return t
end

-- nginx's workers run as the user tests run as (as root, nginx would switch
-- them to `nobody`, who may not read a checkout such as a 0700 temp dir).
local function as_test_user(conf)
  local p = io.popen("id -un")
  local user = p:read("*l")
  p:close()
  return (conf:gsub("worker_processes 1;", "worker_processes 1;\nuser " .. user .. ";", 1))
end

-- Start nginx with `conf` in a fresh prefix; returns the prefix and a stop function.
local function start_nginx(conf)
  conf = as_test_user(conf)
  local prefix = os.tmpname()
  os.remove(prefix)
  assert(os.execute("mkdir -p " .. prefix .. "/logs " .. prefix .. "/conf"))
  local f = assert(io.open(prefix .. "/conf/nginx.conf", "w"))
  f:write(conf)
  f:close()
  local ok = os.execute(string.format("%s -p %s -c conf/nginx.conf 2>%s/logs/start.log",
    nginx, prefix, prefix))
  assert(ok == true or ok == 0, "nginx did not start")
  local function stop()
    local pf = io.open(prefix .. "/logs/nginx.pid")
    local pid = pf and pf:read("*n")
    if pf then pf:close() end
    os.execute(string.format("%s -p %s -c conf/nginx.conf -s stop 2>/dev/null", nginx, prefix))
    require("socket").sleep(0.3)
    if pid then -- the daemon leads its own process group: make sure all of it is gone
      os.execute("kill -9 -" .. pid .. " 2>/dev/null")
    end
    os.execute("rm -rf " .. prefix)
  end
  return prefix, stop
end

local function wait_listening(port)
  for _ = 1, 100 do
    if pcall(get, port, "/stats") then return end
    require("socket").sleep(0.05)
  end
end

describe("OpenResty: hwtimer.ngx in a real nginx", function()
  if not ready then
    it("needs LuaJIT, nginx and its Lua module", function()
      pending("runs in the LuaJIT spec run with Debian's nginx and libnginx-mod-http-lua")
    end)
    return
  end

  local prefix, port, stop

  setup(function()
    port = free_port()
    prefix, stop = start_nginx((CONF:gsub("@(%u+)@", { NDK = ndk_module, LUA = lua_module,
      LPATH = lpath, CPATH = cpath, PORT = tostring(port) })))
    wait_listening(port)
  end)

  teardown(function() stop() end)

  it("runs 10,000 timeouts exactly, with cancels, on one nginx timer", function()
    for _ = 1, 10 do
      local status, body = get(port, "/schedule?n=1000")
      assert.equal(200, status, body)
    end
    local stats
    for _ = 1, 100 do
      stats = numbers(select(2, get(port, "/stats")))
      if stats[3] + stats[2] >= stats[1] then break end
      require("socket").sleep(0.05)
    end
    local scheduled, cancelled, fired, early, twice, pending = stats[1], stats[2], stats[3],
      stats[4], stats[5], stats[6]
    assert.equal(10000, scheduled)
    assert.equal(2500, cancelled)
    assert.equal(7500, fired)
    assert.equal(0, early)
    assert.equal(0, twice)
    assert.equal(0, pending)
    local log = io.open(prefix .. "/logs/error.log"):read("*a")
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
      require("socket").sleep(0.02)
    end
    assert.equal(5, beats)
  end)

  it("examples/openresty/nginx.conf runs as documented", function()
    if not cpath:find("build/jit", 1, true) then
      return pending("the example loads build/jit; this run tests an installed rock")
    end
    local f = assert(io.open("examples/openresty/nginx.conf"))
    local conf = f:read("*a"):gsub("8089", tostring(free_port()))
    f:close()
    local example_port = tonumber(conf:match("listen 127%.0%.0%.1:(%d+)"))
    local _, stop_example = start_nginx(conf)
    local ok, err = pcall(function()
      wait_listening(example_port)
      local status, body = get(example_port, "/later?after=0.05")
      assert.equal(200, status, body)
      assert.matches("scheduled, due in", body, 1, true)
      local stats
      for _ = 1, 50 do
        stats = select(2, get(example_port, "/stats"))
        if stats:find("fired 1", 1, true) then break end
        require("socket").sleep(0.05)
      end
      assert.matches("fired 1, pending 0", stats, 1, true)
    end)
    stop_example()
    assert(ok, err)
  end)
end)
