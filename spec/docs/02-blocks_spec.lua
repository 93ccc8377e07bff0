-- The docs cannot drift from the code: every ```lua block in README.md,
-- CONTRIBUTING.md and docs/*.md runs as a script of its own (a fresh
-- interpreter, $HWT_LUA, with this run's LUA_PATH/LUA_CPATH), unless its
-- first line marks it a fragment:
--   -- (fragment: needs a server socket; loops forever)
-- Fragments must still compile. A block that needs a module this Lua lacks
-- (luv, socket, cqueues, copas) is reported pending. The timer:stop() text's
-- lists of what raises after stop and what still works are checked too
-- (docs/api.md, or wherever that sentence is). Every relative link
-- [text](target) in these files points at a file that exists, and its
-- #anchor, if any, at a heading of that file; README.md stays short.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local TIME_LIMIT = 20 -- seconds a block may take; the slowest takes ~1.5 s
local README_MAX_LINES = 250

-- README.md, CONTRIBUTING.md and every docs/*.md, in that order.
local function doc_files()
  local paths = { "README.md", "CONTRIBUTING.md" }
  local p = assert(io.popen("ls docs/*.md"))
  for path in p:lines() do paths[#paths + 1] = path end
  p:close()
  return paths
end

local FILES = doc_files()
local TEXT = {}
for _, path in ipairs(FILES) do TEXT[path] = helpers.read_file(path) end

-- The text's lines, each with whether it is inside a fenced code block (the
-- fence lines themselves count as inside).
local function lines_of(text)
  local lines, fenced = {}, false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    local fence = line:match("^%s*```") ~= nil
    if fence then fenced = not fenced end
    lines[#lines + 1] = { text = line, code = fenced or fence }
  end
  return lines
end

-- { code, line, fragment = reason or nil }, in the file's order
local function lua_blocks(text, path)
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
  assert(current == nil, path .. ": a ```lua block is not closed")
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

local all, fragments, runnable = {}, 0, 0
for _, path in ipairs(FILES) do
  for i, b in ipairs(lua_blocks(TEXT[path], path)) do
    b.path, b.index = path, i
    all[#all + 1] = b
    if b.fragment then fragments = fragments + 1 else runnable = runnable + 1 end
  end
end

describe("lua blocks of README.md, CONTRIBUTING.md and docs/*.md", function()
  it(string.format("has %d lua blocks in %d files: %d to run, %d marked fragments", #all,
    #FILES, runnable, fragments), function()
    assert.is_true(#FILES >= 7, "README.md, CONTRIBUTING.md and at least 5 docs/*.md expected")
    assert.is_true(runnable >= 4, "too few runnable blocks found: is the extraction broken?")
    local readme = 0
    for _, b in ipairs(all) do
      if b.path == "README.md" and not b.fragment then readme = readme + 1 end
    end
    assert.is_true(readme >= 2, "README.md: no runnable block found")
    assert.equal(#all, runnable + fragments)
  end)

  for _, b in ipairs(all) do
    local where = b.path .. ":" .. b.line
    local name = string.format("%s block %d (line %d)", b.path, b.index, b.line)
    if b.fragment then
      it(name .. " is a fragment (" .. b.fragment .. ") and compiles", function()
        local fn, err = helpers.load(b.code, "=" .. where)
        assert.is_truthy(fn, err)
      end)
    else
      it(name .. " runs to completion", function()
        local missing = missing_modules(b.code)
        if #missing > 0 then
          return pending(table.concat(missing, ", ") .. " not installed for " .. _VERSION)
        end
        local out, status = run(b.code)
        assert(status ~= 124, string.format("%s: did not finish in %d s (mark it "
          .. "'-- (fragment: ...)' if it cannot run by itself)\n%s", where, TIME_LIMIT, out))
        assert(status == 0, string.format("%s: exited with %s\n%s", where, tostring(status), out))
      end)
    end
  end
end)

describe("README.md", function()
  it("is at most " .. README_MAX_LINES .. " lines (the rest is in docs/)", function()
    local n = select(2, TEXT["README.md"]:gsub("\n", "\n"))
    assert(n <= README_MAX_LINES, string.format("README.md has %d lines, at most %d expected",
      n, README_MAX_LINES))
  end)
end)

-- GitHub's anchor for a heading: links keep their text, then lowercase; what
-- is not a letter, digit, space, '-' or '_' is dropped (backticks, dots,
-- colons, apostrophes, commas); spaces become '-'. Bytes past ASCII are kept.
local function slug(heading)
  local s = heading:gsub("%[([^%]]*)%]%([^)]*%)", "%1"):lower()
  s = s:gsub("[^%w%-_ \128-\255]", ""):gsub(" ", "-")
  return s
end

-- The anchors of a file's headings (outside code blocks), as GitHub makes
-- them: the second heading with the same slug gets "-1", the third "-2".
local anchor_cache = {}
local function anchors(path)
  if anchor_cache[path] then return anchor_cache[path] end
  local set, seen = {}, {}
  for _, l in ipairs(lines_of(helpers.read_file(path))) do
    local hashes, title = l.text:match("^(#+)%s+(.-)%s*$")
    if not l.code and hashes and #hashes <= 6 then
      local s = slug(title)
      if seen[s] then
        set[s .. "-" .. seen[s]] = true
        seen[s] = seen[s] + 1
      else
        set[s] = true
        seen[s] = 1
      end
    end
  end
  anchor_cache[path] = set
  return set
end

-- The relative links of a file: { text, target, line }. Fenced code blocks
-- and inline code spans are not markdown, so their text is blanked first
-- (keeping line breaks, so that line numbers stay right); a link's text may
-- run over a line break.
local function links_of(text)
  local kept = {}
  for _, l in ipairs(lines_of(text)) do kept[#kept + 1] = l.code and "" or l.text end
  local body = table.concat(kept, "\n")
  body = body:gsub("`[^`]*`", function(span) return (span:gsub("[^\n]", "")) end)
  local links, pos = {}, 1
  while true do
    local s, e, label, target = body:find("%[([^%]]*)%]%(([^)%s]*)%)", pos)
    if not s then break end
    if not (target:match("^https?:") or target:match("^mailto:")) then
      local line = select(2, body:sub(1, s):gsub("\n", "\n")) + 1
      links[#links + 1] = { text = label, target = target, line = line }
    end
    pos = e + 1
  end
  return links
end

local function exists(path)
  local f = io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

describe("relative links in README.md, CONTRIBUTING.md and docs/*.md", function()
  it("slugs headings as GitHub does", function()
    assert.equal("in-nginx-hwtimerngx-beside-ngxtimerat",
      slug("In nginx: `hwtimer.ngx` beside `ngx.timer.at`"))
    assert.equal("nettys-timer-and-timeout-side-by-side",
      slug("Netty's `Timer` and `Timeout`, side by side"))
    assert.equal("redis-shared-by-many-machines", slug("Redis: shared by many machines"))
    assert.equal("make-check", slug("make check"))
  end)

  local total = 0
  for _, path in ipairs(FILES) do
    local links = links_of(TEXT[path])
    total = total + #links
    it(string.format("%s: its %d relative links point at files and headings that exist", path,
      #links), function()
      local dir = path:match("^(.*)/[^/]*$") or "."
      local broken = {}
      for _, link in ipairs(links) do
        local where = string.format("%s:%d: [%s](%s)", path, link.line, link.text, link.target)
        local file, anchor = link.target:match("^([^#]*)#?(.*)$")
        local target = file == "" and path or dir .. "/" .. file
        if not exists(target) then
          broken[#broken + 1] = where .. ": no such file " .. target
        elseif anchor ~= "" and not target:match("%.md$") then
          broken[#broken + 1] = where .. ": an anchor into a file that is not markdown"
        elseif anchor ~= "" and not anchors(target)[anchor] then
          broken[#broken + 1] = where .. ": " .. target .. " has no heading #" .. anchor
        end
      end
      assert(#broken == 0, "broken links:\n" .. table.concat(broken, "\n"))
    end)
  end

  it("finds the links (is the extraction broken?)", function()
    assert.is_true(total >= 20, "only " .. total .. " relative links found")
  end)
end)

-- "Afterwards these raise `attempt to use a stopped timer`: `a`, `b`, ... and a
-- timeout's `reset`. These still work: `c`, `d` (0), ..., `tostring(timer)`, ..."
describe("the docs on timer:stop()", function()
  local raises, works, found_in
  for _, path in ipairs(FILES) do
    local text = TEXT[path]:gsub("\n", " ")
    local r = text:match("Afterwards these raise `attempt to use a stopped timer`:(.-)and a timeout's `reset`")
    if r then
      assert(not found_in, "the sentence on what raises after stop is in " .. tostring(found_in)
        .. " and in " .. path)
      raises, found_in = r, path
      works = text:match("These still work:(.-)`tostring%(timer%)`")
    end
  end

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
