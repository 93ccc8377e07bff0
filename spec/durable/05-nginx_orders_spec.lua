-- spec: alone (closes p99 within 1 s; spec/run.sh -j runs it with nothing beside it)
-- examples/openresty-durable (an orders service: an order not paid within
-- 2 s is closed by a durable job whose handler makes a 50 ms call through a
-- cosocket) in a real nginx with two workers, once per store: a SQLite file,
-- and a real redis-server through lua-resty-redis (issue 20). Handlers that
-- wait run side by side; a reload, a quit and a stop run no job twice; a
-- worker killed with kill -9 runs again only the jobs it had not finished;
-- errors go to error.log with a level, and a store that is down is retried
-- with backoff. Runs in the LuaJIT spec run.
local N = require("spec.nginx")
local socket = require("socket")

local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

-- The orders' lifecycle, as the example's /stats shows it.
local function stats_of(body)
  local t = {}
  for k, v in body:gmatch("(%a+) (%-?[%d%.]+)") do t[k] = tonumber(v) end
  -- (a close may read nginx's cached clock a hair before its due time: "-0.000")
  t.p50, t.p99, t.max = tonumber(body:match("p50 (%-?[%d%.]+)")), tonumber(body:match("p99 (%-?[%d%.]+)")),
    tonumber(body:match("max (%-?[%d%.]+)"))
  return t
end

local alive = N.alive

local function count_lines(log, text)
  local n, from = 0, 1
  while true do
    local at = log:find(text, from, true)
    if not at then return n end
    n, from = n + 1, at + #text
  end
end

local STORES = {
  { name = "one SQLite file", store = function(dir) return "sqlite:" .. dir .. "/orders.db" end },
  { name = "Redis through lua-resty-redis", redis = true,
    store = function(_, redis) return "redis:127.0.0.1:" .. redis.port end },
}

for _, store in ipairs(STORES) do
describe("examples/openresty-durable, two nginx workers on " .. store.name, function()
  if os.getenv("HWT_QUICK") then
    it("runs in the LuaJIT run of the source tree", function()
      pending("spec/durable/05-nginx_orders runs in the LuaJIT run of the source tree")
    end)
    return
  end
  if not N.ready or not N.cpath:find("build/jit", 1, true) then
    it("needs LuaJIT, nginx and its Lua module, and the example's build/jit", function()
      pending("runs in the LuaJIT spec run of the source tree with Debian's nginx and libnginx-mod-http-lua")
    end)
    return
  end
  if not store.redis and not require("spec.helpers").optional("hwtimer.sqlite") then
    it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
    return
  end

  local redis, dir, port, nginx

  -- The example's nginx.conf on a free port, as the test's user, with
  -- ORDERS_* from `vars`; waits until both workers have the queue open.
  local function start(extra_env, not_open)
    local f = assert(io.open("examples/openresty-durable/nginx.conf"))
    -- (notices too: the workers' "exiting" shows that this is their log)
    local conf = f:read("*a"):gsub("8090", tostring(port)):gsub("error_log logs/error.log;", "error_log logs/error.log notice;")
    f:close()
    local vars = { ORDERS_STORE = store.store(dir, redis), ORDERS_PAY_WITHIN = 2, ORDERS_LEASE = 30 }
    for k, v in pairs(extra_env or {}) do vars[k] = v end
    local exports = {}
    for k, v in pairs(vars) do exports[#exports + 1] = k .. "='" .. tostring(v) .. "'" end
    -- (nginx takes ORDERS_* from its environment: `env` lines in the conf)
    local saved = N.nginx
    N.nginx = "env " .. table.concat(exports, " ") .. " " .. saved
    nginx = N.start(N.config(conf))
    N.nginx = saved
    assert(N.wait_listening(port, "/stats"), nginx.log())
    if not_open then return end
    for _ = 1, 100 do
      local status = N.get(port, "/order?id=probe")
      if status == 200 then break end
      socket.sleep(0.05)
    end
    assert.equal(200, (N.get(port, "/pay?id=probe")), nginx.log())
  end

  local function stop()
    if nginx then nginx.stop() end
    nginx = nil
  end

  local function stats()
    local status, body = N.get(port, "/stats")
    assert.equal(200, status, body)
    return stats_of(body), body
  end

  -- Orders 1..n, `rate` a second (as fast as they go when nil), every
  -- other one paid at once when `pay_every_other`.
  local function orders(n, pay_every_other, rate)
    local t0 = socket.gettime()
    for i = 1, n do
      if rate then
        local ahead = t0 + i / rate - socket.gettime()
        if ahead > 0 then socket.sleep(ahead) end
      end
      local status, body = N.get(port, "/order?id=" .. i)
      assert.equal(200, status, body)
      if pay_every_other and i % 2 == 0 then
        status, body = N.get(port, "/pay?id=" .. i)
        assert.equal(200, status, body)
      end
    end
  end

  local function wait_closed(n, secs)
    local limit, s, body = socket.gettime() + secs * SLOW
    repeat
      s, body = stats()
      if s.closed >= n then break end
      socket.sleep(0.1)
    until socket.gettime() > limit
    return s, body
  end

  -- error.log: no worker died but the one a case killed, nothing reads as lost
  local function assert_clean(log, killed)
    for pid, sig in log:gmatch("worker process (%d+) exited on signal (%d+)") do
      assert.is_true(tonumber(pid) == killed and sig == "9", log)
    end
    assert.is_nil(log:find("[crit]", 1, true), log)
    assert.is_nil(log:find("will never run", 1, true), log)
    assert.is_nil(log:find("error in timeout callback", 1, true), log)
  end

  setup(function()
    if store.redis then redis = N.start_redis() end
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    port = N.free_port()
  end)

  -- each case on a store of its own: what one left is not the next one's
  after_each(function()
    stop()
    if redis then assert(os.execute("redis-cli -p " .. redis.port .. " flushall >/dev/null")) end
    os.execute("rm -f " .. dir .. "/orders.db*")
  end)

  teardown(function()
    stop()
    if redis then redis.stop() end
    os.execute("rm -rf " .. dir)
  end)

  it("closes 1,000 unpaid orders due over ~2 s, handlers of 50 ms side by side: p99 within 1 s, each once", function()
    start({ ORDERS_CONCURRENCY = os.getenv("HWT_ORDERS_CONCURRENCY") }) -- (1: as every close ran before)
    local t0 = socket.gettime()
    orders(2000, true, 1000)
    local sent = socket.gettime() - t0
    local s, body = wait_closed(1000, 2 + sent + 10)
    assert.equal(1000, s.closed, body)
    assert.equal(1001, s.paid, body) -- (the probe's order too)
    assert.equal(1000, s.closes, body)
    assert.equal(0, s.twice, body)
    assert.is_true(s.p99 <= 1, "closes ran late p99 " .. s.p99 .. " s (orders sent in " .. sent .. " s): " .. body)
    print(string.format("\n    %s: orders sent in %.2f s; %s", store.name, sent, body))
    assert_clean(nginx.log())
  end)

  it("at nginx -s reload amid the closes: each runs once, none left leased to the old workers, which exit at once", function()
    start({ ORDERS_PAY_WITHIN = 1 })
    orders(1500, false, 1000)
    wait_closed(600, 10) -- amid them: 1 s of closes due, ~0.5 s more to come
    local old = nginx.worker_pids()
    local t_reload = socket.gettime()
    assert.is_true(nginx.signal("reload"))
    local limit, gone = t_reload + 5 * SLOW, 0
    for _, pid in ipairs(old) do
      while alive(pid) and socket.gettime() < limit do socket.sleep(0.01) end
      assert.is_false(alive(pid), "an old worker is there 5 s after the reload (runner_idle is 10 s)")
      gone = socket.gettime() - t_reload
    end
    local s, body = wait_closed(1500, 20)
    local done = socket.gettime() - t_reload
    assert.equal(1500, s.closed, body .. "\n" .. nginx.log())
    assert.equal(1500, s.closes, body)
    assert.equal(0, s.twice, body)
    -- a job claimed and not started by an old worker would wait for its
    -- lease (30 s): handed back, the new workers run it at once
    assert.is_true(done < 10 * SLOW, "the last close ran " .. done .. " s after the reload")
    print(string.format("\n    %s: reload amid 1,500 closes: old workers gone %.2f s after it, " ..
      "the last close %.2f s after it", store.name, gone, done))
    assert_clean(nginx.log())
  end)

  it("at nginx -s stop: nothing reads as lost (no 'will never run' for the queue's own timeouts)", function()
    start({ ORDERS_PAY_WITHIN = 0.5 })
    orders(400, false)
    local s = wait_closed(400, 10)
    assert.equal(400, s.closed)
    assert.equal(400, s.closes)
    assert.equal(0, s.twice)
    assert(N.get(port, "/order?id=later")) -- one job still waiting at the stop
    local master = nginx.master_pid()
    assert.is_true(nginx.signal("stop"))
    for _ = 1, 100 do
      if not alive(master) then break end
      socket.sleep(0.05)
    end
    assert.is_false(alive(master))
    local log = nginx.log()
    assert.matches("exiting", log, 1, true) -- (the workers' own lines: this is their log)
    assert_clean(log)
  end)

  if not store.redis then
    it("answers requests while the store cannot be opened, naming the directory and the user; opens once it can", function()
      local where = dir .. "/not-yet"
      start({ ORDERS_STORE = "sqlite:" .. where .. "/orders.db" }, true)
      local status, body = N.get(port, "/order?id=1")
      assert.equal(503, status, body)
      assert.matches("queue 'orders' is not open yet in this worker %(hwtimer%.durable: .*/not%-yet/orders%.db: " ..
        "unable to open database file %(the directory .*/not%-yet must exist and be writable by ", body)
      assert.matches("%[error%].-queue 'orders' did not open %(try %d+, next in", nginx.log())
      assert(os.execute("mkdir -p " .. where))
      local limit = socket.gettime() + 10 * SLOW -- (the longest step is 5 s)
      repeat
        status, body = N.get(port, "/order?id=1")
        if status == 200 then break end
        socket.sleep(0.1)
      until socket.gettime() > limit
      assert.equal(200, status, body)
      local s = wait_closed(1, 10)
      assert.equal(1, s.closed)
    end)
  end

  it("kill -9 of a worker amid the closes: only the jobs it had not finished run again", function()
    start({ ORDERS_PAY_WITHIN = 1, ORDERS_LEASE = 1 })
    orders(1000, false, 1000)
    wait_closed(300, 10) -- amid them
    local victim = nginx.worker_pids()[1]
    local t_kill = socket.gettime()
    assert(os.execute("kill -9 " .. victim))
    local s, body = wait_closed(1000, 20)
    assert.equal(1000, s.closed, body)
    local _, twice = N.get(port, "/closes")
    local again = 0
    for id, runs, ended in twice:gmatch("(%S+) (%d+) (%S+)") do
      again = again + 1
      assert.equal("2", runs, id .. " ran " .. runs .. " times")
      -- its first run had not ended at the kill (its end, if any, is the
      -- rerun's), or ended within ack_delay (2 ms) of it, before its
      -- acknowledgement was written
      local t = tonumber(ended)
      assert.is_true(t == nil or t > t_kill - 0.012,
        id .. " ran again though it ended " .. (t and (t_kill - t) or 0) .. " s before the kill")
    end
    print(string.format("\n    %s: kill -9 of a worker amid 1,000 closes: %d ran again", store.name, again))
    assert.matches("exited on signal 9", nginx.log(), 1, true)
    assert_clean(nginx.log(), victim)
  end)

  if store.redis then
    it("while Redis is down 2 s: one reconnection a backoff step per worker, reported to error.log; then all runs", function()
      start({ ORDERS_PAY_WITHIN = 0.5 })
      local before = nginx.log()
      local t0 = socket.gettime()
      redis.restart(2) -- (saved, stopped, 2 s, started: down longer than 2 s)
      local down = socket.gettime() - t0
      socket.sleep(0.5) -- reconnected (the longest step is 1 s) and
      orders(20, false)  -- the queue goes on
      local s, body = wait_closed(20, 10)
      assert.equal(20, s.closed, body)
      assert.equal(20, s.closes, body)
      local log = nginx.log():sub(#before + 1)
      local failed = count_lines(log, "connect() failed")
      -- one try per step (0.05 s, doubling up to 1 s) while it was down, and
      -- the calls under way when it went (a poll, a renewal): per worker
      local steps, at, step = 1, 0, 0.05
      while at + step < down do
        at, steps, step = at + step, steps + 1, math.min(1, step * 2)
      end
      assert.is_true(failed <= 2 * (steps + 2), failed .. " failed connections in " .. down .. " s:\n" .. log)
      print(string.format("\n    Redis down %.1f s: %d failed connections from two workers (%d steps each)",
        down, failed, steps))
      assert.matches("%[error%].-hwtimer%.durable: ", log)
      assert_clean(nginx.log())
    end)
  end
end)
end
