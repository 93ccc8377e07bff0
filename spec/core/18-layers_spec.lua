-- The binding depends one way (lbase.h lists its layers): a file of the
-- binding includes the headers of, and calls the functions of, lower layers
-- only, never its own layer's other files nor any above it. So no two files
-- call each other, directly or round a loop; the C core (csrc/*.c but l*.c)
-- knows no Lua at all.
local read = require("spec.helpers").read_file

-- Layer of each file of the binding, by its name without the extension.
local LAYER = { lbase = 1, larm = 2, ltimer = 3, ltimeout = 3, lstats = 3, lwake = 3, ldispatch = 4, lhwtimer = 5 }

local list = require("spec.helpers").lines_of

local function stem(path) return path:match("([%w_]+)%.[ch]$") end

-- The binding's files: csrc/l*.[ch] but the core's list.h.
local function binding(cmd)
  local t = {}
  for _, path in ipairs(list(cmd)) do
    if stem(path) ~= "list" then t[#t + 1] = path end
  end
  return t
end

describe("the binding's layers", function()
  local sources = binding("ls csrc/l*.c csrc/l*.h")

  it("name every file of the binding", function()
    assert.is_true(#sources >= 12)
    for _, path in ipairs(sources) do
      assert.truthy(LAYER[stem(path)], path .. " is in no layer: add it to LAYER and to lbase.h's list")
    end
  end)

  it("include only the headers of lower layers (and a .c its own)", function()
    for _, path in ipairs(sources) do
      local me = stem(path)
      for header in read(path):gmatch('#include "(l[%w_]+)%.h"') do
        assert.is_true(header == me or LAYER[header] < LAYER[me],
          path .. " includes " .. header .. ".h (layer " .. LAYER[header] .. ", its own is " .. LAYER[me] .. ")")
      end
    end
  end)

  it("call only the functions of lower layers", function()
    local defined = {} -- lhwt_ function -> the file defining it
    for _, path in ipairs(binding("ls csrc/l*.c")) do
      for name in read(path):gmatch("\n[%w_ %*]-[ %*](lhwt_[%w_]+)%b()%s*\n{") do defined[name] = stem(path) end
    end
    for _, path in ipairs(binding("ls csrc/l*.h")) do -- inline ones
      for name in read(path):gmatch("static inline [%w_ %*]-[ %*](lhwt_[%w_]+)%b()%s*\n{") do defined[name] = stem(path) end
    end
    assert.is_true(defined.lhwt_check_live == "lbase" and defined.lhwt_schedule == "larm",
      "the definitions were not found: is the pattern broken?")
    local calls = 0
    for _, path in ipairs(sources) do
      local me = stem(path)
      for name in read(path):gmatch("(lhwt_[%w_]+)%(") do
        local owner = defined[name]
        if owner and owner ~= me then
          calls = calls + 1
          assert.is_true(LAYER[owner] < LAYER[me], path .. " calls " .. name .. " of " .. owner
            .. " (layer " .. LAYER[owner] .. ", its own is " .. LAYER[me] .. ")")
        end
      end
    end
    assert.is_true(calls >= 30)
  end)

  it("leave Lua out of the core", function()
    for _, path in ipairs(list("ls csrc/*.c csrc/*.h")) do
      if not LAYER[stem(path)] and stem(path) ~= "compat" then
        assert.is_nil(read(path):find('#include "compat.h"', 1, true), path .. " includes Lua")
        assert.is_nil(read(path):find("<lua.h>", 1, true), path .. " includes Lua")
      end
    end
  end)
end)
