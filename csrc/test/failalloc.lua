-- Driven by failalloc.c: every step may hit a failing allocation; whatever
-- was accepted must still be accounted for (fired, cancelled or pending).
local hwtimer = require("hwtimer")
local errors = 0 -- callbacks fail too once memory runs out: count, quietly
local timer = assert(hwtimer.new({ max_pending = 1000, on_error = function() errors = errors + 1 end }))
local fired, scheduled, cancelled = 0, 0, 0
local handles = {}
for i = 1, 40 do
  local t = timer:schedule((i % 4) / 1000, function() fired = fired + 1 end)
  scheduled = scheduled + 1
  handles[i] = t
end
timer:every(0.001, function(t) fired = fired + 1; t:cancel() end)
scheduled = scheduled + 1
for i = 1, 40, 3 do if handles[i]:cancel() then cancelled = cancelled + 1 end end
timer:run(2)
assert(scheduled == fired + cancelled + timer:pending(), "an accepted timeout was lost")
local left = timer:stop()
assert(#left == 0 and timer:pending() == 0)
