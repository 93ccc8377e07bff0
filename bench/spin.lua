-- spin.lua: how steady this machine's CPU is, with no timer involved.
--
-- usage: lua5.4 bench/spin.lua [rounds]
--
-- Times the same pure-Lua loop (200,000 iterations calling an empty
-- function) in consecutive segments of a few milliseconds and prints each
-- round's segments in ms, then the fastest and slowest segment overall. On a
-- shared machine, stretches of segments run markedly slower than the rest
-- although nothing in the process changes: a W2c burst (13-25 ms long) that
-- lands in such a stretch reports a lower rate for the same work.
local clock = require("hwtimer").now

local rounds = tonumber(arg[1]) or 6
local f = function() end
local lo, hi = math.huge, 0
for _ = 1, rounds do
  local parts = {}
  for _ = 1, 9 do
    local t0 = clock()
    for _ = 1, 200000 do f() end
    local ms = (clock() - t0) * 1000
    lo, hi = math.min(lo, ms), math.max(hi, ms)
    parts[#parts + 1] = string.format("%.1f", ms)
  end
  print(table.concat(parts, " "))
end
print(string.format("fastest %.1f ms, slowest %.1f ms (x%.2f)", lo, hi, hi / lo))
