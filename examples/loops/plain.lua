-- A plain script: timer:run() polls the timer's pipe and runs callbacks
-- until nothing is pending.
local hwtimer = require("hwtimer")
local timer = hwtimer.new()

timer:schedule(0.02, function() print("second") end)
timer:schedule(0.01, function() print("first") end)
local never = timer:schedule(0.015, function() print("never printed") end)
never:cancel()

timer:run()
timer:close()
print("done")
