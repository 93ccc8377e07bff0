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

  it("gives two generators different tags", function()
    local a, b = ids.generator(clock({ 0 }))(), ids.generator(clock({ 0 }))()
    assert.are_not.equal(a:sub(13, 20), b:sub(13, 20))
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
