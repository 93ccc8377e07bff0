-- luasocket: select() accepts the timer itself next to your sockets
-- (it calls timer:getfd() and timer:dirty()).
local hwtimer = require("hwtimer")
local socket = require("socket")
local timer = hwtimer.new()

local fired = 0
for i = 1, 3 do timer:schedule(i / 100, function() fired = fired + 1 end) end

while timer:pending() > 0 do
  local readable = socket.select({ timer }, nil, 1)
  if readable[timer] then timer:dispatch() end
end
timer:close()
print("fired " .. fired .. ", done")
