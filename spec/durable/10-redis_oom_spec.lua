-- hwtimer.durable with its Redis engine on a Redis past maxmemory
-- (noeviction), against a real redis-server that this spec starts on a free
-- loopback port and stops by its pid: its reads, cancels, claims and
-- acknowledgements still run (the scripts that only read are flagged
-- no-writes, those that free memory or keep it level allow-oom), with jobs
-- in the intake too; a new job is refused with nil, message; once memory
-- is freed, jobs are taken again.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local N, redis = helpers.redis_kit()
if os.getenv("HWT_SLOW") or not redis then
  describe("hwtimer.durable with Redis past maxmemory", function()
    it("needs redis-server, luasocket and redis-lua (left out under valgrind)", function()
      pending("pure Lua against redis-server: apt-get install redis-server lua-socket lua-redis")
    end)
  end)
  return
end

local durable = require("hwtimer.durable")

describe("hwtimer.durable with Redis past maxmemory", function()
  local server, client, timer

  setup(function()
    server = N.start_redis()
    client = redis.connect("127.0.0.1", server.port)
    client:config("set", "maxmemory-policy", "noeviction")
  end)

  teardown(function() server.stop() end)

  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  local function used()
    return tonumber(client:eval("return redis.call('INFO', 'memory')", 0):match("used_memory:(%d+)"))
  end

  -- Past maxmemory: 4 MB of a key of its own (one script, which Redis
  -- lets finish once it began), then maxmemory 1 MB below what is used.
  local function fill()
    client:eval([[
      for i = 1, 40 do redis.call('RPUSH', 'filler', string.rep('x', 100000)) end
    ]], 0)
    client:config("set", "maxmemory", tostring(used() - 1000000))
    assert.has_error(function() client:set("probe", "x") end)
  end

  local function free()
    client:config("set", "maxmemory", "0")
    client:del("filler")
  end

  -- hwtimer-jobs, in this process: stdout, stderr, exit status
  local function jobs(...)
    return helpers.jobs_cli({ "--redis", "127.0.0.1:" .. server.port, "--prefix", "oom", ... })
  end

  it("still reads, cancels, claims, runs and acknowledges, with jobs in the intake, and refuses new jobs with nil, "
    .. "message", function()
    local q = assert(durable.open(timer, { redis = redis.connect("127.0.0.1", server.port), prefix = "oom",
                                           backoff = { delay = 0.05 }, on_error = function() end }))
    -- jobs of made ids in the intake (no script has moved them in), and
    -- of ids of the application's in their buckets
    -- (a job of a given id goes through `put`, which moves the intake in
    -- first: those first)
    assert(q:schedule("k", 0.3, "given", { id = "given-1" }))
    assert(q:schedule("k", 3600, "given later", { id = "given-2" }))
    local soon, later = {}, assert(q:schedule("k", 3600, "later"))
    for i = 1, 3 do soon[i] = assert(q:schedule("k", 0.3, "soon" .. i)) end
    assert.equal(4, client:llen("{oom:default}3:incoming"))
    fill()
    -- reads
    assert.equal("soon2", q:get(soon[2]).payload)
    assert.equal(6, q:pending())
    local c = assert(q:counts())
    assert.same({ 6, 0, 0 }, { c.pending, c.leased, c.dead })
    assert.equal(6, #assert(q:jobs()))
    local out, err, status = jobs("--json", "counts")
    assert.same({ "", 0 }, { err, status })
    assert.matches('"k":{"dead":0,"due":%d,"leased":0,"pending":6}', out)
    -- new jobs refused, with nil, message
    for _, try in ipairs({
      function() return q:schedule("k", 1, "new") end,
      function() return q:schedule("k", 1, "new", { id = "given-3" }) end,
      function() return q:every("k", 60, "new", { id = "every-1" }) end,
    }) do
      local id, why = try()
      assert.is_nil(id)
      assert.matches("OOM command not allowed when used memory > 'maxmemory'", why, 1, true)
    end
    -- cancels
    assert.is_true(q:cancel(later))
    assert.is_true(q:cancel("given-2"))
    assert.equal(4, q:pending())
    -- claims, runs and their acknowledgements (a retry's too: soon1 fails
    -- once, and its acknowledgement rewrites it, with the next claim's)
    local ran = {}
    q:handle("k", function(job)
      if job.payload == "soon1" and job.attempt == 1 then error("once") end
      ran[#ran + 1] = job.payload
    end)
    assert.is_true(helpers.wait_until(timer, function() return q:pending() == 0 end, 5))
    table.sort(ran)
    assert.same({ "given", "soon1", "soon2", "soon3" }, ran)
    assert.has_error(function() client:set("probe", "x") end) -- (still past maxmemory)
    -- memory freed: new jobs taken, and run
    free()
    assert(q:schedule("k", 0.05, "after"))
    assert.is_true(helpers.wait_until(timer, function() return #ran == 5 end, 5))
    assert.equal("after", ran[5])
    q:close()
  end)

  it("claims and acknowledges due jobs of the intake, moving it in, past maxmemory", function()
    local q = assert(durable.open(timer, { redis = redis.connect("127.0.0.1", server.port), prefix = "oom2" }))
    for i = 1, 2 do assert(q:schedule("k", 0.05, "j" .. i)) end
    assert.equal(2, client:llen("{oom2:default}4:incoming"))
    require("socket").sleep(0.1) -- (due, and no script since: the timer does not run)
    fill()
    -- the claim is the first script to write: it moves the intake in
    local eng = durable.engine(q)
    eng:handle("k", true)
    local rows = assert(eng:claim({}, nil, 30, 10, math.huge))
    assert.equal(2, #rows)
    assert.equal(0, client:llen("{oom2:default}4:incoming"))
    assert(eng:ack({ { what = "done", row = rows[1] }, { what = "done", row = rows[2] } }, math.huge))
    assert.equal(0, q:pending())
    free()
    q:close()
  end)
end)
