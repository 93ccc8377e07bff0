--- hwtimer.luv: drive a timer from a luv (libuv) loop.
--
--   local poll = require("hwtimer.luv").attach(timer, [opts]) -- then uv.run()
--   require("hwtimer.luv").detach(poll)                       -- before timer:close()
--
-- A uv poll handle watches the timer's pipe and dispatches when it becomes
-- readable. Callbacks run inside the luv loop, on the Lua thread.
--
-- opts.gc_step (as timer:run's): a uv prepare handle steps the collector
-- each time the loop is about to wait, within the timer's next deadline,
-- then brings libuv's clock up to date. libuv does not tell a prepare
-- handle how long it will wait (uv.backend_timeout() is 0 there), so its
-- own timers and ready handles wait as long as the step: at most the budget.
local uv = require("luv")
local runner = require("hwtimer.runner")

local M = {}
local OPTIONS = { gc_step = runner.OPTIONS.gc_step }
local prepares = setmetatable({}, { __mode = "k" }) -- poll -> its gc_step prepare handle

local function gc_prepare(timer, budget)
  local prep = assert(uv.new_prepare())
  prep:start(function()
    local gap = timer:timeout()
    if gap == nil or gap > 0 then
      runner.gc_idle(timer, budget, gap)
      uv.update_time()
    end
  end)
  return prep
end

function M.attach(timer, opts)
  runner.check_timer(timer, "attach", 2)
  local o = runner.options(opts, OPTIONS, 2, "attach")
  local poll = assert(uv.new_poll(timer:getfd()))
  poll:start("r", function(err)
    assert(not err, err)
    timer:dispatch()
  end)
  local budget = runner.gc_budget(o.gc_step)
  if budget then prepares[poll] = gc_prepare(timer, budget) end
  return poll
end

function M.detach(poll)
  poll:stop()
  if not poll:is_closing() then poll:close() end
  local prep = prepares[poll]
  if prep then
    prepares[poll] = nil
    prep:stop()
    if not prep:is_closing() then prep:close() end
  end
end

return M
