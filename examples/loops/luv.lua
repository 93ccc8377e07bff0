-- luv: attach the timer to the libuv loop, run the loop.
local hwtimer = require("hwtimer")
local uv = require("luv")
local glue = require("hwtimer.luv")
local timer = hwtimer.new()

local poll = glue.attach(timer)
local left = 3
for i = 1, 3 do
  timer:schedule(i / 100, function()
    left = left - 1
    if left == 0 then glue.detach(poll) end -- the loop ends with its last handle
  end)
end
uv.run()
timer:close()
print("fired 3, done")
