-- instructions.lua: W1's schedule and cancel counted in instructions of the
-- Lua thread (valgrind's callgrind), for hwtimer and its Lua peers. W1's
-- nanoseconds move with the machine (this shared one has run the same build
-- 2-3x slower for days); instruction counts do not: the same build, inputs
-- and environment give the same count whatever else the machine does. So a
-- change to the hot path can be judged on any day, against its peers or
-- against an older build (point LUA_PATH/LUA_CPATH at it). Counts leave out
-- cache misses, which are most of a schedule's time at 10^6 pending: they
-- rank code, W1's times rank the machine and the code together.
--
-- usage: lua5.4 bench/instructions.lua [runs] [scale] [out]
--   runs   medians of (default 3); scale of W1's 10^6 timeouts (default 0.1:
--          100,000; one run's four cuts of one system ~20 s on 2 cores);
--          out: a file for the table (make bench: bench/results_instructions.txt)
local RUNS = tonumber(arg[1]) or 3
local SCALE = tonumber(arg[2]) or 0.1
local OUT = arg[3]
local DIR = arg[0]:match("^(.*)/") or "."
local LUA = os.getenv("HWT_LUA") or "lua5.4"
local TMP = os.getenv("TMPDIR") or "/tmp"

-- True when the shell command succeeded (Lua 5.3+, as the rest of this file).
local function run(cmd)
  return os.execute(cmd) == true
end

-- A file's text, or nil where the run wrote none.
local function slurp(path)
  local f = io.open(path)
  local s = f and f:read("a")
  if f then f:close() end
  return s
end

if not run("command -v valgrind >/dev/null 2>&1") then
  print("bench/instructions.lua skipped: needs valgrind (Debian: valgrind)")
  os.exit(0)
end

-- The Lua thread's instruction counts of run.lua's w1cut stopped after each
-- step, 0-3, the four runs at once (a count does not depend on what runs
-- beside it). --separate-threads writes one file per thread; thread 1 is the
-- Lua thread (hwtimer's worker is thread 2: not counted).
local function count_steps(system)
  local base = string.format("%s/hwt_ir.%d", TMP, math.random(1e9))
  local cmds = {}
  for step = 0, 3 do
    cmds[#cmds + 1] = string.format("HWT_W1_STEP=%d valgrind --tool=callgrind --separate-threads=yes"
      .. " --callgrind-out-file=%s.%d %s %s/run.lua %s w1cut %s > %s.%d.out 2>&1 &",
      step, base, step, LUA, DIR, system, SCALE, base, step)
  end
  run(table.concat(cmds, " ") .. " wait")
  local c, n = {}, nil
  for step = 0, 3 do
    local text = slurp(string.format("%s.%d-01", base, step))
    local out = slurp(string.format("%s.%d.out", base, step)) or ""
    c[step] = text and tonumber(text:match("\nsummary:%s*(%d+)") or text:match("\ntotals:%s*(%d+)"))
    n = n or tonumber(out:match("n=(%d+)"))
    if not (c[step] and n) then
      run("rm -f " .. base .. ".*")
      error(system .. " step " .. step .. " failed: " .. out)
    end
  end
  run("rm -f " .. base .. ".*")
  return c, n
end

local function median(t)
  table.sort(t)
  local m = #t
  return m % 2 == 1 and t[(m + 1) // 2] or (t[m // 2] + t[m // 2 + 1]) / 2
end

-- Counts still move a little from run to run (~3 %): Lua 5.4 seeds its
-- string hashes with the time and addresses, and the worker thread's lock
-- is sometimes contended; hence the median of RUNS.
local systems = { "hwtimer", "luv", "heap" }
local rows = {}
for _, system in ipairs(systems) do
  local sched, cancel, n = {}, {}, nil
  for r = 1, RUNS do
    local c
    c, n = count_steps(system)
    sched[r], cancel[r] = (c[1] - c[0]) / n, (c[3] - c[2]) / n
    io.stderr:write(string.format("[instructions %s run %d] schedule %.0f cancel %.0f (n=%d)\n",
      system, r, sched[r], cancel[r], n))
  end
  rows[system] = { schedule = median(sched), cancel = median(cancel), n = n }
end

local function best_peer(k)
  local b
  for _, s in ipairs(systems) do
    if s ~= "hwtimer" and (not b or rows[s][k] < b) then b = rows[s][k] end
  end
  return b
end

local lines = {
  string.format("W1 in instructions of the Lua thread (callgrind), %d timeouts, medians of %d runs, %s UTC",
    rows.hwtimer.n, RUNS, os.date("!%Y-%m-%d %H:%M")),
  string.format("%-26s %9s %9s %9s %12s", "figure", "hwtimer", "luv", "heap", "vs best peer"),
}
for _, k in ipairs({ "schedule", "cancel" }) do
  lines[#lines + 1] = string.format("%-26s %9.0f %9.0f %9.0f %11.2fx", "W1 " .. k .. " (instructions)",
    rows.hwtimer[k], rows.luv[k], rows.heap[k], rows.hwtimer[k] / best_peer(k))
end
local text = table.concat(lines, "\n") .. "\n"
io.write(text)
if OUT then
  local f = assert(io.open(OUT, "w"))
  f:write(text)
  f:close()
end
