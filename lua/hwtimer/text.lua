--- hwtimer.text: text made from values the library does not control (an
-- error object a callback raised, an id or a kind a user chose), for the
-- places it goes: a message that is stored, a line of a log.
local text = {}

local format, concat = string.format, table.concat

--- The message of an error value, whatever it is: a string as it is; a
-- number or a boolean as tostring writes it; anything else by its
-- __tostring when that gives a string, else named by its type. Never
-- raises (a __tostring that raises, yields, or returns no string is an
-- error object too: the job or the retry it ended must still be written).
function text.message(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(v) end
  -- (through tostring, a C function: a __tostring that yields raises
  -- instead of suspending the caller's coroutine)
  local ok, s = pcall(tostring, v)
  if ok and type(s) == "string" then return s end
  if ok and type(s) == "number" then return tostring(s) end -- (5.1: __tostring's number as it is)
  -- (5.4 raises where 5.1 returns what __tostring did: one message for both)
  local mt = getmetatable(v)
  local name = type(mt) == "table" and type(rawget(mt, "__name")) == "string" and rawget(mt, "__name") or t
  return format("(an error object, %s, whose __tostring gave no text)", name)
end

-- The length of the valid UTF-8 sequence at s[i] (1 to 4), or nil where
-- s[i] starts none (RFC 3629: no overlong forms, no surrogates, at most
-- U+10FFFF).
local function utf8_at(s, i)
  local c = s:byte(i)
  if c < 0x80 then return 1 end
  local lo, hi, n = 0x80, 0xBF
  if c >= 0xC2 and c <= 0xDF then n = 2
  elseif c == 0xE0 then n, lo = 3, 0xA0
  elseif c == 0xED then n, hi = 3, 0x9F
  elseif c >= 0xE1 and c <= 0xEF then n = 3
  elseif c == 0xF0 then n, lo = 4, 0x90
  elseif c == 0xF4 then n, hi = 4, 0x8F
  elseif c >= 0xF1 and c <= 0xF3 then n = 4
  else return nil end
  for k = 1, n - 1 do
    local b = s:byte(i + k)
    if not b or b < (k == 1 and lo or 0x80) or b > (k == 1 and hi or 0xBF) then return nil end
  end
  return n
end

--- Call piece(s, i, n) for each valid sequence and bad(byte) for each byte
-- that starts none, in turn; the pieces' results, concatenated.
function text.map_utf8(s, piece, bad)
  local out, i, n = {}, 1, #s
  while i <= n do
    local len = utf8_at(s, i)
    if len then
      out[#out + 1] = piece(s, i, len)
      i = i + len
    else
      out[#out + 1] = bad(s:byte(i))
      i = i + 1
    end
  end
  return concat(out)
end

--- Whether s is valid UTF-8 (RFC 3629).
function text.valid_utf8(s)
  if not s:find("[\128-\255]") then return true end
  local i, n = 1, #s
  while i <= n do
    local len = utf8_at(s, i)
    if not len then return false end
    i = i + len
  end
  return true
end

local SHOWN = { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function hex(b) return format("\\x%02X", b) end

--- s as a terminal or a log line may show it: valid UTF-8 as it is, but
-- the backslash, the double quote (unless `keep_quotes`), control
-- characters (C0, DEL, and C1 whether raw bytes or UTF-8: U+009B is a
-- terminal's CSI) and bytes that start no UTF-8 sequence escaped (\\, \",
-- \n, \r, \t, \xHH). The same string always comes out the same, and two
-- strings never as one.
function text.printable(s, keep_quotes)
  if not s:find('[%z\1-\31\127-\255\\"]') then return s end
  return text.map_utf8(s, function(str, i, len)
    local seq = str:sub(i, i + len - 1)
    local c = seq:byte(1)
    if SHOWN[seq] and not (keep_quotes and seq == '"') then return SHOWN[seq] end
    if c < 0x20 or c == 0x7F then return hex(c) end
    if c == 0xC2 and seq:byte(2) < 0xA0 then return hex(0xC2) .. hex(seq:byte(2)) end
    return seq
  end, hex)
end

--- Any value as one line of a log may carry it (text.message, then
-- text.printable with its quotes as they are): a newline in an id cannot
-- forge a line.
function text.log_safe(v)
  return text.printable(text.message(v), true)
end

return text
