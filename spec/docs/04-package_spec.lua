-- What a luarocks user installs: two rocks whose module lists cover the tree,
-- and a durable front that says which rock is missing instead of failing.
local helpers = require("spec.helpers")

-- A rockspec's fields, read as the Lua it is.
local function rockspec(path)
  local env = {}
  local fn = assert(helpers.load(helpers.read_file(path), "=" .. path))
  if setfenv then setfenv(fn, env) else debug.setupvalue(fn, 1, env) end
  fn()
  return env
end

local lines_of = helpers.lines_of

-- The set of source files of a rockspec's builtin build, from the tree's top
-- (a rock that builds in a folder of the tree names them from there).
local function files_of(spec)
  local files, dir = {}, (spec.source.dir or ""):match("^[^/]+/(.+)$")
  local prefix = dir and dir .. "/" or ""
  for _, m in pairs(spec.build.modules) do
    if type(m) == "string" then files[prefix .. m] = true else
      for _, src in ipairs(m.sources) do files[prefix .. src] = true end
    end
  end
  return files
end

describe("the rocks", function()
  local VERSION = require("hwtimer")._VERSION
  local core = rockspec("rockspec/hwtimer-" .. VERSION .. "-1.rockspec")
  local sqlite = rockspec("rockspec/hwtimer-sqlite-" .. VERSION .. "-1.rockspec")

  it("are at the module's version, MIT like the LICENSE file", function()
    assert.equal(VERSION .. "-1", core.version)
    assert.equal(VERSION .. "-1", sqlite.version)
    assert.same({ "lua >= 5.1", "hwtimer == " .. VERSION }, sqlite.dependencies)
    assert.equal("MIT", core.description.license)
    assert.equal("MIT", sqlite.description.license)
    assert.matches("^MIT License\n", helpers.read_file("LICENSE"))
  end)

  it("install every Lua file and C source of the tree, each in one rock", function()
    local a, b = files_of(core), files_of(sqlite)
    local tree = lines_of("ls lua/*.lua lua/hwtimer/*.lua lua/hwtimer/durable/*.lua csrc/*.c csrc/durable/*.c")
    assert.is_true(#tree >= 20)
    for _, f in ipairs(tree) do
      assert.is_true(a[f] ~= b[f], f .. " is in " .. (a[f] and "both rocks" or "no rock"))
    end
  end)

  it("keep SQLite out of hwtimer: only hwtimer-sqlite links it, as an external dependency", function()
    assert.is_nil(core.external_dependencies)
    assert.same({ header = "sqlite3.h" }, sqlite.external_dependencies.SQLITE)
    assert.is_nil(core.build.modules["hwtimer.sqlite"])
    for _, m in pairs(core.build.modules) do
      if type(m) == "table" then
        for _, lib in ipairs(m.libraries) do assert.is_not.equal("sqlite3", lib) end
      end
    end
    assert.same({ "hwtimer.sqlite" }, (function()
      local names = {}
      for name in pairs(sqlite.build.modules) do names[#names + 1] = name end
      return names
    end)())
  end)

  it("build hwtimer-sqlite in a folder with no lua/ in it (luarocks would install all of lua/ with it)", function()
    assert.equal("hwtimer-" .. VERSION .. "/csrc", sqlite.source.dir)
    assert.is_nil(io.open("csrc/lua"), "csrc/lua exists")
  end)

  it("install hwtimer-jobs with hwtimer: a Lua script luarocks wraps", function()
    assert.same({ ["hwtimer-jobs"] = "bin/hwtimer-jobs" }, core.build.install.bin)
    assert.is_nil(sqlite.build.install)
    assert.equal("#!/usr/bin/env lua\n", helpers.read_file("bin/hwtimer-jobs"):match("^[^\n]*\n"))
    assert.is_true(helpers.sh("test -x bin/hwtimer-jobs"))
  end)

  it("have scm rockspecs with the same modules", function()
    for _, r in ipairs({ "hwtimer", "hwtimer-sqlite" }) do
      local release = rockspec("rockspec/" .. r .. "-" .. VERSION .. "-1.rockspec")
      local scm = rockspec("rockspec/" .. r .. "-scm-1.rockspec")
      assert.same(release.build, scm.build)
    end
  end)
end)

describe("durable.open with a path where hwtimer-sqlite is not installed", function()
  local durable = require("hwtimer.durable")
  local hwtimer = require("hwtimer")
  local saved = {}
  local timer

  -- Hide the SQLite engine and C module from require for one call.
  local function without_sqlite(fn)
    saved.path, saved.cpath = package.path, package.cpath
    for _, m in ipairs({ "hwtimer.durable.sqlite", "hwtimer.sqlite" }) do
      saved[m], package.loaded[m] = package.loaded[m], nil
    end
    package.path, package.cpath = "", ""
    local ok, a, b = pcall(fn)
    package.path, package.cpath = saved.path, saved.cpath
    for _, m in ipairs({ "hwtimer.durable.sqlite", "hwtimer.sqlite" }) do
      package.loaded[m], package.preload[m] = saved[m], nil
    end
    if not ok then error(a, 0) end
    return a, b
  end

  before_each(function() timer = hwtimer.new() end)
  after_each(function() timer:close() end)

  it("returns nil and names the rock when the engine is missing", function()
    local q, err = without_sqlite(function() return durable.open(timer, { path = "/tmp/x.db" }) end)
    assert.is_nil(q)
    assert.equal("hwtimer.durable: SQLite stores need the hwtimer-sqlite rock (luarocks install "
      .. "hwtimer-sqlite; or make install where libsqlite3-dev is installed): module "
      .. "'hwtimer.durable.sqlite' not found", err)
  end)

  it("returns nil and names the rock when only the C module is missing, every time", function()
    local q, err = without_sqlite(function()
      package.preload["hwtimer.durable.sqlite"] = function() return require("hwtimer.sqlite") end
      local q1, err1 = durable.open(timer, { path = "/tmp/x.db" })
      assert.is_nil(q1)
      assert.equal(err1, select(2, durable.open(timer, { path = "/tmp/x.db" })))
      return q1, err1
    end)
    assert.is_nil(q)
    assert.equal("hwtimer.durable: SQLite stores need the hwtimer-sqlite rock (luarocks install "
      .. "hwtimer-sqlite; or make install where libsqlite3-dev is installed): module "
      .. "'hwtimer.sqlite' not found", err)
  end)

  it("raises any other error of the engine as it is", function()
    assert.has_error(function()
      without_sqlite(function()
        package.preload["hwtimer.durable.sqlite"] = function() error("engine broken", 0) end
        return durable.open(timer, { path = "/tmp/x.db" })
      end)
    end, "engine broken")
  end)
end)
