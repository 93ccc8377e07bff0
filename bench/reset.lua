-- reset.lua: what an idle timeout pushed back on every packet costs.
-- N resets of one pending timeout by the same delay (it stays in its slot:
-- only the expiry changes), against cancelling and scheduling a new one.
-- usage: lua5.4 bench/reset.lua [N]
local hwtimer = require("hwtimer")
local N = tonumber(arg[1]) or 1000000
local timer = hwtimer.new()
local cb = function() end
local clock = hwtimer.now

local function median3(f)
  local r = { f(), f(), f() }
  table.sort(r)
  return r[2]
end

local t = timer:schedule(30, cb)
local reset_ns = median3(function()
  local t0 = clock()
  for _ = 1, N do t:reset(30) end
  return (clock() - t0) / N * 1e9
end)
local pair_ns = median3(function()
  local h = timer:schedule(30, cb)
  local t0 = clock()
  for _ = 1, N do
    h:cancel()
    h = timer:schedule(30, cb)
  end
  return (clock() - t0) / N * 1e9
end)
print(string.format("reset %.0f ns; cancel + schedule %.0f ns (median of 3, N = %d)", reset_ns, pair_ns, N))
timer:close()
