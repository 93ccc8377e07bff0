-- hwtimer.durable in a real nginx with four workers sharing one store
-- (issue 11), run once per engine: one SQLite file, and a real redis-server
-- through lua-resty-redis (Debian lua-nginx-redis). Jobs scheduled through
-- requests that land on different workers run exactly once across them;
-- handlers do cosocket I/O (an HTTP round trip to this nginx, writes to
-- redis); a worker killed with kill -9 inside a job leaves it to another
-- worker once the lease ends; jobs survive `nginx -s stop`, `-s quit` and
-- `-s reload`, and none runs before it is due. Runs in the LuaJIT spec run.
--
-- With SQLite the store's reads and commits are SQLite's C library called
-- from the worker: blocking, like a write to a local log file (a commit is
-- tens of microseconds on a local disk; busy_timeout bounds the wait for
-- another worker's lock). With Redis every command is a cosocket and
-- yields, as the handlers' own I/O does.
--
-- Every run of a handler is written to a redis list (the ledger) before the
-- handler returns: the ledger outlives the nginx under test, its restarts
-- and the kill -9, so the spec counts runs there.
local N = require("spec.nginx")
local socket = require("socket")

local SLOW = tonumber(os.getenv("HWT_SLOW")) or 1
local WORKERS = 4
local LEASE = 2

local CONF = [[
@HEAD@
events { worker_connections 1024; }
http {
  access_log off;
  lua_package_path "@LPATH@;/usr/share/lua/5.1/?.lua;;";
  lua_package_cpath "@CPATH@;;";
  lua_shared_dict st 1m;
  init_worker_by_lua_block {
    local sqlite = require("hwtimer.sqlite")
    local durable = require("hwtimer.durable")
    -- exit_max = 0: at a worker's exit no timeout's callback is called;
    -- the queue's own exit (jobs handed back, leases kept while handlers
    -- wait, acknowledgements written) must not rest on them
    local d = assert(require("hwtimer.ngx").new({ tick = 0.001, exit_max = 0 }))
    local common = { lease = @LEASE@, poll = 0.02, sweep = 0.1, batch_timeout = 0.5,
      on_error = function(err, job)
        -- (a batch rolled back is the batch spec's to count, not a fault)
        if tostring(err):find("a batch was rolled back", 1, true) then return ngx.shared.st:incr("rolled", 1, 0) end
        ngx.log(ngx.ERR, "durable: ", tostring(err), " job ", job and job.id or "-")
      end }
    local function opts(o)
      for k, v in pairs(common) do o[k] = v end
      return o
    end
    local function ready(q)   -- the handlers, then the queue is this worker's
    -- one ledger entry per run: "id pid generation lateness attempt extra"
    local function ledger(job, extra)
      local r = require("nginx.redis"):new()
      r:set_timeout(5000)
      assert(r:connect("127.0.0.1", @REDIS@))
      local line = string.format("%s %d @GEN@ %.6f %d %s", job.id, ngx.worker.pid(),
        sqlite.now() - job.due, job.attempt, extra or "-")
      assert(r:rpush("ledger", line))
      r:set_keepalive(10000, 16)
    end
    q:handle("count", function(job) ledger(job) end)
    q:handle("io", function(job)   -- an HTTP round trip to this nginx, through a cosocket
      local sock = ngx.socket.tcp()
      sock:settimeout(5000)
      assert(sock:connect("127.0.0.1", @PORT@))
      assert(sock:send("GET /pong?id=" .. job.id .. " HTTP/1.0\r\nHost: x\r\n\r\n"))
      local reply = assert(sock:receive("*a"))
      sock:close()
      ledger(job, reply:match("\r\n\r\n(%S+)"))
    end)
    q:handle("slow", function(job)  -- waits on a timer 1.6 leases, then writes its run
      ngx.sleep(@LEASE@ * 1.6)
      ledger(job)
    end)
    q:handle("linger", function(job)  -- writes its start, waits 1.6 leases, writes its end
      ledger(job, "start")
      ngx.sleep(@LEASE@ * 1.6)
      ledger(job, "end")
    end)
    q:handle("hang", function(job)  -- the first run waits until the worker is killed
      ledger(job)
      if job.attempt == 1 then ngx.sleep(60) end
    end)
    package.loaded.q = q
    ngx.shared.st:incr("opened", 1, 0)
    end
@OPEN@
  }
  server {
    listen 127.0.0.1:@PORT@ reuseport;
    location = /ping { return 200 "up"; }
    location = /pong { content_by_lua_block { ngx.print("pong:", ngx.var.arg_id) } }
    location = /schedule {   # n jobs of a kind, ids TAG-FIRST.., due in delay s (+ i * step)
      content_by_lua_block {
        local q, a = package.loaded.q, ngx.req.get_uri_args()
        local n, first = tonumber(a.n), tonumber(a.first)
        for i = 0, n - 1 do
          assert(q:schedule(a.kind, tonumber(a.delay) + i * tonumber(a.step or 0), nil,
                            { id = a.tag .. "-" .. (first + i) }))
        end
        ngx.say(ngx.worker.pid())
      }
    }
    location = /pending { content_by_lua_block { ngx.say(package.loaded.q:pending()) } }
    # a batch whose light thread is killed while its function waits: "ID
    # SECONDS ROLLED", the first job this request could then store, the
    # seconds that took, and the batches rolled back in this nginx
    location = /batch_killed { content_by_lua_block {
      local q, tag = package.loaded.q, ngx.var.arg_tag
      local th = ngx.thread.spawn(function()
        return q:batch(function(b)
          assert(b:schedule("count", 0, nil, { id = tag .. "-killed" }))
          ngx.sleep(60)
        end)
      end)
      ngx.sleep(0.01)
      assert(ngx.thread.kill(th))
      local t0, id = ngx.now(), nil
      repeat
        id = q:schedule("count", 0, nil, { id = tag .. "-after" })
        if not id then ngx.sleep(0.02) end
      until id or ngx.now() - t0 > 10
      ngx.say(string.format("%s %.3f %d", tostring(id), ngx.now() - t0, ngx.shared.st:get("rolled") or 0))
    } }
    location = /opened { content_by_lua_block { ngx.say(ngx.shared.st:get("opened") or 0) } }
  }
}
]]

-- How each worker opens the queue, per engine, as docs/durable.md and docs/durable-redis.md show it.
-- SQLite: in init_worker, a connection per worker to the one file. Redis:
-- cosockets are off in init_worker, so the queue opens in a timer of its
-- own, and the client is a function giving a connected lua-resty-redis
-- object (a cosocket belongs to the request or timer that made it: the
-- engine takes one from nginx's pool for each command and gives it back).
local ENGINES = {
  { name = "one SQLite file", open = [[
    ready(assert(durable.open(d, opts({ path = "@DB@", busy_timeout = 10 }))))]] },
  { name = "Redis through lua-resty-redis", open = [[
    assert(ngx.timer.at(0, function()
      ready(assert(durable.open(d, opts({ prefix = "app", redis = function()
        local r = require("nginx.redis"):new()
        r:set_timeout(5000)
        local ok, err = r:connect("127.0.0.1", @REDIS@)
        if not ok then return nil, err end
        return r
      end }))))
    end))]] },
}
local redis_cmd = N.redis_cmd

-- The ledger's runs of the jobs whose id starts with `tag`-, by id.
local function runs_of(redis_port, tag)
  local by_id, total = {}, 0
  for _, line in ipairs(redis_cmd(redis_port, "LRANGE", "ledger", 0, -1)) do
    local id, pid, gen, late, attempt, extra = line:match("^(%S+) (%d+) (%d+) (%S+) (%d+) (%S+)$")
    if id and id:sub(1, #tag + 1) == tag .. "-" then
      local list = by_id[id] or {}
      by_id[id] = list
      list[#list + 1] = { pid = tonumber(pid), gen = tonumber(gen), late = tonumber(late),
                          attempt = tonumber(attempt), extra = extra }
      total = total + 1
    end
  end
  return by_id, total
end

-- The jobs that ran more than once, each run as "pid attempt lateness".
local function runs_twice(by_id)
  local out = {}
  for id, list in pairs(by_id) do
    if #list > 1 then
      local runs = {}
      for i, r in ipairs(list) do runs[i] = string.format("%d #%d %+.3fs", r.pid, r.attempt, r.late) end
      out[#out + 1] = id .. ": " .. table.concat(runs, ", ")
    end
  end
  return #out .. " ran twice: " .. table.concat(out, "; ")
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local alive = N.alive

for _, engine in ipairs(ENGINES) do
describe("OpenResty: durable jobs in nginx with four workers on " .. engine.name, function()
  if os.getenv("HWT_QUICK") then -- (the rock's runs: ~40 s of nginx, to keep CI under 15 minutes)
    it("runs once, in the LuaJIT run of the source tree", function()
      pending("spec/durable/04-nginx runs in the LuaJIT run of the source tree")
    end)
    return
  end
  if N.skip_unless_ready(pending) then return end
  if not require("spec.helpers").optional("hwtimer.sqlite") then
    it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
    return
  end

  local redis, dir, db, port, ngx_, gen = nil, nil, nil, nil, nil, 0
  local killed = {}   -- worker pids this spec killed with kill -9
  local seen = {}     -- pid -> start time of every nginx process this spec started

  -- A process's start time (clock ticks since boot), to tell it from a
  -- later process that got the same pid.
  local function started_at(pid)
    local f = io.open("/proc/" .. pid .. "/stat")
    local line = f and f:read("*l")
    if f then f:close() end
    if not line then return nil end
    local fields = {}
    for x in line:gsub("^.-%) ", ""):gmatch("%S+") do fields[#fields + 1] = x end
    return fields[20]
  end

  local function note_pids()
    if not ngx_ then return end
    local pids = ngx_.worker_pids()
    pids[#pids + 1] = ngx_.master_pid()
    for _, pid in ipairs(pids) do seen[pid] = seen[pid] or started_at(pid) end
  end

  local function start()
    gen = gen + 1
    local conf = CONF:gsub("@OPEN@", function() return engine.open end)
    ngx_ = N.start(N.config(conf, { PORT = port, REDIS = redis.port, DB = db, LEASE = LEASE, GEN = gen })
      :gsub("worker_processes 1;", "worker_processes " .. WORKERS .. ";", 1))
    assert(N.wait_listening(port, "/ping"), ngx_.log())
    local opened
    for _ = 1, 100 do
      opened = tonumber(select(2, N.get(port, "/opened")):match("%d+"))
      if #ngx_.worker_pids() == WORKERS and opened >= WORKERS then break end
      socket.sleep(0.05)
    end
    note_pids()
    assert.equal(WORKERS, #ngx_.worker_pids())
    assert.equal(WORKERS, opened, ngx_.log())
  end

  -- error.log has no worker that died, but for the ones killed here.
  local function assert_no_crash(log)
    log = log or ngx_.log()
    for pid, sig in log:gmatch("worker process (%d+) exited on signal (%d+)") do
      assert.is_true(killed[tonumber(pid)] and sig == "9", log)
    end
    assert.is_nil(log:find("durable: ", 1, true), log)
    assert.is_nil(log:find("error in timeout callback", 1, true), log)
    assert.is_nil(log:find("[crit]", 1, true), log)
  end

  local function stop()
    if not ngx_ then return end
    local master, workers = ngx_.master_pid(), ngx_.worker_pids()
    ngx_.stop()
    ngx_ = nil
    for _, pid in ipairs(workers) do assert.is_false(alive(pid)) end
    if master then assert.is_false(alive(master)) end
  end

  -- Schedule jobs through `requests` HTTP requests (each a new connection,
  -- so that reuseport spreads them over the workers); returns the pids that
  -- served them.
  local function schedule(kind, tag, requests, per, delay, step)
    local served = {}
    for r = 0, requests - 1 do
      local status, body = N.get(port, string.format("/schedule?kind=%s&tag=%s&n=%d&first=%d&delay=%g&step=%g",
        kind, tag, per, r * per, delay, step or 0))
      assert.equal(200, status, ngx_.log())
      local pid = tonumber(body:match("%d+"))
      served[pid] = (served[pid] or 0) + 1
    end
    return served
  end

  local function wait_runs(tag, n, secs)
    local limit = socket.gettime() + secs * SLOW
    local by_id
    repeat
      by_id = runs_of(redis.port, tag)
      if count(by_id) >= n then break end
      socket.sleep(0.05)
    until socket.gettime() > limit
    return by_id
  end

  -- What a count that fell short is told with: the ids that never ran, the
  -- jobs the store still holds, the log.
  local function missing(by_id, tag, n)
    local ids = {}
    for i = 0, n - 1 do
      if not by_id[tag .. "-" .. i] then ids[#ids + 1] = tag .. "-" .. i end
    end
    local ok, left = pcall(N.get, port, "/pending")
    return string.format("%d never ran (%s); the store holds %s; error.log:\n%s", #ids,
      table.concat(ids, " ", 1, math.min(#ids, 10)), ok and left or "?", ngx_ and ngx_.log() or "")
  end

  local function pending_jobs()
    local _, body = N.get(port, "/pending")
    return tonumber(body:match("%d+"))
  end

  local function wait_pending(n, secs)
    local limit, left = socket.gettime() + secs * SLOW
    repeat
      left = pending_jobs()
      if left == n then break end
      socket.sleep(0.05)
    until socket.gettime() > limit
    return left
  end

  setup(function()
    redis = N.start_redis()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    db = dir .. "/timers.db"
    port = N.free_port()
    start()
  end)

  -- Whatever a failed case left running is stopped here, by its pid (an
  -- nginx process still alive under a pid this spec saw).
  local function nginx_left()
    local left = {}
    for pid, t in pairs(seen) do
      if started_at(pid) == t then left[#left + 1] = pid end
    end
    return left
  end

  after_each(note_pids)

  teardown(function()
    if ngx_ then
      note_pids()
      ngx_.stop()
    end
    for _, pid in ipairs(nginx_left()) do os.execute("kill -9 " .. pid .. " 2>/dev/null") end
    redis.stop()
    os.execute("rm -rf " .. dir)
  end)

  it("runs jobs scheduled on different workers exactly once across the four", function()
    local served = schedule("count", "once", 40, 25, 0.3, 0.0005)
    assert.is_true(count(served) >= 2, "every request landed on one worker")
    local by_id = wait_runs("once", 1000, 20)
    assert.equal(1000, count(by_id), missing(by_id, "once", 1000))
    local ran_on = {}
    for id, list in pairs(by_id) do
      assert.equal(1, #list, id .. " ran " .. #list .. " times")
      assert.is_true(list[1].late >= 0, id .. " ran early by " .. -list[1].late .. " s")
      ran_on[list[1].pid] = true
    end
    assert.is_true(count(ran_on) >= 2, "every job ran on one worker")
    assert.equal(0, wait_pending(0, 5))
    socket.sleep(0.3)  -- a late duplicate would show now
    local again, total = runs_of(redis.port, "once")
    assert.equal(1000, total, runs_twice(again) .. "\nerror.log:\n" .. ngx_.log())
    assert_no_crash()
  end)

  it("runs jobs whose handler makes an HTTP round trip to this nginx through a cosocket", function()
    schedule("io", "io", 10, 20, 0.2, 0.001)
    local by_id = wait_runs("io", 200, 20)
    assert.equal(200, count(by_id), missing(by_id, "io", 200))
    for id, list in pairs(by_id) do
      assert.equal(1, #list, id .. " ran " .. #list .. " times")
      assert.equal("pong:" .. id, list[1].extra)
    end
    assert.equal(0, wait_pending(0, 5))
    assert_no_crash()
  end)

  it("runs a job whose handler waits longer than its lease once: the lease is extended meanwhile", function()
    schedule("slow", "slow", 4, 1, 0.05)
    local by_id = wait_runs("slow", 4, LEASE * 1.6 + 10)
    assert.equal(4, count(by_id), missing(by_id, "slow", 4))
    assert.equal(0, wait_pending(0, 5))
    socket.sleep(0.3)  -- a second run would show now
    by_id = runs_of(redis.port, "slow")
    for id, list in pairs(by_id) do
      local runs = {}
      for _, r in ipairs(list) do runs[#runs + 1] = string.format("pid %d attempt %d late %.3f", r.pid, r.attempt, r.late) end
      assert.equal(1, #list, id .. " ran " .. #list .. " times: " .. table.concat(runs, "; "))
    end
    assert_no_crash()
  end)

  -- (SQLite: the batch's transaction held the file's write lock, for
  -- every worker, until the queue's close)
  it("rolls back a batch whose light thread was killed inside it, after batch_timeout", function()
    local _, body = N.get(port, "/batch_killed?tag=killed")
    local id, secs, rolled = body:match("^(%S+) (%S+) (%d+)")
    assert.equal("killed-after", id, body)
    assert.is_true(tonumber(secs) >= 0.4 and tonumber(secs) < 5 * SLOW, body)
    assert.equal("1", rolled)
    schedule("count", "killed-other", 8, 1, 0) -- the other workers write too
    local by_id = wait_runs("killed", 1, 10)
    assert.truthy(by_id["killed-after"])
    assert.equal(8, count(wait_runs("killed-other", 8, 10)))
    socket.sleep(0.3)
    assert.is_nil(runs_of(redis.port, "killed")["killed-killed"])
    assert_no_crash()
  end)

  it("gives the job of a worker killed with kill -9 to another worker once its lease ends", function()
    schedule("hang", "hang", 1, 1, 0.05)
    local by_id = wait_runs("hang", 1, 10)
    local first = assert(by_id["hang-0"], "the job never started")[1]
    local t_kill = socket.gettime()
    assert(os.execute("kill -9 " .. first.pid))
    killed[first.pid] = true
    local list
    local limit = socket.gettime() + (LEASE + 10) * SLOW
    repeat
      list = runs_of(redis.port, "hang")["hang-0"]
      if #list >= 2 then break end
      socket.sleep(0.05)
    until socket.gettime() > limit
    assert.equal(2, #list)
    local second = list[2]
    assert.are_not.equal(first.pid, second.pid)
    assert.equal(2, second.attempt)
    -- not before the lease taken at the first run's start had ended
    assert.is_true(second.late - first.late >= LEASE - 0.05,
      "rerun after " .. (second.late - first.late) .. " s, lease " .. LEASE .. " s")
    assert.is_true(socket.gettime() - t_kill < (LEASE + 5) * SLOW)
    assert.equal(0, wait_pending(0, 5))
    -- the master replaced the killed worker: four again
    for _ = 1, 100 do
      if #ngx_.worker_pids() == WORKERS then break end
      socket.sleep(0.05)
    end
    assert.equal(WORKERS, #ngx_.worker_pids())
    assert.matches("worker process " .. first.pid .. " exited on signal 9", ngx_.log(), 1, true)
    assert_no_crash()
  end)

  it("keeps jobs across nginx -s stop and a new start: each runs once, in the new nginx", function()
    local old = gen
    schedule("count", "restart", 8, 25, 1.5, 0.001)
    stop()
    start()
    local by_id = wait_runs("restart", 200, 20)
    assert.equal(200, count(by_id), missing(by_id, "restart", 200))
    for id, list in pairs(by_id) do
      assert.equal(1, #list, id .. " ran " .. #list .. " times")
      assert.equal(old + 1, list[1].gen)
      assert.is_true(list[1].late >= 0, id .. " ran early by " .. -list[1].late .. " s")
    end
    assert.equal(0, wait_pending(0, 5))
    assert_no_crash()
  end)

  -- The worker's exit (quit, reload) hands the timeouts that never ran to
  -- their callbacks, cancelled: the queue must leave their jobs to the store
  -- (not run them before they are due, not use the stopped timer).
  it("loses no accepted job at nginx -s quit, and runs none of them early", function()
    schedule("count", "quit", 8, 25, 1.5, 0.002)
    local master, workers = ngx_.master_pid(), ngx_.worker_pids()
    assert.is_true(ngx_.signal("quit"))
    for _ = 1, 200 do
      if not alive(master) then break end
      socket.sleep(0.05)
    end
    local left = {}
    for _, pid in ipairs(workers) do
      if alive(pid) then left[#left + 1] = pid end
    end
    assert.is_false(alive(master), "nginx did not quit in 10 s; workers left: " ..
      table.concat(left, " ") .. "\n" .. io.popen("ps -o pid,ppid,stat,wchan:25,args --ppid " .. master ..
      " -p " .. master):read("*a") .. "\nerror.log:\n" .. ngx_.log())
    local quit_log = ngx_.log()
    ngx_.stop()   -- removes its prefix
    ngx_ = nil
    start()
    local by_id = wait_runs("quit", 200, 20)
    assert.equal(200, count(by_id), missing(by_id, "quit", 200))
    assert.equal(0, wait_pending(0, 5))
    for id, list in pairs(by_id) do
      local runs = {}
      for _, r in ipairs(list) do runs[#runs + 1] = string.format("pid %d attempt %d late %.3f", r.pid, r.attempt, r.late) end
      assert.equal(1, #list, id .. " ran " .. #list .. " times: " .. table.concat(runs, "; "))
    end
    for id, list in pairs(by_id) do
      assert.is_true(list[1].late >= 0, id .. " ran early by " .. -list[1].late .. " s")
      assert.equal(gen, list[1].gen)
    end
    assert_no_crash(quit_log)
    assert_no_crash()
  end)

  -- How many runs of the jobs tagged `tag` wrote their end.
  local function ends_of(tag)
    local n = 0
    for _, list in pairs(runs_of(redis.port, tag)) do
      for _, r in ipairs(list) do
        if r.extra == "end" then n = n + 1 end
      end
    end
    return n
  end

  -- Wait up to `secs` for `n` ends of the "linger" jobs tagged `tag`, and a
  -- lease more (a second run, once a lease had run out, would show by
  -- then): each job ran once, its start and end in one worker. Their runs by id.
  local function assert_lingered_once(tag, n, secs)
    local limit = socket.gettime() + secs * SLOW
    while ends_of(tag) < n and socket.gettime() < limit do socket.sleep(0.05) end
    assert.equal(n, ends_of(tag), missing(runs_of(redis.port, tag), tag, n))
    socket.sleep(LEASE + 0.5)
    local by_id = runs_of(redis.port, tag)
    assert.equal(n, count(by_id), missing(by_id, tag, n))
    for id, list in pairs(by_id) do
      local runs = {}
      for _, r in ipairs(list) do runs[#runs + 1] = string.format("%s in pid %d, attempt %d", r.extra, r.pid, r.attempt) end
      local said = id .. ": " .. table.concat(runs, "; ")
      assert.equal(2, #list, said)
      assert.same({ "start", "end" }, { list[1].extra, list[2].extra })
      assert.equal(list[1].pid, list[2].pid, said)
    end
    return by_id
  end

  -- At a reload the old worker stops its timer while these handlers wait:
  -- the renewals that kept their leases were timeouts of that timer.
  it("keeps the leases of handlers still waiting at nginx -s reload: each job runs once, to its end, in the old worker", function()
    schedule("linger", "linger", 4, 1, 0.05)
    local by_id = wait_runs("linger", 4, 10) -- their starts
    assert.equal(4, count(by_id), missing(by_id, "linger", 4))
    local before = ngx_.worker_pids()
    local old = {}
    for _, pid in ipairs(before) do old[pid] = true end
    assert.is_true(ngx_.signal("reload"))
    socket.sleep(0.2)
    note_pids()
    by_id = assert_lingered_once("linger", 4, LEASE * 1.6 + 10)
    for id, list in pairs(by_id) do
      assert.is_true(old[list[1].pid], id .. " ran in a new worker")
    end
    assert.equal(0, wait_pending(0, 5))
    assert.is_nil(N.wait_gone(before, 10 * SLOW), "an old worker is still there 10 s after its handlers ended")
    assert_no_crash()
  end)

  -- Three generations of workers at once, each old one with handlers
  -- still waiting, and jobs falling due all along.
  it("runs each job once across three reloads in a row while handlers wait through them", function()
    schedule("linger", "relay", 1, 40, 0.05, 0.05) -- 40 jobs due over 2 s, each waiting 1.6 leases
    local before = ngx_.worker_pids()
    for _ = 1, 3 do
      socket.sleep(0.6)
      assert.is_true(ngx_.signal("reload"))
      socket.sleep(0.1)
      note_pids()
    end
    local pids = {}
    for _, list in pairs(assert_lingered_once("relay", 40, LEASE * 1.6 + 15)) do pids[list[1].pid] = true end
    assert.is_true(count(pids) >= 2, "all 40 ran in one worker") -- (old and new generations shared them)
    assert.equal(0, wait_pending(0, 5))
    assert.is_nil(N.wait_gone(before, 10 * SLOW), "an old worker is still there 10 s after its handlers ended")
    assert_no_crash()
  end)

  it("hands the jobs of the old workers to the new ones at nginx -s reload: once each, none early", function()
    schedule("count", "reload", 8, 25, 1.5, 0.002)
    local before = ngx_.worker_pids()
    assert.is_true(ngx_.signal("reload"))
    socket.sleep(0.2)
    note_pids()
    local old = {}
    for _, pid in ipairs(before) do old[pid] = true end
    local by_id = wait_runs("reload", 200, 20)
    assert.equal(200, count(by_id), missing(by_id, "reload", 200))
    assert.equal(0, wait_pending(0, 5))
    for id, list in pairs(by_id) do
      assert.equal(1, #list, id .. " ran " .. #list .. " times")
      assert.is_true(list[1].late >= 0, id .. " ran early by " .. -list[1].late .. " s")
      assert.is_nil(old[list[1].pid], id .. " ran in an old worker")
    end
    assert.is_nil(N.wait_gone(before, 10 * SLOW), "an old worker is still there 10 s after the reload")
    assert_no_crash()
    stop()
  end)
end)
end
