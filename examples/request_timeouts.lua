-- Request timeouts: every request gets a timeout that its response cancels.
-- Most responses arrive in time; the ones that do not are failed by the timer.
local hwtimer = require("hwtimer")
local timer = hwtimer.new()

local answered, timed_out = 0, 0
local function send_request(id, latency)
  local req = { id = id }
  req.timeout = timer:schedule(0.05, function() -- 50 ms to answer
    req.done = true
    timed_out = timed_out + 1
  end)
  timer:schedule(latency, function() -- the simulated response
    if req.done then return end -- too late: already failed
    req.done = true
    req.timeout:cancel()
    answered = answered + 1
  end)
end

for id = 1, 100 do send_request(id, id % 10 == 0 and 0.08 or 0.01) end
timer:run()
print(string.format("answered %d, timed out %d", answered, timed_out))
timer:close()
