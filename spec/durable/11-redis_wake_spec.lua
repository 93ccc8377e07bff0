-- A job another process makes due now starts at once in nginx, not at the
-- next poll (issue 43): the scheduling process PUBLISHes the kind on
-- BASE:wake, each worker listens there (hwtimer.durable.ngx_wake) and polls.
-- The workers poll every 5 s here, so a start within a second can only come
-- from the wake-up. A real nginx with two workers and lua-resty-redis, a
-- real redis-server; the scheduling process is this one (redis-lua). Runs in
-- the LuaJIT spec run.
local N = require("spec.nginx")
local socket = require("socket")

local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1
local POLL = 5 * SLOW -- (a start within SLOW seconds can only be the wake-up)

-- The most connection attempts a listener may make in `window` seconds
-- after its connection is lost: at once, then one a backoff step (0.05 s,
-- 0.1, 0.2... up to 1 s: in 0.5 s, at 0.05, 0.15 and 0.35), with one to
-- spare; a try each 0.05 s would make ten in 0.5 s.
local function most_tries(window)
  local most, at, step = 2, 0, 0.05
  while at + step <= window do at, step, most = at + step, math.min(1, step * 2), most + 1 end
  return most
end

-- Run fn while the server takes no new connection (maxclients 1: it
-- answers "ERR max number of clients reached" and closes); `admin`, made
-- before, stays. The limit is raised after fn, whatever fn did.
local function without_room(admin, fn)
  admin:config("set", "maxclients", "1")
  local ok, err = pcall(fn)
  admin:config("set", "maxclients", "10000")
  assert(ok, err)
end

local CONF = [[
@HEAD@
events { worker_connections 1024; }
http {
  access_log off;
  lua_package_path "@LPATH@;/usr/share/lua/5.1/?.lua;;";
  lua_package_cpath "@CPATH@;;";
  init_worker_by_lua_block {
    local core = require("hwtimer.core")
    local timer = assert(require("hwtimer.ngx").new({ tick = 0.001 }))
    local function connect()
      local r = require("nginx.redis"):new()
      r:set_timeout(5000)
      local ok, err = r:connect("127.0.0.1", @REDIS@)
      if not ok then return nil, err end
      return r
    end
    -- each start to the ledger: "id monotonic-seconds pid"
    local function ledger(job)
      local r = assert(connect())
      assert(r:rpush("ledger", string.format("%s %.6f %d", job.id, core.now(), ngx.worker.pid())))
      r:set_keepalive(10000, 16)
    end
    require("hwtimer.durable.ngx").open("q", timer, { redis = connect, prefix = "wake", poll = @POLL@,
      sweep = @POLL@, attempts = 1,
      on_error = function(err) ngx.log(ngx.INFO, "durable: ", tostring(err)) end }, function(q)
      q:handle("count", ledger)
      q:handle("fail", function(job) ledger(job) error("fails on purpose") end)
    end)
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /ready { content_by_lua_block {
      ngx.say(require("hwtimer.durable.ngx").get("q", 5) and "open" or "not open")
    } }
  }
}
]]

describe("OpenResty: jobs another process makes due now", function()
  if N.skip_unless_ready(pending) then return end
  local redis = N.redis_lua()
  if not redis or not os.execute("command -v redis-server >/dev/null 2>&1") then
    it("needs redis-server and redis-lua", function() pending("apt-get install redis-server lua-redis") end)
    return
  end
  local hwtimer = require("hwtimer")
  local durable = require("hwtimer.durable")
  local core = require("hwtimer.core")
  local server, nginx, port, timer, q

  local function listeners()
    return tonumber(N.redis_cmd(server.port, "PUBSUB", "NUMSUB", durable.engine(q):wake_channel())[2])
  end

  local function wait_for(cond, secs)
    local limit = socket.gettime() + secs * SLOW
    while socket.gettime() < limit do
      if cond() then return true end
      socket.sleep(0.01)
    end
    return cond()
  end

  local function wait_listening(n)
    assert.is_true(wait_for(function() return listeners() == n end, 10),
      "listeners: " .. tostring(listeners()) .. ", expected " .. n)
  end

  -- the ledger's starts of `id`: { monotonic seconds, ... }
  local function starts(id)
    local list = {}
    for _, line in ipairs(N.redis_cmd(server.port, "LRANGE", "ledger", 0, -1)) do
      local lid, at = line:match("^(%S+) (%S+)")
      if lid == id then list[#list + 1] = tonumber(at) end
    end
    return list
  end

  -- seconds from t0 to the first start of `id`, waiting up to 3 s for it
  local function started_after(id, t0)
    assert.is_true(wait_for(function() return #starts(id) > 0 end, 3), "job " .. id .. " did not start in 3 s")
    return starts(id)[1] - t0
  end

  local function publishes()
    local stats = N.redis_cmd(server.port, "INFO", "commandstats")
    return tonumber(stats:match("cmdstat_publish:calls=(%d+)") or 0),
      tonumber(stats:match("cmdstat_publish:[^\r\n]*rejected_calls=(%d+)") or 0)
  end

  setup(function()
    server = N.start_redis()
    port = N.free_port()
    nginx = N.start(N.config(CONF, { PORT = port, REDIS = server.port, POLL = POLL })
      :gsub("worker_processes 1;", "worker_processes 2;", 1))
    assert.is_true(N.wait_listening(port, "/ping"))
    for _ = 1, 2 do assert.equal("open\n", select(2, N.get(port, "/ready", 10))) end
    timer = hwtimer.new()
    q = assert(durable.open(timer, { redis = function() return redis.connect("127.0.0.1", server.port) end,
      prefix = "wake", poll = POLL }))
  end)

  teardown(function()
    if q then q:close() end
    if timer then timer:close() end
    if nginx then nginx.stop() end
    if server then server.stop() end
  end)

  it("starts each job q:schedule makes due now within a second, though the workers poll every 5 s", function()
    wait_listening(2)
    local lates = {}
    for i = 1, 20 do
      local t0 = core.now()
      local id = assert(q:schedule("count", 0))
      lates[i] = started_after(id, t0)
      socket.sleep(0.01 * (i % 5)) -- (at points of the workers' poll period)
    end
    table.sort(lates)
    print(string.format("\n    20 jobs due now: started after p50 %.2f ms, max %.2f ms (poll %d s)",
      lates[10] * 1e3, lates[20] * 1e3, POLL))
    assert.is_true(lates[20] < SLOW, "a job started " .. lates[20] .. " s after its schedule")
  end)

  it("starts a job q:run_now makes due and a dead job q:retry makes pending within a second", function()
    local id = assert(q:schedule("count", 3600))
    socket.sleep(0.05)
    local t0 = core.now()
    assert(q:run_now(id))
    assert.is_true(started_after(id, t0) < SLOW)

    local dead = assert(q:schedule("fail", 0)) -- (the workers give each job 1 attempt)
    started_after(dead, core.now() - 1)
    assert.is_true(wait_for(function() local j = q:get(dead) return j and j.dead == true end, 3))
    t0 = core.now()
    assert(q:retry(dead))
    assert.is_true(wait_for(function() return #starts(dead) == 2 end, 3), "the retried job did not start in 3 s")
    assert.is_true(starts(dead)[2] - t0 < SLOW)
  end)

  it("publishes nothing for a job due later than the poll, nor for one of a kind this process handles", function()
    local calls = publishes()
    assert(q:schedule("count", 600))
    q:handle("mine", function() end)
    assert(q:schedule("mine", 0))
    timer:run(0.05)
    assert.equal(calls, (publishes()))
    assert(q:schedule("count", 0))
    assert.equal(calls + 1, (publishes()))
  end)

  -- (no stamp to give: the `add` script stamps the entry, and the wake-up
  -- is decided from the job's own due time, seconds from the store's now)
  it("publishes for a job q:at makes due now when the add script stores it, not for one due later", function()
    local calls = require("hwtimer.durable.redis_client")
    local stamp = calls.stamp
    calls.stamp = function() return nil end
    local ok, err = pcall(function()
      local before = publishes()
      assert(q:at("count", os.time() + 3600))
      assert.equal(before, (publishes()))
      assert(q:at("count", os.time()))
      assert.equal(before + 1, (publishes()))
    end)
    calls.stamp = stamp
    assert(ok, err)
  end)

  it("listens again after its connection is killed, and after nginx -s reload", function()
    wait_listening(2)
    N.redis_cmd(server.port, "CLIENT", "KILL", "TYPE", "pubsub")
    wait_listening(2)
    for _ = 1, 5 do
      local t0 = core.now()
      assert.is_true(started_after(assert(q:schedule("count", 0)), t0) < SLOW)
    end
    local old = nginx.worker_pids()
    local t_reload = core.now()
    assert.is_true(nginx.signal("reload"))
    assert.is_nil(N.wait_gone(old, 10 * SLOW), "the old workers did not exit")
    -- (a listener looks whether its worker exits between reads of at most
    -- 0.5 s, not the connection's own timeout, 5 s here)
    local took = core.now() - t_reload
    assert.is_true(took < 2.5 * SLOW, "the old workers took " .. took .. " s to exit")
    assert.is_true(N.wait_listening(port, "/ping"))
    for _ = 1, 2 do assert.equal("open\n", select(2, N.get(port, "/ready", 10))) end
    wait_listening(2)
    for _ = 1, 5 do
      local t0 = core.now()
      assert.is_true(started_after(assert(q:schedule("count", 0)), t0) < SLOW)
    end
  end)

  -- While the server is down each worker's listener tries again at a
  -- growing step (0.05 s, 0.1, ... up to 1 s): a warning an outage, not one
  -- a try.
  it("warns once a worker for each outage of the server, and listens again after it", function()
    for outage = 1, 2 do -- (the second: a listener that was subscribed again starts its warnings afresh)
      wait_listening(2)
      local before = #nginx.log()
      server.restart(2 * SLOW) -- (5 tries or more of each listener fall in it)
      wait_listening(2)
      local _, warnings = nginx.log():sub(before + 1):gsub("listening again once the store answers", "")
      assert.is_true(warnings >= 1 and warnings <= 2, warnings .. " warnings of outage " .. outage .. " from 2 workers")
    end
    local t0 = core.now()
    -- (this process's client finds its connection closed at its first command: nil, message; then a new one)
    local id = q:schedule("count", 0) or assert(q:schedule("count", 0))
    assert.is_true(started_after(id, t0) < SLOW)
  end)

  it("listens again where the server had no room for a listener's connection for a while: not a refusal for good",
     function()
    wait_listening(2)
    local admin = redis.connect("127.0.0.1", server.port) -- (connected before the limit: it stays)
    local before = #nginx.log()
    without_room(admin, function()
      admin:client("kill", "type", "normal") -- (the workers' pooled connections: a listener would take one; not admin)
      admin:client("kill", "type", "pubsub")
      socket.sleep(0.5 * SLOW) -- (each worker's listener is answered "ERR max number of clients reached")
      assert.equal(0, tonumber(admin:raw_cmd("PUBSUB NUMSUB " .. durable.engine(q):wake_channel())[2]))
    end)
    wait_listening(2)
    admin:quit()
    assert.not_matches("no wake-ups for", nginx.log():sub(before + 1), 1, true)
    local t0 = core.now()
    -- (this process's client was killed too: its first command finds the connection closed)
    local id = q:schedule("count", 0) or assert(q:schedule("count", 0))
    assert.is_true(started_after(id, t0) < SLOW)
  end)

  it("leaves every worker alive: none exited on a signal, no alert in error.log", function()
    assert.not_matches("exited on signal", nginx.log(), 1, true)
    assert.not_matches("%[alert%]", nginx.log())
  end)

  it("schedules as before where an ACL refuses the channel, stops publishing after the refusal, " ..
     "and the poll runs the job", function()
    N.redis_cmd(server.port, "ACL", "SETUSER", "nochan", "on", ">pw", "~*", "+@all", "resetchannels")
    local t = hwtimer.new()
    local limited = assert(durable.open(t, { prefix = "wake", poll = POLL, redis = function()
      local c = redis.connect("127.0.0.1", server.port)
      c:auth("nochan", "pw")
      return c
    end }))
    local _, rejected = publishes()
    local id = assert(limited:schedule("count", 0))
    assert.is_nil(durable.engine(limited):wake_channel())
    local again = assert(limited:schedule("count", 0))
    assert.equal(rejected + 1, select(2, publishes()))
    -- nothing accepted is lost: the workers' poll finds both
    assert.is_true(wait_for(function() return #starts(id) == 1 and #starts(again) == 1 end, POLL + 3),
      "the jobs whose wake-up was refused did not run by the poll")
    limited:close()
    t:close()
  end)

  -- (last: the server's default user loses its channels for the rest of the file)
  it("ends each worker's listener with one warning, no error, where the server refuses it the channel", function()
    wait_listening(2)
    local log = #nginx.log()
    N.redis_cmd(server.port, "ACL", "SETUSER", "default", "resetchannels")
    N.redis_cmd(server.port, "CLIENT", "KILL", "TYPE", "pubsub") -- (the listeners SUBSCRIBE again, refused)
    local function said() return select(2, nginx.log():sub(log + 1):gsub("no wake%-ups for ", "")) end
    assert.is_true(wait_for(function() return said() == 2 end, 5), "warnings: " .. said())
    socket.sleep(0.3 * SLOW) -- (no try after a refusal: nothing more is written)
    local after = nginx.log():sub(log + 1)
    assert.equal(2, said(), after)
    assert.matches("NOPERM", after, 1, true)
    assert.not_matches("%[error%]", after)
    assert.equal(0, listeners())
    N.redis_cmd(server.port, "ACL", "SETUSER", "default", "allchannels")
  end)
end)

describe("q:wake() in a plain Lua process", function()
  local helpers = require("spec.helpers")
  local _, redis = helpers.redis_kit()
  if helpers.without_redis(it, pending) then return end
  local hwtimer = require("hwtimer")
  local durable = require("hwtimer.durable")
  local server
  setup(function() server = N.start_redis() end)
  teardown(function() server.stop() end)

  it("polls at once: a job another queue object stored due now runs, though the poll is 5 s", function()
    local timer = hwtimer.new()
    local function connect() return redis.connect("127.0.0.1", server.port) end
    local q = assert(durable.open(timer, { redis = connect, prefix = "plain", poll = POLL, sweep = POLL }))
    local other = assert(durable.open(timer, { redis = connect, prefix = "plain", poll = POLL, wake = false }))
    local ran = {}
    q:handle("count", function(job) ran[#ran + 1] = job.id end)
    timer:run(0.05) -- (the open's first looks are done)
    for i = 1, 3 do
      local id = assert(other:schedule("count", 0))
      timer:run(0.1)
      assert.equal(i - 1, #ran) -- not found before the wake-up: the poll is 5 s away
      q:wake()
      q:wake() -- (one poll however many say so)
      timer:run(0.1)
      assert.same(id, ran[i])
    end
    q:close()
    other:close()
    q:wake() -- (nothing on a closed queue)
    timer:close()
  end)

  -- (a job with an id is put through the put script, which may replace one:
  -- its wake-up is decided from its due time, a delay or a time of day)
  it("publishes for a job with an id due within the poll, by delay or by time, and not for one due later", function()
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = function() return redis.connect("127.0.0.1", server.port) end,
      prefix = "ids", poll = POLL }))
    local function publishes()
      return tonumber(N.redis_cmd(server.port, "INFO", "commandstats"):match("cmdstat_publish:calls=(%d+)") or 0)
    end
    local before = publishes()
    assert(q:schedule("elsewhere", 3600, nil, { id = "later" }))
    assert(q:at("elsewhere", os.time() + 3600, nil, { id = "later-at" }))
    assert.equal(before, publishes())
    assert(q:schedule("elsewhere", 0, nil, { id = "now" }))
    assert.equal(before + 1, publishes())
    assert(q:at("elsewhere", os.time() - 1, nil, { id = "now-at" }))
    assert.equal(before + 2, publishes())
    q:close()
    timer:close()
  end)

  -- (the message names the kind, so that only the processes that handle it
  -- poll; "" wakes every one)
  it("publishes a batch's jobs due now under their kind, one kind however many payloads", function()
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = function() return redis.connect("127.0.0.1", server.port) end,
      prefix = "kinds", poll = POLL }))
    local channel = durable.engine(q):wake_channel()
    local sub = socket.tcp()
    sub:settimeout(2)
    assert(sub:connect("127.0.0.1", server.port))
    assert(sub:send("*2\r\n$9\r\nSUBSCRIBE\r\n$" .. #channel .. "\r\n" .. channel .. "\r\n"))
    for _ = 1, 6 do assert(sub:receive("*l")) end -- (*3, subscribe, the channel, :1)
    local function message() -- *3, message, the channel, then the payload
      local lines = {}
      for i = 1, 7 do lines[i] = assert(sub:receive("*l")) end
      return lines[7]
    end
    assert(q:batch(function(b)
      assert(b:schedule("elsewhere", 0, "one"))
      assert(b:schedule("elsewhere", 0, "two"))
    end))
    assert.equal("elsewhere", message())
    assert(q:batch(function(b)
      assert(b:schedule("elsewhere", 0, "one"))
      assert(b:schedule("another", 0, "one"))
    end))
    assert.equal("", message())
    -- and the same through add_many (nginx's batch of the schedules of requests waiting at once):
    -- put's tables, { id, kind, payload, delay (us), relative, every, seconds until due }
    local engine = durable.engine(q)
    assert(engine:add_many({ { "m1", "elsewhere", "one", 0, true, 0, 0 }, { "m2", "elsewhere", "two", 0, true, 0, 0 } }))
    assert.equal("elsewhere", message())
    assert(engine:add_many({ { "m3", "elsewhere", "one", 0, true, 0, 0 }, { "m4", "another", "one", 0, true, 0, 0 } }))
    assert.equal("", message())
    sub:close()
    q:close()
    timer:close()
  end)

  it("publishes a wake-up for a job q:run_now makes due, however short the poll", function()
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = function() return redis.connect("127.0.0.1", server.port) end,
      prefix = "short", poll = 0.2 }))
    local function publishes()
      return tonumber(N.redis_cmd(server.port, "INFO", "commandstats"):match("cmdstat_publish:calls=(%d+)") or 0)
    end
    local id = assert(q:schedule("elsewhere", 3600))
    local before = publishes()
    assert(q:run_now(id))
    assert.equal(before + 1, publishes())
    q:close()
    timer:close()
  end)

  it("refuses a wake option that is not a boolean", function()
    local timer = hwtimer.new()
    local ok, err = pcall(durable.open, timer, { redis = function() return redis.connect("127.0.0.1", server.port) end,
      prefix = "plain", wake = 1 })
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'open' (option 'wake': boolean expected)", err, 1, true)
    timer:close()
  end)
end)

describe("hwtimer.durable.redis_wake: a plain Lua process listens for wake-ups", function()
  local helpers = require("spec.helpers")
  local _, redis = helpers.redis_kit()
  if helpers.without_redis(it, pending) then return end
  local hwtimer = require("hwtimer")
  local durable = require("hwtimer.durable")
  local wake = require("hwtimer.durable.redis_wake")
  local core = require("hwtimer.core")
  local server, timer, q, other, ran
  local down, tries = false, 0 -- (the queues' connect fails while down, counting the tries)
  setup(function() server = N.start_redis() end)
  teardown(function() server.stop() end)
  before_each(function()
    timer = hwtimer.new()
    down, tries = false, 0
    local function connect()
      if down then
        tries = tries + 1
        return nil, "down for the test"
      end
      return redis.connect("127.0.0.1", server.port)
    end
    q = assert(durable.open(timer, { redis = connect, prefix = "lw", poll = POLL, sweep = POLL }))
    other = assert(durable.open(timer, { redis = connect, prefix = "lw", poll = POLL }))
    ran = {}
    q:handle("count", function(job) ran[job.id] = core.now() end)
  end)
  after_each(function()
    q:close()
    other:close()
    timer:close()
  end)

  -- `n` jobs `other` schedules due now, each awaited through `turn` (one
  -- turn of the host's loop) for up to 2 s: the seconds each took to start
  local function starts(n, turn)
    local lates = {}
    for i = 1, n do
      local t0 = core.now()
      local id = assert(other:schedule("count", 0))
      local limit = t0 + 2 * SLOW
      while not ran[id] and core.now() < limit do turn() end
      assert.truthy(ran[id], "job " .. i .. " did not start in " .. 2 * SLOW .. " s (the poll is " .. POLL .. " s)")
      lates[i] = ran[id] - t0
    end
    return lates
  end

  it("in a luv loop: jobs another queue object makes due now start at once, and again after the connection " ..
     "is killed", function()
    local uv = require("luv")
    local poll = require("hwtimer.luv").attach(timer)
    local l = wake.luv(assert(wake.listen(q)), uv)
    local turn = function() uv.run("once") end
    local idle = uv.new_timer() -- (so that uv.run("once") never waits long with nothing ready)
    idle:start(10, 10, function() end)
    for _ = 1, 20 do turn() end
    for _, late in ipairs(starts(10, turn)) do assert.is_true(late < 0.5 * SLOW, "started after " .. late .. " s") end
    N.redis_cmd(server.port, "CLIENT", "KILL", "TYPE", "pubsub")
    local t0 = core.now()
    while core.now() < t0 + 0.3 do turn() end
    assert.truthy(l:getfd(), "no connection after the kill")
    for _, late in ipairs(starts(5, turn)) do assert.is_true(late < 0.5 * SLOW, "started after " .. late .. " s") end
    l:close()
    idle:stop()
    idle:close()
    require("hwtimer.luv").detach(poll)
    uv.run("nowait")
  end)

  it("makes a lost connection again in the step that finds it lost, not after the backoff", function()
    -- (no loop and no dispatch: nothing on the timer can run, so only the
    -- step itself can have made the connection that getfd shows)
    local l = assert(wake.listen(q))
    local first = l:getfd()
    assert.truthy(first)
    N.redis_cmd(server.port, "CLIENT", "KILL", "TYPE", "pubsub")
    local limit = core.now() + 2 * SLOW
    while not l.why and core.now() < limit do
      assert.is_true(l:step())
      socket.sleep(0.005)
    end
    assert.equal("the connection closed", l.why)
    assert.truthy(l:getfd(), "no connection made at once after the loss")
    assert.is_nil(l.retry_at, "a try after the backoff was scheduled though the connection was made")
    -- (and it is a subscription: one, the old one gone)
    local listed = N.redis_cmd(server.port, "CLIENT", "LIST", "TYPE", "pubsub")
    assert.equal(1, select(2, tostring(listed):gsub("sub=1", "")), tostring(listed))
    -- (a process that never loaded cqueues: its close asks nothing of it)
    local cq = package.loaded.cqueues
    package.loaded.cqueues = nil
    local ok, err = pcall(l.close, l)
    package.loaded.cqueues = cq
    assert.is_true(ok, tostring(err))
  end)

  it("in cqueues: the listener is pollable, and a refused SUBSCRIBE ends it with why", function()
    local cqueues = require("cqueues")
    local cq = cqueues.new()
    local attached = require("hwtimer.cqueues").attach(timer, cq)
    local l = assert(wake.listen(q))
    cq:wrap(function() while l:step() do cqueues.poll(l) end end)
    local turn = function() assert(cq:step(0.01)) end
    for _ = 1, 5 do turn() end
    for _, late in ipairs(starts(10, turn)) do assert.is_true(late < 0.5 * SLOW, "started after " .. late .. " s") end
    -- (what cqueues.poll asks of it: while connected its descriptor, no timeout)
    assert.same({ l:getfd(), "r" }, { l:pollfd(), l:events() })
    assert.is_number(l:getfd())
    assert.is_nil(l:timeout())
    l:close()
    assert.is_false(l:step(), "a closed listener's step")
    -- (and without a connection no descriptor, polled again in 0.05 s)
    assert.same({ -1, 0.05 }, { l:pollfd(), l:timeout() })
    for _ = 1, 3 do turn() end
    -- an ACL user without channels
    N.redis_cmd(server.port, "ACL", "SETUSER", "lwno", "on", ">pw", "~*", "+@all", "resetchannels")
    local t2 = hwtimer.new()
    local limited = assert(durable.open(t2, { prefix = "lw", poll = POLL, redis = function()
      local c = redis.connect("127.0.0.1", server.port)
      c:auth("lwno", "pw")
      return c
    end }))
    local l2 = assert(wake.listen(limited))
    local limit = core.now() + 2 * SLOW
    while l2:step() and core.now() < limit do cqueues.poll(l2, 0.05) end
    assert.matches("NOPERM", l2.why)
    assert.is_nil(l2:getfd())
    limited:close()
    t2:close()
    attached.detach()
  end)

  it("in cqueues: a connection lost and not made again is tried after 0.05 s, doubling; then listens again",
    function()
    local cqueues = require("cqueues")
    local cq = cqueues.new()
    local attached = require("hwtimer.cqueues").attach(timer, cq)
    local l = assert(wake.listen(q))
    cq:wrap(function() while l:step() do cqueues.poll(l) end end)
    -- (each job's handler makes a round trip on a cqueues socket of the
    -- host's: it yields to the loop that also polls the listener; not on
    -- Lua 5.1, whose pcall a handler cannot yield across)
    local a, b = require("cqueues.socket").pair()
    if _VERSION ~= "Lua 5.1" or jit then
      cq:wrap(function() for line in b:lines("*l") do assert(b:write(line .. "\n")) assert(b:flush()) end end)
      q:handle("count", function(job)
        assert(a:write(job.id .. "\n"))
        assert(a:flush())
        assert.equal(job.id, a:read("*l"))
        ran[job.id] = core.now()
      end)
    end
    local turn = function() assert(cq:step(0.01)) end
    for _ = 1, 5 do turn() end
    assert.truthy(l:getfd())
    down = true
    N.redis_cmd(server.port, "CLIENT", "KILL", "TYPE", "pubsub")
    local t0, window = core.now(), 0.5 * SLOW
    while core.now() < t0 + window do turn() end
    local most = most_tries(window)
    assert.is_true(tries >= 1 and tries <= most, tries .. " tries in " .. window .. " s (at most " .. most .. ")")
    assert.is_nil(l:getfd())
    -- a job made due meanwhile: its wake-up went to nobody (pub/sub keeps
    -- nothing), so the new connection polls the queue at once
    local missed = assert(other:schedule("count", 0))
    down = false
    local limit = core.now() + 2 * SLOW
    while not l:getfd() and core.now() < limit do turn() end
    assert.truthy(l:getfd(), "no connection once the store answers")
    local connected = core.now()
    while not ran[missed] and core.now() < connected + 0.5 * SLOW do turn() end
    assert.truthy(ran[missed], "the job made due while the listener was away waits for the poll")
    assert.equal(l:getfd(), l:pollfd())
    for _, late in ipairs(starts(3, turn)) do assert.is_true(late < 0.5 * SLOW, "started after " .. late .. " s") end
    l:close()
    a:close()
    for _ = 1, 3 do turn() end
    b:close()
    attached.detach()
  end)

  it("stores each job with its wake-up in one round trip, the job as a plain schedule stores it", function()
    local stats = function()
      local st = N.redis_cmd(server.port, "INFO", "commandstats")
      return tonumber(st:match("cmdstat_publish:calls=(%d+)") or 0), tonumber(st:match("cmdstat_rpush:calls=(%d+)") or 0)
    end
    local ids, payloads = {}, {}
    q:handle("count", function(job) payloads[job.id] = job.payload end)
    assert(other:schedule("count", 3600)) -- (a reply just now: the schedules below are stamped here)
    local pub0, push0 = stats()
    for i = 1, 50 do ids[i] = assert(other:schedule("count", 0, "p" .. i)) end
    local pub1, push1 = stats()
    assert.equal(50, pub1 - pub0)
    assert.equal(50, push1 - push0)
    local limit = core.now() + 5
    while core.now() < limit do
      timer:run(0.05)
      local n = 0
      for _ in pairs(payloads) do n = n + 1 end
      if n == 50 then break end
    end
    for i = 1, 50 do assert.equal("p" .. i, payloads[ids[i]], "job " .. i) end
  end)

  -- Replies come as the socket gives them: a read (64 KiB) ends anywhere,
  -- in a message's length line or its text, and the rest comes next read.
  it("takes each of a burst of wake-ups larger than a read whole, however the reads split them", function()
    local woken = 0
    q.wake = function() woken = woken + 1 end -- (the listener's call, counted; connecting calls it once)
    local l = assert(wake.listen(q))
    assert.equal(1, woken)
    local n = 50000 -- (about 1.2 MB: 20 reads or more, each ending wherever the kernel had got to)
    local function publish(kind)
      return "*3\r\n$7\r\nPUBLISH\r\n$" .. #l.channel .. "\r\n" .. l.channel .. "\r\n$" .. #kind .. "\r\n" .. kind .. "\r\n"
    end
    local burst = {}
    for i = 1, n do burst[i] = publish(i % 2 == 0 and "count" or "") end
    burst[n + 1] = publish("nobody's kind") -- (not handled here: no wake)
    local pub = assert(require("socket").connect("127.0.0.1", server.port))
    assert(pub:send(table.concat(burst))) -- (one write: the server sends the messages as fast as it can)
    local limit = core.now() + 5 * SLOW
    while woken < n + 1 and core.now() < limit do assert.is_true(l:step()) end
    for _ = 1, 10 do l:step() end
    assert.equal(n + 1, woken)
    assert.is_nil(l.why)
    assert.equal("", l.buf)
    pub:close()
    l:close()
  end)

  -- A server at its maxclients answers a new connection with "ERR max
  -- number of clients reached" and closes it: not a refusal for good.
  it("tries again after the backoff where the server has no room for its connection, and listens once it has",
     function()
    local admin = redis.connect("127.0.0.1", server.port) -- (connected before the limit: it stays)
    local l = assert(wake.listen(q))
    local function listening() return tonumber(admin:raw_cmd("PUBSUB NUMSUB " .. l.channel)[2]) end
    local function turn_until(cond, secs)
      local limit = core.now() + secs * SLOW
      while core.now() < limit and not cond() do
        assert.is_true(l:step())
        timer:run(0.01)
      end
      return cond()
    end
    assert.is_true(turn_until(function() return listening() == 1 end, 2))
    local function rejected()
      return tonumber(admin:raw_cmd("INFO stats"):match("rejected_connections:(%d+)"))
    end
    without_room(admin, function()
      local before, window = rejected(), 0.5 * SLOW
      admin:client("kill", "type", "pubsub")
      turn_until(function() return false end, 0.5)
      assert.matches("max number of clients reached", tostring(l.why), 1, true)
      assert.equal(0, listening())
      local refusals, most = rejected() - before, most_tries(window) -- (the backoff's steps, not a try a turn)
      assert.is_true(refusals >= 2 and refusals <= most, refusals .. " tries in " .. window .. " s (at most " .. most .. ")")
    end)
    assert.is_true(turn_until(function() return listening() == 1 end, 3), "not listening again")
    admin:quit()
    l:close()
  end)

  it("says why there is nothing to listen to", function()
    local t3 = hwtimer.new()
    local off = assert(durable.open(t3, { prefix = "lw", wake = false,
      redis = function() return redis.connect("127.0.0.1", server.port) end }))
    local l, err = wake.listen(off)
    assert.is_nil(l)
    assert.matches("no wake%-ups for this queue", err)
    local obj = assert(durable.open(t3, { prefix = "lw", redis = redis.connect("127.0.0.1", server.port) }))
    l, err = wake.listen(obj)
    assert.is_nil(l)
    assert.matches("opts.redis to be a function", err, 1, true)
    off:close()
    obj:close()
    t3:close()
  end)

  it("closes the connection whose SUBSCRIBE could not be sent, and says why", function()
    local t3, broken, sock = hwtimer.new(), false, nil
    local cut = assert(durable.open(t3, { prefix = "lw", redis = function()
      local c = redis.connect("127.0.0.1", server.port)
      if broken then -- (this connection cannot send: its writes fail at once)
        sock = c.network.socket
        sock:shutdown("send")
      end
      return c
    end }))
    broken = true
    local l, err = wake.listen(cut)
    assert.is_nil(l)
    assert.matches("^hwtimer.durable: SUBSCRIBE: ", err)
    assert.equal(-1, sock:getfd(), "the connection was left open")
    cut:close()
    t3:close()
  end)
end)
