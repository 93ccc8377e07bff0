-- hwtimer.durable with its Redis engine: a store of an older format
-- upgraded when a process of this one opens it, against a real
-- redis-server that this spec starts on a free loopback port and stops by
-- its pid. Each older format's store is written here as its processes
-- wrote it (their keys, their encodings); the upgrade keeps every job and
-- its due time, moves the old intake in, and fences it (a string where the
-- list was), so that a process of that format still running fails its
-- first command there, having written nothing.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local have_socket, N = pcall(require, "spec.nginx")
local redis = have_socket and N.redis_lua()
local have_server = os.execute("command -v redis-server >/dev/null 2>&1")
have_server = have_server == true or have_server == 0
if os.getenv("HWT_SLOW") or not (have_socket and redis and have_server) then
  describe("hwtimer.durable with Redis, upgrading a store", function()
    it("needs redis-server, luasocket and redis-lua (left out under valgrind)", function()
      pending("pure Lua against redis-server: apt-get install redis-server lua-socket lua-redis")
    end)
  end)
  return
end

local durable = require("hwtimer.durable")

describe("hwtimer.durable with Redis, upgrading a store", function()
  local server, port
  local timer, q, client, prefix
  local open_queues, n_prefix = {}, 0

  setup(function()
    server = N.start_redis()
    port = server.port
  end)

  teardown(function() server.stop() end)

  local function connect() return redis.connect("127.0.0.1", port) end

  -- The server's clock, epoch seconds (what "now" means to the scripts).
  local function server_now()
    local t = client:eval("return redis.call('TIME')", 0)
    return tonumber(t[1]) + tonumber(t[2]) / 1e6
  end

  local function open(opts)
    opts = opts or {}
    if opts.redis == nil then opts.redis = connect() end
    opts.prefix = opts.prefix or prefix
    local queue, err = durable.open(timer, opts)
    if queue then open_queues[#open_queues + 1] = queue end
    return queue, err
  end

  before_each(function()
    timer = hwtimer.new()
    client = connect()
    n_prefix = n_prefix + 1
    prefix = "up" .. n_prefix
    open_queues = {}
  end)

  after_each(function()
    for _, o in ipairs(open_queues) do o:close() end
    timer:close()
  end)

  local function wait(done, secs) return helpers.wait_until(timer, done, secs or 5) end

  describe("durable.open", function()
    it("upgrades a store of format 2 (the same layout without the intake) to 6, its jobs kept", function()
      local tag = "{" .. prefix .. ":default}"
      client:hmset(tag .. ":meta", "app", "hwtimer.durable", "format", "2", "buckets", "1", "jobs", "0")
      q = assert(open())
      assert.equal("6", client:hget(tag .. ":meta", "format"))
      assert(q:schedule("k", 60))
      assert.equal(1, q:pending())
      -- a store of format 2 with jobs in its buckets and slots (written as
      -- format 2 wrote them: `put`, nothing in the intake)
      local other = "{" .. prefix .. ":old}"
      local old = assert(open({ queue = "old" }))
      local due = server_now() + 0.2
      assert(old:batch(function(b)
        for i = 1, 100 do b:at("k", due + i * 1e-4, "p" .. i, { id = "old-" .. i }) end
      end))
      old:close()
      assert.equal(0, client:llen(other .. ":in"))
      client:hset(other .. ":meta", "format", "2")
      local ran = {}
      local upgraded = assert(open({ queue = "old" }))
      assert.equal("6", client:hget(other .. ":meta", "format"))
      assert.equal(100, upgraded:pending())
      assert.equal("p7", upgraded:get("old-7").payload)
      upgraded:handle("k", function(job) ran[job.id] = (ran[job.id] or 0) + 1 end)
      assert.is_true(wait(function() return upgraded:pending() == 0 end))
      timer:run(0.1)
      for i = 1, 100 do assert.equal(1, ran["old-" .. i], "old-" .. i) end
    end)

    -- A store of format 3 or 4 as it wrote it: a job "tick" of kind "t"
    -- (nine values, no schedule; periodic when every_us > 0) in bucket 0
    -- and its kind's slot, and an entry in the intake of that format,
    -- {p:q}:in or {p:q}:intake (the encoding of jobs of that format, after
    -- TIME's two fields); in format 4, format 3's intake fenced.
    local function u32(n)
      return string.char(math.floor(n / 16777216) % 256, math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
    end
    local function str(x) return u32(#x) .. x end
    local function old_store(format, tag, due_us, every_us, entry)
      client:eval([[
        local due, every = tonumber(ARGV[1]), tonumber(ARGV[2])
        redis.call('HSET', KEYS[1], 'app', 'hwtimer.durable', 'format', ARGV[4], 'buckets', 1, 'jobs', 1)
        redis.call('HSET', KEYS[2], 'tick', cmsgpack.pack('t', due, every, 0, '', 'hb', false, 0, due))
        local w = 2 ^ 40
        local start = math.floor(due / w) * w
        redis.call('ZADD', KEYS[3], start, string.format('%.0f/%.0f', start, w))
        redis.call('ZADD', KEYS[3] .. ':' .. string.format('%.0f', start), due, 'tick')
        redis.call('SADD', KEYS[4], 't')
        redis.call('RPUSH', KEYS[ARGV[4] == '3' and 5 or 6], ARGV[3])
        if ARGV[4] == '4' then redis.call('SET', KEYS[5], 'fence of format 3') end
      ]], 6, tag .. ":meta", tag .. ":j:0", tag .. ":r:1:t", tag .. ":kinds", tag .. ":in", tag .. ":intake",
        string.format("%.0f", due_us), string.format("%.0f", every_us), entry, tostring(format)) -- (LuaJIT's tostring: 14 digits)
    end
    -- `key` a fence: a process of the format whose intake it was fails its
    -- first command there (every script reads or pushes to it first)
    local function assert_fence(key)
      assert.equal("string", client:type(key))
      assert.has_error(function() client:lrange(key, 0, -1) end)
      assert.has_error(function() client:rpush(key, "x") end)
    end

    it("upgrades a store of format 3 to 6, its jobs and intake kept, and fences the processes of format 3", function()
      local tag = "{" .. prefix .. ":default}"
      local t = client:eval("return redis.call('TIME')", 0)
      local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
      local due_us = math.floor(now * 1e6) - 500000
      -- a job of a fresh id, due 60 s after the TIME of its entry
      local entry = t[1] .. " " .. t[2] .. " " .. str("fresh-1") .. str("k") .. "\1\1\1" .. str("q") .. str("60000000") ..
        str("0")
      old_store(3, tag, due_us, 2000000, entry)
      q = assert(open())
      assert.equal("6", client:hget(tag .. ":meta", "format"))
      -- the intake of format 3 moved in, and made a string: every script of
      -- a process of format 3 reads or pushes to that list first, and fails
      -- there, having written nothing
      assert_fence(tag .. ":in")
      assert_fence(tag .. ":intake")
      assert_fence(tag .. ":inbox")
      assert.equal(0, client:llen(tag .. ":incoming"))
      local fresh = q:get("fresh-1")
      assert.same({ "k", "q", 0 }, { fresh.kind, fresh.payload, fresh.attempt })
      assert.is_true(math.abs(fresh.due - (tonumber(t[1]) + tonumber(t[2]) / 1e6 + 60)) < 1e-5)
      assert.equal(2, q:pending())
      -- the periodic job of format 3 runs as a schedule of its interval
      local tick = q:get("tick")
      assert.same({ 2, "once", 0, due_us / 1e6, "hb" }, { tick.every, tick.missed, tick.runs, tick.scheduled_for, tick.payload })
      local ran = {}
      q:handle("t", function(job) ran[#ran + 1] = job end)
      assert.is_true(wait(function() local j = q:get("tick") return #ran == 1 and not j.leased end))
      assert.same({ due_us / 1e6, false }, { ran[1].scheduled_for, ran[1].late })
      tick = q:get("tick")
      assert.same({ due_us / 1e6 + 2, 1 }, { tick.scheduled_for, tick.runs })
      -- opened again: format 6, the fence in place
      q:close()
      q = assert(open())
      assert.equal(2, q:pending())
      client:del(tag .. ":in")
      client:rpush(tag .. ":in", "x")
      local queue, err = open()
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: redis " .. tag .. ": key " .. tag ..
        ":in is a list, not a string (not a hwtimer.durable store)", err)
    end)

    it("upgrades a store of format 4 to 6, its jobs and intake kept, and fences the processes of format 4", function()
      local tag = "{" .. prefix .. ":default}"
      local t = client:eval("return redis.call('TIME')", 0)
      local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
      local due_us = math.floor(now * 1e6) + 100000
      -- as format 4 left it: a job in bucket 0 and its slot, one of an id
      -- it made (24 hex digits) in the intake at {p:q}:intake, due 0.2 s
      -- after the TIME of its entry, and format 3's intake fenced
      local made = "0123456789abcdef01234567"
      local entry = t[1] .. " " .. t[2] .. " " .. str(made) .. str("t") .. "\1\1\1" .. str("q") .. str("200000") ..
        str("0") .. str("")
      old_store(4, tag, due_us, 0, entry)
      q = assert(open())
      assert.equal("6", client:hget(tag .. ":meta", "format"))
      -- the intake of format 4 moved in, and made a string: a process of
      -- format 4 fails its first command, having written nothing
      assert_fence(tag .. ":intake")
      assert_fence(tag .. ":in")
      assert_fence(tag .. ":inbox")
      assert.equal(0, client:llen(tag .. ":incoming"))
      assert.is_true(math.abs(q:get(made).due - (tonumber(t[1]) + tonumber(t[2]) / 1e6 + 0.2)) < 1e-5)
      assert.equal("hb", q:get("tick").payload)
      -- an id made now (26 hex digits) goes in a block; all three run once
      local new = assert(q:schedule("t", 0.1))
      assert.equal(26, #new)
      assert.equal(3, q:pending())
      local ran = {}
      q:handle("t", function(job) ran[job.id] = (ran[job.id] or 0) + 1 end)
      assert.is_true(wait(function() return q:pending() == 0 end))
      timer:run(0.1)
      assert.same({ [made] = 1, tick = 1, [new] = 1 }, ran)
      q:close()
      -- opened again: format 6, the fences in place; a list there is refused
      q = assert(open())
      client:del(tag .. ":intake")
      client:rpush(tag .. ":intake", "x")
      local queue, err = open()
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: redis " .. tag .. ": key " .. tag ..
        ":intake is a list, not a string (not a hwtimer.durable store)", err)
    end)

    it("upgrades a store of format 5 to 6, its jobs, counts and intake kept, and fences the processes of format 5",
      function()
      local tag = "{" .. prefix .. ":default}"
      -- a store as format 5 left it: jobs of ids it made in blocks, jobs
      -- of ids given in numbered buckets (counted apart: 'hashed'), the
      -- intakes of formats 3 and 4 fenced, and an entry of the `add`
      -- script in its intake at {p:q}:inbox, of a job due 0.3 s after the
      -- TIME of that entry (a layout and encodings that format 6 keeps:
      -- written here by this one, then made format 5's)
      q = assert(open())
      local made = {}
      for i = 1, 5 do made[i] = assert(q:schedule("t", 0.2 + i / 100, "m" .. i)) end
      for i = 1, 3 do assert(q:schedule("t", 0.25, "g" .. i, { id = "given-" .. i })) end
      assert.equal(8, q:pending()) -- (a script: the intake moved in)
      q:close()
      local counts = client:hmget(tag .. ":meta", "jobs", "hashed", "buckets")
      assert.same({ "8", "3", "1" }, counts)
      client:hset(tag .. ":meta", "format", "5")
      client:set(tag .. ":in", "fence of format 3")
      client:set(tag .. ":intake", "fence of format 4")
      local t = client:eval("return redis.call('TIME')", 0)
      local fresh = "0123456789abcdef0123456789"
      client:rpush(tag .. ":inbox", t[1] .. " " .. t[2] .. " " .. str(fresh) .. str("t") .. "\1\1\1" .. str("q") ..
        str("300000") .. str("0") .. str(""))
      -- a process of format 6 opens it
      q = assert(open())
      assert.equal("6", client:hget(tag .. ":meta", "format"))
      assert_fence(tag .. ":inbox")
      assert_fence(tag .. ":intake")
      assert_fence(tag .. ":in")
      assert.equal(0, client:llen(tag .. ":incoming"))
      assert.same({ "9", "3", "1" }, client:hmget(tag .. ":meta", "jobs", "hashed", "buckets"))
      assert.is_true(math.abs(q:get(fresh).due - (tonumber(t[1]) + tonumber(t[2]) / 1e6 + 0.3)) < 1e-5)
      assert.equal("g2", q:get("given-2").payload)
      assert.equal("m4", q:get(made[4]).payload)
      -- all nine run, once each
      local ran = {}
      q:handle("t", function(job) ran[job.id] = (ran[job.id] or 0) + 1 end)
      assert.is_true(wait(function() return q:pending() == 0 end))
      timer:run(0.1)
      local want = { [fresh] = 1, ["given-1"] = 1, ["given-2"] = 1, ["given-3"] = 1 }
      for i = 1, 5 do want[made[i]] = 1 end
      assert.same(want, ran)
      q:close()
      -- a process of format 5 still running: its RPUSH and its scripts'
      -- first command (LRANGE of its intake) fail
      assert.has_error(function() client:rpush(tag .. ":inbox", "x") end)
    end)

  end)
end)
