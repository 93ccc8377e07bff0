-- make check-mutants-random: mutants nobody chose. spec/mutants/sites.lua
-- finds every candidate mutant of lua/ and csrc/ (not csrc/test/) by token
-- rules; a seed picks N of them uniformly (the same N for the same seed and
-- tree); each is planted in a scratch copy and the specs that cover its
-- file run there (stopping at the first failure, each file for at most
-- HWT_MUTANT_LIMIT seconds: a mutant that makes a spec hang is killed by
-- the time limit). Those in spec/mutants/equivalents.lua are skipped.
--   lua5.4 spec/mutants/random.lua SEED N [THRESHOLD]
-- A mutant that survives on 5.4 is run again on 5.1 (the branches of a Lua
-- without string.pack or integers: LuaJIT's in nginx), and a line of C is
-- judged on a Lua it is compiled for.
-- A mutant that does not load (Lua) or build (C; an implicit declaration is
-- an error) is stillborn, not counted; one of C that builds with a warning
-- is caught by make test's lint-c, one of Lua that luacheck warns of (a
-- deleted `local` leaves a global read) by make test's lint.
-- A spec file that catches a mutant is run once on the unmutated tree too
-- (once per run): if it fails there, its mutants are "unjudged", not caught.
-- Fails when fewer than THRESHOLD % (default 90) of the counted mutants are
-- caught; prints each survivor's diff.
local C = dofile("spec/mutants/common.lua")
local sites = dofile("spec/mutants/sites.lua")
local equivalents = dofile("spec/mutants/equivalents.lua")

local SEED = math.floor(tonumber(arg[1]) or 1)
local N = math.floor(tonumber(arg[2]) or 200)
local THRESHOLD = tonumber(arg[3]) or 90
local LIMIT = tonumber(os.getenv("HWT_MUTANT_LIMIT")) or 120
local JOBS = tonumber(os.getenv("HWT_MUTANT_JOBS")) or 2
local shard = tonumber(os.getenv("HWT_MUTANT_SHARD"))
local claims = os.getenv("HWT_MUTANT_CLAIMS")
-- Tests known to fail on the unmutated tree (parts of their names, split
-- by "|"), left out of every run.
-- HWT_MUTANT_ONLY=3,25: only those of the sample (to look at survivors again);
-- HWT_MUTANT_LIST=1: only print the sample.
local ONLY
for i in (os.getenv("HWT_MUTANT_ONLY") or ""):gmatch("%d+") do ONLY = ONLY or {}; ONLY[tonumber(i)] = true end
-- HWT_MUTANT_FILES=ngx%.lua$|ldispatch: a sample of those files only (Lua
-- patterns, split by "|"), to look at one part closely; not CI's sample.
local FILES
for pat in (os.getenv("HWT_MUTANT_FILES") or ""):gmatch("[^|]+") do FILES = FILES or {}; FILES[#FILES + 1] = pat end
local FILTER_OUT = {}
for part in (os.getenv("HWT_MUTANT_FILTER_OUT") or ""):gmatch("[^|]+") do FILTER_OUT[#FILTER_OUT + 1] = part end

local covers = dofile("spec/mutants/cover.lua")
local cover, ring = covers.cover, covers.ring

-- The Lua versions a line of C is compiled for: the #if LUA_VERSION_NUM
-- conditions around it (any other condition is taken as true). A mutant in
-- a part only 5.1 builds (lua_getfenv) is judged on 5.1, not 5.4.
local NUMS = { ["5.4"] = 504, ["5.3"] = 503, ["5.2"] = 502, ["5.1"] = 501 }
local function compiled_for(text, line)
  local stack, n = {}, 0
  local function cond(expr)
    -- (compat.h: packs live in the handle from 5.4 on)
    if expr:match("^%s*HWT_PACK_IN_HANDLE%s*$") then expr = "LUA_VERSION_NUM >= 504" end
    local op, num = expr:match("^%s*LUA_VERSION_NUM%s*([<>=!]+)%s*(%d+)%s*$")
    num = tonumber(num)
    return function(v)
      if not op then return true end
      if op == ">=" then return v >= num elseif op == ">" then return v > num
      elseif op == "<=" then return v <= num elseif op == "<" then return v < num
      elseif op == "==" then return v == num elseif op == "!=" then return v ~= num end
      return true
    end
  end
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if n == line then break end
    local d, rest = l:match("^%s*#%s*(%a+)(.*)$")
    if d == "if" then stack[#stack + 1] = { now = cond(rest), taken = cond(rest) }
    elseif d == "ifdef" or d == "ifndef" then stack[#stack + 1] = { now = cond(""), taken = cond("") }
    elseif (d == "elif" or d == "else") and #stack > 0 then
      local top, c = stack[#stack], cond(d == "elif" and rest or "")
      local taken = top.taken
      top.now = function(v) return not taken(v) and c(v) end
      top.taken = function(v) return taken(v) or c(v) end
    elseif d == "endif" then stack[#stack] = nil end
  end
  return function(v)
    for _, e in ipairs(stack) do if not e.now(NUMS[v]) then return false end end
    return true
  end
end
local function lua_for(m, v)
  if not m.file:match("^csrc/") or v ~= "5.4" then return v end
  local on = compiled_for(C.read(m.file), m.line)
  for _, w in ipairs({ "5.4", "5.1", "5.3", "5.2" }) do if on(w) then return w end end
  return v
end
local function compiled_on(m, v)
  return not m.file:match("^csrc/") or compiled_for(C.read(m.file), m.line)(v)
end

-- Every candidate, in a fixed order (files sorted, then by line).
local function files()
  local p = assert(io.popen("find lua csrc -path csrc/test -prune -o -type f "
    .. "\\( -name '*.lua' -o -name '*.c' -o -name '*.h' \\) -print | LC_ALL=C sort"))
  local out = {}
  for f in p:lines() do
    local keep = FILES == nil
    for _, pat in ipairs(FILES or {}) do keep = keep or f:find(pat) ~= nil end
    if keep then out[#out + 1] = f end
  end
  p:close()
  return out
end

local function identity(file, from, to) return file .. "\0" .. from .. "\0" .. to end

local skip = {}
for _, e in ipairs(equivalents) do skip[identity(e.file, e.from, e.to)] = e end

-- An entry with `after` (the text of the line before) names only the
-- mutant of its line where the same line is written in several places.
local pool = {}
for _, file in ipairs(files()) do
  local text, lines = C.read(file), {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  for _, m in ipairs(sites.find(text, file:match("%.lua$") and "lua" or "c")) do
    m.file = file
    local e = skip[identity(file, m.from, m.to)]
    m.equivalent = e and (e.after == nil or e.after == lines[m.line - 1])
      or m.from:match("^%s*return%s+NULL%s*;") and m.to:match("^%s*return%s+0%s*;") -- (NULL is 0 in C: the same program)
    pool[#pool + 1] = m
  end
end

-- The seed's sample: a Park-Miller generator (exact in doubles, the same on
-- every Lua) drives a partial Fisher-Yates shuffle of the pool; the first
-- N that are not known equivalents are the sample (an equivalent found
-- later leaves the rest of the sample as it was).
local state = SEED % 2147483646 + 1
local function random(n)
  state = (state * 16807) % 2147483647
  return state % n + 1
end
local sample, skipped = {}, 0
for i = 1, #pool do
  if #sample == N then break end
  local j = i - 1 + random(#pool - i + 1)
  pool[i], pool[j] = pool[j], pool[i]
  if pool[i].equivalent then
    skipped = skipped + 1
  else
    sample[#sample + 1] = pool[i]
  end
end
for i, m in ipairs(sample) do m.index, m.skip = i, ONLY and not ONLY[i] end

local function diff(m)
  return string.format("--- %s:%d (%s)\n-%s\n+%s", m.file, m.line, m.kind, m.from, m.to)
end

local function plant(text, m)
  local lines, n = {}, 0
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if n == m.line then
      assert(l == m.from, "the line moved")
      lines[#lines + 1] = m.to -- (a deleted line is left empty: the others keep their numbers)
    else
      lines[#lines + 1] = l
    end
  end
  if text:sub(-1) == "\n" then lines[#lines] = nil end
  return table.concat(lines, "\n") .. (text:sub(-1) == "\n" and "\n" or "")
end

local t0 = os.time()

-- HWT_MUTANT_LIST=1: print the sample (index and diff) and run nothing.
if os.getenv("HWT_MUTANT_LIST") == "1" then
  for i, m in ipairs(sample) do
    if not m.skip then print(string.format("%3d %s", i, diff(m))) end
  end
  os.exit(0)
end

-- The parent: every shard at once, their output straight through, then the
-- report from the results they left in the claims directory.
if not shard then
  print(string.format("check-mutants-random: seed %d, %d of %d candidates (%d equivalents drawn and skipped), %d shards",
    SEED, #sample, #pool, skipped, JOBS))
  io.stdout:flush()
  claims = C.mktemp("/tmp/hwtimer-claims.XXXXXX")
  local cmds = {}
  for k = 1, JOBS do
    cmds[k] = string.format("HWT_MUTANT_SHARD=%d HWT_MUTANT_CLAIMS=%s %s spec/mutants/random.lua %d %d &", k,
      C.q(claims), C.q(arg[-1] or "lua5.4"), SEED, N)
  end
  C.sh("{ " .. table.concat(cmds, " ") .. " wait; }")
  local count = { caught = 0, survived = 0, stillborn = 0, unjudged = 0, timeout = 0 }
  local survivors = {}
  for i, m in ipairs(sample) do
    if m.skip then goto next end
    local f = io.open(claims .. "/" .. i .. "/result", "rb")
    local r = f and f:read("*l") or "lost"
    if f then f:close() end
    local what = r:match("^(%a+)")
    count[what] = (count[what] or 0) + 1
    if r:match("%(timed out%)") then count.timeout = count.timeout + 1 end
    if what == "survived" then survivors[#survivors + 1] = m end
    ::next::
  end
  C.remove(claims)
  local counted = count.caught + count.survived
  local rate = counted > 0 and 100 * count.caught / counted or 100
  for _, m in ipairs(survivors) do print("\nsurvivor:\n" .. diff(m)) end
  print(string.format("\ncheck-mutants-random: seed %d, %d mutants%s: %d caught (%d of them by a time limit), "
    .. "%d survived, %d stillborn, %d unjudged (their spec fails unmutated), %d lost; %d equivalents skipped; "
    .. "%.1f %% of %d counted caught (threshold %g %%) in %d s", SEED, #sample, ONLY and " (some)" or "", count.caught, count.timeout,
    count.survived, count.stillborn, count.unjudged, count.lost or 0, skipped, rate, counted, THRESHOLD,
    os.time() - t0))
  -- (CI's closing line counts this one: the sample fails as one, below its threshold)
  local below = rate < THRESHOLD or count.lost
  print(string.format("%d passed, %d failed", below and 0 or 1, below and 1 or 0))
  os.exit((rate >= THRESHOLD and not count.lost) and 0 or 1)
end

-- A shard.
local dir = C.scratch()
-- A spec file's first failure on the unmutated tree (false if it passes),
-- once per shard: a mutant whose first failure is that same one is not
-- judged (load, a bug on the branch); one that fails earlier is caught.
local verified = {}
local function unmutated_failure(v, file)
  local key = v .. " " .. file
  if verified[key] == nil then
    local ok, _, out = C.run_specs(dir, v, { file }, LIMIT, nil, FILTER_OUT)
    verified[key] = not ok and (C.first_failure(out) or "?") or false
  end
  return verified[key]
end

local function build(v)
  -- (a declaration deleted that C99 lets the compiler guess is stillborn,
  -- not a survivor; other warnings, an unused variable left by a deleted
  -- line, do not stop a build of this Makefile, so they do not here)
  return C.sh(string.format("cd %s && make -s all LUA_VERSION=%s CFLAGS='-O2 -g -Werror=implicit-function-declaration' "
    .. ">%s/build.log 2>&1", C.q(dir), v, C.q(dir)))
end

-- make test's lint-c: the C clean under the project's warnings (a deleted
-- line that leaves a variable unset or unused is caught there).
local function warning_free(v)
  return C.sh(string.format("cd %s && make -s lint-c-one LUA_VERSION=%s >%s/lint-c.log 2>&1", C.q(dir), v, C.q(dir)))
end
-- make test's lint: luacheck over the mutated Lua file, with the tree's
-- .luacheckrc (a deleted `local` leaves a global read, which it reports).
-- The first warning, or nil where it is clean.
local function luacheck_warning(file)
  local log = dir .. "/luacheck.log"
  if C.sh(string.format("cd %s && luacheck --no-color -q --formatter plain %s >%s 2>&1", C.q(dir), C.q(file), C.q(log)))
  then return nil end
  local out = C.read(log)
  return out:match("^[^\n]-:%d+:%d+: ([^\n]*)") or error("luacheck failed with no warning of " .. file .. ":\n" .. out, 0)
end
-- (a failure that names no line of ours is the run's, not the mutant's: it stops the run)
local function warning(log)
  local w = log:match("csrc/[^\n]-: warning: ([^\n]*)") or log:match("csrc/[^\n]-: error: ([^\n]*)")
  return w or error("make lint-c-one failed with no warning of csrc/:\n" .. log, 0)
end

-- The specs that cover a mutant on Lua v, one file at a time up to the
-- first that fails: passed?, what failed, its log.
local function run_cover(v, specs)
  local ok, failed, out = true, "", ""
  for _, spec in ipairs(specs) do
    if spec == "test-c" or spec == "check-failalloc" then
      out = dir .. "/" .. spec .. ".log"
      ok = C.sh(string.format("cd %s && timeout %d make -s %s >%s 2>&1", C.q(dir), LIMIT, spec, C.q(out)))
      failed, out = "make " .. spec, C.read(out)
    else -- ("FILE#PART": only the tests of FILE whose names hold PART)
      local file, part = spec:match("^([^#]+)#(.+)$")
      ok, failed, out = C.run_specs(dir, v, { file or spec }, LIMIT, part and { part }, FILTER_OUT)
    end
    if not ok then break end
  end
  return ok, failed, out
end

for i, m in ipairs(sample) do
  if not m.skip and C.claim(claims, i) then
    local path = dir .. "/" .. m.file
    local original = C.read(path)
    local mutated = plant(original, m)
    local v, specs = cover(m.file)
    v = lua_for(m, v)
    local started = os.time()
    local result
    C.write(path, mutated)
    local is_lua = m.file:match("%.lua$")
    local loads = is_lua and load(mutated, "=" .. m.file)
    local lint = loads and luacheck_warning(m.file)
    if is_lua and not loads then
      result = "stillborn (does not load)"
    elseif lint then
      result = "caught by make lint (luacheck: " .. lint .. ")"
    elseif m.file:match("^csrc/") and not build(v) then
      result = "stillborn (does not build)"
    elseif m.file:match("^csrc/") and not warning_free(v) then
      result = "caught by make lint-c (a warning: " .. warning(C.read(dir .. "/lint-c.log")) .. ")"
    else
      local ok, failed, out = run_cover(v, specs)
      local first_v = v
      -- A survivor on 5.4 is tried on 5.1 too, where the code takes the
      -- branches of a Lua without string.pack, integers or uservalues
      -- (LuaJIT's, in nginx), if its line is compiled there; one of a Lua
      -- file on LuaJIT also (5.1 names no parameters: the nginx specs are
      -- pending there, the plain ones run).
      if ok and (v == "5.4" or (v == "jit" and m.file:match("%.lua$"))) and compiled_on(m, "5.1")
        and (m.file:match("%.lua$") or build("5.1")) then
        v = "5.1"
        ok, failed, out = run_cover(v, specs)
      end
      -- A file both plain Lua and nginx run (the Redis client, the queue)
      -- takes branches only in nginx (a pooled cosocket, ngx.*): a survivor
      -- runs its cover's nginx specs on LuaJIT too (a file of csrc/ is
      -- built for LuaJIT first).
      if ok and specs.ngx and (m.file:match("%.lua$") or build("jit")) then
        v = "jit"
        ok, failed, out = run_cover(v, specs.ngx)
      end
      -- Then the rest of its area's spec files, on the Lua it ran first.
      local more = ok and ring(m.file, specs) or {}
      if #more > 0 then
        v = first_v
        ok, failed, out = C.run_specs(dir, v, more, LIMIT, nil, FILTER_OUT)
        failed = (failed:match("^(%S+)") or failed) .. (ok and "" or " (its area's other specs)")
      end
      if ok then
        local ngx_specs = specs.ngx and " " .. table.concat(specs.ngx, " ") or ""
        result = "survived " .. table.concat(specs, " ") .. ngx_specs .. (#more > 0 and " and its area's " .. #more .. " others" or "")
      else
        C.write(path, original)
        local first = failed:match("^(%S+)")
        local how = C.first_failure(out)
        if not (first and first:match("_spec%.lua$")) then
          result = "caught by " .. failed
        elseif how and unmutated_failure(v, first) == how then
          result = "unjudged: " .. first .. " fails unmutated at the same test: " .. how
        else
          result = "caught by " .. failed .. (how and how:match("timed out$") and " (timed out)" or "")
        end
      end
    end
    C.write(path, original)
    C.sh("mkdir -p " .. C.q(claims .. "/" .. i))
    C.write(claims .. "/" .. i .. "/result", result .. "\n")
    print(string.format("%3d  %-9s %s:%d %s: %s (Lua %s, %d s)", i, result:match("^%a+"), m.file, m.line, m.kind,
      result:gsub("^%a+%s*", ""), v, os.time() - started))
    if result:match("^survived") then print(diff(m)) end
    io.stdout:flush()
  end
end
C.remove(dir)
