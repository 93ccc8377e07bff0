-- hwtimer.durable.redis_entry: the jobs a process stamps itself go to the
-- intake as they are to be stored, their value packed here. Against a real
-- redis-server (started on a free loopback port, stopped by its pid): the
-- value is cmsgpack.pack's, byte for byte, for every length of string and
-- every size of number it writes in its own form; and an intake holding
-- entries of both forms (stamped here, stamped by the `add` script) is
-- moved in whole, each job due when its schedule answered.
local have_socket, N = pcall(require, "spec.nginx")
local redis = have_socket and N.redis_lua()
local have_server = os.execute("command -v redis-server >/dev/null 2>&1")
have_server = have_server == true or have_server == 0
if os.getenv("HWT_SLOW") or not (have_socket and redis and have_server) then
  describe("hwtimer.durable.redis_entry", function()
    it("needs redis-server, luasocket and redis-lua (left out under valgrind)", function()
      pending("pure Lua against redis-server")
    end)
  end)
  return
end

local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local entry = require("hwtimer.durable.redis_entry")

describe("hwtimer.durable.redis_entry", function()
  local server, client

  setup(function()
    server = N.start_redis()
    client = redis.connect("127.0.0.1", server.port)
  end)

  teardown(function() server.stop() end)

  -- cmsgpack.pack of a new job's ten fields, in Redis (numbers sent as
  -- text, every digit)
  local PACK = [[
    local payload = ARGV[4] == '1' and ARGV[5] or false
    return cmsgpack.pack(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), 0, '', payload, false, 0,
      tonumber(ARGV[2]), false)
  ]]
  local function packed_by_redis(kind, due, every, payload)
    return client:eval(PACK, 0, kind, string.format("%.0f", due), string.format("%.0f", every),
      payload and "1" or "0", payload or "")
  end

  local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

  it("packs a job's value as cmsgpack does, for each form of string and number", function()
    -- each boundary of a form, both sides of it
    local lengths = { 0, 1, 31, 32, 255, 256, 65535, 65536 }
    local numbers = { 0, 1, 127, 128, 255, 256, 65535, 65536, 4294967295, 4294967296, 1.8e15 + 7, 2 ^ 53 - 1,
      -1, -32, -33, -128, -129, -32768, -32769, -2147483648, -2147483649, -4294967296, -4294967297,
      -1.8e15 - 7, -(2 ^ 53 - 1) }
    local n = 0
    for _, len in ipairs(lengths) do
      local kind, payload = string.rep("k", len), string.rep("\0p", len):sub(1, len)
      for _, p in ipairs({ payload, false }) do
        local ours = entry.value(kind, 1.8e15, 0, p or nil)
        local theirs = packed_by_redis(kind, 1.8e15, 0, p or nil)
        assert.equal(hex(theirs), hex(ours), string.format("kind and payload of %d bytes (%s)", len, tostring(p and true)))
        n = n + 1
      end
    end
    for _, due in ipairs(numbers) do
      for _, every in ipairs({ 0, 1, 128, 65536, 4294967296, 3.6e9 }) do
        local ours = entry.value("k", due, every, "p")
        assert.equal(hex(packed_by_redis("k", due, every, "p")), hex(ours),
          string.format("due %.0f, every %.0f", due, every))
        n = n + 1
      end
    end
    assert.equal(16 + #numbers * 6, n)
  end)

  it("moves in an intake of both forms of entry, each job due as its schedule answered", function()
    local timer = hwtimer.new()
    local c = redis.connect("127.0.0.1", server.port)
    local q = assert(durable.open(timer, { redis = c, prefix = "entries" }))
    local calls = require("hwtimer.durable.redis_client")
    local stamp = calls.stamp
    local ids, dues = {}, {}
    -- (the stamp refused for every third: the `add` script's entry)
    local made = 0
    calls.stamp = function(self)
      made = made + 1
      if made % 3 == 0 then return nil end
      return stamp(self)
    end
    local ok, err = pcall(function()
      assert(q:pending() == 0) -- (a reply: bounds to stamp with)
      for i = 1, 30 do
        local id = assert(q:schedule("k" .. i % 2, 60 + i / 1000, i % 5 == 0 and string.rep("x", i * 10) or nil))
        ids[i] = id
      end
    end)
    calls.stamp = stamp
    assert(ok, err)
    local inbox = "{entries:default}:incoming"
    local items = c:lrange(inbox, 0, -1)
    local marks = {}
    for _, e in ipairs(items) do marks[e:sub(1, 1) == entry.MARK and "stamped" or "add"] = true end
    assert.same({ stamped = true, add = true }, marks)
    for i = 1, 30 do
      local job = assert(q:get(ids[i])) -- (a script: the intake moved in first)
      dues[i] = job.due
      assert.equal("k" .. i % 2, job.kind)
      assert.equal(i % 5 == 0 and string.rep("x", i * 10) or nil, job.payload)
      assert.equal(0, job.attempt)
    end
    assert.equal(0, c:llen(inbox))
    assert.equal(30, q:pending())
    -- due in the order they were scheduled, 60 s ahead
    for i = 2, 30 do assert.is_true(dues[i] > dues[i - 1], "job " .. i) end
    q:close()
  end)
end)
