-- cqueues: the timer is pollable; attach it to a controller, run the loop.
local hwtimer = require("hwtimer")
local cqueues = require("cqueues")
local glue = require("hwtimer.cqueues")
local timer = hwtimer.new()

local cq = cqueues.new()
local attached = glue.attach(timer, cq)
local left = 3
for i = 1, 3 do
  timer:schedule(i / 100, function()
    left = left - 1
    if left == 0 then attached.detach() end
  end)
end
assert(cq:loop())
timer:close()
print("fired 3, done")
