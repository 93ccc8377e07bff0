-- Heartbeats with jitter: many connections beat every interval, each delayed
-- by a random share of it, so they do not all beat in the same instant.
local hwtimer = require("hwtimer")
local timer = hwtimer.new()

local beats, conns = 0, {}
for i = 1, 500 do
  conns[i] = timer:every({ interval = 0.02, rate = true, jitter = 0.5 }, function()
    beats = beats + 1
  end)
end
timer:run(0.2)
for _, hb in ipairs(conns) do hb:cancel() end
local s = timer:stats()
print(string.format("%d connections, %d beats in 0.2 s, late p99 %.2f ms", #conns, beats,
  s.late_p99 * 1000))
timer:close()
