-- hwtimer.durable.ids: the ids a queue makes for jobs given none. Each is
-- the millisecond (12 hex digits), the generator's random tag (8) and a
-- count (6): ordered by time within a generator, apart between processes.
local ids = require("hwtimer.durable.ids")

describe("hwtimer.durable.ids", function()
  local function clock(t) return function() return t[1] end end

  it("makes ids of 26 hex digits, ordered within a generator, the millisecond first", function()
    local t = { 1700000000.5 }
    local gen = ids.generator(clock(t))
    local prev = gen()
    assert.matches("^018bcfe569f4%x%x%x%x%x%x%x%x000000$", prev)
    for i = 1, 600 do
      if i % 100 == 0 then t[1] = t[1] + 0.001 end
      local id = gen()
      assert.equal(26, #id)
      assert.is_true(id > prev, id .. " after " .. prev)
      prev = id
    end
  end)

  -- (2^24 ids in one millisecond: seconds of Lua, so in the plain runs only)
  it("keeps 26 digits and the order past 2^24 ids in one millisecond: the count wraps, the millisecond moves on",
    function()
    if os.getenv("HWT_SLOW") or os.getenv("HWT_QUICK") then
      return pending("2^24 ids: in the plain runs of each Lua")
    end
    local gen = ids.generator(clock({ 1000 }))
    local prev
    for _ = 1, 2 ^ 24 - 2 do prev = gen() end
    for _ = 1, 4 do -- the last two of the count, then the first two after it wrapped
      local id = gen()
      assert.equal(26, #id, id)
      assert.is_true(id > prev, id .. " after " .. prev)
      prev = id
    end
    assert.equal("0000000f4241", prev:sub(1, 12)) -- (the millisecond after the clock's 1000 s)
  end)

  it("gives two generators different tags", function()
    local a, b = ids.generator(clock({ 0 }))(), ids.generator(clock({ 0 }))()
    assert.are_not.equal(a:sub(13, 20), b:sub(13, 20))
    -- of 32 random bits each: 8 tags whose first byte is 0 would come once in 2^64
    local high = {}
    for i = 1, 8 do high[i] = ids.generator(clock({ 0 }))():sub(13, 14) end
    assert.is_true(table.concat(high) ~= ("00"):rep(8), "every tag's first byte 0")
  end)

  -- (the fallback below seeds math.random: where the kernel gives the
  -- bits, the user's random sequence is left alone)
  it("takes its tag from /dev/urandom, leaving math.random's sequence as it was", function()
    math.randomseed(42)
    local expected = { math.random(1, 1e6), math.random(1, 1e6), math.random(1, 1e6) }
    math.randomseed(42)
    local first = math.random(1, 1e6)
    ids.generator(clock({ 0 }))
    assert.same(expected, { first, math.random(1, 1e6), math.random(1, 1e6) })
  end)

  it("makes its tag from what differs between processes where /dev/urandom cannot be read", function()
    local open = io.open
    io.open = function(path, ...) -- luacheck: ignore 122 (a stand-in for a machine without it)
      if path == "/dev/urandom" then return nil, "no such file" end
      return open(path, ...)
    end
    local ok, a = pcall(function() return ids.generator(clock({ 1 }))() end)
    io.open = open -- luacheck: ignore 122
    assert.is_true(ok, tostring(a))
    assert.matches("^0000000003e8%x%x%x%x%x%x%x%x000000$", a)
  end)
end)
