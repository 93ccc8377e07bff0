-- cron.parse: every syntax form and its normal form (tostring), names,
-- steps, macros, the day-of-month/day-of-week rule, expressions that never
-- match, and bad input: nil and a message naming the field, or an error
-- naming the argument.
local cron = require("hwtimer.cron")

-- The normal form of an expression (tostring without the frame).
local function norm(expr, opts)
  local c = assert(cron.parse(expr, opts))
  return (tostring(c):match("^hwtimer%.cron %((.*), [^,]+%)$"))
end

describe("cron.parse", function()
  it("reads *, lists, ranges and steps, and writes them back in a normal form", function()
    assert.equal("* * * * *", norm("* * * * *"))
    assert.equal("*/5 * * * *", norm("*/5 * * * *"))
    assert.equal("10-40/5 * * * *", norm("10-40/5 * * * *"))
    assert.equal("7-59/10 * * * *", norm("7/10 * * * *")) -- v/s: from v to the field's end
    assert.equal("0,15,30-35 1-5 1,15 1-6/2 *", norm("0,15,30-35 1-5 1,15 1-6/2 *"))
    assert.equal("5 4 * * *", norm("  5\t4  *   * *  "))
    assert.equal("0 0 1 1 *", norm("00 000 01 1 *"))
    -- a step past the range's end: the one value it leaves
    assert.equal("5 * * * *", norm("5-5/10 * * * *"))
    assert.equal("0 * * * *", norm("0-59/100000000000000000000 * * * *"))
    assert.equal("59 * * * *", norm("59/10 * * * *"))
    assert.equal("0 0 * * 0", norm("0 0 * * 7/1"))
    for _, expr in ipairs({ "5-5/10 * * * *", "0 0 * * 7/1", "0-59/100000000000000000000 * * * *" }) do
      local c = assert(cron.parse(expr))
      local again = assert(cron.parse(norm(expr)))
      assert.equal(c:next(1.7e9), again:next(1.7e9), expr) -- it reads back as the same schedule
      assert.equal(c:next(c:next(1.7e9)), again:next(again:next(1.7e9)), expr)
    end
  end)

  it("reads month and day names in any case; day of week 7 is Sunday", function()
    assert.equal("0 9 * 1,7,12 1-5", norm("0 9 * jan,JUL,Dec Mon-FRI"))
    assert.equal("0 0 * 2-4/2 0", norm("0 0 * feb-apr/2 sun"))
    assert.equal("0 0 * * 0", norm("0 0 * * 7"))
    assert.equal("0 0 * * 5-7", norm("0 0 * * fri-sun")) -- a range ending on sun(0) runs to 7
    assert.equal("0 0 * * 5-7", norm("0 0 * * 5-0"))
  end)

  it("reads an optional leading seconds field", function()
    assert.equal("*/15 * * * * *", norm("*/15 * * * * *"))
    assert.equal("30 0 12 * * 1-5", norm("30 0 12 * * mon-fri"))
  end)

  it("expands the @macros, in any case", function()
    local want = {
      ["@yearly"] = "0 0 1 1 *", ["@annually"] = "0 0 1 1 *", ["@monthly"] = "0 0 1 * *",
      ["@weekly"] = "0 0 * * 0", ["@daily"] = "0 0 * * *", ["@midnight"] = "0 0 * * *",
      ["@hourly"] = "0 * * * *",
    }
    for macro, expr in pairs(want) do
      assert.equal(expr, norm(macro))
      assert.equal(expr, norm(" " .. macro:upper() .. " "))
    end
  end)

  it("shows the expression and the zone in tostring", function()
    assert.equal("hwtimer.cron (30 2 * * *, UTC)", tostring(assert(cron.parse("30 2 * * *"))))
    assert.equal("hwtimer.cron (0 9 * * 1-5, Europe/Berlin)",
      tostring(assert(cron.parse("0 9 * * mon-fri", { tz = "Europe/Berlin" }))))
  end)

  it("refuses an expression that can never match, and keeps those that can", function()
    local never = "cron: day-of-month field: no day it allows exists in the months allowed"
    assert.same({ nil, never }, { cron.parse("0 0 30 2 *") })
    assert.same({ nil, never }, { cron.parse("0 0 31 4,6,9,11 *") })
    assert.same({ nil, never }, { cron.parse("0 0 30,31 feb */7") }) -- dow '*...': both must match
    assert.truthy(cron.parse("0 0 29 2 *"))     -- leap years
    assert.truthy(cron.parse("0 0 31 4 mon"))   -- both restricted: Mondays of April
    assert.truthy(cron.parse("0 0 */30 2 *"))   -- 1 and 31: February 1
  end)
end)

describe("cron.parse: bad expressions", function()
  local cases = {
    { "61 * * * *", "cron: minute field: 61 is out of range 0-59" },
    { "* 24 * * *", "cron: hour field: 24 is out of range 0-23" },
    { "* * 0 * *", "cron: day-of-month field: 0 is out of range 1-31" },
    { "* * 32 * *", "cron: day-of-month field: 32 is out of range 1-31" },
    { "* * * 13 *", "cron: month field: 13 is out of range 1-12" },
    { "* * * 0 *", "cron: month field: 0 is out of range 1-12" },
    { "* * * * 8", "cron: day-of-week field: 8 is out of range 0-7" },
    { "60 * * * * *", "cron: second field: 60 is out of range 0-59" },
    { "* * * * * 8", "cron: day-of-week field: 8 is out of range 0-7" },
    { "x * * * *", "cron: minute field: 'x' is not a number" },
    { "* * * foo *", "cron: month field: 'foo' is not a number or month name" },
    { "* * * * sunday", "cron: day-of-week field: 'sunday' is not a number or day name" },
    { "* mon * * *", "cron: hour field: 'mon' is not a number" },
    { "-5 * * * *", "cron: minute field: '' is not a number" },
    { "1.5 * * * *", "cron: minute field: '1.5' is not a number" },
    { "5-2 * * * *", "cron: minute field: range 5-2 runs backwards" },
    { "* * * dec-jan *", "cron: month field: range dec-jan runs backwards" },
    { "*/0 * * * *", "cron: minute field: step '0' is not a positive integer" },
    { "*/x * * * *", "cron: minute field: step 'x' is not a positive integer" },
    { "1-5/ * * * *", "cron: minute field: step '' is not a positive integer" },
    { "*/5/2 * * * *", "cron: minute field: step '5/2' is not a positive integer" },
    { "1,,2 * * * *", "cron: minute field: empty list item" },
    { "1, * * * *", "cron: minute field: empty list item" },
    { "* * * *", "cron: 5 or 6 fields expected, got 4" },
    { "* * * * * * *", "cron: 5 or 6 fields expected, got 7" },
    { "", "cron: 5 or 6 fields expected, got 0" },
    { "@fortnightly", "cron: unknown macro '@fortnightly'" },
    { "@daily 5", "cron: unknown macro '@daily 5'" },
  }
  for _, case in ipairs(cases) do
    it(string.format("%q: %s", case[1], case[2]), function()
      assert.same({ nil, case[2] }, { cron.parse(case[1]) })
    end)
  end
end)

describe("cron.parse: bad arguments", function()
  it("raises naming the argument", function()
    assert.has_error(function() return cron.parse(nil) end,
      "bad argument #1 to 'parse' (string expected, got nil)")
    assert.has_error(function() return cron.parse(5) end,
      "bad argument #1 to 'parse' (string expected, got number)")
    assert.has_error(function() return cron.parse("* * * * *", 5) end,
      "bad argument #2 to 'parse' (table expected, got number)")
    assert.has_error(function() return cron.parse("* * * * *", { tz = 1 }) end,
      "bad argument #2 to 'parse' (option 'tz': string expected)")
    assert.has_error(function() return cron.parse("* * * * *", { zone = "UTC" }) end,
      "bad argument #2 to 'parse' (unknown option 'zone')")
  end)

  it("raises at the caller's line, in parse and in next and prev", function()
    local H, here = require("spec.helpers"), "01%-parse_spec%.lua$"
    local c = assert(cron.parse("* * * * *"))
    H.raises_at(here, function() local r = cron.parse(nil) return r end,
      "bad argument #1 to 'parse' (string expected, got nil)")
    H.raises_at(here, function() local r = cron.parse("* * * * *", 5) return r end,
      "bad argument #2 to 'parse' (table expected, got number)")
    H.raises_at(here, function() local r = c:next("x") return r end, "bad argument #1 to 'next' (number expected, got string)")
    H.raises_at(here, function() local r = c:prev(1e16) return r end,
      "bad argument #1 to 'prev' (epoch seconds from -1e15 to 1e15 expected)")
    H.raises_at(here, function() local r = c.next({}, 1) return r end,
      "calling 'next' on bad self (hwtimer.cron expected, got table)")
  end)

  it("returns nil and a message for a zone it cannot find or read", function()
    assert.same({ nil, "cron: unknown time zone 'Mars/Olympus'" },
      { cron.parse("* * * * *", { tz = "Mars/Olympus" }) })
    assert.same({ nil, "cron: unknown time zone '../../etc/passwd'" },
      { cron.parse("* * * * *", { tz = "../../etc/passwd" }) })
    assert.same({ nil, "cron: unknown time zone '/etc/localtime'" },
      { cron.parse("* * * * *", { tz = "/etc/localtime" }) })
    assert.same({ nil, "cron: unknown time zone ''" }, { cron.parse("* * * * *", { tz = "" }) })
    -- (an empty part: not the IANA name it would reach through the file system)
    assert.same({ nil, "cron: unknown time zone 'Europe//Berlin'" },
      { cron.parse("* * * * *", { tz = "Europe//Berlin" }) })
    assert.same({ nil, "cron: unknown time zone 'zone.tab'" }, { cron.parse("* * * * *", { tz = "zone.tab" }) })
    if io.open("/usr/share/zoneinfo/leapseconds") then -- (a text file there)
      assert.same({ nil, "cron: time zone 'leapseconds': not a TZif file" },
        { cron.parse("* * * * *", { tz = "leapseconds" }) })
    end
    if io.open("/usr/share/zoneinfo/right/UTC") then
      assert.same({ nil, "cron: time zone 'right/UTC': has leap seconds (not supported)" },
        { cron.parse("* * * * *", { tz = "right/UTC" }) })
    end
  end)

  it("c:next and c:prev name a bad epoch or a bad self", function()
    local c = assert(cron.parse("* * * * *"))
    for _, m in ipairs({ "next", "prev" }) do
      assert.has_error(function() return c[m](c, "1") end,
        "bad argument #1 to '" .. m .. "' (number expected, got string)")
      assert.has_error(function() return c[m](c) end,
        "bad argument #1 to '" .. m .. "' (number expected, got nil)")
      for _, bad in ipairs({ 0 / 0, math.huge, -math.huge, 2e15 }) do
        assert.has_error(function() return c[m](c, bad) end,
          "bad argument #1 to '" .. m .. "' (epoch seconds from -1e15 to 1e15 expected)")
      end
      assert.has_error(function() return c[m](5) end,
        "calling '" .. m .. "' on bad self (hwtimer.cron expected, got number)")
    end
  end)
end)
