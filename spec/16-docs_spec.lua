-- The README's API section is the reference: every name in every luaL_Reg
-- table of the binding, and every public function of the Lua modules, must
-- have a "**syntax:**" line there. Adding a method without documenting it
-- fails this spec (and so CI).
local read = require("spec.helpers").read_file

local readme = read("README.md")
local syntax = {}
for line in readme:gmatch("[^\n]+") do
  if line:find("**syntax:**", 1, true) then syntax[#syntax + 1] = line end
end

local function documented(needle)
  for _, line in ipairs(syntax) do
    if line:find(needle, 1, true) then return true end
  end
  return false
end

-- { "name", function } entries of `static const luaL_Reg <table>[] = { ... };`
local function reg_names(source, table_name)
  local body = source:match("luaL_Reg " .. table_name .. "%[%] = {(.-)\n};")
  assert(body, "no luaL_Reg table " .. table_name)
  local names = {}
  for name in body:gmatch('{ "([%w_]+)",') do names[#names + 1] = name end
  return names
end

describe("API reference (README)", function()
  local binding = read("csrc/lhwtimer.c")

  local cases = {
    { "timer_methods", "timer:%s(" },
    { "timeout_methods", "t:%s(" },
    { "module_functions", "hwtimer.%s(" },
  }
  for _, case in ipairs(cases) do
    it("documents every entry of " .. case[1], function()
      local names = reg_names(binding, case[1])
      assert.is_true(#names > 0)
      for _, name in ipairs(names) do
        assert.is_true(documented(case[2]:format(name)), "undocumented: " .. case[2]:format(name))
      end
    end)
  end

  it("documents the metamethods", function()
    for _, name in ipairs(reg_names(binding, "timer_metamethods")) do
      assert.truthy(readme:find("`" .. name .. "`", 1, true), "undocumented: " .. name)
    end
  end)

  it("documents every public function of the Lua modules", function()
    local modules = {
      { "lua/hwtimer.lua", "^function hwtimer%.([%w_]+)", "hwtimer.%s(" },
      { "lua/hwtimer/retry.lua", "^function M%.([%w_]+)", "hwtimer.%s(" },
      { "lua/hwtimer/retry.lua", "^function Retry:(%a[%w_]*)", "r:%s(" }, -- not __tostring
      { "lua/hwtimer/luv.lua", "^function M%.([%w_]+)", 'require("hwtimer.luv").%s(' },
      { "lua/hwtimer/cqueues.lua", "^function M%.([%w_]+)", 'require("hwtimer.cqueues").%s(' },
      { "lua/hwtimer/copas.lua", "^function M%.([%w_]+)", 'require("hwtimer.copas").%s(' },
      { "lua/hwtimer/ngx.lua", "^function M%.([%w_]+)", 'require("hwtimer.ngx").%s(' },
      { "lua/hwtimer/ngx.lua", "^function Dispatcher:([%w_]+)", "d:%s(" },
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
