-- lateness.lua: N timeouts with delays uniform in [0.2, 1.2] s on one timer;
-- prints the lateness (callback time - (schedule time + delay)) percentiles.
-- usage: lua5.4 bench/lateness.lua [N] [tick]
local hwtimer = require("hwtimer")
local N = tonumber(arg[1]) or 20000
local timer = hwtimer.new({ tick = tonumber(arg[2]) or 0.001 })
local late, fired = {}, 0
for i = 1, N do late[i] = 0 end -- preallocated: no table growth inside callbacks
math.randomseed(1)
local due = {}
for i = 1, N do
  local delay = 0.2 + math.random() * 1.0
  local cb = function()
    fired = fired + 1
    late[fired] = hwtimer.now() - due[i]
  end
  due[i] = hwtimer.now() + delay -- after making cb, which may run a GC step
  timer:schedule(delay, cb)
end
timer:run()
table.sort(late)
local function p(q) return late[math.max(1, math.ceil(#late * q))] * 1000 end
print(string.format("n=%d lateness ms: min %.3f p50 %.3f p99 %.3f max %.3f",
  #late, p(0), p(0.5), p(0.99), p(1)))
