--- hwtimer.durable.ids: job ids and lease owners, for every engine.
-- An id is 24 hex digits: the clock in ms (12), a tag drawn when the
-- generator is made (8), and a count within the millisecond (4). Ids made
-- one after another sort in the order they were made, so an index on them
-- grows at its right edge (SQLite inserts many times faster than with
-- random keys). Unique within a generator by the count (past 65,536 in one
-- millisecond the time part moves on a millisecond, and never goes back);
-- across generators by the 32-bit tag, which two share with odds of 2^-32.
-- A generator is made per queue, when it opens: after any fork (an nginx
-- master's children), so that no two processes share a tag.
local floor, format = math.floor, string.format

local M = {}

-- The count's four digits, made once each: the counts a millisecond sees
-- are the same few hundred again and again.
local HEX4 = setmetatable({}, { __index = function(t, n)
  local s = format("%04x", n)
  t[n] = s
  return s
end })

-- 32 random bits from the kernel, else from what differs between processes.
local function random_tag()
  local f = io.open("/dev/urandom", "rb")
  if f then
    local b = f:read(4)
    f:close()
    if b and #b == 4 then
      local x = 0
      for i = 1, 4 do x = x * 256 + b:byte(i) end
      return x
    end
  end
  local seed = tonumber(tostring({}):match("0x(%x+)") or "0", 16) or 0
  math.randomseed((os.time() + seed + floor(os.clock() * 1e6)) % 2147483647)
  return math.random(0, 0x7fffffff) * 2 + math.random(0, 1)
end

--- gen = ids.generator(now, [obj]): `now(obj)` is the clock in epoch
-- seconds (an engine's method and the engine); gen() returns a new id.
function M.generator(now, obj)
  local tag, last, count, prefix = random_tag(), -1, 0, ""
  return function()
    local ms = floor(now(obj) * 1000)
    if ms > last then
      last, count = ms, 0
      prefix = format("%012x%08x", ms, tag)
    else
      count = count + 1
      if count > 0xffff then -- the clock went back, or a very busy millisecond
        last, count = last + 1, 0
        prefix = format("%012x%08x", last, tag)
      end
    end
    return prefix .. HEX4[count]
  end
end

return M
