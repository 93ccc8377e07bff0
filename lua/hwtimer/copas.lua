--- hwtimer.copas: run a timer alongside copas.
--
--   require("hwtimer.copas").loop(timer)        -- instead of copas.loop()
--   require("hwtimer.copas").step(timer)        -- instead of copas.step()
--
-- Copas (1.x, as Debian ships it) keeps its select set to itself and cannot
-- wait on another file descriptor, so the timer cannot wake it directly.
-- Instead each step lets copas wait at most until the timer's next event
-- (timer:timeout()), then dispatches what is due. A timeout scheduled while
-- copas waits is seen after that wait: set max_wait (seconds, default 0.05)
-- to bound how long that can be.
local copas = require("copas")

local M = {}

function M.step(timer, max_wait)
  max_wait = max_wait or 0.05
  local wait = timer:timeout()
  if not wait or wait > max_wait then wait = max_wait end
  copas.step(wait)
  return timer:dispatch()
end

function M.loop(timer, max_wait)
  while true do
    M.step(timer, max_wait)
  end
end

return M
