-- Shared helpers for the specs.
local hwtimer = require("hwtimer")

local helpers = {}

-- The same specs run on Lua 5.1-5.4 and LuaJIT.
helpers.unpack = table.unpack or unpack
helpers.load = loadstring or load

function helpers.pack(...)
  return { n = select("#", ...), ... }
end

-- Whether to run the issue's full sizes (a store of 10^6 jobs, a kill -9
-- amid 50,000) and the Redis Cluster: in the Lua 5.4 run of the source tree;
-- the repeat runs (the other Luas, the rocks, the sanitizers: HWT_QUICK;
-- valgrind: HWT_SLOW) take a tenth, or leave the cluster out, to keep the
-- suite's time.
function helpers.full_size()
  return _VERSION == "Lua 5.4" and not rawget(_G, "jit") and os.getenv("HWT_SLOW") == nil
    and os.getenv("HWT_QUICK") == nil
end

-- A module this machine may not have built (hwtimer.sqlite without
-- libsqlite3-dev): the module, or nil where require finds no file of it. One
-- that is found and fails to load raises: a broken build is a failure, not
-- a spec left pending as if the module were not there.
function helpers.optional(name)
  local ok, m = pcall(require, name)
  if ok then return m end
  if tostring(m):find("module '" .. name .. "' not found", 1, true) then return nil end
  error(name .. " is built here but does not load: " .. tostring(m), 0)
end

-- Count the calls of obj's method `name` (set on obj over its class's):
-- returns count() and stop(), which gives obj its class's method back.
function helpers.count_calls(obj, name)
  local n, f = 0, obj[name]
  obj[name] = function(...)
    n = n + 1
    return f(...)
  end
  return function() return n end, function() obj[name] = nil end
end

-- How many keys t has.
function helpers.count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

-- Dispatch until `done()` is true or `secs` pass; returns done().
function helpers.wait_until(timer, done, secs)
  local limit = hwtimer.now() + (secs or 5)
  while not done() and hwtimer.now() < limit do
    timer:run(0.005)
  end
  return done()
end

-- The whole content of a file.
function helpers.read_file(path)
  local f = assert(io.open(path))
  local s = f:read("*a")
  f:close()
  return s
end

-- What a shell command prints.
function helpers.shell(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("*a")
  p:close()
  return out
end

-- Whether a shell command succeeded (os.execute's result on every Lua).
function helpers.sh(cmd)
  local ok = os.execute(cmd)
  return ok == true or ok == 0
end

-- Prometheus text checked by `promtool check metrics` (Debian: prometheus):
-- true, or false and what promtool said. Fails the spec when promtool is
-- missing: make test installs it.
function helpers.promtool(text)
  assert(helpers.sh("command -v promtool >/dev/null"), "promtool missing: apt-get install prometheus")
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  local out = helpers.shell("promtool check metrics < " .. path .. " 2>&1; echo \"exit $?\"")
  os.remove(path)
  local status = tonumber(out:match("exit (%d+)%s*$"))
  return status == 0, out
end

-- The value of the sample whose line starts `line_start ` (name and labels,
-- exactly as rendered) in Prometheus text; nil when there is none.
function helpers.prom_sample(text, line_start)
  for line in text:gmatch("[^\n]+") do
    if line:sub(1, #line_start + 1) == line_start .. " " then return tonumber(line:sub(#line_start + 2)) end
  end
end

-- Start a shell command in the background; returns its pid.
function helpers.spawn(cmd)
  return (helpers.shell(cmd .. " & echo $!"):match("%d+"))
end

-- A new directory /tmp/NAME.XXXXXX (mktemp -d).
function helpers.tempdir(name)
  local dir = helpers.shell("mktemp -d /tmp/" .. name .. ".XXXXXX"):gsub("%s+$", "")
  assert(dir ~= "", "mktemp -d failed (a child process cannot start here)")
  return dir
end

-- The lines a shell command prints, as a list.
function helpers.lines_of(cmd)
  local p = assert(io.popen(cmd))
  local t = {}
  for line in p:lines() do t[#t + 1] = line end
  p:close()
  return t
end

-- Wait (up to `secs`, generously) until the worker has expired something and
-- made the timer's pipe readable, without dispatching it.
function helpers.wait_readable(timer, secs)
  return require("hwtimer_testutil").readable(timer:getfd(), secs or 5)
end

-- Number of threads of this process (Linux /proc), or nil elsewhere.
function helpers.thread_count()
  local f = io.open("/proc/self/status")
  if not f then return nil end
  local n = f:read("*a"):match("Threads:%s*(%d+)")
  f:close()
  return tonumber(n)
end

-- Seconds left until `deadline` as reported by `measure()`, checked against
-- clock reads taken around the call: between deadline - after and
-- deadline - before, never below 0 (a slow host may already have reached it).
function helpers.assert_time_left(deadline, measure)
  local before = hwtimer.now()
  local left = measure()
  local after = hwtimer.now()
  assert(left <= math.max(0, deadline - before) + 1e-6, "later than the deadline: " .. left)
  assert(left >= math.max(0, deadline - after) - 1e-6, "earlier than the deadline: " .. left)
  return left
end

-- Drop a timer with n timeouts pending (every keep_every-th one watched):
-- after four full collections the timer and those timeouts must be gone and
-- the process must have its thread count from before.
function helpers.assert_dropped_timer_frees(n, keep_every)
  collectgarbage()
  collectgarbage()
  local before = helpers.settled_thread_count()
  local weak = setmetatable({}, { __mode = "k" })
  do
    local timer = hwtimer.new()
    for i = 1, n do
      local t = timer:schedule(1 + i % 50, function() end)
      if i % keep_every == 0 then weak[t] = true end
    end
    weak[timer] = true
  end
  for _ = 1, 4 do collectgarbage() end
  assert(next(weak) == nil, "a dropped timer or one of its timeouts is still alive")
  if before then
    local now = helpers.wait_thread_count(before)
    assert(now == before, "threads: " .. before .. " before, " .. now .. " after")
  end
end

-- A joined thread can still be counted for a moment (the kernel wakes
-- pthread_join before it unlists the thread), so counts to compare are read
-- once they hold still, and an expected count is waited for (up to secs).
function helpers.settled_thread_count()
  local last, same = helpers.thread_count(), 0
  while last and same < 5 do
    require("hwtimer_testutil").sleep(0.002)
    local n = helpers.thread_count()
    same = n == last and same + 1 or 0
    last = n
  end
  return last
end

function helpers.wait_thread_count(n, secs)
  local limit = hwtimer.now() + (secs or 2)
  local c = helpers.thread_count()
  while c ~= n and hwtimer.now() < limit do
    require("hwtimer_testutil").sleep(0.001)
    c = helpers.thread_count()
  end
  return c
end

-- Run a Lua snippet in a fresh interpreter with the same paths; returns its
-- combined output and whether it exited 0. `redirect` (shell text) is added
-- to its command line, as "<&-" to start it with stdin closed.
function helpers.run_lua(code, redirect)
  local lua = os.getenv("HWT_LUA") or "lua5.4"
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local p = io.popen(string.format("%s %s %s 2>&1; echo \"exit=$?\"", lua, path, redirect or ""))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local status = tonumber(out:match("exit=(%d+)%s*$"))
  return out, status == 0
end

-- fn raises `message` at a line of the spec file whose name matches
-- `file` (a Lua pattern): the position an error's level gives, which
-- has_error strips. fn must not end in a tail call (its frame would be gone).
function helpers.raises_at(file, fn, message)
  local ok, err = pcall(fn)
  assert(not ok, "did not raise: " .. message)
  local where, text = tostring(err):match("^(.-):%d+: (.*)$")
  assert(where and where:find(file), "raised at " .. tostring(where) .. ", not in " .. file .. ": " .. tostring(err))
  assert(text == message, "raised '" .. tostring(text) .. "', not '" .. message .. "'")
end

-- This process's id (Linux /proc).
function helpers.pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("*a"):match("^(%d+)")
  f:close()
  return pid
end

-- The voluntary context switches of process pid's threads other than its
-- main one (the timers' driver thread, a checkpoint's): how often they woke.
function helpers.thread_switches(pid)
  pid = tonumber(pid)
  local n = 0
  local p = io.popen("ls /proc/" .. pid .. "/task")
  for tid in p:read("*a"):gmatch("%d+") do
    if tonumber(tid) ~= pid then
      local f = io.open("/proc/" .. pid .. "/task/" .. tid .. "/status")
      if f then -- (a thread may end between the listing and the read)
        n = n + tonumber(f:read("*a"):match("\nvoluntary_ctxt_switches:%s*(%d+)") or 0)
        f:close()
      end
    end
  end
  p:close()
  return n
end

-- The name a type error gives for v: its metatable's __name (5.3 on), else its type.
function helpers.type_name(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__name") or type(v)
end

function helpers.busy(secs)
  local t = hwtimer.now() + secs
  while hwtimer.now() < t do end
end

-- The punctual specs (spec/hosts/05, 06, 08): the 99th percentile of a list
-- of lateness (sorted in place), and seconds shown in ms.
function helpers.p99(list)
  table.sort(list)
  return list[math.ceil(#list * 0.99)]
end

function helpers.ms(s) return ("%.2f ms"):format(s * 1000) end

-- The median of a list of numbers (a copy is sorted).
function helpers.median(list)
  local c = { helpers.unpack(list) }
  table.sort(c)
  local n = #c
  return n % 2 == 1 and c[(n + 1) / 2] or (c[n / 2] + c[n / 2 + 1]) / 2
end

-- measure() returns a miss (a message) or false. A neighbour on this shared
-- machine can hold up one burst by a few ms, where a host that holds
-- callbacks back behind waiting ones holds them for the whole wait, every
-- time: so a miss runs again once. Returns the second miss, or false.
function helpers.miss_twice(measure)
  local miss = measure()
  if miss then miss = measure() end
  return miss
end

-- hwtimer-jobs run in this process (hwtimer.jobs_cli.main) with the words
-- `args`: its stdout, stderr and exit status.
function helpers.jobs_cli(args)
  local function sink()
    local t = {}
    return { t = t, flush = function() return true end,
             write = function(self, ...)
               for _, v in ipairs({ ... }) do t[#t + 1] = tostring(v) end
               return self
             end }
  end
  local o, e = sink(), sink()
  local status = require("hwtimer.jobs_cli").main(args, o, e)
  return table.concat(o.t), table.concat(e.t), status
end

-- What a spec of a real redis-server needs: spec.nginx (which needs
-- luasocket), redis-lua and the redis-server command; N and redis-lua's
-- module, or nil where one is missing.
function helpers.redis_kit()
  local ok, N = pcall(require, "spec.nginx")
  local redis = ok and N.redis_lua()
  local server = os.execute("command -v redis-server >/dev/null 2>&1")
  if ok and redis and (server == true or server == 0) then return N, redis end
  return nil
end

-- Inside a describe: true where helpers.redis_kit() found nothing, after a
-- pending test that says what to install (the describe then returns).
function helpers.without_redis(it, pending)
  if helpers.redis_kit() then return false end
  it("needs redis-server, luasocket and redis-lua", function()
    pending("redis-server, luasocket or redis-lua missing: apt-get install redis-server lua-socket lua-redis")
  end)
  return true
end

return helpers
