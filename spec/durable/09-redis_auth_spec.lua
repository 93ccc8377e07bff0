-- hwtimer.durable on a Redis server that asks for a password (issue 42):
-- a client that did not authenticate, or whose user may not load scripts,
-- gets the server's refusal from durable.open (NOAUTH, NOPERM), not a
-- 'closed' connection (the SCRIPT LOAD refused, the engine sent the whole
-- script by EVAL, which a server drops an unauthenticated client for).
-- A real redis-server with --requirepass and ACL users, on a free loopback
-- port, stopped by its pid.
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")

local helpers = require("spec.helpers")
local N, redis = helpers.redis_kit()

describe("durable.open on a Redis server with a password", function()
  if helpers.without_redis(it, pending) then return end
  local server, timer
  setup(function()
    -- default: the password "s3cret"; alice may do everything; reader may
    -- read (no script, no EVAL); evaler may EVAL but not SCRIPT LOAD
    server = N.start_redis("--requirepass s3cret --user alice on '>apw' '~*' '&*' '+@all'"
      .. " --user reader on '>rpw' '~*' '+@read' '+@connection'"
      .. " --user evaler on '>epw' '~*' '+@all' '-script'")
  end)
  teardown(function() server.stop() end)
  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  local function client(user, password)
    local c = redis.connect("127.0.0.1", server.port)
    if user then c:auth(user, password) elseif password then c:auth(password) end
    return c
  end

  local function open(c, prefix)
    return durable.open(timer, { redis = c, prefix = prefix, on_error = function() end })
  end

  it("says NOAUTH to a client that did not authenticate, however many times it is asked", function()
    for _, prefix in ipairs({ "a", "a", "b" }) do
      local q, err = open(client(), prefix)
      assert.is_nil(q)
      assert.matches("NOAUTH Authentication required", err, 1, true)
      assert.not_matches("closed", err)
    end
    -- the same through a function that makes the connection
    local q, err = open(function() return client() end, "fn")
    assert.is_nil(q)
    assert.matches("NOAUTH Authentication required", err, 1, true)
  end)

  it("says NOPERM to a user who may not load scripts, the command named", function()
    for _, who in ipairs({ { "reader", "rpw" }, { "evaler", "epw" } }) do
      local q, err = open(client(who[1], who[2]), "p")
      assert.is_nil(q, who[1])
      assert.matches("NOPERM", err, 1, true)
      assert.matches("'script|load'", err, 1, true)
    end
  end)

  it("opens the store for the default user and an ACL user who authenticated", function()
    for _, who in ipairs({ { nil, "s3cret" }, { "alice", "apw" } }) do
      local q = assert(open(client(who[1], who[2]), "ok"))
      assert(q:schedule("k", 60, "p", { id = "j" .. tostring(who[1]) }))
      assert.equal("p", q:get("j" .. tostring(who[1])).payload)
      q:close()
    end
  end)

  -- A client may raise an error that is no string (an error object, a
  -- number) or return nil and one: durable.open gives nil and its text
  -- (tostring, __tostring honoured), as for a refused connection, not a
  -- Lua error of its own from reading it as a string.
  it("gives nil and the text of a client's error that is no string, raised or returned", function()
    local object = setmetatable({}, { __tostring = function() return "connection reset (an error object)" end })
    local cases = {
      { function() error(object) end, "connection reset (an error object)" },
      { function() error(42, 0) end, "42" },
      { function() return nil, 7 end, "7" },
    }
    for _, case in ipairs(cases) do
      local c = { script = case[1], evalsha = case[1], eval = case[1], rpush = case[1] }
      local ok, q, err = pcall(open, c, "odd")
      assert.is_true(ok, tostring(q))
      assert.is_nil(q)
      assert.equal("hwtimer.durable: redis {odd:default}3: " .. case[2], err)
    end
  end)
end)

-- The third value of a failed call says who failed: true where the server
-- answered with a refusal (the engine then stops asking: a wake-up's
-- PUBLISH refused by an ACL turns wake-ups off), false where no server
-- answered (a connection that cannot be made: asked again next time).
-- A server (or a proxy) without SCRIPT LOAD, here renamed away: every
-- script goes whole by EVAL, and the queue works as on any other.
describe("hwtimer.durable on a Redis server without SCRIPT", function()
  if helpers.without_redis(it, pending) then return end
  local server
  setup(function() server = N.start_redis("--rename-command SCRIPT ''") end)
  teardown(function() server.stop() end)

  it("sends each script whole by EVAL: jobs stored, read and run", function()
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = redis.connect("127.0.0.1", server.port), prefix = "noscript",
      poll = 0.05 }))
    local ran = {}
    q:handle("k", function(job) ran[#ran + 1] = job.payload end)
    assert(q:schedule("k", 0, "now"))
    assert(q:schedule("k", 3600, "later", { id = "later" }))
    assert.equal("later", q:get("later").payload)
    local limit = require("hwtimer.core").now() + 5
    while #ran == 0 and require("hwtimer.core").now() < limit do timer:run(0.05) end
    assert.same({ "now" }, ran)
    assert.equal(1, q:pending())
    local stats = N.redis_cmd(server.port, "INFO", "commandstats")
    assert.is_nil(stats:match("cmdstat_evalsha:"), "EVALSHA used")
    assert.truthy(stats:match("cmdstat_eval:calls=%d+"), "no EVAL")
    q:close()
    timer:close()
  end)
end)

describe("hwtimer.durable.redis_client's calls without a connection", function()
  local calls = require("hwtimer.durable.redis_client")
  local function unreachable()
    return { connect = function() error("connection refused", 0) end, sha = {} }
  end

  it("say the server did not answer, for a command and for a wake-up's publish", function()
    local res, err, server = calls.command(unreachable(), "ping")
    assert.same({ nil, "cannot connect: connection refused", false }, { res, err, server })
    res, err, server = calls.publish(unreachable(), "chan", "kind")
    assert.same({ nil, "cannot connect: connection refused", false }, { res, err, server })
  end)

  it("say so too when the connect function returns nil or false and a message, not raising", function()
    for _, failed in ipairs({ { nil, "no route to host" }, { false, "no route to host" } }) do
      local state = { connect = function() return failed[1], failed[2] end, sha = {} }
      local res, err, server = calls.command(state, "ping")
      assert.same({ nil, "cannot connect: no route to host", false }, { res, err, server }, tostring(failed[1]))
      assert.is_nil(state.client)
    end
  end)

  it("take a client with no publish method as a refusal", function()
    local res, err, server = calls.publish({ client = { ping = function() return "PONG" end }, sha = {} }, "chan", "kind")
    assert.same({ nil, "the client has no publish method", true }, { res, err, server })
  end)
end)
