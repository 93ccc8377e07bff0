--- hwtimer.luv: drive a timer from a luv (libuv) loop.
--
--   local poll = require("hwtimer.luv").attach(timer)   -- then uv.run()
--   require("hwtimer.luv").detach(poll)                 -- before timer:close()
--
-- A uv poll handle watches the timer's pipe and dispatches when it becomes
-- readable. Callbacks run inside the luv loop, on the Lua thread.
local uv = require("luv")

local M = {}

function M.attach(timer)
  local poll = assert(uv.new_poll(timer:getfd()))
  poll:start("r", function(err)
    assert(not err, err)
    timer:dispatch()
  end)
  return poll
end

function M.detach(poll)
  poll:stop()
  if not poll:is_closing() then poll:close() end
end

return M
