-- gcstall.lua: longest stalls of a Lua loop that allocates like a server
-- (a closure and a table per step, 11,000 kept live), with and without
-- hwtimer handles. Shows whose pauses the demo's lateness tail is.
-- usage: lua5.4 bench/gcstall.lua [timer|none]
local hw = require("hwtimer")
local now = hw.now
local use_timer = arg[1] == "timer"
local timer = hw.new()
local live, keep = {}, 11000
local over1, over5, maxgap = 0, 0, 0
local last = now()
local t_end = last + 4
local i = 0
while now() < t_end do
  i = i + 1
  -- per "callback": a closure, a request table, and (optionally) a timeout handle
  local req = { attempt = 1, id = i }
  local f = function() return req end
  local slot = i % keep + 1
  if use_timer then
    if live[slot] then live[slot]:cancel() end
    live[slot] = timer:schedule(10, f, req)
  else
    live[slot] = { f, req, {} }
  end
  for _ = 1, 30 do end
  local t = now()
  local g = t - last
  if g > 0.001 then over1 = over1 + 1 end
  if g > 0.005 then over5 = over5 + 1 end
  if g > maxgap then maxgap = g end
  last = t
end
print(string.format("%-8s iterations %d, stalls >1ms %d, >5ms %d, max %.3f ms", use_timer and "timer" or "no timer",
  i, over1, over5, maxgap * 1000))
