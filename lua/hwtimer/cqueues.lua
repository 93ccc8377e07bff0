--- hwtimer.cqueues: drive a timer from a cqueues controller.
--
--   local cq = cqueues.new()
--   local attached = require("hwtimer.cqueues").attach(timer, cq)
--   cq:loop()                 -- returns once detached and nothing else runs
--   attached:detach()         -- from anywhere, e.g. a callback
--
-- A coroutine on the controller waits with cqueues.poll(timer) (the timer is
-- pollable: pollfd, events, timeout) and dispatches. Callbacks run inside the
-- controller's coroutine, on the Lua thread.
local cqueues = require("cqueues")
local condition = require("cqueues.condition")

local M = {}

function M.attach(timer, cq)
  cq = cq or cqueues.new()
  local attached = { detached = false, wake = condition.new() }
  function attached.detach()
    attached.detached = true
    attached.wake:signal()
  end
  cq:wrap(function()
    while not attached.detached do
      cqueues.poll(timer, attached.wake)
      if attached.detached then break end
      local ok, err = pcall(timer.dispatch, timer)
      if not ok then
        if tostring(err):find("stopped timer", 1, true) then break end
        error(err, 0)
      end
    end
  end)
  return attached, cq
end

return M
