-- Schedule/cancel storms while the worker expires timeouts at a 1 ms tick
-- and drains spans ahead of time: the Lua thread and the worker contend for
-- the wheel all the time. Nothing accepted is lost or run twice.
-- (make check runs this under ThreadSanitizer.)
local hwtimer = require("hwtimer")

describe("storm", function()
  it("survives a second of schedule/cancel against a busy worker", function()
    local timer = hwtimer.new({ tick = 0.001, wheel_size = 16 }) -- small: many drains
    local scheduled, fired, cancelled, twice, after_cancel = 0, 0, 0, 0, 0
    local seen, live, was_cancelled = {}, {}, {}
    -- counted here, asserted after the run (an assert in a callback would go
    -- to the timer's on_error and be lost)
    local function cb(_, id)
      if seen[id] then twice = twice + 1 end
      if was_cancelled[id] then after_cancel = after_cancel + 1 end
      seen[id] = true
      live[id] = nil
      fired = fired + 1
    end
    math.randomseed(13)
    local stop_at = hwtimer.now() + 1
    while hwtimer.now() < stop_at do
      for _ = 1, 200 do
        scheduled = scheduled + 1
        live[scheduled] = timer:schedule(math.random() * 0.03, cb, scheduled)
        local victim = scheduled - math.random(0, 50)
        local h = live[victim]
        if h and h:cancel() then
          live[victim] = nil
          was_cancelled[victim] = true
          cancelled = cancelled + 1
        end
      end
      timer:dispatch()
    end
    timer:run(5)
    assert.equal(0, timer:pending())
    assert.equal(0, twice, "ran twice")
    assert.equal(0, after_cancel, "ran after a cancel that returned true")
    assert.equal(scheduled, fired + cancelled)
    timer:close()
  end)
end)
