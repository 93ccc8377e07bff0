--- hwtimer.durable.redis_entry: jobs with fresh ids as this process writes
-- them to the Redis engine's intake when it stamps the entry itself (the
-- server's clock bounded from above: hwtimer.durable.redis_client's stamp).
--
-- Each job then has its due time on the server's clock already, so it goes
-- as the scripts store it: its id, its kind, its due time as text (what
-- ZADD takes) and its value in its bucket, the MessagePack that
-- cmsgpack.pack makes of its ten fields, byte for byte. The script that
-- moves the intake in (redis_scripts' drain) only reads them: decoding a
-- job and packing its value were half of its time, ~2.3 us a job of Redis's
-- own (measured, Redis 7.0), where the client packs it in a fraction of
-- that. An entry of the `add` script, stamped by TIME, holds the jobs as
-- `put` reads them instead (redis.lua's job_put).
local M = {}

local char, floor, format = string.char, math.floor, string.format
local spack = string.pack -- (Lua 5.3 and later)

-- v (a whole number, 0 <= v < 2^64) as n (2, 4 or 8) bytes, big-endian
local be
if spack then
  local fmt = { [2] = ">I2", [4] = ">I4", [8] = ">I8" }
  be = function(v, n) return spack(fmt[n], v) end
else
  local function be4(v)
    return char(floor(v / 16777216) % 256, floor(v / 65536) % 256, floor(v / 256) % 256, v % 256)
  end
  be = function(v, n)
    if n == 2 then return char(floor(v / 256), v % 256) end
    if n == 4 then return be4(v) end
    local hi = floor(v / 4294967296)
    return be4(hi) .. be4(v - hi * 4294967296)
  end
end

-- A 4-byte length before each string, as struct.unpack's 'I4c0' reads it
-- in Redis (lengths under 256, the usual ones, from a table).
local short = {}
for n = 0, 255 do short[n] = "\0\0\0" .. char(n) end
local function u32(n) return short[n] or be(n, 4) end
M.u32 = u32

-- A number past what an int64 holds (a due time ~292,000 years away) as
-- cmsgpack writes it: a float, of 32 bits when that is exact.
local TWO32 = 4294967296
local float
if spack then
  local sunpack = string.unpack
  float = function(v)
    local f = spack(">f", v)
    if sunpack(">f", f) == v then return "\202" .. f end
    return "\203" .. spack(">d", v)
  end
else
  local frexp = math.frexp
  float = function(v)
    local sign = v < 0 and 2147483648 or 0
    local m, e = frexp(v < 0 and -v or v) -- |v| = m * 2^e, 0.5 <= m < 1
    local m24 = m * 16777216
    if m24 % 1 == 0 and e <= 128 then -- (24 bits of mantissa, the exponent within a float's)
      return "\202" .. be(sign + (e + 126) * 8388608 + m24 - 8388608, 4)
    end
    local mant = (m * 2 - 1) * 4503599627370496 -- (2^52: the mantissa's bits, a whole number)
    return "\203" .. be(sign + (e + 1022) * 1048576 + floor(mant / TWO32), 4) .. be(mant % TWO32, 4)
  end
end

-- A whole number as cmsgpack writes it: the shortest form that holds it,
-- unsigned when v >= 0 (a due time before 1970 is negative); past int64,
-- a float.
local function int(v)
  if v >= 9223372036854775808 or v < -9223372036854775808 then return float(v) end
  if v >= 0 then
    if v <= 127 then return char(v) end
    if v <= 0xff then return "\204" .. char(v) end
    if v <= 0xffff then return "\205" .. be(v, 2) end
    if v < TWO32 then return "\206" .. be(v, 4) end
    if spack then return spack(">BI8", 207, v) end
    return "\207" .. be(v, 8)
  end
  if v >= -32 then return char(256 + v) end
  if v >= -128 then return "\208" .. char(256 + v) end
  if v >= -32768 then return "\209" .. be(65536 + v, 2) end
  if v >= -TWO32 / 2 then return "\210" .. be(TWO32 + v, 4) end
  -- (two's complement in two halves: 2^64 + v is not exact in a double)
  local hi = floor(v / TWO32)
  return "\211" .. be(TWO32 + hi, 4) .. be(v - hi * TWO32, 4)
end

-- A string as cmsgpack writes it (fixstr, str8, str16, str32).
local function str(s)
  local n = #s
  if n < 32 then return char(0xa0 + n) .. s end
  if n <= 0xff then return "\217" .. char(n) .. s end
  if n <= 0xffff then return "\218" .. be(n, 2) .. s end
  return "\219" .. be(n, 4) .. s
end

-- The job's value in its bucket, as the scripts' pack(kind, due, every,
-- attempt, owner, payload, error, dead, ready, schedule) makes it for a
-- new job with no schedule: attempt 0, no owner (''), payload or false,
-- no error (false), not dead (0), ready at its due time, no schedule:
-- kind, due, every, '\0\160', payload, '\194\0', due, '\194'. What
-- depends on the kind alone, and on the interval alone, is kept from the
-- last job (a process schedules few kinds, most of them with no interval).
local last_kind, kind_part, kind_head -- str(kind); kind after its length (the entry's field)
local last_every, every_part
local function per_kind(kind)
  last_kind, kind_part, kind_head = kind, str(kind), u32(#kind) .. kind
end
local function per_every(every)
  -- (then attempt 0, owner '')
  last_every, every_part = every, int(every) .. "\0\160"
end
local function value(kind, due, every, payload)
  if kind ~= last_kind then per_kind(kind) end
  if every ~= last_every then per_every(every) end
  local d = int(due)
  -- (then error false, dead 0; after ready, schedule false)
  return kind_part .. d .. every_part .. (payload and str(payload) or "\194") .. "\194\0" .. d .. "\194"
end
M.value = value

-- due as the text ZADD reads: every digit (LuaJIT's tostring gives 14)
local mtype = math.type -- (Lua 5.3 and later)
local function text(v)
  if mtype and mtype(v) == "integer" then return tostring(v) end
  return format("%.0f", v)
end

--- The jobs' part of an entry: a job's id, kind, due time (whole
-- microseconds on the server's clock) as text, and value, each after its
-- length (4 bytes); after `mark` when given (an entry of this job alone).
-- One concatenation (the value's length is known from its parts): this
-- is on every schedule's path.
function M.job(id, kind, due, every, payload, mark)
  if kind ~= last_kind then per_kind(kind) end
  if every ~= last_every then per_every(every) end
  local t, d = text(due), int(due)
  local p = payload and str(payload) or "\194"
  local n = #kind_part + 2 * #d + #every_part + #p + 3
  return (mark or "") .. u32(#id) .. id .. kind_head .. u32(#t) .. t ..
    u32(n) .. kind_part .. d .. every_part .. p .. "\194\0" .. d .. "\194"
end

--- An entry's mark: its first byte (an entry of the `add` script starts
-- with TIME's digits).
M.MARK = "="

return M
