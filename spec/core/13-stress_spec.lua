-- Stress: many timeouts over a few seconds; callbacks cancel others and
-- schedule new ones. At the end scheduled = fired + cancelled exactly,
-- nothing pending, every callback ran once, none early.
-- HWT_STRESS_N sets the number (make check: 1,000,000; default 100,000).
local hwtimer = require("hwtimer")

local N = tonumber(os.getenv("HWT_STRESS_N")) or 100000

describe("stress", function()
  it("accounts for every one of " .. N .. " timeouts exactly", function()
    local timer = hwtimer.new()
    local handles, state = {}, {}
    local scheduled, fired, cancelled, early, twice = 0, 0, 0, 0, 0
    math.randomseed(11)

    local callback
    local function add(delay)
      scheduled = scheduled + 1
      local id = scheduled
      handles[id] = assert(timer:schedule(delay, callback, id))
      state[id] = "pending"
    end

    function callback(t, id)
      if state[id] ~= "pending" then twice = twice + 1 end
      state[id], handles[id] = "fired", nil
      fired = fired + 1
      if hwtimer.now() < t:deadline() then early = early + 1 end
      local victim = math.random(1, scheduled) -- cancel someone, maybe already done
      local h = handles[victim]
      if h and h:cancel() then
        state[victim], handles[victim] = "cancelled", nil
        cancelled = cancelled + 1
      end
      for _ = 1, 2 do -- and schedule new ones, some due at once
        if scheduled < N then add(math.random() < 0.1 and 0 or math.random() * 0.3) end
      end
    end

    for _ = 1, math.floor(N / 4) do add(math.random() * 0.5) end
    timer:run(60)

    assert.equal(N, scheduled)
    assert.equal(0, timer:pending())
    assert.equal(scheduled, fired + cancelled)
    assert.equal(0, twice)
    assert.equal(0, early)
    local f, c = 0, 0
    for id = 1, N do
      if state[id] == "fired" then f = f + 1 elseif state[id] == "cancelled" then c = c + 1 end
    end
    assert.equal(fired, f)
    assert.equal(cancelled, c)
    timer:close()
  end)
end)
