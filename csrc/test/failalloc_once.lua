-- Driven by failalloc.c in "once" mode: one allocation along this script
-- fails, as a passing shortage would. What caught the error goes on; at the
-- end every accepted timeout ran once (none lost, none twice) unless it was
-- cancelled, the periodic one ran until its cancel returned true and not
-- once more, and nothing is pending:
-- the timer still works after the failure, wherever it hit (a schedule, a
-- cancel, a callback, its error's traceback, on_error, a periodic re-arm).
local function check(ok, what)
  if not ok then error("failalloc-check: " .. what, 0) end
end

local loaded, hwtimer = pcall(require, "hwtimer")
if not loaded then return end -- (the failure hit loading the module: nothing to check)
local N = 24
local runs, accepted, cancelled, handles = {}, {}, {}, {}
for i = 1, N + 1 do runs[i], accepted[i], cancelled[i], handles[i] = 0, false, false, false end
-- on_error gets the error, the handle and a traceback; a failure that left
-- no traceback gets one made up ("(no traceback)"), never a nil or the
-- made-up text in the error's place.
local reports_bad = false
local made, timer = pcall(hwtimer.new, { on_error = function(err, t, traceback)
  if type(traceback) ~= "string" or type(t) ~= "userdata" or err == traceback then reports_bad = true end
  -- (a traceback, or the error's text made up with "(no traceback)": never the text alone)
  if type(traceback) == "string" and not (traceback:find("stack traceback", 1, true)
    or traceback:find("(no traceback)", 1, true)) then reports_bad = true end
end })
if not (made and timer) then return end

local function count(_, id) runs[id] = runs[id] + 1 end
-- (every other one an error object: its text is made by __tostring)
local BOOM = setmetatable({}, { __tostring = function() return "boom object" end })
local function raise(_, id)
  runs[id] = runs[id] + 1
  error(id % 10 == 0 and BOOM or "boom")
end
for i = 1, N do
  local ok, t = pcall(timer.schedule, timer, (i % 3) / 1000, i % 5 == 0 and raise or count, i)
  if ok and t then accepted[i], handles[i] = true, t end
end
local stopped_at = false -- the periodic one's runs when its cancel returned true
local ok, p = pcall(timer.every, timer, 0.001, function(t, id)
  runs[id] = runs[id] + 1
  -- (the call itself may fail for memory: it runs again, and cancels then)
  if runs[id] >= 3 and not stopped_at and t:cancel() then stopped_at = runs[id] end
end, N + 1)
if ok and p then accepted[N + 1] = true end
for i = 1, N, 4 do
  local t = handles[i]
  if t then
    local done, was = pcall(t.cancel, t)
    if done and was then cancelled[i] = true end
  end
end

local rounds = 0
repeat
  pcall(timer.dispatch, timer)
  rounds = rounds + 1
  local waited = pcall(timer.run, timer, 0.002)
until (waited and timer:pending() == 0) or rounds > 500
check(timer:pending() == 0, "timeouts still pending after 500 rounds")
check(not reports_bad, "on_error was given no traceback, or the traceback in the error's place")
for i = 1, N do
  if accepted[i] then
    check(runs[i] == (cancelled[i] and 0 or 1), "timeout " .. i .. " ran " .. runs[i] .. " times")
  else
    check(runs[i] == 0, "timeout " .. i .. " was refused and ran")
  end
end
check(runs[N + 1] == (accepted[N + 1] and stopped_at or 0), "the periodic timeout ran " .. runs[N + 1] ..
      " times, cancelled after run " .. tostring(stopped_at))
check(not accepted[N + 1] or runs[N + 1] >= 3, "the periodic timeout ran " .. runs[N + 1] .. " times")
pcall(timer.close, timer)

-- stop() hands back what never ran: a failure on the way (the list grows)
-- must lose none of them; stop again gives the rest.
local made2, timer2 = pcall(hwtimer.new)
if not (made2 and timer2) then return end
local pending2 = 0
for i = 1, 40 do
  local ok2, t = pcall(timer2.schedule, timer2, 60 + i, count, 1)
  if ok2 and t then pending2 = pending2 + 1 end
end
local back = 0
for _ = 1, 3 do
  local stopped, list = pcall(timer2.stop, timer2)
  if stopped then back = back + #list end
end
check(back == pending2, "stop handed back " .. back .. " of " .. pending2 .. " pending timeouts")
check(timer2:pending() == 0, "pending after stop: " .. timer2:pending())

-- take and done (the hosts whose callbacks yield): a callback with many
-- arguments grows the stack as take hands it out.
local made3, timer3 = pcall(hwtimer.new)
if not (made3 and timer3) then return end
timer3:take_only()
local taken, accepted3 = {}, {}
for i = 1, 6 do taken[i], accepted3[i] = 0, false end
local function many(_, id) taken[id] = taken[id] + 1 end
for i = 1, 6 do
  local ok3, t = pcall(timer3.schedule, timer3, 0, many, i, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                       16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36)
  if ok3 and t then accepted3[i] = true end
end
local function take_one()
  local t, fn, id = timer3:take()
  if not t then return false end
  pcall(fn, t, id)
  timer3:done(t)
  return true
end
local turns = 0
repeat
  local went, more = pcall(take_one)
  turns = turns + 1
until (went and not more and timer3:pending() == 0) or turns > 200
for i = 1, 6 do
  check(taken[i] == (accepted3[i] and 1 or 0), "taken timeout " .. i .. " ran " .. taken[i] .. " times")
end
check(timer3:pending() == 0, "taken timeouts still pending: " .. timer3:pending())
