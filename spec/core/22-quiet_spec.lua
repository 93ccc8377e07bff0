-- Where nothing goes wrong, nothing is written to stderr: the binding prints
-- only the errors it cannot raise (a callback's with no on_error, a
-- wake-up hook's, a timer collected with timeouts pending), so a line there
-- is a defect even when every result is right. Each case runs in a fresh
-- interpreter whose whole output is read.
local helpers = require("spec.helpers")

local PRELUDE = [[
local hwtimer = require("hwtimer")
local timer = hwtimer.new({ tick = 0.001 })
local ran = 0
local function count() ran = ran + 1 end
]]

local CASES = {
  { "resets, schedules and cancels on a timer with no wake-up hook nor wake socket", [[
    local t = timer:schedule(10, count)
    timer:timeout() -- (as a host that sleeps on the descriptor asks, before and between)
    for i = 1, 10000 do t:reset(i % 2 == 0 and 5 or 0.001) end
    timer:timeout()
    timer:schedule(0, count)
    timer:timeout()
    local e = timer:every(0.002, count)
    for _ = 1, 1000 do e:reset(0.001) end
    for i = 1, 1000 do timer:schedule(i % 3 == 0 and 0 or 0.001, count):cancel() end
    timer:run(0.05)
    t:cancel()
    e:cancel()
    assert(ran > 0)
  ]] },
  { "a wake-up hook set, called, then removed", [[
    local woken = 0
    local far = timer:schedule(10, count)
    timer:wakeup(function() woken = woken + 1 end)
    timer:timeout() -- (the host's planned wake-up: 10 s from now)
    timer:schedule(0, count)
    timer:wakeup(nil)
    local t = timer:schedule(10, count)
    for _ = 1, 1000 do t:reset(0) t:reset(10) end
    timer:dispatch()
    far:cancel()
    assert(woken >= 1)
  ]] },
  { "dispatch, run, take and done, stats and stop with timeouts pending", [[
    for i = 1, 100 do timer:schedule(i % 2 == 0 and 0 or 0.003, count) end
    timer:dispatch()
    timer:run(0.01)
    timer:schedule(0, count)
    timer:run(0.01)
    local s = timer:stats()
    assert(s)
    timer:schedule(3600, count)
    assert(#timer:stop() == 1)
  ]] },
  -- (the loops' runner reports a callback's error to on_error, and writes
  -- to stderr only where on_error itself raised)
  { "callbacks that raise in a cqueues loop, each taken by on_error", [[
    local cqueues = require("cqueues")
    local cq = cqueues.new()
    local errs = 0
    require("hwtimer.cqueues").attach(timer, cq, { on_error = function() errs = errs + 1 end })
    for _ = 1, 5 do timer:schedule(0.001, function() error("taken", 0) end) end
    local limit = hwtimer.now() + 5
    while errs < 5 and hwtimer.now() < limit do assert(cq:step(0.01)) end
    assert(errs == 5, errs .. " errors taken")
  ]], needs = "cqueues" },
  { "a retry that fails, then succeeds", [[
    local n = 0
    local r = hwtimer.retry(timer, function() n = n + 1 return n >= 3 end, { delay = 0.001, jitter = 0 })
    timer:run(1)
    assert(r:state() == "succeeded")
  ]] },
}

-- What it does print, it prints once a time and goes on: an on_error that
-- raises for each of 300 callbacks in one dispatch. Each of its errors is
-- let go at once (the binding's stack left as it found it): the one before
-- is collected by the time the next on_error runs.
describe("stderr where on_error raises", function()
  it("gets one line a callback, the dispatch runs all 300, and each error is let go", function()
    local out, ok = helpers.run_lua([[
      local hwtimer = require("hwtimer")
      local alive = setmetatable({}, { __mode = "k" })
      local most = 0
      local timer = hwtimer.new({ on_error = function()
        collectgarbage()
        local n = 0
        for _ in pairs(alive) do n = n + 1 end
        most = math.max(most, n)
        local e = setmetatable({}, { __tostring = function() return "on_error broke" end })
        alive[e] = true
        error(e)
      end })
      local ran = 0
      for _ = 1, 300 do timer:schedule(0, function() ran = ran + 1 error("callback broke", 0) end) end
      assert(timer:dispatch() == 300 and ran == 300)
      assert(most == 0, most .. " errors of on_error still held")
      timer:close()
      io.stdout:write('done')
    ]])
    assert.is_true(ok, out)
    out = out:gsub("exit=%d+%s*$", "")
    local rest, lines = out:gsub("hwtimer: error in on_error: [^\n]*\n", "")
    assert.same({ 300, "done" }, { lines, rest }, out)
  end)
end)

describe("stderr", function()
  for _, case in ipairs(CASES) do
    it("stays silent: " .. case[1], function()
      if case.needs and not pcall(require, case.needs) then return pending(case.needs .. " is not installed for " .. _VERSION) end
      local out, ok = helpers.run_lua(PRELUDE .. case[2] .. "\ntimer:close()\nio.stdout:write('done')\n")
      assert.is_true(ok, out)
      assert.equal("done", (out:gsub("exit=%d+%s*$", "")))
    end)
  end
end)
