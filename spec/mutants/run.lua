-- make check-mutants: plants each small bug of spec/mutants/list.lua, one at
-- a time, in a scratch copy of the tree, runs the specs that concern it
-- (make test-spec SPECS=... in the copy, stopping at the first failure) and
-- fails if any mutant survives. A mutant whose text is not found exactly
-- once in its file fails too: the list must follow the code.
--   lua5.4 spec/mutants/run.lua [TEXT...]   (only the mutants whose name has a TEXT)
-- The mutants run in HWT_MUTANT_JOBS shards at once (default 2), each in a
-- copy of its own, each taking the next mutant no shard has claimed: most
-- of a mutant's time is spent waiting (on servers, on timeouts), and load
-- can only make a spec fail, never let a mutant survive.
local list = dofile("spec/mutants/list.lua")
local LIMIT = tonumber(os.getenv("HWT_MUTANT_LIMIT")) or 240 -- seconds a spec file may take
local JOBS = tonumber(os.getenv("HWT_MUTANT_JOBS")) or 2
local shard = tonumber(os.getenv("HWT_MUTANT_SHARD"))
local claims = os.getenv("HWT_MUTANT_CLAIMS") -- a directory: mutant i is claimed by making i in it

local C = dofile("spec/mutants/common.lua")
local sh, read, write, q, scratch = C.sh, C.read, C.write, C.q, C.scratch

local function run_specs(dir, v, specs, limit, filter) return C.run_specs(dir, v, specs, limit or LIMIT, filter) end

local function count_once(s, text)
  local n, init = 0, 1
  while true do
    local i = s:find(text, init, true)
    if not i then return n end
    n, init = n + 1, i + 1
  end
end

local t0 = os.time()
local chosen = {}
for _, m in ipairs(list) do
  local wanted = #arg == 0
  for _, text in ipairs(arg) do wanted = wanted or m.name:find(text, 1, true) ~= nil end
  if wanted then chosen[#chosen + 1] = m end
end
assert(#chosen > 0, "no mutant's name has " .. table.concat(arg, " or "))

-- The specs must pass on the unmutated tree, or nothing can be judged: run
-- once, before any shard starts. (HWT_MUTANT_BASELINE=0 skips this where
-- they have just passed on this tree: CI runs make test first.)
local function baseline()
  if os.getenv("HWT_MUTANT_BASELINE") == "0" then return end
  local dir, sets = scratch(), {}
  for _, m in ipairs(chosen) do
    sets[m.lua] = sets[m.lua] or {}
    for _, f in ipairs(m.specs) do sets[m.lua][f] = true end
  end
  for v, set in pairs(sets) do
    local files = {}
    for f in pairs(set) do files[#files + 1] = f end
    table.sort(files)
    local ok, failed, out = run_specs(dir, v, files)
    if not ok then
      io.write(out:sub(-3000), "\n")
      print("check-mutants: the unmutated specs fail on Lua " .. v .. " (" .. failed .. "): no mutant can be judged")
      sh("rm -rf " .. q(dir))
      os.exit(1)
    end
  end
  sh("rm -rf " .. q(dir))
end

-- The parent: one child per shard, all at once; their reports in turn, then
-- the sum. (A child's pipe holds its few lines until it is read.)
if not shard and JOBS > 1 and #chosen > 1 then
  baseline()
  local args = {}
  for i = 1, #arg do args[i] = q(arg[i]) end
  local p = assert(io.popen("mktemp -d /tmp/hwtimer-claims.XXXXXX"))
  claims = p:read("*l")
  p:close()
  local children = {}
  for k = 1, JOBS do
    children[k] = assert(io.popen(string.format(
      "HWT_MUTANT_BASELINE=0 HWT_MUTANT_SHARD=%d HWT_MUTANT_CLAIMS=%s %s spec/mutants/run.lua %s 2>&1",
      k, q(claims), q(arg[-1] or "lua5.4"), table.concat(args, " "))))
  end
  local caught, failed, survivors = 0, 0, {}
  local function report(child, k)
    for line in child:lines() do
      local c, f = line:match("^(%d+) passed, (%d+) failed$")
      if c then
        caught, failed = caught + tonumber(c), failed + tonumber(f)
      else
        local i = line:match("^%s*(%d+)%s+SURVIVED ")
        if i then survivors[#survivors + 1] = tonumber(i) end
        print(line)
      end
      io.stdout:flush()
    end
    local done, _, code = child:close()
    if not done or (code and code ~= 0) then
      -- (counted by what it printed, below)
      print("check-mutants: shard " .. k .. " failed")
    end
  end
  for k, child in ipairs(children) do report(child, k) end
  sh("rm -rf " .. q(claims))
  -- A survivor is run once more with nothing beside it: a spec whose
  -- catch depends on a quiet machine shows up by name (FLAKY) rather than
  -- as a survivor nobody can reproduce; one that survives again is one.
  local again = survivors
  survivors = {}
  for _, i in ipairs(again) do
    local p2 = assert(io.popen("mktemp -d /tmp/hwtimer-claims.XXXXXX"))
    local alone = p2:read("*l")
    p2:close()
    for j = 1, #chosen do
      if j ~= i then sh("mkdir " .. q(alone .. "/" .. j)) end
    end
    failed = failed - 1 -- its count comes again from the run alone
    local before = caught
    report(assert(io.popen(string.format(
      "HWT_MUTANT_BASELINE=0 HWT_MUTANT_SHARD=0 HWT_MUTANT_CLAIMS=%s %s spec/mutants/run.lua %s 2>&1",
      q(alone), q(arg[-1] or "lua5.4"), table.concat(args, " ")))), "alone")
    sh("rm -rf " .. q(alone))
    if caught > before then
      print(string.format("%2d  FLAKY    %s: survived beside another shard, caught alone", i, chosen[i].name))
    end
  end
  for _, i in ipairs(survivors) do print(string.format("check-mutants: survived twice: %d %s", i, chosen[i].name)) end
  print(string.format("check-mutants: %d shards, %d mutants, %d caught, %d not caught in %d s", JOBS, #chosen,
    caught, failed, os.time() - t0))
  print(string.format("%d passed, %d failed", caught, failed))
  -- (A shard that failed only by its survivors, all caught alone, is not a
  -- failure; one that died before its count leaves caught short.)
  os.exit(failed == 0 and caught == #chosen and 0 or 1)
end

local ran_any = C.ran_any
local function claim(i) return C.claim(claims, i) end

if not shard then baseline() end
local dir = scratch()
local mine, caught, survived, broken = 0, 0, {}, {}
for i, m in ipairs(chosen) do
  if claim(i) then
    mine = mine + 1
    local path = dir .. "/" .. m.file
    local original = read(path)
    local n = count_once(original, m.from)
    if n ~= 1 then
      broken[#broken + 1] = m.name
      print(string.format("%2d  LIST     %s: its text is found %d times in %s, not once", i, m.name, n, m.file))
    else
      local a = original:find(m.from, 1, true)
      write(path, original:sub(1, a - 1) .. m.to .. original:sub(a + #m.from))
      local started = os.time()
      local ok, failed, out = run_specs(dir, m.lua, m.specs, m.limit, m.filter)
      write(path, original)
      if ok and m.filter and not ran_any(out) then -- (a test renamed: the list must follow)
        broken[#broken + 1] = m.name
        print(string.format("%2d  LIST     %s: its filter matches no test of %s", i, m.name, table.concat(m.specs, " ")))
      elseif ok then
        survived[#survived + 1] = m.name
        print(string.format("%2d  SURVIVED %s (%s on Lua %s)", i, m.name, table.concat(m.specs, " "), m.lua))
      else
        caught = caught + 1
        print(string.format("%2d  caught   %s: by %s (Lua %s, %d s)", i, m.name, failed, m.lua, os.time() - started))
      end
    end
    io.stdout:flush()
  end
end
sh("rm -rf " .. q(dir))

print(string.format("check-mutants%s: %d mutants, %d caught, %d survived, %d not found in %d s",
  shard and (shard == 0 and " (alone)" or " (shard " .. shard .. ")") or "", mine, caught, #survived, #broken, os.time() - t0))
print(string.format("%d passed, %d failed", caught, #survived + #broken))
os.exit((#survived == 0 and #broken == 0) and 0 or 1)
