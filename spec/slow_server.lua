-- spec/slow_server.lua PORTFILE HOLD LIFETIME: a loopback TCP server for the
-- punctual specs, in a process of its own. It answers each connection's
-- first line with "ok" HOLD seconds after the line came, then closes it. It
-- writes its port to PORTFILE once it listens, and exits by itself after
-- LIFETIME seconds (a spec stops it by its pid before that). luasocket only,
-- so any Lua with lua-socket runs it; select takes at most 1,024 sockets.
local socket = require("socket")

local portfile, hold, lifetime = arg[1], tonumber(arg[2]), tonumber(arg[3])
assert(portfile and hold and lifetime, "usage: slow_server.lua PORTFILE HOLD LIFETIME")
local gettime = socket.gettime

local srv = assert(socket.bind("127.0.0.1", 0, 1024))
srv:settimeout(0)
local f = assert(io.open(portfile .. ".part", "w"))
local _, port = srv:getsockname()
f:write(port)
f:close()
assert(os.rename(portfile .. ".part", portfile)) -- whole, or not there

local reading, answer_at = {}, {} -- sockets whose line is awaited; socket -> when to answer

local function accept_all()
  local c = srv:accept()
  while c do
    c:settimeout(0)
    reading[c] = true
    c = srv:accept()
  end
end

local function read_line(c)
  local line, err = c:receive("*l")
  if line then
    reading[c], answer_at[c] = nil, gettime() + hold
  elseif err == "closed" then
    reading[c] = nil
    c:close()
  end
end

-- Answers what is due; returns the next time one will be.
local function answer_due(now, limit)
  local soonest = limit
  for c, at in pairs(answer_at) do
    if at <= now then
      c:send("ok\n")
      c:close()
      answer_at[c] = nil
    elseif at < soonest then
      soonest = at
    end
  end
  return soonest
end

local stop = gettime() + lifetime
while gettime() < stop do
  local now = gettime()
  local wait = answer_due(now, stop) - now
  local set = { srv }
  for c in pairs(reading) do set[#set + 1] = c end
  local ready = socket.select(set, nil, math.max(0, math.min(wait, 0.05)))
  for _, s in ipairs(ready) do
    if s == srv then accept_all() else read_line(s) end
  end
end
