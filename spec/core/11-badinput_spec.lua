-- Bad input, for every public function: wrong types, NaN, infinities,
-- negative and out-of-range values, a wrong self. Each gets an error that
-- names the argument, on every Lua version; none crashes.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local NAN, INF = 0 / 0, math.huge
local f = function() end

local timer_methods = { "schedule", "every", "dispatch", "run", "pending", "getfd", "dirty",
                        "pollfd", "events", "timeout", "stats", "count", "stop", "close" }
local timeout_methods = { "cancel", "state", "is_pending", "is_expired", "is_cancelled",
                          "deadline", "remaining", "timer", "task" }

-- Call obj.<name>(self, ...) as a field call, the way Lua names it in errors
-- (never as a tail call: that loses the name).
local function call(obj, name, self, ...)
  local chunk = helpers.load("local o, s = ...; local r = o." .. name .. "(s, select(3, ...)) return r")
  return chunk(obj, self, ...)
end

local function expect(n, name, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, name .. " accepted bad input")
  assert.matches("bad argument #" .. n .. " to '" .. name .. "'", tostring(err), 1, true)
end

describe("bad input", function()
  local timer, handle
  before_each(function()
    timer = hwtimer.new()
    handle = timer:schedule(100, f)
  end)
  after_each(function() timer:close() end)

  it("hwtimer.new: every option, every wrong value", function()
    local bad = { "x", true, 1, { tick = NAN }, { tick = INF }, { tick = -INF }, { tick = -1 },
                  { tick = 0 }, { tick = 1e9 }, { tick = "1" }, { wheel_size = NAN },
                  { wheel_size = INF }, { wheel_size = -1 }, { wheel_size = 1e9 },
                  { wheel_size = 1.5 }, { max_pending = NAN }, { max_pending = INF },
                  { max_pending = -1 }, { max_pending = {} }, { on_error = 1 },
                  { on_error = "f" }, { nope = 1 }, { [1] = 1 } }
    for _, opts in ipairs(bad) do
      expect(1, "new", function() local r = hwtimer.new(opts) return r end)
    end
  end)

  it("schedule and every: delay and callback", function()
    for _, d in ipairs({ NAN, INF, -INF, 1e10, "x", {}, true }) do
      expect(1, "schedule", function() local r = timer:schedule(d, f) return r end)
      expect(1, "every", function() local r = timer:every(d, f) return r end)
    end
    expect(1, "schedule", function() local r = timer:schedule(nil, f) return r end)
    for _, d in ipairs({ 0, -1, -INF }) do
      expect(1, "every", function() local r = timer:every(d, f) return r end)
    end
    for _, cb in ipairs({ 1, "f", {}, true }) do
      expect(2, "schedule", function() local r = timer:schedule(1, cb) return r end)
      expect(2, "every", function() local r = timer:every(1, cb) return r end)
    end
    expect(2, "schedule", function() local r = timer:schedule(1) return r end)
    assert.equal(1, timer:pending()) -- only the before_each one
  end)

  it("every's table: every field, every wrong value, unknown keys", function()
    local bad = { {}, { interval = 0 }, { interval = NAN }, { interval = "1" },
                  { interval = 1, jitter = 2 }, { interval = 1, jitter = NAN },
                  { interval = 1, first = -1 }, { interval = 1, first = NAN },
                  { interval = 1, first = INF }, { interval = 1, first = 1e10 },
                  { interval = 1, first = "0" }, { interval = 1, ratee = true },
                  { interval = 1, [1] = true }, { interval = 1, [true] = 1 } }
    for _, p in ipairs(bad) do
      expect(1, "every", function() local r = timer:every(p, f) return r end)
    end
    assert.has_error(function() local r = timer:every({ interval = 1, ratee = true }, f) return r end,
      "bad argument #1 to 'every' (unknown option 'ratee')")
    assert.has_error(function() local r = timer:every({ interval = 1, first = -1 }, f) return r end,
      "bad argument #1 to 'every' (field 'first': non-negative number of seconds expected)")
    assert.has_error(function() local r = timer:every({ interval = 1, [1] = 2 }, f) return r end,
      "bad argument #1 to 'every' (option names must be strings)")
    assert.equal(1, timer:pending()) -- only the before_each one
  end)

  it("count: exactly one of the three names", function()
    for _, v in ipairs({ "retry_x", "", "scheduled", 1, {}, true }) do
      expect(1, "count", function() local r = timer:count(v) return r end)
    end
    expect(1, "count", function() local r = timer:count() return r end)
    assert.has_error(function() local r = timer:count("retry_startd") return r end,
      "bad argument #1 to 'count' (invalid option 'retry_startd')")
    assert.equal(0, timer:stats().retry_started)
  end)

  it("dispatch and run: counts and seconds", function()
    for _, v in ipairs({ -1, 1.5, NAN, INF, -INF, "x", {} }) do
      expect(1, "dispatch", function() local r = timer:dispatch(v) return r end)
    end
    for _, v in ipairs({ -1, NAN, INF, -INF, 1e10, "x", {} }) do
      expect(1, "run", function() local r = timer:run(v) return r end)
    end
  end)

  it("every timer method with a wrong self", function()
    for _, name in ipairs(timer_methods) do
      for _, self in ipairs({ 42, "x", {}, handle }) do
        expect(1, name, call, timer, name, self)
      end
      expect(1, name, call, timer, name, nil)
    end
  end)

  it("every timeout method with a wrong self", function()
    for _, name in ipairs(timeout_methods) do
      for _, self in ipairs({ 42, "x", {}, timer }) do
        expect(1, name, call, handle, name, self)
      end
      expect(1, name, call, handle, name, nil)
    end
  end)
end)
