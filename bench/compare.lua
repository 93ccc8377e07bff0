-- bench/compare.lua: one build beside another in one run (make bench-compare).
--
-- On this VM a figure moves 2-3x from one hour to the next, so a figure is
-- only held against another measured in the same run. Each round runs every
-- workload on three builds back to back, in an order that rotates from round
-- to round: BASE, NEW, and NEW again (an A/A pair: the same build twice, whose
-- difference is the noise of this run). A figure's ratio is the median over
-- the rounds of NEW against BASE in the same round; its spread is the largest
-- A/A difference of any round. A figure worse than BASE by more than its
-- spread fails the run (exit 1).
--
-- usage: lua5.4 bench/compare.lua BASE_DIR NEW_DIR [rounds] [scale]
-- Each DIR holds lua/ and build/5.4/hwtimer/core.so, and build/jit/... for
-- the nginx workloads (run where nginx and its Lua module are installed).
-- The harness (bench/run.lua, bench/ngx.lua) is this tree's, for both builds.
local BASE_DIR, NEW_DIR = arg[1], arg[2]
local ROUNDS = tonumber(arg[3]) or 5
local SCALE = tonumber(arg[4]) or 1
assert(BASE_DIR and NEW_DIR, "usage: lua5.4 bench/compare.lua BASE_DIR NEW_DIR [rounds] [scale]")
local HERE = arg[0]:match("^(.*)/") or "."
local LUA = os.getenv("HWT_LUA") or "lua5.4"

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local function abs(dir)
  if dir:sub(1, 1) == "/" then return dir end
  local p = io.popen("pwd")
  local cwd = p:read("*l")
  p:close()
  return cwd .. "/" .. dir
end

local builds = {
  { name = "base", dir = abs(BASE_DIR) },
  { name = "new", dir = abs(NEW_DIR) },
  { name = "new'", dir = abs(NEW_DIR) }, -- the A/A twin
}
for _, b in ipairs(builds) do
  assert(exists(b.dir .. "/build/5.4/hwtimer/core.so"), b.dir .. ": no build/5.4/hwtimer/core.so")
end
local have_ngx = exists("/usr/sbin/nginx") and exists("/usr/lib/nginx/modules/ngx_http_lua_module.so")
for _, b in ipairs(builds) do
  have_ngx = have_ngx and exists(b.dir .. "/build/jit/hwtimer/core.so")
end

local function plain(dir, workload)
  return ("LUA_PATH='%s/lua/?.lua;%s/lua/?/init.lua;;' LUA_CPATH='%s/build/5.4/?.so;;' %s %s/run.lua hwtimer %s %g")
    :format(dir, dir, dir, LUA, HERE, workload, SCALE)
end

local function in_nginx(work, n, ahead)
  return function(dir)
    return ("HWT_NGX_PATH='%s/lua/?.lua' HWT_NGX_CPATH='%s/build/jit/?.so' %s %s/ngx.lua one %s %d %g")
      :format(dir, dir, LUA, HERE, work, math.floor(n * SCALE), ahead)
  end
end

-- Each job: one process a build a round, and the figures read off its line
-- (key, label, and which way is better).
local w4_sizes = SCALE >= 1 and { 1000, 100000, 1000000, 4000000 } or { 1000, 10000, 100000 }
local jobs = {
  { cmd = function(d) return plain(d, "w1") end, figures = {
    { "schedule_ns", "W1 schedule (ns)", "low" },
    { "cancel_ns", "W1 cancel (ns)", "low" },
    { "bytes", "W1 bytes per pending", "low" } } },
  { cmd = function(d) return plain(d, "w2c") end, figures = {
    { "callbacks_per_s", "W2c callbacks per s", "high" } } },
  { cmd = function(d) return plain(d, "w4") end, figures = {} },
}
for _, p in ipairs(w4_sizes) do
  table.insert(jobs[3].figures, { "pair_ns_" .. p, ("W4 pair at %g pending (ns)"):format(p), "low" })
end
if have_ngx then
  jobs[#jobs + 1] = { cmd = in_nginx("count", 200000, 0.2), figures = {
    { "callbacks_per_s", "W6a nginx, due 0.2 s ahead (/s)", "high" } } }
  jobs[#jobs + 1] = { cmd = in_nginx("count", 200000, 0.01), figures = {
    { "callbacks_per_s", "W6a nginx, due 10 ms ahead (/s)", "high" } } }
  jobs[#jobs + 1] = { cmd = in_nginx("io", 2000, 0.2), figures = {
    { "callbacks_per_s", "W6b nginx, cosocket trips (/s)", "high" } } }
end

local function run(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  local ok = p:close()
  local line = out:match("(system=%S+ workload=%S+[^\n]*)")
  if not (ok and line) then
    io.stderr:write("bench/compare.lua: failed: ", cmd, "\n", out, "\n")
    os.exit(2)
  end
  local t = {}
  for k, v in line:gmatch("(%S+)=(%S+)") do t[k] = tonumber(v) end
  return t
end

-- values[label][build name] = { one per round }
local values = {}
for r = 1, ROUNDS do
  for j, job in ipairs(jobs) do
    for i = 0, #builds - 1 do
      local b = builds[(i + r + j) % #builds + 1] -- the order turns each round and job
      local got = run(job.cmd(b.dir))
      for _, f in ipairs(job.figures) do
        local key, label = f[1], f[2]
        assert(got[key], label .. ": no " .. key .. " in the output")
        values[label] = values[label] or {}
        values[label][b.name] = values[label][b.name] or {}
        values[label][b.name][r] = got[key]
      end
    end
    io.stderr:write(("[round %d of %d] %s done\n"):format(r, ROUNDS, job.figures[1][2]))
  end
end

local function median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  local n = #c
  return n % 2 == 1 and c[(n + 1) / 2] or (c[n / 2] + c[n / 2 + 1]) / 2
end

-- How much faster x is than ref (above 1: x is better), whichever way is better.
local function speed(x, ref, better)
  if better == "low" then return ref / x end
  return x / ref
end

local function fmt(v)
  if v >= 1e5 then return ("%.3gM"):format(v / 1e6) end
  if v >= 100 then return ("%.0f"):format(v) end
  return ("%.3g"):format(v)
end

print(("bench-compare: %d rounds, scale %g, %s"):format(ROUNDS, SCALE, os.date("!%Y-%m-%d %H:%M UTC")))
print(("  base: %s\n  new:  %s"):format(BASE_DIR, NEW_DIR))
print(("%-34s %9s %9s %9s %10s  %s"):format("figure (medians)", "base", "new", "new/base", "A/A spread", "verdict"))
local worse = {}
for _, job in ipairs(jobs) do
  for _, f in ipairs(job.figures) do
    local label, better = f[2], f[3]
    local v = values[label]
    local ratios, spread = {}, 0
    for r = 1, ROUNDS do
      ratios[r] = speed(v.new[r], v.base[r], better)
      spread = math.max(spread, math.abs(speed(v["new'"][r], v.new[r], better) - 1))
    end
    local ratio = median(ratios)
    local verdict = ratio < 1 - spread and "WORSE" or ratio > 1 + spread and "better" or "level"
    if verdict == "WORSE" then worse[#worse + 1] = label end
    print(("%-34s %9s %9s %8.2fx %9.1f%%  %s"):format(label, fmt(median(v.base)), fmt(median(v.new)),
      ratio, spread * 100, verdict))
  end
end
if not have_ngx then print("(W6a/W6b not run: needs nginx, libnginx-mod-http-lua and both builds for LuaJIT)") end
print("new/base: above 1 is better (a time divided into base's, or a rate into new's), the median of")
print("the rounds' paired ratios. A/A spread: the largest difference between the new build and itself")
print("in any round. WORSE: below 1 by more than that spread.")
if #worse > 0 then
  print("worse than base: " .. table.concat(worse, ", "))
  os.exit(1)
end
