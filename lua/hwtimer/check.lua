--- hwtimer.check: the argument tests the Lua modules share (retry, durable,
-- the loop glue), worded as the binding words its own (csrc/lhwtimer.c).
local check = {}
local message = require("hwtimer.text").message

--- A value's type as an "expected, got" message names it: a userdata's or
-- table's metatable __name when it has one.
function check.type_name(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and type(rawget(mt, "__name")) == "string" and rawget(mt, "__name")
    or type(v)
end

--- A function, or an object whose metatable has __call.
function check.callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__call") ~= nil
end

--- A hwtimer timer, or any object whose `schedule` method can be called (the
-- OpenResty glue's object): indexing another userdata may raise, which means
-- "not a timer".
function check.is_timer(v)
  if type(v) ~= "userdata" and type(v) ~= "table" then return false end
  local ok, schedule = pcall(function() return v.schedule end)
  return ok and check.callable(schedule)
end

--- Number tests, one definition each (NaN and the infinities fail all):
-- finite; positive (> 0); seconds (0 to 1e9); span (above 0, to 1e9);
-- whole (an integer from 1 up).
local huge, floor = math.huge, math.floor
function check.finite(v) return type(v) == "number" and v == v and v > -huge and v < huge end
function check.positive(v) return check.finite(v) and v > 0 end
function check.seconds(v) return check.finite(v) and v >= 0 and v <= 1e9 end
function check.span(v) return check.finite(v) and v > 0 and v <= 1e9 end
function check.whole(v) return check.positive(v) and v == floor(v) end

--- A test for a whole number from 1 to `most`, and what it expects in words.
function check.count_to(most)
  return function(v) return check.whole(v) and v <= most end, "integer from 1 to " .. string.format("%.0f", most)
end

local function option_name(key) return "option '" .. key .. "'" end
local function unknown_option(key) return "unknown option '" .. key .. "'" end

--- Read the table opts against spec = { key = { default, test, what } }: a
-- new table with every key of spec, given or defaulted; or nil and the
-- message for the first unknown key or value that fails its test.
-- name(key) and unknown(key) word the messages (default: "option 'k'",
-- "unknown option 'k'"). The caller raises, at its own depth.
function check.options(opts, spec, name, unknown)
  name, unknown = name or option_name, unknown or unknown_option
  for k in pairs(opts) do
    if spec[k] == nil then return nil, unknown(message(k)) end
  end
  local o = {}
  for key, s in pairs(spec) do
    local v = opts[key]
    if v == nil then
      v = s[1]
    elseif not s[2](v) then
      return nil, string.format("%s: %s expected", name(key), s[3])
    end
    o[key] = v
  end
  return o
end

--- Raise "bad argument #n to 'fname' (msg)", as luaL_argerror words it;
-- `level` as error()'s, counted from argerror's caller.
function check.argerror(n, fname, msg, level)
  error(string.format("bad argument #%d to '%s' (%s)", n, fname, msg), level + 1)
end

--- Argument #n of fname, an options table or nil, read with check.options
-- (unknown words an unknown key). Returns the options; raises as
-- hwtimer.new does, at `level` counted from arg_options's caller.
function check.arg_options(opts, spec, n, fname, level, unknown)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then
    check.argerror(n, fname, "table expected, got " .. check.type_name(opts), level + 1)
  end
  local o, err = check.options(opts, spec, nil, unknown)
  if not o then check.argerror(n, fname, err, level + 1) end
  return o
end

return check
