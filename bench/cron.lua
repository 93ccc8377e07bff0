-- bench/cron.lua: what a calendar schedule's times cost. hwtimer.cron
-- beside cron-parser (BullMQ's job schedulers compute their next times
-- with it), in the same run when node and bench/bullmq's packages are
-- installed (make bench-bullmq installs them). For each expression and
-- zone: microseconds a next() when each call starts where the last one's
-- time was (a schedule's runs, one after another), microseconds to parse
-- and take the first time (a schedule made or changed), their ratios, and
-- whether both name the same first COMPARE times from 2026-01-01.
--   lua5.4 bench/cron.lua [scale]      (scale 1: 20,000 calls a figure,
--                                       cron-parser a hundredth of that)
package.path = "./?.lua;./lua/?.lua;" .. package.path
local cron = require("hwtimer.cron")
local clock = os.clock

local SCALE = tonumber(arg[1]) or 1
local N = math.max(100, math.floor(20000 * SCALE))
local N_PEER = math.max(10, math.floor(N / 100)) -- cron-parser takes ~1 ms a call: keep the run short
local START, COMPARE = 1767225600, 200 -- 2026-01-01 00:00 UTC
local CASES = {
  { "*/5 * * * *", "UTC", "every 5 minutes" },
  { "30 2 * * *", "Europe/Berlin", "02:30 daily, a time daylight saving skips once a year" },
  { "0 9 * * 1-5", "America/New_York", "09:00 on weekdays" },
  { "0 0 29 2 *", "UTC", "February 29: a match every 4 years" },
}

local function us_per_next(c)
  local t, t0 = START, clock()
  for _ = 1, N do t = c:next(t) end
  return (clock() - t0) * 1e6 / N
end

local function us_per_first(expr, tz)
  local t0 = clock()
  for i = 1, N do assert(cron.parse(expr, { tz = tz })):next(START + i * 61) end
  return (clock() - t0) * 1e6 / N
end

-- cron-parser's lines, by case number; nil (and why) without node or its packages.
local function peer()
  local js = "bench/bullmq/cron.js"
  if not io.open("bench/bullmq/node_modules/cron-parser/package.json") then
    return nil, "bench/bullmq's packages are not installed (make bench-bullmq)"
  end
  local found = os.execute("command -v node >/dev/null 2>&1")
  if found ~= true and found ~= 0 then return nil, "no node" end -- (5.1 and LuaJIT: a status number)
  local cmd = { "node", js, START, N_PEER, COMPARE }
  for _, c in ipairs(CASES) do cmd[#cmd + 1] = ("'%s' '%s'"):format(c[1], c[2]) end
  local p = assert(io.popen(table.concat(cmd, " ")))
  local out = {}
  for line in p:lines() do
    local k = tonumber(line:match("^case=(%d+)"))
    if k then
      out[k] = { next = tonumber(line:match("next_ns=(%d+)")) / 1e3, first = tonumber(line:match("first_ns=(%d+)")) / 1e3,
                 times = line:match("times=([%d,]*)") }
    end
  end
  if not p:close() or not out[#CASES] then return nil, "node bench/bullmq/cron.js failed" end
  return out
end

-- Whether c names the times `peer` (comma-separated epoch seconds) does;
-- where not, the first that differs, as UTC.
local function compare(c, peer_times)
  local t, i = START, 0
  for pt in peer_times:gmatch("%d+") do
    i = i + 1
    t = c:next(t)
    if tonumber(pt) ~= t then
      local f = "!%Y-%m-%d %H:%M"
      return ("differ from the %dth: hwtimer.cron %s UTC, cron-parser %s UTC"):format(i, os.date(f, t),
        os.date(f, tonumber(pt)))
    end
  end
  return ("the first %d times agree"):format(i)
end

local peers, why = peer()
if not peers then print("bench/cron.lua: cron-parser skipped: " .. why) end
for k, case in ipairs(CASES) do
  local expr, tz, what = case[1], case[2], case[3]
  local c = assert(cron.parse(expr, { tz = tz }))
  us_per_next(c) -- warm (LuaJIT compiles)
  local nxt = math.min(us_per_next(c), us_per_next(c))
  local first = math.min(us_per_first(expr, tz), us_per_first(expr, tz))
  local line = ("schedule %q %s (%s): hwtimer.cron next %.2f us, parse and first time %.2f us"):format(
    expr, tz, what, nxt, first)
  local p = peers and peers[k]
  if p then
    line = line .. ("; cron-parser %.2f us and %.2f us (%.1fx and %.1fx); %s"):format(
      p.next, p.first, p.next / nxt, p.first / first, compare(c, p.times))
  end
  print(line)
end
