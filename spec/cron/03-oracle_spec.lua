-- hwtimer.cron against croniter (Debian's python3-croniter, 1.3.5), the
-- oracle: random expressions and start times (a fixed seed, the same cases
-- on every Lua) in six zones, a third of the starts within two days of a
-- UTC offset change, next and prev. One python3 process answers them all
-- (the cases go through a temporary file). Each case where croniter
-- answers otherwise is classified by the rule that explains it, exactly
-- (spec/cron/croniter_model.lua: hwtimer.cron made to follow croniter's day
-- rule, its DST handling, or both, must give croniter's answer); any other
-- disagreement fails. The counts go to stderr.
local cron = require("hwtimer.cron")
local tzif = require("hwtimer.tzif")
local helpers = require("spec.helpers")
local cases = require("spec.cron.cases")
local croniter = require("spec.cron.croniter_model")

local PYTHON = "/usr/bin/python3" -- Debian's, where python3-croniter is installed
local SEED = tonumber(os.getenv("HWT_CRON_SEED")) or 20261124
-- 5000 cases take ~1 s on Lua 5.4 (croniter included); under valgrind (HWT_SLOW, make
-- check-valgrind) 2000 took 5 s
local N = tonumber(os.getenv("HWT_CRON_CASES"))
  or os.getenv("HWT_SLOW") and 2000 or os.getenv("HWT_QUICK") and 2000 or 5000
local ZONES = { "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
                "America/Sao_Paulo" }

-- The Python side: one line in, one line out, "id epoch" or "id ERR name".
local ORACLE_PY = [[
import sys
from datetime import datetime
from zoneinfo import ZoneInfo
from importlib.metadata import version
from croniter import croniter
print("version", version("croniter"))
zones = {}
for line in open(sys.argv[1]):
    i, kind, tz, start, expr = line.rstrip("\n").split("|")
    z = zones.get(tz) or zones.setdefault(tz, ZoneInfo(tz))
    try:
        it = croniter(expr, datetime.fromtimestamp(float(start), z))
        print(i, int(it.get_next(float) if kind == "next" else it.get_prev(float)))
    except Exception as e:
        print(i, "ERR", type(e).__name__)
]]

local function have_croniter()
  return helpers.sh(PYTHON .. " -c 'import croniter' 2>/dev/null")
end

-- The cases: { expr, croniter's expr (seconds last), tz, start, kind, six }.
local function make_cases()
  local r = cases.rng(SEED)
  local list = {}
  for i = 1, N do
    local expr, six = cases.expression(r, { croniter = true })
    local tz = ZONES[r(1, #ZONES)]
    local start = r(946684800, 2840140800) -- 2000 to 2060
    if r(1, 3) == 1 then -- within two days of the next offset change
      local _, b = assert(tzif.load(tz)):segment(start)
      if b then start = b + r(-2 * 86400, 2 * 86400) end
    end
    if r(1, 4) == 1 then start = start + r(1, 999) / 1000 end
    list[i] = { expr = expr, tz = tz, start = start, six = six,
                kind = r(1, 4) == 1 and "prev" or "next",
                theirs_expr = six and expr:gsub("^(%S+) (.*)$", "%2 %1") or expr }
  end
  return list
end

-- croniter's answers, by case index, and its version.
local function ask_croniter(list)
  local dir = helpers.tempdir("hwtimer-cron")
  local f = assert(io.open(dir .. "/cases", "w"))
  for i, c in ipairs(list) do
    f:write(string.format("%d|%s|%s|%.3f|%s\n", i, c.kind, c.tz, c.start, c.theirs_expr))
  end
  f:close()
  f = assert(io.open(dir .. "/oracle.py", "w"))
  f:write(ORACLE_PY)
  f:close()
  local answers, version, other = {}, nil, {}
  for _, line in ipairs(helpers.lines_of(string.format("%s %s/oracle.py %s/cases 2>&1", PYTHON, dir, dir))) do
    local i, v = line:match("^(%d+) (.*)$")
    if i then
      answers[tonumber(i)] = v
    elseif line:match("^version ") then
      version = line:match("^version (.*)")
    else
      other[#other + 1] = line
    end
  end
  assert(version, "the oracle did not start:\n" .. table.concat(other, "\n"))
  helpers.sh("rm -rf " .. dir)
  return answers, version
end

-- The rules that may explain a disagreement, alone and together.
local RULES = {
  { name = "day rule", day = true }, { name = "DST", dst = true },
  { name = "day rule + DST", day = true, dst = true },
  { name = "Feb 29", feb29 = true }, { name = "day rule + Feb 29", day = true, feb29 = true },
  { name = "DST + Feb 29", dst = true, feb29 = true },
  { name = "day rule + DST + Feb 29", day = true, dst = true, feb29 = true },
}

-- "agree", the name of the first set of rules that explains croniter's
-- answer `theirs` (a string) for case c, or "disagree".
local function classify(c, ours, theirs)
  if tostring(ours) == theirs then return "agree" end
  for _, rule in ipairs(RULES) do
    if tostring(croniter.answer(c, rule)) == theirs then return rule.name end
  end
  return "disagree"
end

local function describe_case(c, ours, theirs)
  local zone = tzif.load(c.tz)
  local function show(t)
    t = tonumber(t)
    if not t then return tostring(t) end
    local off = zone:offset(math.floor(t))
    return os.date("!%Y-%m-%d %H:%M:%S", math.floor(t) + off) .. string.format(" %+.2g h", off / 3600)
  end
  return string.format("%s(%q) in %s from %s (%.3f): hwtimer.cron %s, croniter %s", c.kind, c.expr,
    c.tz, show(c.start), c.start, show(ours), theirs and (theirs:match("ERR") and theirs or show(theirs)))
end

describe("hwtimer.cron against croniter", function()
  it(string.format("agrees on %d random cases in %d zones but where a stated rule explains it", N,
    #ZONES), function()
    if not have_croniter() then
      return pending(PYTHON .. " has no croniter (Debian: apt-get install python3-croniter)")
    end
    local list = make_cases()
    local answers, version = ask_croniter(list)
    local counts, bad = { agree = 0, disagree = 0 }, {}
    for _, rule in ipairs(RULES) do counts[rule.name] = 0 end
    for i, c in ipairs(list) do
      local cr = assert(cron.parse(c.expr, { tz = c.tz }))
      local ours = cr[c.kind](cr, c.start)
      local class = classify(c, ours, answers[i])
      counts[class] = counts[class] + 1
      if class == "disagree" and #bad < 20 then bad[#bad + 1] = describe_case(c, ours, answers[i]) end
    end
    local known = {}
    for _, rule in ipairs(RULES) do known[#known + 1] = rule.name .. " " .. counts[rule.name] end
    io.stderr:write(string.format("\ncron oracle: croniter %s, %d cases (seed %d): %d agree, %d differ by "
      .. "a known rule (%s), %d disagree\n", tostring(version), N, SEED, counts.agree,
      N - counts.agree - counts.disagree, table.concat(known, ", "), counts.disagree))
    assert(#bad == 0, "unexplained disagreements:\n" .. table.concat(bad, "\n"))
    assert.is_true(counts.agree >= N * 0.7, "too few agreements: " .. counts.agree)
  end)
end)
