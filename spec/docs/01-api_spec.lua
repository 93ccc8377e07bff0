-- The docs are the reference: every name in every luaL_Reg table of the
-- binding, and every public function of the Lua modules, must have a
-- "**syntax:**" line in README.md or one of docs/*.md (docs/api.md,
-- docs/hosts.md, docs/durable.md, docs/operating.md, docs/cron.md, docs/metrics.md, ...). Adding a method without documenting it
-- fails this spec (and so CI).
local read = require("spec.helpers").read_file

-- README.md and every docs/*.md, by path.
local function doc_files()
  local paths = { "README.md" }
  local p = assert(io.popen("ls docs/*.md"))
  for path in p:lines() do paths[#paths + 1] = path end
  p:close()
  return paths
end

local doc_paths = doc_files()
local texts, syntax = {}, {}
for _, path in ipairs(doc_paths) do
  local text = read(path)
  texts[#texts + 1] = text
  for line in text:gmatch("[^\n]+") do
    if line:find("**syntax:**", 1, true) then syntax[#syntax + 1] = line end
  end
end
local alltext = table.concat(texts, "\n")

local function documented(needle)
  for _, line in ipairs(syntax) do
    if line:find(needle, 1, true) then return true end
  end
  return false
end

-- The binding's files (csrc/l*.c) and their `luaL_Reg <table>[] = { ... };`
-- tables, by name: { table_name = { "name", ... } }.
local function reg_tables()
  local tables, files = {}, 0
  local p = assert(io.popen("ls csrc/l*.c"))
  for path in p:lines() do
    files = files + 1
    for table_name, body in read(path):gmatch("luaL_Reg ([%w_]+)%[%] = {(.-)\n};") do
      local names = {}
      for name in body:gmatch('{ "([%w_]+)",') do names[#names + 1] = name end
      assert(not tables[table_name], "two luaL_Reg tables named " .. table_name)
      tables[table_name] = names
    end
  end
  p:close()
  assert(files > 0, "no csrc/l*.c")
  return tables
end

-- What each table's name says its entries are, and how the docs write them.
local kinds = {
  { "timer_metamethods$", "`%s`" },
  { "timer_methods$", "timer:%s(" },
  { "timeout_methods$", "t:%s(" },
  { "^module_functions$", "hwtimer.%s(" },
}

local function kind_of(table_name)
  for _, k in ipairs(kinds) do
    if table_name:find(k[1]) then return k end
  end
end

describe("API reference (README.md and docs/*.md)", function()
  local tables = reg_tables()

  it("reads README.md and at least 5 docs/*.md", function()
    assert.equal("README.md", doc_paths[1])
    assert.is_true(#doc_paths - 1 >= 5, "docs files read: " .. (#doc_paths - 1))
    assert.is_true(#syntax >= 40, "syntax lines found: " .. #syntax)
  end)

  it("knows what every luaL_Reg table of the binding holds", function()
    for table_name in pairs(tables) do
      assert.truthy(kind_of(table_name), "luaL_Reg table of unknown kind: " .. table_name)
    end
  end)

  for _, k in ipairs(kinds) do
    it("documents every entry of the tables matching " .. k[1], function()
      local seen = 0
      for table_name, names in pairs(tables) do
        if table_name:find(k[1]) then
          for _, name in ipairs(names) do
            seen = seen + 1
            local needle = k[2]:format(name)
            local found = k[2]:sub(1, 1) == "`" and alltext:find(needle, 1, true) or documented(needle)
            assert.truthy(found, "undocumented: " .. needle .. " (" .. table_name .. ")")
          end
        end
      end
      assert.is_true(seen > 0, "no entries for " .. k[1])
    end)
  end

  it("documents every public function of the Lua modules", function()
    local modules = {
      { "lua/hwtimer.lua", "^function hwtimer%.([%w_]+)", "hwtimer.%s(" },
      { "lua/hwtimer/retry.lua", "^function M%.([%w_]+)", "hwtimer.%s(" },
      { "lua/hwtimer/retry.lua", "^function Retry:(%a[%w_]*)", "r:%s(" }, -- not __tostring
      { "lua/hwtimer/luv.lua", "^function M%.([%w_]+)", 'require("hwtimer.luv").%s(' },
      { "lua/hwtimer/cqueues.lua", "^function M%.([%w_]+)", 'require("hwtimer.cqueues").%s(' },
      { "lua/hwtimer/copas.lua", "^function M%.([%w_]+)", 'require("hwtimer.copas").%s(' },
      { "lua/hwtimer/ngx.lua", "^function M%.([%w_]+)", 'require("hwtimer.ngx").%s(' },
      { "lua/hwtimer/ngx.lua", "^function NgxTimer:(%a[%w_]*)", "d:%s(" },
      { "lua/hwtimer/jobs_cli.lua", "^function M%.([%w_]+)", 'require("hwtimer.jobs_cli").%s(' },
      { "lua/hwtimer/durable.lua", "^function M%.([%w_]+)", "durable.%s(" },
      { "lua/hwtimer/durable.lua", "^function Queue:(%a[%w_]*)", "q:%s(" }, -- not __tostring
      { "lua/hwtimer/durable/ngx.lua", "^function M%.([%w_]+)", 'require("hwtimer.durable.ngx").%s(' },
      { "lua/hwtimer/durable/redis_wake.lua", "^function M%.([%w_]+)", 'require("hwtimer.durable.redis_wake").%s(' },
      { "lua/hwtimer/durable/redis_wake.lua", "^function Listener:(step)", "l:%s(" },
      { "lua/hwtimer/durable/sqlite_wake.lua", "^function M%.([%w_]+)", 'require("hwtimer.durable.sqlite_wake").%s(' },
      { "lua/hwtimer/metrics.lua", "^function M%.([%w_]+)", "metrics.%s(" },
      { "lua/hwtimer/metrics_ngx.lua", "^function M%.([%w_]+)", 'require("hwtimer.metrics_ngx").%s(' },
      { "lua/hwtimer/cron.lua", "^function M%.([%w_]+)", "cron.%s(" },
      { "lua/hwtimer/cron.lua", "^function Cron:(%a[%w_]*)", "c:%s(" }, -- not __tostring
    }
    local seen = 0
    for _, m in ipairs(modules) do
      for line in read(m[1]):gmatch("[^\n]+") do
        local name = line:match(m[2])
        if name then
          seen = seen + 1
          assert.is_true(documented(m[3]:format(name)), "undocumented: " .. m[3]:format(name))
        end
      end
    end
    assert.is_true(seen >= 12)
  end)
end)
