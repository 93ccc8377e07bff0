--- hwtimer.jobs_cli_text: how hwtimer-jobs writes strings it did not make
-- (ids, kinds, payloads, errors, cursors, the words it was given): as text
-- a terminal shows without obeying it, as JSON, as shell words, in base64;
-- and the times it shows (an ISO date, a span, how long from now).
-- hwtimer.jobs_cli's alone; no API of its own.
local M = {}

local floor, format, concat = math.floor, string.format, table.concat

---------------------------------------------------------------------------
-- Text: UTF-8, printable forms
---------------------------------------------------------------------------

-- (UTF-8 and its printable form as hwtimer.text has them: RFC 3629)
local text = require("hwtimer.text")
local map_utf8, valid_utf8, printable = text.map_utf8, text.valid_utf8, text.printable

-- Columns a string takes: its UTF-8 characters (printable() has escaped
-- everything else).
local function width(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

---------------------------------------------------------------------------
-- JSON: a small encoder (objects' keys sorted, so the output is the same
-- for the same data)
---------------------------------------------------------------------------

local json = {}

local ARRAY = {}
json.null = setmetatable({}, { __tostring = function() return "null" end })

--- t, marked to be encoded as an array (an empty table is an object).
function json.array(t) return setmetatable(t, ARRAY) end

local ESCAPE = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                 ["\r"] = "\\r", ["\t"] = "\\t" }
for c = 0, 31 do ESCAPE[string.char(c)] = ESCAPE[string.char(c)] or format("\\u%04x", c) end
ESCAPE["\127"] = "\\u007f"

local REPLACEMENT = "\239\191\189" -- U+FFFD

--- A JSON string: quote, backslash and control characters (C0, DEL and
-- C1: U+0080-U+009F, which a terminal obeys as it does ESC [) escaped; each
-- byte that does not start a valid UTF-8 sequence replaced by U+FFFD (the
-- document says where: a *_base64 field beside it holds the bytes).
function json.string(s)
  if s:find("[\128-\255]") then
    s = map_utf8(s, function(str, i, len) return str:sub(i, i + len - 1) end,
      function() return REPLACEMENT end)
  end
  s = s:gsub('[%z\1-\31\127"\\]', ESCAPE)
  return '"' .. s:gsub("\194([\128-\159])", function(b) return format("\\u00%02x", b:byte()) end) .. '"'
end

-- The shortest of %.15g to %.17g that reads back as the same number;
-- null where JSON has none (NaN, infinities).
local function number(v)
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  for digits = 15, 17 do
    local s = format("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
end

local function encode(v, out)
  local t = type(v)
  if v == nil or v == json.null then
    out[#out + 1] = "null"
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  elseif t == "number" then
    out[#out + 1] = number(v)
  elseif t == "string" then
    out[#out + 1] = json.string(v)
  elseif t == "table" and getmetatable(v) == ARRAY then
    out[#out + 1] = "["
    for i = 1, #v do
      if i > 1 then out[#out + 1] = "," end
      encode(v[i], out)
    end
    out[#out + 1] = "]"
  elseif t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = json.string(k) .. ":"
      encode(v[k], out)
    end
    out[#out + 1] = "}"
  else
    error("hwtimer-jobs: cannot encode a " .. t .. " as JSON")
  end
end

--- v as JSON text.
function json.encode(v)
  local out = {}
  encode(v, out)
  return concat(out)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

-- s in base64 (RFC 4648, with padding).
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local d = { floor(n / 262144), floor(n / 4096) % 64, floor(n / 64) % 64, n % 64 }
    for k = 1, 4 do d[k] = B64:sub(d[k] + 1, d[k] + 1) end
    if not c then d[4] = "=" end
    if not b then d[3] = "=" end
    out[#out + 1] = concat(d)
  end
  return concat(out)
end

local B64_VALUE = {}
for k = 1, 64 do B64_VALUE[B64:sub(k, k)] = k - 1 end

-- The bytes of s in base64 as base64() writes it (padded, no other form),
-- or nil.
local function unbase64(s)
  if #s % 4 ~= 0 or s:find("[^%w+/=]") or s:find("=[^=]") then return nil end
  local out = {}
  for i = 1, #s, 4 do
    local n = 0
    for k = i, i + 3 do n = n * 64 + (B64_VALUE[s:sub(k, k)] or 0) end
    out[#out + 1] = string.char(floor(n / 65536), floor(n / 256) % 256, n % 256)
  end
  local pad = #s:match("=*$")
  local bytes = concat(out):sub(1, #s / 4 * 3 - pad)
  if base64(bytes) ~= s then return nil end -- (bits set past the last byte, "=" too many)
  return bytes
end

-- Cut text longer than n columns to n, ending in "...".
local function cut(s, n)
  if width(s) <= n then return s end
  local out, w = {}, 0
  for ch in s:gmatch("[^\128-\191][\128-\191]*") do
    if w + 1 > n - 3 then break end
    out[#out + 1], w = ch, w + 1
  end
  return concat(out) .. "..."
end

-- Whether s is text a terminal shows as it is: valid UTF-8 without control
-- characters (C0, DEL, C1).
local function plain(s)
  return valid_utf8(s) and not s:find("[%z\1-\31\127]") and not s:find("\194[\128-\159]")
end

-- A shell word that reads back as s: as it is where it has letters, digits
-- and ._/:=@%+- alone, in '...' where it is plain text, and otherwise
-- (control characters, C1 ones too, bytes that are not UTF-8: an id of
-- escape sequences) as bash's $'...' with each of those bytes as \xHH, so
-- that the terminal shows it and a paste gives the bytes back. (bash ends
-- $'...' at a \x00: a NUL has no shell word.)
local function shell_word(s)
  if s:match("^[%w._/:=@%%+-]+$") then return s end
  if plain(s) then return "'" .. s:gsub("'", "'\\''") .. "'" end
  return "$'" .. map_utf8(s, function(str, i, len)
    local seq = str:sub(i, i + len - 1)
    if seq == "'" or seq == "\\" then return "\\" .. seq end
    if plain(seq) then return seq end
    return (seq:gsub(".", function(c) return format("\\x%02X", c:byte()) end))
  end, function(b) return format("\\x%02X", b) end) .. "'"
end

---------------------------------------------------------------------------
-- Times: when a job is due, how long from now
---------------------------------------------------------------------------

-- An epoch as UTC ISO-8601 with milliseconds, or the number where os.date
-- cannot show it.
local function iso(t)
  local s = floor(t)
  local ok, date = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", s)
  if not ok or not date then return format("%.3f", t) end
  return date .. format(".%03dZ", floor((t - s) * 1000))
end

-- A span of seconds in one or two units: "45s", "5m", "1h30m", "2d4h",
-- "0.25s".
local function span(secs)
  if secs < 60 then
    return (secs == floor(secs) and format("%d", secs) or format("%.3g", secs)) .. "s"
  end
  local units = { { 86400, "d" }, { 3600, "h" }, { 60, "m" }, { 1, "s" } }
  secs = floor(secs)
  for i, u in ipairs(units) do
    if secs >= u[1] then
      local n, rest = floor(secs / u[1]), secs % u[1]
      local next_u = units[i + 1]
      local small = next_u and floor(rest / next_u[1]) or 0
      return n .. u[2] .. (small > 0 and small .. next_u[2] or "")
    end
  end
end

-- When `t` is from `now`, to the nearest second: "in 5m", "3s ago", "now".
local function relative(t, now)
  local d = floor(t - now + 0.5)
  if d == 0 then return "now" end
  if d > 0 then return "in " .. span(d) end
  return span(-d) .. " ago"
end

M.valid_utf8, M.map_utf8, M.printable, M.width = valid_utf8, map_utf8, printable, width
M.iso, M.span, M.relative = iso, span, relative
M.json, M.number, M.base64, M.unbase64 = json, number, base64, unbase64
M.plain, M.cut, M.shell_word = plain, cut, shell_word

return M
