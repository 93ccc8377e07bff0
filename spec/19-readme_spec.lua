-- The README cannot drift from the code: every ```lua block in it runs as a
-- script of its own (a fresh interpreter, $HWT_LUA, with this run's
-- LUA_PATH/LUA_CPATH), unless its first line marks it a fragment:
--   -- (fragment: needs a server socket; loops forever)
-- Fragments must still compile. A block that needs a module this Lua lacks
-- (luv, socket, cqueues, copas) is reported pending. The timer:stop() text's
-- lists of what raises after stop and what still works are checked too.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local README = "README.md"
local TIME_LIMIT = 20 -- seconds a block may take; the slowest takes ~1.5 s

-- { code, line, fragment = reason or nil }, in the README's order
local function lua_blocks(text)
  local blocks, current, n = {}, nil, 0
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    if current then
      if line:match("^```%s*$") then
        current.code = table.concat(current, "\n") .. "\n"
        blocks[#blocks + 1] = current
        current = nil
      else
        current[#current + 1] = line
      end
    elseif line:match("^```lua%s*$") then
      current = { line = n + 1 }
    end
  end
  assert(current == nil, "README.md: a ```lua block is not closed")
  for _, b in ipairs(blocks) do
    b.fragment = (b[1] or ""):match("^%-%- %(fragment: (.+)%)%s*$")
  end
  return blocks
end

local function have(module)
  return (pcall(require, module))
end

-- Modules a block requires that are not hwtimer's own and are missing here.
local function missing_modules(code)
  local missing = {}
  for name in code:gmatch("require%(?%s*[\"']([%w_.]+)[\"']") do
    if not name:match("^hwtimer") and not have(name) then missing[#missing + 1] = name end
    -- durable timers need their C store, built only where SQLite's headers are
    if name == "hwtimer.durable" and not have("hwtimer.sqlite") then
      missing[#missing + 1] = "hwtimer.sqlite"
    end
  end
  return missing
end

-- Run code in a fresh interpreter, killed after TIME_LIMIT seconds.
local function run(code)
  local lua = os.getenv("HWT_LUA") or "lua5.4"
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(code)
  f:close()
  local p = io.popen(string.format("timeout %d %s %s 2>&1; echo \"exit=$?\"", TIME_LIMIT, lua, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local status = tonumber(out:match("exit=(%d+)%s*$"))
  return out, status
end

local blocks = lua_blocks(helpers.read_file(README))
local fragments, runnable = 0, 0
for _, b in ipairs(blocks) do
  if b.fragment then fragments = fragments + 1 else runnable = runnable + 1 end
end

describe("README.md", function()
  it(string.format("has %d lua blocks: %d to run, %d marked fragments", #blocks, runnable,
    fragments), function()
    assert.is_true(runnable >= 2, "no runnable block found: is the extraction broken?")
    assert.equal(#blocks, runnable + fragments)
  end)

  for i, b in ipairs(blocks) do
    local name = string.format("block %d (line %d)", i, b.line)
    if b.fragment then
      it(name .. " is a fragment (" .. b.fragment .. ") and compiles", function()
        local fn, err = helpers.load(b.code, "=README.md:" .. b.line)
        assert.is_truthy(fn, err)
      end)
    else
      it(name .. " runs to completion", function()
        local missing = missing_modules(b.code)
        if #missing > 0 then
          return pending(table.concat(missing, ", ") .. " not installed for " .. _VERSION)
        end
        local out, status = run(b.code)
        assert(status ~= 124, string.format("README.md:%d: did not finish in %d s (mark it "
          .. "'-- (fragment: ...)' if it cannot run by itself)\n%s", b.line, TIME_LIMIT, out))
        assert(status == 0, string.format("README.md:%d: exited with %s\n%s", b.line,
          tostring(status), out))
      end)
    end
  end
end)

-- "Afterwards these raise `attempt to use a stopped timer`: `a`, `b`, ... and a
-- timeout's `reset`. These still work: `c`, `d` (0), ..., `tostring(timer)`, ..."
describe("README.md on timer:stop()", function()
  local text = helpers.read_file(README):gsub("\n", " ")
  local raises = text:match("Afterwards these raise `attempt to use a stopped timer`:(.-)and a timeout's `reset`")
  local works = text:match("These still work:(.-)`tostring%(timer%)`")

  local function names(list)
    local t = {}
    for name in (list or ""):gmatch("`([%w_]+)`") do t[#t + 1] = name end
    return t
  end

  -- the arguments each method needs to get past its argument checks
  local function call(timer, t, name)
    local args = {
      schedule = { 1, print }, every = { 1, print }, run = { 0 }, wakeup = { print }, done = { t },
    }
    return timer[name](timer, helpers.unpack(args[name] or {}))
  end

  it("lists what raises after stop, and it raises; the rest works", function()
    assert.is_truthy(raises, "the sentence listing what raises after stop is gone")
    assert.is_truthy(works, "the sentence listing what still works after stop is gone")
    local r, w = names(raises), names(works)
    assert.is_true(#r >= 10 and #w >= 4)
    local timer = hwtimer.new()
    local t = timer:schedule(10, print)
    timer:stop()
    for _, name in ipairs(r) do
      assert.has_error(function() call(timer, t, name) end, "attempt to use a stopped timer")
    end
    for _, name in ipairs(w) do
      local ok, err = pcall(call, timer, t, name)
      assert(ok, "timer:" .. name .. "() raised after stop: " .. tostring(err))
    end
    assert.equal(0, timer:pending())
    assert.is_string(tostring(timer))
    -- every method of the timeout handle but reset still works
    assert.has_error(function() t:reset(1) end, "attempt to use a stopped timer")
    for _, name in ipairs({ "cancel", "lateness", "state", "is_pending", "is_expired",
      "is_cancelled", "deadline", "remaining", "timer", "task" }) do
      local ok, err = pcall(t[name], t)
      assert(ok, "t:" .. name .. "() raised after stop: " .. tostring(err))
    end
    assert.is_false(t:cancel())
    assert.equal("cancelled", t:state())
    assert.is_string(tostring(t))
    timer:close()
  end)
end)
