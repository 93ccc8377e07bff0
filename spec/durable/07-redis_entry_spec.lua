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
local helpers = require("spec.helpers")
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
      -1.8e15 - 7, -(2 ^ 53 - 1),
      -- past an int64: floats, of 32 bits where exact (cmsgpack's rule)
      2 ^ 63 - 1024, 2 ^ 63, 2 ^ 63 + 2048, 1e19, 2 ^ 64, 2 ^ 127, 2 ^ 128, 1e300,
      -(2 ^ 63), -(2 ^ 63) - 2048, -1e19, -(2 ^ 100), -1e300 }
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

  it("writes a job's fields, each after its length, its value as value() packs it", function()
    local u32 = entry.u32
    local function text(v) return string.format("%.0f", v) end
    local n = 0
    -- kinds and intervals that change from one job to the next (the parts
    -- kept from the last job must follow), payloads of every form's length
    for _, len in ipairs({ 0, 1, 31, 32, 255, 256, 65536 }) do
      for _, kind in ipairs({ "k", string.rep("q", len + 1), "k" }) do
        for _, every in ipairs({ 0, 65536, 0 }) do
          for _, p in ipairs({ string.rep("p", len), false }) do
            for _, due in ipairs({ 1.8e15 + 7, 42, -1e19 }) do
              local v = entry.value(kind, due, every, p or nil)
              local want = u32(26) .. string.rep("a", 26) .. u32(#kind) .. kind .. u32(#text(due)) .. text(due) ..
                u32(#v) .. v
              local what = string.format("kind of %d bytes, every %d, payload %s, due %.0f", #kind, every,
                tostring(p and #p), due)
              -- (compared as they are: hex() of 64 KB, 378 times, is seconds)
              assert.equal("=" .. want, entry.job(string.rep("a", 26), kind, due, every, p or nil, "="), what)
              assert.equal(want, entry.job(string.rep("a", 26), kind, due, every, p or nil), what)
              n = n + 1
            end
          end
        end
      end
    end
    assert.equal(7 * 3 * 3 * 2 * 3, n)
  end)

  it("moves in an intake of both forms of entry, each job due as its schedule answered, and runs each once",
    function()
    local timer = hwtimer.new()
    local c = redis.connect("127.0.0.1", server.port)
    local q = assert(durable.open(timer, { redis = c, prefix = "entries" }))
    local eng = durable.engine(q)
    local calls = require("hwtimer.durable.redis_client")
    local stamp = calls.stamp
    local ids, soon = {}, {}
    -- (the stamp refused for every third call: the `add` script's entry)
    local made = 0
    calls.stamp = function(self)
      made = made + 1
      -- (and the 32nd: an add script's entry between two stamped ones, all of one kind)
      if made % 3 == 0 and made <= 30 or made == 32 then return nil end
      return stamp(self)
    end
    local far_past, far_future
    local ok, err = pcall(function()
      assert(q:pending() == 0) -- (a reply: bounds to stamp with)
      for i = 1, 30 do
        local id = assert(q:schedule("k" .. i % 2, 0.3 + i / 1000, i % 5 == 0 and string.rep("x", i * 10) or nil))
        ids[i], soon[id] = id, true
      end
      for _ = 31, 33 do soon[assert(q:schedule("k0", 0.35))] = true end
      -- entries of three jobs each, in both forms (as nginx's requests
      -- send theirs), one of them due ~317,000 years before 1970
      for n = 1, 2 do
        local jobs = {}
        for j = 1, 3 do
          local id = q._new_id()
          jobs[j] = { id, "k0", "many" .. n .. j, 400000 + j * 1000, true, 0 }
          ids[#ids + 1], soon[id] = id, true
        end
        if n == 2 then
          far_past = q._new_id()
          jobs[4] = { far_past, "k1", nil, -1e19, true, 0 }
          -- and one of an id no generator made (no block: a numbered bucket)
          jobs[5] = { "not-of-a-block", "k1", "odd", 450000, true, 0 }
          soon["not-of-a-block"] = true
        end
        assert(eng:add_many(jobs))
      end
      -- and one job alone through add_many (in nginx, a request that waited
      -- with no other): its entry is the job after the mark
      local lone = q._new_id()
      assert(eng:add_many({ { lone, "k0", "lone", 420000, true, 0 } }))
      soon[lone] = true
      -- (1e19 us: past an int64, packed as a float; through the engine, as
      -- q:at refuses a time past 9e9 s)
      far_future = q._new_id()
      assert(eng:add_many({ { far_future, "k1", nil, 1e19, false, 0 } }))
    end)
    calls.stamp = stamp
    assert(ok, err)
    local inbox = "{entries:default}7:incoming"
    local items = c:lrange(inbox, 0, -1)
    local marks = {}
    for _, e in ipairs(items) do marks[e:sub(1, 1) == entry.MARK and "stamped" or "add"] = true end
    assert.same({ stamped = true, add = true }, marks)
    -- read where they are (the reads move nothing: no-writes), then moved
    -- in (the drain), the same
    local dues, read = {}, {}
    for i = 1, 36 do read[i] = assert(q:get(ids[i])) end
    assert.equal(#items, c:llen(inbox))
    assert.equal(43, q:pending())
    assert(eng:run("drain"))
    assert.equal(0, c:llen(inbox))
    for i = 1, 36 do
      local job = assert(q:get(ids[i]))
      assert.same(read[i], job)
      dues[i] = job.due
      if i <= 30 then
        assert.equal("k" .. i % 2, job.kind)
        assert.equal(i % 5 == 0 and string.rep("x", i * 10) or nil, job.payload)
      else
        assert.equal("many" .. (i <= 33 and 1 or 2) .. ((i - 31) % 3 + 1), job.payload)
      end
      assert.equal(0, job.attempt)
    end
    assert.equal(0, c:llen(inbox))
    assert.equal(43, q:pending())
    assert.equal("odd", q:get("not-of-a-block").payload)
    -- due in the order they were scheduled
    for i = 2, 30 do assert.is_true(dues[i] > dues[i - 1], "job " .. i) end
    -- (1e19 us before its stamp: the reply carries it as text, every digit)
    assert.is_true(math.abs(q:get(far_past).due + 1e13 - os.time()) < 60, tostring(q:get(far_past).due))
    assert.equal(1e13, q:get(far_future).due)
    -- each runs once when due, the one due long ago at once; the one due
    -- in ~317,000 years waits, and is cancelled
    local ran = {}
    local function run(job) ran[job.id] = (ran[job.id] or 0) + 1 end
    q:handle("k0", run)
    q:handle("k1", run)
    assert.is_true(helpers.wait_until(timer, function() return q:pending() == 1 end, 10))
    timer:run(0.1)
    for id in pairs(soon) do assert.equal(1, ran[id], id) end
    assert.equal(1, ran[far_past])
    assert.is_nil(ran[far_future])
    assert.is_true(q:cancel(far_future))
    assert.equal(0, q:pending())
    q:close()
    timer:close()
  end)
end)
