--- hwtimer.durable.ids: job ids and lease owners, for every engine.
-- An id is 26 hex digits: the clock in ms (12), a tag drawn when the
-- generator is made (8), and the generator's running count (6). Ids made
-- one after another sort in the order they were made, so an index on them
-- grows at its right edge (SQLite inserts many times faster than with
-- random keys); and the ids one generator makes in a row share their tag
-- and the count's high digits, so Redis keeps 32 of them in one hash
-- (hwtimer.durable.redis_scripts: a drain writes a run of jobs with one
-- HSET, not one a job). Unique within a generator: the time part never
-- goes back, and moves on a millisecond when the count wraps (every 2^24
-- ids); across generators by the 32-bit tag, which two share with odds of
-- 2^-32. A generator is made per queue, when it opens: after any fork (an
-- nginx master's children), so that no two processes share a tag.
local floor, format = math.floor, string.format

local M = {}

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
  -- (16 bits a draw: Lua 5.1's math.random(m, n) overflows an int past
  -- 2^31 - 1 and gave negative tags, 16 digits long)
  return math.random(0, 0xffff) * 65536 + math.random(0, 0xffff)
end

-- The count's last two digits, made once each (an id is a string built on
-- the schedule's path: one concatenation, no format, for most of them).
local HEX2 = {}
for i = 0, 255 do HEX2[i] = format("%02x", i) end

--- gen = ids.generator(now, [obj]): `now(obj)` is the clock in epoch
-- seconds (an engine's method and the engine); gen() returns a new id.
function M.generator(now, obj)
  local tag, last, count, head = format("%08x", random_tag()), -1, -1, ""
  return function()
    local ms = floor(now(obj) * 1000)
    count = count + 1
    if count > 0xffffff then -- wrapped: a later millisecond keeps the ids apart
      count = 0
      if ms <= last then ms = last + 1 end
    end
    local low = count % 256
    if ms > last or low == 0 then -- the head: time, tag, the count's first four digits
      if ms > last then last = ms end
      head = format("%012x%s%04x", last, tag, (count - low) / 256)
    end
    return head .. HEX2[low]
  end
end

return M
