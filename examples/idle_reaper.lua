-- Idle-connection reaping: each connection's idle timeout is reset on every
-- packet (O(1), no new allocation); a connection that goes quiet is closed.
local hwtimer = require("hwtimer")
local timer = hwtimer.new()

local IDLE = 0.03
local conns, reaped = {}, {}
for i = 1, 5 do
  local conn = { id = i }
  conn.idle = timer:schedule(IDLE, function() reaped[#reaped + 1] = conn.id end)
  conns[i] = conn
end

-- Traffic: connections 1-3 send a packet every 10 ms for 100 ms; 4 and 5 stay quiet.
local ticks = 0
timer:every(0.01, function(t)
  ticks = ticks + 1
  for i = 1, 3 do conns[i].idle:reset(IDLE) end -- a packet arrived
  if ticks == 10 then t:cancel() end
end)
timer:run()
print("reaped " .. table.concat(reaped, ",") .. " (the quiet ones first, the busy ones once traffic stopped)")
timer:close()
