--- hwtimer.check: the argument tests the Lua modules share (retry, durable).
local C = {}

--- A value's type as an "expected, got" message names it: a userdata's or
-- table's metatable __name when it has one.
function C.type_name(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and type(rawget(mt, "__name")) == "string" and rawget(mt, "__name")
    or type(v)
end

--- A function, or an object whose metatable has __call.
function C.callable(v)
  if type(v) == "function" then return true end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__call") ~= nil
end

--- A hwtimer timer, or any object whose `schedule` method can be called (the
-- OpenResty glue's object): indexing another userdata may raise, which means
-- "not a timer".
function C.is_timer(v)
  if type(v) ~= "userdata" and type(v) ~= "table" then return false end
  local ok, schedule = pcall(function() return v.schedule end)
  return ok and C.callable(schedule)
end

return C
