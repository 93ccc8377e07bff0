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

local N, redis = helpers.redis_kit()
if os.getenv("HWT_SLOW") or not redis then
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

  -- The key bases of the store of (prefix, queue): format 7's, and the one
  -- of format 6 and older, {prefix:queue}.
  local base_of = require("hwtimer.durable.redis").base

  -- The store of (`p`, `queue`), written by this version, made as format
  -- `format` (6 or older) would have left it: every key renamed to the old
  -- base (formats 6 and 7 differ in nothing else), its format set.
  local function to_old(p, queue, format)
    local new, old = base_of(p, queue)
    client:eval([[
      for _, k in ipairs(redis.call('KEYS', ARGV[1] .. ':*')) do
        redis.call('RENAME', k, ARGV[2] .. string.sub(k, #ARGV[1] + 1))
      end
      redis.call('HSET', ARGV[2] .. ':meta', 'format', ARGV[3])
    ]], 0, new, old, tostring(format))
    return old, new
  end

  describe("durable.open", function()
    it("upgrades a store of format 2 (the same layout without the intake) to 7, its jobs kept", function()
      local new, tag = base_of(prefix, "default")
      client:hmset(tag .. ":meta", "app", "hwtimer.durable", "format", "2", "buckets", "1", "jobs", "0")
      q = assert(open())
      assert.equal("7", client:hget(new .. ":meta", "format"))
      assert(q:schedule("k", 60))
      assert.equal(1, q:pending())
      -- a store of format 2 with jobs in its buckets and slots (written as
      -- format 2 wrote them: `put`, nothing in the intake)
      local old = assert(open({ queue = "old" }))
      local due = server_now() + 0.2
      assert(old:batch(function(b)
        for i = 1, 100 do b:at("k", due + i * 1e-4, "p" .. i, { id = "old-" .. i }) end
      end))
      old:close()
      local _, other = to_old(prefix, "old", 2)
      local ran = {}
      local upgraded = assert(open({ queue = "old" }))
      assert.equal("7", client:hget(other .. ":meta", "format"))
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

    it("upgrades a store of format 3 to 7, its jobs and intake kept, and fences the processes of format 3", function()
      local new, tag = base_of(prefix, "default")
      local t = client:eval("return redis.call('TIME')", 0)
      local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
      local due_us = math.floor(now * 1e6) - 500000
      -- a job of a fresh id, due 60 s after the TIME of its entry
      local entry = t[1] .. " " .. t[2] .. " " .. str("fresh-1") .. str("k") .. "\1\1\1" .. str("q") .. str("60000000") ..
        str("0")
      old_store(3, tag, due_us, 2000000, entry)
      q = assert(open())
      assert.equal("7", client:hget(new .. ":meta", "format"))
      -- the intake of format 3 moved in, and made a string: every script of
      -- a process of format 3 reads or pushes to that list first, and fails
      -- there, having written nothing
      assert_fence(tag .. ":in")
      assert_fence(tag .. ":intake")
      assert_fence(tag .. ":inbox")
      assert_fence(tag .. ":incoming")
      assert_fence(tag .. ":meta")
      assert.equal(0, client:llen(new .. ":incoming"))
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
      -- opened again: format 7, the fence in place
      q:close()
      q = assert(open())
      assert.equal(2, q:pending())
      assert_fence(tag .. ":in")
    end)

    it("upgrades a store of format 4 to 7, its jobs and intake kept, and fences the processes of format 4", function()
      local new, tag = base_of(prefix, "default")
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
      assert.equal("7", client:hget(new .. ":meta", "format"))
      -- the intake of format 4 moved in, and made a string: a process of
      -- format 4 fails its first command, having written nothing
      assert_fence(tag .. ":intake")
      assert_fence(tag .. ":in")
      assert_fence(tag .. ":inbox")
      assert_fence(tag .. ":incoming")
      assert.equal(0, client:llen(new .. ":incoming"))
      assert.is_true(math.abs(q:get(made).due - (tonumber(t[1]) + tonumber(t[2]) / 1e6 + 0.2)) < 1e-5)
      assert.equal("hb", q:get("tick").payload)
      -- an id made now (26 hex digits) goes in a block; all three run once
      local id_now = assert(q:schedule("t", 0.1))
      assert.equal(26, #id_now)
      assert.equal(3, q:pending())
      local ran = {}
      q:handle("t", function(job) ran[job.id] = (ran[job.id] or 0) + 1 end)
      assert.is_true(wait(function() return q:pending() == 0 end))
      timer:run(0.1)
      assert.same({ [made] = 1, tick = 1, [id_now] = 1 }, ran)
      q:close()
      -- opened again: format 7, the fences in place
      q = assert(open())
      assert.equal(0, q:pending())
      assert_fence(tag .. ":intake")
    end)

    it("upgrades a store of format 5 to 7, its jobs, counts and intake kept, and fences the processes of format 5",
      function()
      local new, tag = base_of(prefix, "default")
      -- a store as format 5 left it: jobs of ids it made in blocks, jobs
      -- of ids given in numbered buckets (counted apart: 'hashed'), the
      -- intakes of formats 3 and 4 fenced, and an entry of the `add`
      -- script in its intake at {p:q}:inbox, of a job due 0.3 s after the
      -- TIME of that entry (a layout and encodings that format 7 keeps:
      -- written here by this one, then made format 5's)
      q = assert(open())
      local made = {}
      for i = 1, 5 do made[i] = assert(q:schedule("t", 0.2 + i / 100, "m" .. i)) end
      for i = 1, 3 do assert(q:schedule("t", 0.25, "g" .. i, { id = "given-" .. i })) end
      assert.equal(8, q:pending()) -- (a script: the intake moved in)
      q:close()
      local counts = client:hmget(new .. ":meta", "jobs", "hashed", "buckets")
      assert.same({ "8", "3", "1" }, counts)
      to_old(prefix, "default", 5)
      client:set(tag .. ":in", "fence of format 3")
      client:set(tag .. ":intake", "fence of format 4")
      local t = client:eval("return redis.call('TIME')", 0)
      local fresh = "0123456789abcdef0123456789"
      client:rpush(tag .. ":inbox", t[1] .. " " .. t[2] .. " " .. str(fresh) .. str("t") .. "\1\1\1" .. str("q") ..
        str("300000") .. str("0") .. str(""))
      -- a process of format 7 opens it
      q = assert(open())
      assert.equal("7", client:hget(new .. ":meta", "format"))
      assert_fence(tag .. ":inbox")
      assert_fence(tag .. ":intake")
      assert_fence(tag .. ":in")
      assert.equal(0, client:llen(new .. ":incoming"))
      assert.same({ "9", "3", "1" }, client:hmget(new .. ":meta", "jobs", "hashed", "buckets"))
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

    -- The keys matching `base` .. ":*" (glob's specials escaped), sorted.
    local function keys_of(base)
      local keys = client:keys(base:gsub("[%*%?%[%]\\]", "\\%0") .. ":*")
      table.sort(keys)
      return keys
    end

    it("moves a store of format 6 to keys of its own, its jobs, counts and intake kept, and fences the processes of "
      .. "format 6", function()
      local new, tag = base_of(prefix, "default")
      -- a store as format 6 left it at {prefix:queue}: jobs of made ids in
      -- blocks, of given ids in a bucket, a schedule, a dead job, a job
      -- leased, and an entry of the `add` script in its intake
      q = assert(open({ attempts = 1, on_error = function() end }))
      local made = {}
      for i = 1, 5 do made[i] = assert(q:schedule("t", 0.3 + i / 100, "m" .. i)) end
      for i = 1, 3 do assert(q:schedule("t", 0.3, "g" .. i, { id = "given-" .. i })) end
      assert(q:every("t", 3600, "s", { id = "hourly" }))
      assert(q:schedule("bad", 0, nil, { id = "dead-1" }))
      q:handle("bad", function() error("no") end)
      assert.is_true(wait(function() return #q:dead() == 1 end))
      q:close()
      local counts = client:hmget(new .. ":meta", "jobs", "hashed", "buckets")
      to_old(prefix, "default", 6)
      assert.same({}, keys_of(new))
      local t = client:eval("return redis.call('TIME')", 0)
      local fresh = "0123456789abcdef0123456789"
      client:rpush(tag .. ":incoming", t[1] .. " " .. t[2] .. " " .. str(fresh) .. str("t") .. "\1\1\1" .. str("q") ..
        str("300000") .. str("0") .. str(""))
      local old_keys = keys_of(tag)
      -- a process of format 7 opens it: every key moved, the old base's
      -- five keys fences
      q = assert(open({ attempts = 1, on_error = function() end }))
      assert.equal("7", client:hget(new .. ":meta", "format"))
      assert.same({ tag .. ":in", tag .. ":inbox", tag .. ":incoming", tag .. ":intake", tag .. ":meta" }, keys_of(tag))
      for _, k in ipairs(keys_of(tag)) do assert_fence(k) end
      assert.equal("hwtimer.durable: store format 7, moved to " .. new .. " (prefix " .. prefix .. ", queue default)",
        client:get(tag .. ":meta"))
      -- (and the block of the job of the intake: its id's digits 13 to 20,
      -- and those after them halved, in hex)
      local moved = { new .. ":j:cdef0123:" .. math.floor(0x45678 / 2) }
      for _, k in ipairs(old_keys) do
        if k ~= tag .. ":incoming" then moved[#moved + 1] = new .. k:sub(#tag + 1) end
      end
      table.sort(moved)
      assert.same(moved, keys_of(new))
      assert.same({ tonumber(counts[1]) + 1, counts[2], counts[3] },
        { tonumber(client:hget(new .. ":meta", "jobs")), client:hget(new .. ":meta", "hashed"),
          client:hget(new .. ":meta", "buckets") })
      assert.equal(10, q:pending())
      assert.equal("no", q:dead()[1].error:match("no$"))
      assert.equal(3600, q:get("hourly").every)
      assert.is_true(math.abs(q:get(fresh).due - (tonumber(t[1]) + tonumber(t[2]) / 1e6 + 0.3)) < 1e-5)
      local ran = {}
      q:handle("t", function(job) ran[job.id] = (ran[job.id] or 0) + 1 end)
      assert.is_true(wait(function() return q:pending() == 1 end))
      timer:run(0.1)
      local want = { [fresh] = 1, ["given-1"] = 1, ["given-2"] = 1, ["given-3"] = 1 }
      for i = 1, 5 do want[made[i]] = 1 end
      assert.same(want, ran)
      -- a process of format 6 still running: its RPUSH and its scripts'
      -- first command (LRANGE of its intake) fail, as its open would
      -- (a string where its meta was)
      assert.has_error(function() client:rpush(tag .. ":incoming", "x") end)
      assert.equal("string", client:type(tag .. ":meta"))
    end)

    it("gives two pairs whose names join alike ('p:eu', 'orders' and 'p', 'eu:orders') stores of their own", function()
      local a = assert(open({ prefix = prefix .. ":eu", queue = "orders" }))
      local b = assert(open({ prefix = prefix, queue = "eu:orders" }))
      assert(a:schedule("k", 60, "from a", { id = "same" }))
      assert(b:schedule("k", 60, "from b", { id = "same" }))
      assert.equal("from a", a:get("same").payload)
      assert.equal("from b", b:get("same").payload)
      assert.is_true(b:cancel("same"))
      assert.equal("from a", a:get("same").payload)
      assert.same({ 1, 0 }, { a:pending(), b:pending() })
    end)

    -- Redis Cluster's hash tag of `key`: what is between its first "{"
    -- and the first "}" after it, when that is not empty; else nil.
    local function hash_tag(key)
      local open_ = key:find("{", 1, true)
      local close = open_ and key:find("}", open_ + 1, true)
      if close and close > open_ + 1 then return key:sub(open_ + 1, close - 1) end
    end

    -- (A "{" in the tag changes nothing: the tag ends at the first "}".)
    it("keeps the keys of every (prefix, queue) apart, under one non-empty hash tag without '}'", function()
      local parts = { "", ":", "::", "}", "{", "{}", "a}b", "x{y}z", "%", "%7D", "%3A", "\0", "\255", "a\0b:c", "7" }
      local stores = {}
      for _, x in ipairs(parts) do
        for _, y in ipairs({ "", ":", "}", "q", "7:q", "\0", "\255" }) do
          local p, queue = prefix .. x, y .. "q"
          local qq = assert(open({ prefix = p, queue = queue }))
          local name = string.format("%q %q", p, queue)
          assert(qq:schedule("k", 60, name, { id = "same" }))
          stores[#stores + 1] = { qq = qq, name = name, base = base_of(p, queue) }
        end
      end
      local all = client:keys("*" .. prefix .. "*")
      local owner = {}
      for _, s in ipairs(stores) do
        assert.equal(s.name, s.qq:get("same").payload)
        assert.equal(1, s.qq:pending())
        local keys = keys_of(s.base)
        assert.is_true(#keys >= 4, s.name)
        local tag = hash_tag(keys[1])
        assert.truthy(tag, s.name)
        assert.falsy(tag:find("}", 1, true), s.name)
        for _, k in ipairs(keys) do
          assert.equal(tag, hash_tag(k), k)
          assert.is_nil(owner[k], k .. " of " .. s.name .. " and of " .. tostring(owner[k]))
          owner[k] = s.name
        end
      end
      for _, k in ipairs(all) do assert.truthy(owner[k], k) end
    end)

    it("moves a store of format 6 that two pairs shared to the first that opens it, and refuses the other, saying "
      .. "where it went", function()
      local pa, pb = prefix .. ":eu", prefix
      local a = assert(open({ prefix = pa, queue = "orders" }))
      assert(a:schedule("k", 60, "p", { id = "x" }))
      a:close()
      local tag = to_old(pa, "orders", 6)
      assert.equal(tag, select(2, base_of(pb, "eu:orders")))
      -- the second pair opens first: the store is its own now
      local b = assert(open({ prefix = pb, queue = "eu:orders" }))
      assert.equal("p", b:get("x").payload)
      local queue, err = open({ prefix = pa, queue = "orders" })
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: redis " .. base_of(pa, "orders") .. ": the store of format 6 or older at " .. tag ..
        " was moved: hwtimer.durable: store format 7, moved to " .. base_of(pb, "eu:orders") .. " (prefix " .. pb ..
        ", queue eu:orders) (for prefix " .. pa .. ", queue orders, a store of its own: delete " .. tag .. ":meta)", err)
      client:del(tag .. ":meta")
      a = assert(open({ prefix = pa, queue = "orders" }))
      assert.same({ 0, 1 }, { a:pending(), b:pending() })
    end)

  end)

  -- hwtimer-jobs' reads (counts, ls, show, schedules: docs/operating.md)
  -- write nothing: not a store made, none upgraded, not a byte changed.
  describe("hwtimer-jobs", function()
    -- The tool, run in this process on this test's store: stdout, stderr,
    -- exit status.
    local function jobs(...)
      return helpers.jobs_cli({ "--redis", "127.0.0.1:" .. port, "--prefix", prefix, ... })
    end

    -- Every key of this test's prefix, with its value as DUMP serializes
    -- it and its time to live, sorted.
    local function snapshot()
      return client:eval([[
        local out = {}
        for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
          out[#out + 1] = k .. '\0' .. redis.call('DUMP', k) .. '\0' .. redis.call('PTTL', k)
        end
        table.sort(out)
        return out
      ]], 0, "*" .. prefix .. "*")
    end

    -- A store of this format: a dead job, a job of a given id, a schedule,
    -- and jobs of made ids left in the intake. Returns the made ids.
    local function fill()
      q = assert(open({ attempts = 1, on_error = function() end }))
      q:handle("bad", function() error("no") end)
      assert(q:schedule("bad", 0, nil, { id = "dead-1" }))
      assert.is_true(wait(function() return #q:dead() == 1 end))
      q:close()
      q = assert(open())
      assert(q:schedule("t", 600, "given", { id = "given-1" }))
      assert(q:every("t", 3600, "s", { id = "hourly" }))
      local made = {}
      for i = 1, 3 do made[i] = assert(q:schedule("t", 60 * i, "m" .. i)) end
      q:close()
      return made
    end

    it("reads a store of this format (its intake too) with counts, ls, show and schedules, changing not a byte",
      function()
      local made = fill()
      local intake = base_of(prefix, "default") .. ":incoming"
      assert.equal(3, client:llen(intake))
      local before = snapshot()
      local out, err, status = jobs("--json", "counts")
      assert.same({ "", 0 }, { err, status })
      assert.matches('"t":{"dead":0,"due":0,"leased":0,"pending":5}', out, 1, true)
      assert.matches('"bad":{"dead":1,"due":0,"leased":0,"pending":0}', out, 1, true)
      out, err, status = jobs("--json", "ls", "--kind", "t", "--limit", "2")
      assert.same({ "", 0 }, { err, status })
      assert.matches('"id":"' .. made[1] .. '"', out, 1, true)
      assert.matches('"id":"' .. made[2] .. '"', out, 1, true)
      local cursor = out:match('"next":"([^"]+)"')
      out, err, status = jobs("--json", "ls", "--kind", "t", "--limit", "2", "--after", cursor)
      assert.same({ "", 0 }, { err, status })
      assert.matches('"id":"' .. made[3] .. '"', out, 1, true)
      assert.matches('"id":"given-1"', out, 1, true)
      out, err, status = jobs("--json", "ls", "--state", "dead")
      assert.same({ "", 0 }, { err, status })
      assert.matches('"id":"dead-1"', out, 1, true)
      out, err, status = jobs("--json", "show", made[2])
      assert.same({ "", 0 }, { err, status })
      assert.matches('"payload":"m2"', out, 1, true)
      err, status = select(2, jobs("show", "given-1"))
      assert.same({ "", 0 }, { err, status })
      out, err, status = jobs("--json", "schedules")
      assert.same({ "", 0 }, { err, status })
      assert.matches('"id":"hourly"', out, 1, true)
      assert.same(before, snapshot())
      assert.equal(3, client:llen(intake))
      -- (a repair is no read: it moves the intake in, and writes)
      err, status = select(2, jobs("cancel", made[1]))
      assert.same({ "", 0 }, { err, status })
      assert.equal(0, client:llen(intake))
    end)

    for _, format in ipairs({ 5, 6 }) do
      it("refuses a store of format " .. format .. " with counts, ls, show and schedules, changing not a byte",
        function()
        fill()
        local old, new = to_old(prefix, "default", format)
        if format == 5 then -- (its intake at :inbox, those of formats 3 and 4 fenced)
          client:rename(old .. ":incoming", old .. ":inbox")
          client:set(old .. ":in", "fence of format 3")
          client:set(old .. ":intake", "fence of format 4")
        end
        local before = snapshot()
        local refused = "store format " .. format .. " at " .. old .. ": this version reads 7 at " .. new ..
          ", to which its processes move it when they open it (the older ones still using it would be shut out)"
        for _, args in ipairs({ { "counts" }, { "ls" }, { "show", "given-1" }, { "schedules" } }) do
          local out, err, status = jobs(args[1], args[2])
          assert.same({ "", "hwtimer-jobs: redis " .. new .. ": " .. refused .. "\n", 1 }, { out, err, status })
        end
        assert.same(before, snapshot())
        -- durable.open with existing = true the same; without it, upgraded
        local queue, err = open({ existing = true })
        assert.is_nil(queue)
        assert.equal("hwtimer.durable: redis " .. new .. ": " .. refused, err)
        assert.same(before, snapshot())
        q = assert(open())
        assert.equal("7", client:hget(new .. ":meta", "format"))
        assert.equal(5, q:pending()) -- (and one dead)
      end)
    end

    it("makes no store where there is none (durable.open with existing = true)", function()
      local new, old = base_of(prefix, "default")
      local queue, err = open({ existing = true })
      assert.is_nil(queue)
      assert.equal("hwtimer.durable: redis " .. new .. ": no hwtimer.durable store at " .. new ..
        " (nor one of format 6 or older at " .. old .. "): none is made here", err)
      assert.same({}, snapshot())
    end)
  end)
end)
