-- What spec/mutants/run.lua (the hand-written mutants) and
-- spec/mutants/random.lua (the generated ones) share: the shell, the
-- scratch copy of the tree, a spec run in it with busted's flags and a time
-- limit, and the claims by which shards split the mutants between them.
local M = {}

function M.sh(cmd)
  local ok, _, code = os.execute(cmd)
  if type(ok) == "number" then return ok == 0, ok end -- Lua 5.1
  return ok == true, code
end

function M.read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function M.write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

function M.q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

function M.mktemp(template)
  local p = assert(io.popen("mktemp -d " .. template))
  local dir = p:read("*l")
  p:close()
  return dir
end

-- The scratch copy: the work tree without build/, dist/ and .git.
function M.scratch()
  local dir = M.mktemp("/tmp/hwtimer-mutants.XXXXXX")
  assert(M.sh("bash -o pipefail -c " .. M.q("tar --exclude=./build --exclude=./dist --exclude=./.git -cf - . | tar -xf - -C " .. dir)),
    "could not copy the tree")
  return dir
end

function M.remove(dir) M.sh("rm -rf " .. M.q(dir)) end

-- Busted's flags for a mutant: stop at the first failure and, where the
-- mutant names them (`filter`: parts of test names), run only the tests
-- that concern it. Each part becomes a Lua pattern that matches it, every
-- character but a letter or a digit a dot, so that the flags need no quotes.
-- `filter_out` (parts of test names too) leaves tests out.
function M.flags(filter, filter_out)
  local f = { "--no-keep-going" }
  for _, text in ipairs(filter or {}) do f[#f + 1] = "--filter=" .. text:gsub("[^%w]", ".") end
  for _, text in ipairs(filter_out or {}) do f[#f + 1] = "--filter-out=" .. text:gsub("[^%w]", ".") end
  return table.concat(f, " ")
end

-- Run `specs` on Lua `v` in the copy, each file for at most `limit` seconds
-- (spec/run.sh kills a file past it and counts it failed: a mutant that
-- makes a spec hang is caught by the time limit), only the tests `filter`
-- names (all if nil) but those `filter_out` names; returns passed?, the
-- failing file(s), log. One file at a time (SPEC_JOBS=1): the shards are
-- what runs side by side here.
function M.run_specs(dir, v, specs, limit, filter, filter_out)
  local log = dir .. "/mutant.log"
  local cmd = string.format("cd %s && HWT_SPEC_LIMIT=%d make -s test-spec SPEC_JOBS=1 LUA_VERSION=%s "
    .. "BUSTED_FLAGS=%s SPECS=%s >%s 2>&1", M.q(dir), limit, v, M.q(M.flags(filter, filter_out)),
    M.q(table.concat(specs, " ")), log)
  local passed = M.sh(cmd)
  local out = M.read(log)
  local failed = out:match("spec files failed: ([^\n]*)") or (passed and "" or "the build")
  return passed, failed, out
end

-- The first test that failed in a log ("FILE: timed out" for a file cut
-- short by its limit), nil if none.
function M.first_failure(out)
  local name = out:match("\n[FE][a-z]+r[a-z]* %-> [^\n]*\n([^\n]*)")
  if name then return name end
  local timed = out:match("\n([^\n:]+): timed out after")
  return timed and timed .. ": timed out" or nil
end

-- Whether busted ran a test at all in a log (a filter can match none).
function M.ran_any(out)
  for n in out:gmatch("(%d+) success[es]* /") do -- ("1 success", "2 successes")
    if tonumber(n) > 0 then return true end
  end
  return false
end

-- A shard's next mutant: one no other shard has claimed (mkdir is atomic).
function M.claim(claims, i)
  return not claims or M.sh("mkdir " .. M.q(claims .. "/" .. i) .. " 2>/dev/null")
end

return M
