-- copas (1.x cannot wait on another descriptor): step copas and the timer
-- together instead of calling copas.loop().
local hwtimer = require("hwtimer")
local glue = require("hwtimer.copas")
local timer = hwtimer.new()

local fired = 0
for i = 1, 3 do timer:schedule(i / 100, function() fired = fired + 1 end) end
while timer:pending() > 0 do glue.step(timer) end
timer:close()
print("fired " .. fired .. ", done")
