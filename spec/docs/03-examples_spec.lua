-- Every runnable example, run as its own process, so that none rots.
local helpers = require("spec.helpers")

local function have(module)
  return (pcall(require, module))
end

-- `args`: the script's command-line arguments (arg[1], ...).
local function run_example(path, args)
  local prelude = ""
  for i, a in ipairs(args or {}) do prelude = prelude .. string.format("arg[%d] = %q ", i, a) end
  return helpers.run_lua(prelude .. helpers.read_file(path))
end

describe("examples", function()
  local cases = {
    { "examples/loops/plain.lua", nil, "first\nsecond\ndone" },
    { "examples/loops/luasocket.lua", "socket", "fired 3, done" },
    { "examples/loops/luv.lua", "luv", "fired 3, done" },
    { "examples/loops/cqueues.lua", "cqueues", "fired 3, done" },
    { "examples/loops/copas.lua", "copas", "fired 3, done" },
    { "examples/request_timeouts.lua", nil, "answered 90, timed out 10" },
    { "examples/heartbeats.lua", nil, "500 connections, " },
    { "examples/failback_retry.lua", nil, "registered on attempt " },
    { "examples/idle_reaper.lua", nil, "reaped 4,5,1,2,3" },
    { "examples/orders.lua", "hwtimer.sqlite", "closed order 1, order 3; order 2 was paid", { "1" } },
    -- (500 connections for 2 s; it exits 1 when a callback ran early or the counts do not add up)
    { "examples/demo.lua", nil, "accounting  scheduled = fired + cancelled + left: ok", { "500", "2" } },
  }
  for _, case in ipairs(cases) do
    local path, needs, expect, args = case[1], case[2], case[3], case[4]
    it(path, function()
      if needs and not have(needs) then
        return pending(needs .. " is not installed for " .. _VERSION)
      end
      local out, ok = run_example(path, args)
      assert.is_true(ok, out)
      assert.matches(expect, out, 1, true)
    end)
  end
end)
