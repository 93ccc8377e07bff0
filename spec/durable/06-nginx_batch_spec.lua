-- In nginx, the schedules that concurrent requests of one worker make
-- through lua-resty-redis share round trips to Redis (issue 21,
-- hwtimer.durable.redis_batch): fewer `add` calls than jobs, each request
-- answered with its own job's id, every job stored and run once; a Redis
-- that stops with a round trip in flight answers every waiting request
-- nil, message, and loses none of the jobs accepted before; the intake of a
-- queue no process polls is moved in by a timer. One worker, a
-- real redis-server with an append-only file fsynced at every write (so
-- that kill -9 loses nothing it acknowledged). Runs in the LuaJIT spec run.
local N = require("spec.nginx")
local socket = require("socket")

local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1

local CONF = [[
@HEAD@
events { worker_connections 1024; }
http {
  access_log off;
  lua_package_path "@LPATH@;/usr/share/lua/5.1/?.lua;;";
  lua_package_cpath "@CPATH@;;";
  lua_shared_dict flags 1m;
  init_worker_by_lua_block {
    local durable = require("hwtimer.durable")
    local timer = assert(require("hwtimer.ngx").new({ tick = 0.001 }))
    local function connect()
      local r = require("nginx.redis"):new()
      r:set_timeout(5000)
      local ok, err = r:connect("127.0.0.1", @REDIS@)
      if not ok then return nil, err end
      return r
    end
    -- (a job's run goes to the ledger with LPUSH: RPUSH is the `add` script's alone)
    local function ledger(job)
      local r = assert(connect())
      assert(r:lpush("ledger", job.payload .. " " .. job.id))
      r:set_keepalive(10000, 16)
    end
    require("hwtimer.durable.ngx").open("q", timer, { redis = connect, prefix = "batch", poll = 0.02,
      on_error = function(err) ngx.log(ngx.WARN, "durable: ", tostring(err)) end }, function(q)
      q:handle("count", ledger)
    end)
    -- a queue no process polls (no handler): only its schedulers move its intake in
    require("hwtimer.durable.ngx").open("far", timer, { redis = connect, prefix = "far" })
    require("hwtimer.durable.ngx").open("rounds", timer, { redis = connect, prefix = "rounds" })
    -- a queue whose store is out of reach until a request says /up
    require("hwtimer.durable.ngx").open("late", timer, { prefix = "late", redis = function()
      if not ngx.shared.flags:get("up") then return nil, "not up yet" end
      return connect()
    end })
    -- the default on_error (nginx's error log, at [error]) for a handler that raises
    require("hwtimer.durable.ngx").open("errs", timer, { redis = connect, prefix = "errs", poll = 0.02, attempts = 1 },
      function(q) q:handle("fail", function(job) error("boom " .. job.id, 0) end) end)
    -- a queue whose claims bring thousands of jobs (a long reply to read)
    require("hwtimer.durable.ngx").open("big", timer, { redis = connect, prefix = "big", poll = 60, sweep = 60,
      batch = 5000 }, function(q) q:handle("b", function() ngx.shared.flags:incr("big runs", 1, 0) end) end)
    -- options durable.open refuses (checked in its timer, where it opens)
    require("hwtimer.durable.ngx").open("refused", timer, { redis = connect, prefix = "refused", batch = 1e19 })
    -- a setup function that raises: the queue it was given is closed, and the open tried again
    require("hwtimer.durable.ngx").open("setup", timer, { redis = connect, prefix = "setup" }, function(q)
      q:handle("k", function() end)
      error("no handlers today", 0)
    end)
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /up { content_by_lua_block { ngx.shared.flags:set("up", true) ngx.say("up") } }
    # a job of "errs" whose handler raises: its id
    location = /err_job { content_by_lua_block {
      local q = assert(require("hwtimer.durable.ngx").get("errs", 5))
      ngx.say(assert(q:schedule("fail", 0)))
    } }
    # durable.ngx.open's refusals, one a line (the timer is any: none gets that far)
    location = /open_args { content_by_lua_block {
      local open = require("hwtimer.durable.ngx").open
      for _, args in ipairs({ { nil, 1, {} }, { "", 1, {} }, { 5, 1, {} }, { "x", 1, nil }, { "x", 1, {}, 5 },
                              { "q", 1, {} } }) do
        local ok, err = pcall(function() local r = open(args[1], args[2], args[3], args[4]) return r end)
        local at = tostring(err):match("^content_by_lua%(nginx%.conf:%d+%):5: ") and "" or "(not the caller's line) "
        ngx.say(ok and "ok" or at .. tostring(err))
      end
    } }
    # get's refusals of its wait, one a line; then what a get of the queue
    # whose setup raises says, waiting up to 0.3 s
    # a get of the queue that never opens, up to 10 s
    location = /setup_wait { content_by_lua_block {
      local q, err = require("hwtimer.durable.ngx").get("setup", 10)
      ngx.say(q and "open" or err)
    } }
    location = /get_args { content_by_lua_block {
      local get = require("hwtimer.durable.ngx").get
      for _, wait in ipairs({ -1, 0 / 0, "1", true }) do -- (of a queue not open: an open one is returned at once)
        local ok, err = pcall(function() local r = get("setup", wait) return r end)
        local at = tostring(err):match("^content_by_lua%(nginx%.conf:%d+%):4: ") and "" or "(not the caller's line) "
        ngx.say(ok and "ok" or at .. tostring(err))
      end
      local q, err = get("setup", 0.3)
      ngx.say(tostring(q or err))
    } }
    # 3,000 jobs due now and one far; the far one cancelled while the claim
    # of the others waits on its long reply (the queue's _claiming, looked at
    # only to cancel then): "PCALL RESULT STORED"
    location = /cancel_in_claim { content_by_lua_block {
      local q = assert(require("hwtimer.durable.ngx").get("big", 5))
      local far = assert(q:schedule("b", 3600))
      assert(q:batch(function(b)
        for _ = 1, 3000 do b:schedule("b", 0, string.rep("x", 300)) end
      end))
      local n = 0
      while not q._claiming and n < 2000 do n = n + 1 ngx.sleep(0.001) end
      local ok, got = pcall(q.cancel, q, far)
      ngx.say(tostring(ok), " ", tostring(got), " ", tostring(q:get(far) ~= nil))
    } }
    location = /big_runs { content_by_lua_block { ngx.say(ngx.shared.flags:get("big runs") or 0) } }
    # a job of the queue "late", once open: "ok" once it ran (a cosocket to the ledger), or why not
    location = /late_job { content_by_lua_block {
      local q, err = require("hwtimer.durable.ngx").get("late", 2)
      if not q then return ngx.say("nil ", err) end
      local ran
      q:handle("late", function(job)
        local r = require("nginx.redis"):new()
        r:set_timeout(5000)
        assert(r:connect("127.0.0.1", @REDIS@))
        assert(r:lpush("ledger", "late " .. job.id))
        r:set_keepalive(10000, 16)
        ran = true
      end)
      assert(q:schedule("late", 0))
      for _ = 1, 200 do
        if ran then break end
        ngx.sleep(0.01)
      end
      ngx.say(ran and "ok" or "nil not run in 2 s")
    } }
    # "SECONDS OPEN|MESSAGE" of a get of the queue "late" that waits up to 8 s
    location = /late { content_by_lua_block {
      local t0 = ngx.now()
      local q, err = require("hwtimer.durable.ngx").get("late", 8)
      ngx.update_time()
      ngx.say(string.format("%.3f %s", ngx.now() - t0, q and "open" or tostring(err)))
    } }
    # the queue with refused options: "SECONDS MESSAGE" of a get that waits up to 2 s
    location = /refused { content_by_lua_block {
      local t0 = ngx.now()
      local q, err = require("hwtimer.durable.ngx").get("refused", 2)
      ngx.update_time()
      ngx.say(string.format("%.3f %s", ngx.now() - t0, tostring(q or err)))
    } }
    location = /ping { content_by_lua_block {
      local q = require("hwtimer.durable.ngx").get("q", 0)
      ngx.say(q and "open" or "opening")
    } }
    # hwtimer.durable.redis_batch alone, with a send that takes 5 ms: n
    # light threads add k jobs each, one after another; then the batch's
    # state: "TRIPS JOBS busy=B waking=W line=L"
    location = /batch_unit { content_by_lua_block {
      local b, trips, jobs = nil, 0, 0
      b = require("hwtimer.durable.redis_batch").new(function(list)
        trips, jobs = trips + 1, jobs + #list
        ngx.sleep(0.005)
        return "stored"
      end)
      local threads = {}
      for i = 1, tonumber(ngx.var.arg_n) do
        threads[i] = ngx.thread.spawn(function()
          for _ = 1, tonumber(ngx.var.arg_k) do assert(b:add({}) == "stored") end
        end)
      end
      for i = 1, #threads do assert(ngx.thread.wait(threads[i])) end
      ngx.say(string.format("%d %d busy=%s waking=%d line=%d", trips, jobs, tostring(b.busy), b.waking, #b.line))
    } }
    # hwtimer.durable.redis_batch alone, its edges: GATHER set to 1 s, 2
    # and then 4 threads add 3 jobs each with a send of 5 ms (the longer of
    # the two runs' seconds); then, with WAIT set to
    # 0.2 s, a sender whose round trip hangs for 1 s and a caller it carries.
    # "SECONDS_FOR_ROUNDS|CARRIED'S ANSWER"
    location = /batch_edges { content_by_lua_block {
      local B = require("hwtimer.durable.redis_batch")
      local gather, wait = B.GATHER, B.WAIT
      B.GATHER = 1 -- (a caller left waiting the whole gather shows as seconds)
      -- (2 callers: each round trip carries the sender and one caller to
      -- wake, the last to wake being the only one; 4: several)
      local rounds = 0
      for _, n in ipairs({ 2, 4 }) do
        local b = B.new(function() ngx.sleep(0.005) return "stored" end)
        local threads = {}
        ngx.update_time()
        local t0 = ngx.now()
        for i = 1, n do
          threads[i] = ngx.thread.spawn(function() for _ = 1, 3 do assert(b:add({}) == "stored") end end)
        end
        for i = 1, #threads do assert(ngx.thread.wait(threads[i])) end
        ngx.update_time()
        rounds = math.max(rounds, ngx.now() - t0)
      end
      B.GATHER, B.WAIT = gather, 0.2
      local trips = 0
      local hung = B.new(function()
        trips = trips + 1
        ngx.sleep(trips == 2 and 1 or 0.05) -- the second round trip's sender hangs
        return "stored"
      end)
      local a = ngx.thread.spawn(function() return hung:add({}) end)     -- trip 1, alone
      local lead = ngx.thread.spawn(function() return hung:add({}) end)  -- waits, then sends trip 2...
      local carried = ngx.thread.spawn(function() return select(2, hung:add({})) end) -- ...with this one
      ngx.thread.wait(a)
      local _, msg = ngx.thread.wait(carried)
      ngx.thread.wait(lead)
      B.WAIT = wait
      ngx.say(string.format("%.3f|%s", rounds, tostring(msg)))
    } }
    # WAIT 0.2 s and a round trip of one job (MAX 1) that takes 0.15 s: A
    # sends; B and C wait; B sends next at 0.15 s; C's wait ends at 0.22 s
    # with B's round trip 0.07 s old (its sender not gone): C's answer.
    location = /batch_wait { content_by_lua_block {
      local B = require("hwtimer.durable.redis_batch")
      local wait, max = B.WAIT, B.MAX
      B.WAIT, B.MAX = 0.2, 1
      local b = B.new(function() ngx.sleep(0.15) return "stored" end)
      local a = ngx.thread.spawn(function() return b:add({}) end)
      ngx.sleep(0.01)
      local bt = ngx.thread.spawn(function() return b:add({}) end)
      ngx.sleep(0.01)
      local c = ngx.thread.spawn(function() return b:add({}) end)
      local got = {}
      for _, t in ipairs({ a, bt, c }) do
        local _, res, err = ngx.thread.wait(t)
        got[#got + 1] = tostring(res) .. " " .. tostring(err)
      end
      B.WAIT, B.MAX = wait, max
      ngx.say(table.concat(got, "|"))
    } }
    # One job a round trip (MAX 1), four callers at once: A sends; B, C and D
    # wait in line, each sent in turn by the one before's end. Each answer.
    location = /batch_line { content_by_lua_block {
      local B = require("hwtimer.durable.redis_batch")
      local wait, max = B.WAIT, B.MAX
      B.WAIT, B.MAX = 2, 1
      local b = B.new(function() ngx.sleep(0.02) return "stored" end)
      local ts = {}
      for i = 1, 4 do ts[i] = ngx.thread.spawn(function() return b:add({}) end) end
      local got = {}
      for _, t in ipairs(ts) do
        local _, res, err = ngx.thread.wait(t)
        got[#got + 1] = tostring(res) .. " " .. tostring(err)
      end
      B.WAIT, B.MAX = wait, max
      ngx.say(table.concat(got, "|"))
    } }
    # A gathering that a caller never ends: L sends K's job with its own, and
    # K's request is killed in that round trip (never to wake); G's schedule
    # then gathers for K until GATHER (0.05 s) and sends alone; W1 and W2
    # come in G's round trip, and W1 carries W2's job. Each answer (K's:
    # "killed"), G's seconds, the state: "A|L|K|G|W1|W2 SECONDS busy= waking= line="
    location = /batch_lost { content_by_lua_block {
      local B = require("hwtimer.durable.redis_batch")
      local gather = B.GATHER
      B.GATHER = 0.05
      local b = B.new(function() ngx.sleep(0.02) return "stored" end)
      local function add() local res, err = b:add({}) return tostring(res or err) end
      local a = ngx.thread.spawn(add)
      local l = ngx.thread.spawn(add)
      local k = ngx.thread.spawn(add)
      ngx.sleep(0.03) -- (A's round trip ended; L's, with K's job, in flight)
      local killed = ngx.thread.kill(k)
      ngx.sleep(0.03) -- (L's ended: K counted to wake)
      local secs
      local g = ngx.thread.spawn(function()
        ngx.update_time()
        local t0 = ngx.now()
        local res = add()
        ngx.update_time()
        secs = ngx.now() - t0
        return res
      end)
      local w1 = ngx.thread.spawn(add)
      local w2 = ngx.thread.spawn(add)
      local got = {}
      for _, t in ipairs({ a, l, g, w1, w2 }) do
        local ok, res = ngx.thread.wait(t)
        got[#got + 1] = ok and res or "failed: " .. tostring(res)
      end
      table.insert(got, 3, killed and "killed" or "not killed")
      B.GATHER = gather
      ngx.say(string.format("%s %.3f busy=%s waking=%d line=%d", table.concat(got, "|"), secs,
        tostring(b.busy), b.waking, #b.line))
    } }
    # one job: "ok ID" or "nil MESSAGE"
    location = /one { content_by_lua_block {
      local a = ngx.req.get_uri_args()
      local q, err = require("hwtimer.durable.ngx").get("q")
      local id
      if q then id, err = q:schedule("count", tonumber(a.delay), a.tag .. "-" .. a.i) end
      ngx.say(id and "ok " .. id or "nil " .. tostring(err))
    } }
    # n jobs in the queue "far", one after another: "ok" or the first error
    location = /far { content_by_lua_block {
      local q, err = require("hwtimer.durable.ngx").get("far")
      for _ = 1, tonumber(ngx.var.arg_n) do
        if not q then break end
        local id
        id, err = q:schedule("far", 3600)
        if not id then break end
      end
      ngx.say(err and "nil " .. tostring(err) or "ok")
    } }
    # n light threads, each scheduling k jobs in the queue "rounds" (no
    # handler either), one after another: "ok" or the first error
    location = /rounds { content_by_lua_block {
      local q, err = require("hwtimer.durable.ngx").get("rounds")
      local threads = {}
      for i = 1, tonumber(ngx.var.arg_n) do
        threads[i] = ngx.thread.spawn(function()
          for _ = 1, tonumber(ngx.var.arg_k) do
            local id, e = q:schedule("far", 3600)
            if not id then return e end
          end
        end)
      end
      for i = 1, #threads do
        local _, e = ngx.thread.wait(threads[i])
        err = err or e
      end
      ngx.say(err and "nil " .. tostring(err) or "ok")
    } }
    # n requests to /one at once (through cosockets to this worker): their
    # answers, one a line, "i ok ID" or "i nil MESSAGE"
    location = /fan { content_by_lua_block {
      local a = ngx.req.get_uri_args()
      local threads = {}
      for i = 1, tonumber(a.n) do
        threads[i] = ngx.thread.spawn(function()
          local s = ngx.socket.tcp()
          s:settimeout(30000)
          assert(s:connect("127.0.0.1", @PORT@))
          assert(s:send("GET /one?tag=" .. a.tag .. "&i=" .. i .. "&delay=" .. a.delay ..
            " HTTP/1.0\r\nHost: x\r\n\r\n"))
          local reply = assert(s:receive("*a"))
          s:close()
          return (reply:match("\r\n\r\n(.-)\n?$"))
        end)
      end
      for i = 1, #threads do
        local ok, line = ngx.thread.wait(threads[i])
        ngx.say(i, " ", ok and line or "thread failed: " .. tostring(line))
      end
    } }
  }
}
]]
local redis_cmd = N.redis_cmd

-- How many RPUSH the server has run: one per `add` script call.
local function rpush_calls(port)
  local info = redis_cmd(port, "INFO", "commandstats")
  return tonumber(info:match("cmdstat_rpush:calls=(%d+)")) or 0
end

-- The ledger: payload -> list of the ids its runs had.
local function ledger(port)
  local runs, n = {}, 0
  for _, line in ipairs(redis_cmd(port, "LRANGE", "ledger", 0, -1)) do
    local payload, id = line:match("^(%S+) (%S+)$")
    runs[payload] = runs[payload] or {}
    table.insert(runs[payload], id)
    n = n + 1
  end
  return runs, n
end

-- A /fan's answers: i -> { ok = id } or { err = message }.
-- f() until it gives a truthy value, for up to 2 s; its last value.
local function within_2s(f)
  local v
  for _ = 1, 100 do
    v = f()
    if v then return v end
    socket.sleep(0.02)
  end
  return v
end

local function answers(body)
  local out = {}
  for i, rest in body:gmatch("(%d+) ([^\n]*)") do
    local id = rest:match("^ok (%S+)$")
    out[tonumber(i)] = id and { ok = id } or { err = rest:match("^nil (.*)$") or rest }
  end
  return out
end

describe("OpenResty: schedules of concurrent requests share round trips to Redis", function()
  if os.getenv("HWT_QUICK") then
    it("runs in the LuaJIT run of the source tree", function()
      pending("spec/durable/06-nginx_batch runs in the LuaJIT run of the source tree")
    end)
    return
  end
  if not N.ready then
    it("needs LuaJIT, nginx and its Lua module", function()
      pending("runs in the LuaJIT spec run with Debian's nginx and libnginx-mod-http-lua")
    end)
    return
  end

  local redis, port, nginx

  local function start()
    nginx = N.start(N.config(CONF, { PORT = port, REDIS = redis.port }))
    assert(N.wait_listening(port, "/ping"), nginx.log())
    for _ = 1, 100 do
      if select(2, N.get(port, "/ping")):find("open", 1, true) == 1 then return end
      socket.sleep(0.05)
    end
    error("the queue did not open: " .. nginx.log())
  end

  setup(function()
    redis = N.persistent_redis()
    redis.start()
    port = N.free_port()
    start()
  end)

  teardown(function()
    if nginx then nginx.stop() end
    redis.stop()
  end)

  it("64 requests at once: fewer add calls than jobs, each its own id, every job stored and run once", function()
    local n = 64
    local before = rpush_calls(redis.port)
    local status, body = N.get(port, "/fan?n=" .. n .. "&tag=a&delay=0.5", 30)
    assert.equal(200, status, body)
    local trips = rpush_calls(redis.port) - before
    local got, ids = answers(body), {}
    for i = 1, n do
      assert.truthy(got[i] and got[i].ok, "request " .. i .. ": " .. tostring(got[i] and got[i].err))
      assert.is_nil(ids[got[i].ok], "id given twice: " .. got[i].ok)
      ids[got[i].ok] = i
    end
    assert.is_true(trips >= 1 and trips < n, trips .. " add calls for " .. n .. " jobs")
    -- every job runs once, with the id its own request was answered
    local limit = socket.gettime() + 10 * SLOW
    local _, total = ledger(redis.port)
    while total < n and socket.gettime() < limit do
      socket.sleep(0.05)
      _, total = ledger(redis.port)
    end
    socket.sleep(1) -- past the sweep and the poll: a second run would show
    local runs
    runs, total = ledger(redis.port)
    assert.equal(n, total)
    for i = 1, n do
      assert.same({ got[i].ok }, runs["a-" .. i], "job a-" .. i)
    end
    print(string.format("\n    64 concurrent schedules: %d add calls (round trips)", trips))
  end)

  it("callers that schedule again as soon as they are answered go together: a round trip for each round", function()
    -- 32 callers, 20 jobs each: after the first round trip (the first
    -- caller's job alone), each round trip carries every caller's next job.
    -- The caller that sent a round trip is answered first (it need not be
    -- woken); were its next job sent at once, alone, the round trips would
    -- alternate one job and 31: 40 of them.
    -- (2 callers: each round trip carries one caller to wake besides its sender)
    -- The intake, which no process polls here, is moved in by the caller
    -- once its entries times the jobs of the last reach 500: with 32 jobs
    -- an entry, by the 16th entry, not the 500th (so about every 500 jobs).
    local function moved()
      local meta = redis_cmd(redis.port, "KEYS", "{rounds:default}*:meta")[1] -- (none before the first job)
      return meta and tonumber(redis_cmd(redis.port, "HGET", meta, "jobs")) or 0
    end
    for _, n in ipairs({ 32, 2 }) do
      local k = 20
      local before, moved_before = rpush_calls(redis.port), moved()
      local status, body = N.get(port, "/rounds?n=" .. n .. "&k=" .. k, 30)
      assert.equal("ok\n", body, status)
      local trips = rpush_calls(redis.port) - before
      assert.is_true(trips <= k + 2, trips .. " add calls for " .. k .. " rounds of " .. n .. " callers")
      print(string.format("\n    %d callers x %d jobs one after another: %d add calls", n, k, trips))
      if n == 32 then
        within_2s(function() return moved() > moved_before end)
        assert.is_true(moved() - moved_before >= 400, (moved() - moved_before) .. " of 640 jobs moved in")
      end
    end
  end)

  it("is idle once every caller has its answer: nobody in line, none counted as still to wake", function()
    -- (a sender left counted as a caller to wake made every later schedule
    -- wait GATHER for a wake-up that never comes)
    for _, nk in ipairs({ { 1, 3 }, { 5, 4 }, { 40, 3 } }) do
      local status, body = N.get(port, "/batch_unit?n=" .. nk[1] .. "&k=" .. nk[2], 30)
      assert.equal(200, status, body)
      local trips, jobs, state = body:match("^(%d+) (%d+) (.-)\n$")
      assert.equal(nk[1] * nk[2], tonumber(jobs), body)
      assert.is_true(tonumber(trips) <= nk[1] * nk[2], body)
      assert.equal("busy=false waking=0 line=0", state, body)
    end
  end)

  it("sends at once when the callers it gathers for have woken, "
    .. "and tells a carried caller whose sender hangs that its job may be stored", function()
    local status, body = N.get(port, "/batch_edges", 30)
    assert.equal(200, status, body)
    local rounds, msg = body:match("^([%d.]+)|(.-)\n$")
    -- 6 jobs of 2 callers, then 12 of 4, each in a few round trips of 5 ms: no gathering waited
    -- out its 1 s (a gatherer never told that the last caller woke did)
    assert.is_true(tonumber(rounds) < 0.8, body)
    assert.equal("no answer from Redis in 0.2 s (the job may be stored)", msg)
  end)

  it("logs a handler's error to error.log at [error] by default, naming the job", function()
    local status, body = N.get(port, "/err_job", 30)
    assert.equal(200, status, body)
    local id = body:match("^(%S+)\n$")
    local line = within_2s(function()
      return nginx.log():match("[^\n]*hwtimer%.durable: job " .. id:gsub("%p", "%%%0") .. " %(fail%): boom [^\n]*")
    end)
    assert.matches("%[error%]", line or "(no line)")
  end)

  it("durable.ngx.open raises on a bad name, options or setup, and on a name opened already, naming the caller's line",
    function()
    local status, body = N.get(port, "/open_args", 30)
    assert.equal(200, status, body)
    assert.equal(table.concat({
      "bad argument #1 to 'open' (non-empty string expected, got nil)",
      "bad argument #1 to 'open' (non-empty string expected, got string)",
      "bad argument #1 to 'open' (non-empty string expected, got number)",
      "bad argument #3 to 'open' (table expected, got nil)",
      "bad argument #4 to 'open' (function expected, got number)",
      "hwtimer.durable.ngx: queue 'q' is opened already in this worker",
    }, "\n") .. "\n", (body:gsub("content_by_lua%(nginx%.conf:%d+%):%d+: ", "")))
  end)

  it("get refuses a wait that is no number of seconds, naming the caller's line; tells why a queue whose setup " ..
    "raises is not open", function()
    local status, body = N.get(port, "/get_args", 30)
    assert.equal(200, status, body)
    local lines = {}
    for l in (body:gsub("content_by_lua%(nginx%.conf:%d+%):%d+: ", "")):gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.same({
      "bad argument #2 to 'get' (non-negative number of seconds expected, got number)",
      "bad argument #2 to 'get' (non-negative number of seconds expected, got number)",
      "bad argument #2 to 'get' (non-negative number of seconds expected, got string)",
      "bad argument #2 to 'get' (non-negative number of seconds expected, got boolean)",
      "hwtimer.durable.ngx: queue 'setup' is not open yet in this worker (the setup function raised: " ..
        "no handlers today)",
    }, lines)
    local log = nginx.log()
    assert.truthy(log:find("queue 'setup' did not open (try 1, next in 0.05 s): the setup function raised: " ..
      "no handlers today", 1, true), log)
  end)

  -- (a cancel's reply read while a claim's long one still comes: the
  -- claim's rows are then checked against it)
  it("cancels while a claim of thousands waits on its reply: true, the job gone, and the claimed ones run", function()
    for _ = 1, 4 do
      local status, body = N.get(port, "/cancel_in_claim", 30)
      assert.equal(200, status, body)
      assert.equal("true true false\n", body)
    end
    local runs = 0
    for _ = 1, 100 do
      runs = tonumber((select(2, N.get(port, "/big_runs"))))
      if runs >= 12000 then break end
      socket.sleep(0.1)
    end
    assert.equal(12000, runs)
  end)

  -- (a line longer than a round trip takes: the rest keep their places)
  it("sends a line longer than MAX in turn, each caller answered by its own round trip", function()
    local status, body = N.get(port, "/batch_line", 30)
    assert.equal(200, status, body)
    assert.equal("stored nil|stored nil|stored nil|stored nil\n", body)
  end)

  it("answers a caller whose wait ends while a young round trip is in flight that none ended, not sending", function()
    local status, body = N.get(port, "/batch_wait", 30)
    assert.equal(200, status, body)
    assert.equal("stored nil|stored nil|nil no round trip to Redis ended in 0.2 s\n", body)
  end)

  -- (a gathering left standing once its GATHER had passed: the last caller
  -- woken by a later round trip posted to the gone gatherer and raised)
  it("sends once a gathering for a caller whose request was killed has waited GATHER, and goes on", function()
    local status, body = N.get(port, "/batch_lost", 30)
    assert.equal(200, status, body)
    local answers_, secs, state = body:match("^(%S+) ([%d.]+) (.-)\n$")
    assert.equal("stored|stored|killed|stored|stored|stored", answers_, body)
    assert.is_true(tonumber(secs) >= 0.045 and tonumber(secs) < 0.5, body) -- (GATHER, then its round trip)
    assert.equal("busy=false waking=0 line=0", state, body)
  end)

  -- (durable.open raised in the timer that opens the queue: the requests
  -- waiting in get() waited their whole `wait`, told only "opening")
  it("tells the requests waiting for a queue whose options durable.open refuses why, at once", function()
    local _, body = N.get(port, "/refused")
    local secs, msg = body:match("^(%S+) (.-)\n$")
    assert.is_true(tonumber(secs) < 0.5, body)
    assert.equal("hwtimer.durable.ngx: queue 'refused' is not open yet in this worker (durable.open raised: " ..
      "bad argument #2 to 'open' (option 'batch': integer from 1 to 100000 expected))", msg:gsub("raised: [^ ]+%.lua:%d+: ", "raised: "))
    local log = nginx.log()
    assert.truthy(log:find("queue 'refused' cannot open: durable.open raised: [^\n]*bad argument #2"), log)
    assert.is_nil(log:find("exited on signal", 1, true), log) -- (the worker lives on, its other queues open)
  end)

  -- (a wake-up that reached one of them left the others their whole wait)
  it("gives a queue that opens late to every request waiting for it, at once", function()
    local waiting = {}
    for i = 1, 3 do
      waiting[i] = assert(socket.connect("127.0.0.1", port))
      waiting[i]:settimeout(15)
      assert(waiting[i]:send("GET /late HTTP/1.0\r\nHost: x\r\n\r\n"))
    end
    socket.sleep(0.2) -- (all three in get())
    assert.equal("up\n", select(2, N.get(port, "/up")))
    local secs = {}
    for i, c in ipairs(waiting) do
      local reply = assert(c:receive("*a"))
      c:close()
      local s, what = reply:match("\r\n\r\n(%S+) ([^\n]*)")
      assert.equal("open", what, reply)
      secs[i] = tonumber(s)
    end
    table.sort(secs)
    -- each woken when the queue opened (its next try, at most 5 s after /up)
    assert.is_true(secs[3] - secs[1] < 1, table.concat(secs, " "))
    assert.is_true(secs[3] < 7.5, table.concat(secs, " "))
    -- the queue it opened works: a job through its cosockets runs, and the
    -- worker that retried the open all along survived
    assert.equal("ok", select(2, N.get(port, "/late_job")):match("^(%S+)"))
    local log = nginx.log()
    assert.is_nil(log:find("exited on signal", 1, true), log)
  end)

  it("moves the intake of a queue no process polls in, in a timer, once it holds 500 jobs", function()
    local status, body = N.get(port, "/far?n=499", 30)
    assert.equal("ok\n", body, status)
    socket.sleep(0.3) -- (a poll would have moved them in by now: there is none)
    assert.equal(499, redis_cmd(redis.port, "LLEN", "{far:default}3:incoming"))
    -- the 500th moves them all in; and again, once that move has ended (one at a time, not one a worker's life)
    for _, c in ipairs({ { 1, "500" }, { 500, "1000" } }) do
      status, body = N.get(port, "/far?n=" .. c[1], 30)
      assert.equal("ok\n", body, status)
      local function left() return redis_cmd(redis.port, "LLEN", "{far:default}3:incoming") end
      within_2s(function() return left() == 0 end)
      assert.equal(0, left())
      assert.equal(c[2], redis_cmd(redis.port, "HGET", "{far:default}3:meta", "jobs"))
    end
  end)

  it("answers every waiting request nil, message when Redis stops mid-batch, and loses none accepted", function()
    local workers = nginx.worker_pids()
    -- accepted first: due in 2 s, after Redis is back
    local status, body = N.get(port, "/fan?n=16&tag=kept&delay=2", 30)
    assert.equal(200, status, body)
    local kept = answers(body)
    for i = 1, 16 do assert.truthy(kept[i].ok, body) end
    -- Redis frozen (the round trip in flight stays unanswered, the other
    -- requests wait for it in line), then killed
    assert(os.execute("kill -STOP " .. redis.pid))
    local c = socket.tcp()
    c:settimeout(30)
    assert(c:connect("127.0.0.1", port))
    c:send("GET /fan?n=64&tag=lost&delay=0.2 HTTP/1.0\r\nHost: x\r\n\r\n")
    socket.sleep(0.5 * SLOW)
    redis.kill9()
    local reply = assert(c:receive("*a"))
    c:close()
    local got = answers(reply:match("\r\n\r\n(.*)$"))
    for i = 1, 64 do
      assert.truthy(got[i] and got[i].err, "request " .. i .. " was answered " .. tostring(got[i] and got[i].ok))
      assert.matches("^hwtimer.durable: ", got[i].err)
    end
    -- back with what it acknowledged: the 16 accepted run once, none refused does
    redis.start()
    local limit = socket.gettime() + 15 * SLOW
    local _, total = ledger(redis.port)
    while total < 16 and socket.gettime() < limit do
      socket.sleep(0.1)
      _, total = ledger(redis.port)
    end
    socket.sleep(1)
    local runs = ledger(redis.port)
    for i = 1, 16 do assert.same({ kept[i].ok }, runs["kept-" .. i], "job kept-" .. i) end
    for i = 1, 64 do assert.is_nil(runs["lost-" .. i], "job lost-" .. i .. " was refused, and ran") end
    local log = nginx.log()
    assert.is_nil(log:find("[crit]", 1, true), log)
    -- the host survived its cosockets' failures: same workers, none crashed
    assert.same(workers, nginx.worker_pids())
    assert.is_nil(log:find("exited on signal", 1, true), log)
    assert.is_nil(log:find("[alert]", 1, true), log)
  end)

  -- (the queue 'setup' never opens: its setup raises at every try)
  it("tells each request waiting for a queue that has not opened that the worker is exiting, at nginx -s quit",
    function()
    local waiting = {}
    for i = 1, 2 do
      waiting[i] = assert(socket.connect("127.0.0.1", port))
      waiting[i]:settimeout(15)
      assert(waiting[i]:send("GET /setup_wait HTTP/1.0\r\nHost: x\r\n\r\n"))
    end
    socket.sleep(0.3) -- (both in get())
    local master = nginx.master_pid()
    assert.is_true(nginx.signal("quit"))
    for _, c in ipairs(waiting) do
      local reply = assert(c:receive("*a"))
      c:close()
      assert.equal("hwtimer.durable.ngx: queue 'setup' is not open yet in this worker (the worker is exiting)",
        reply:match("\r\n\r\n([^\n]*)"), reply)
    end
    assert.is_nil(N.wait_gone({ master }, 10), "nginx did not quit")
    nginx.stop()
    start() -- (a fresh one for what follows)
  end)
end)
