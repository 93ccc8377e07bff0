-- The hand mutants' list follows the code: make check-mutants (an hour into
-- CI) fails on an entry whose text is gone or whose filter names no test;
-- this finds the same drift in make test's first minutes.
local helpers = require("spec.helpers")

local list = dofile("spec/mutants/list.lua")

local function count(s, text)
  local n, at = 0, 1
  while true do
    local a = s:find(text, at, true)
    if not a then return n end
    n, at = n + 1, a + 1
  end
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The names of the tests of each spec file that a filter of the list
-- concerns, as busted lists them (the describes' and the it's joined by
-- spaces) on this interpreter.
-- (A spec file may hold tests for one Lua only, nginx's for LuaJIT: a
-- mutant's filters are looked at on the Lua it runs on, each in its turn of
-- make test.)
local LUA = os.getenv("HWT_LUA") or "lua5.4"
local KIND = LUA:find("jit", 1, true) and "jit" or LUA:match("5%.%d")

-- The repeat runs (the rocks, the sanitizers, valgrind: HWT_QUICK or
-- HWT_SLOW) leave some tests pending, which busted then lists by the pending
-- line alone: the filters are looked at in the plain runs of each Lua.
local REPEAT = os.getenv("HWT_QUICK") or os.getenv("HWT_SLOW")
local function names_checked()
  if REPEAT then pending("filters are looked at in the plain runs of each Lua (here some tests are left out)") end
  return not REPEAT
end

local function test_names()
  local files, seen = {}, {}
  for _, m in ipairs(list) do
    for _, spec in ipairs(m.filter and m.lua == KIND and m.specs or {}) do
      if not seen[spec] then seen[spec], files[#files + 1] = true, spec end
    end
  end
  local cmd = {}
  for _, spec in ipairs(files) do
    cmd[#cmd + 1] = string.format("echo '== %s'; busted --lua=%s --list %s || echo '!! failed'", spec, LUA, spec)
  end
  local names, file = {}, nil
  for _, line in ipairs(helpers.lines_of(table.concat(cmd, "; ") .. " 2>&1")) do
    assert(line ~= "!! failed", "busted --list failed on " .. tostring(file))
    local f = line:match("^== (.+)$")
    if f then file, names[f] = f, {} else
      local name = line:match("^%S+:%d+: (.+)$")
      if name and file then names[file][#names[file] + 1] = name end
    end
  end
  return names
end

-- A filter as busted takes it (run.lua's flags: non-word characters as any).
local function matches_one(names, f)
  local pattern = f:gsub("[^%w]", ".")
  for _, name in ipairs(names or {}) do
    if name:find(pattern) then return true end
  end
  return false
end

describe("spec/mutants/list.lua", function()
  it("names each mutant once", function()
    local seen = {}
    for i, m in ipairs(list) do
      assert.is_nil(seen[m.name], "entry " .. i .. " has the name of entry " .. tostring(seen[m.name]))
      seen[m.name] = i
    end
  end)

  it("finds each mutant's text exactly once in its file, and the text it plants differs", function()
    for i, m in ipairs(list) do
      local where = "entry " .. i .. " (" .. m.name .. ")"
      assert.is_true(exists(m.file), where .. ": no file " .. m.file)
      assert.equal(1, count(helpers.read_file(m.file), m.from), where .. ": its text is not found once in " .. m.file)
      assert.are_not.equal(m.from, m.to, where)
    end
  end)

  it("runs each mutant on a Lua CI has, against spec files that exist, with filters that name their tests", function()
    if not names_checked() then return end
    local names = test_names()
    for i, m in ipairs(list) do
      local where = "entry " .. i .. " (" .. m.name .. ")"
      assert.is_truthy(({ ["5.1"] = 1, ["5.2"] = 1, ["5.3"] = 1, ["5.4"] = 1, jit = 1 })[m.lua], where .. ": lua " .. tostring(m.lua))
      assert.is_true(#m.specs > 0, where .. ": no spec")
      for _, spec in ipairs(m.specs) do assert.is_true(exists(spec), where .. ": no spec file " .. spec) end
      for _, f in ipairs(m.lua == KIND and m.filter or {}) do
        local found = false
        for _, spec in ipairs(m.specs) do found = found or matches_one(names[spec], f) end
        assert.is_true(found, where .. ": no test of " .. table.concat(m.specs, " ") .. " has " .. f .. " in its name")
      end
    end
  end)
end)

-- The generated mutants' runner (spec/mutants/random.lua) the same way: its
-- cover names spec files that exist and parts that name their tests (a part
-- that names none runs nothing, and every mutant of the file survives it),
-- and each equivalent skipped names a line its file still has.
describe("spec/mutants/cover.lua and equivalents.lua", function()
  local cover = dofile("spec/mutants/cover.lua")
  local equivalents = dofile("spec/mutants/equivalents.lua")

  it("cover each file of lua/ and csrc/ named with spec files that exist, parts naming their tests", function()
    if not names_checked() then return end
    local CI_LUA = { ["5.1"] = 1, ["5.2"] = 1, ["5.3"] = 1, ["5.4"] = 1, jit = 1 }
    local parts = {}
    for file, specs in pairs(cover.map) do
      assert.is_true(exists(file), "cover names no file " .. file)
      assert.is_truthy(CI_LUA[specs.lua or "5.4"], file .. ": lua " .. tostring(specs.lua))
      local function check(named, lua)
        for _, spec in ipairs(named) do
          local path, part = spec:match("^([^#]+)#?(.*)$")
          assert.is_true(path == "test-c" or path == "check-failalloc" or exists(path), file .. ": no spec file " .. path)
          if part ~= "" and lua == KIND then parts[#parts + 1] = { file, path, part } end
        end
      end
      check(specs, specs.lua or "5.4")
      check(specs.ngx or {}, "jit")
    end
    local names = {}
    for _, p in ipairs(parts) do
      if not names[p[2]] then
        names[p[2]] = {}
        for _, line in ipairs(helpers.lines_of(string.format("busted --lua=%s --list %s 2>&1", LUA, p[2]))) do
          local name = line:match("^%S+:%d+: (.+)$")
          if name then names[p[2]][#names[p[2]] + 1] = name end
        end
      end
      assert.is_true(matches_one(names[p[2]], p[3]), p[1] .. ": no test of " .. p[2] .. " has " .. p[3] .. " in its name")
    end
  end)

  it("name a line each file still has (after the line `after` names), a change, and why", function()
    for i, e in ipairs(equivalents) do
      local where = "equivalent " .. i .. " (" .. e.file .. ")"
      assert.is_true(exists(e.file), where .. ": no such file")
      local lines, found = helpers.lines_of("cat " .. e.file), false
      for n, l in ipairs(lines) do
        found = found or (l == e.from and (e.after == nil or lines[n - 1] == e.after))
      end
      assert.is_true(found, where .. ": no line " .. e.from)
      assert.are_not.equal(e.from, e.to, where)
      assert.is_true(type(e.reason) == "string" and #e.reason > 20, where .. ": no reason")
    end
  end)
end)
