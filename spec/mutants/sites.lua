-- The candidate mutants of one source file, found line by line with token
-- rules (spec/mutants/random.lua samples them). Comments, string literals
-- and C's preprocessor lines are masked first, so that no rule fires inside
-- them; each mutant replaces one whole line (`from`) by another (`to`).
local M = {}

local STR, COM = "\1", "\2" -- the masks: in a string, in a comment

local function mask(s, i, j, m) return s:sub(1, i - 1) .. m:rep(j - i + 1) .. s:sub(j + 1) end

-- Lua: `state` is the closing bracket of a long string or comment that
-- runs on from a line before (nil if none); returns the code, the state.
local function lua_mask(line, state)
  local code, i = line, 1
  if state then
    local a, b = line:find(state.close, 1, true)
    if not a then return (STR):rep(#line), state end
    code, i = mask(code, 1, b, state.m), b + 1
  end
  while i <= #line do
    local c = line:sub(i, i)
    if line:sub(i, i + 1) == "--" then
      local eq = line:match("^%[(=*)%[", i + 2)
      if eq then
        local close = "]" .. eq .. "]"
        local a, b = line:find(close, i + 4 + #eq, true)
        if not a then return mask(code, i, #line, COM), { close = close, m = COM } end
        code, i = mask(code, i, b, COM), b + 1
      else
        return mask(code, i, #line, COM), nil
      end
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= #line and line:sub(j, j) ~= c do j = j + (line:sub(j, j) == "\\" and 2 or 1) end
      code, i = mask(code, i, math.min(j, #line), STR), j + 1
    elseif line:match("^%[=*%[", i) then
      local eq = line:match("^%[(=*)%[", i)
      local close = "]" .. eq .. "]"
      local a, b = line:find(close, i + 2 + #eq, true)
      if not a then return mask(code, i, #line, STR), { close = close, m = STR } end
      code, i = mask(code, i, b, STR), b + 1
    else
      i = i + 1
    end
  end
  return code, nil
end

-- C: `state` is true inside a /* comment */ from a line before, "pp" on a
-- preprocessor line's continuation.
local function c_mask(line, state)
  if state == "pp" or (not state and line:match("^%s*#")) then
    return (COM):rep(#line), line:match("\\%s*$") and "pp" or nil
  end
  local code, i = line, 1
  if state then
    local a, b = line:find("*/", 1, true)
    if not a then return (COM):rep(#line), true end
    code, i = mask(code, 1, b, COM), b + 1
  end
  while i <= #line do
    local c, two = line:sub(i, i), line:sub(i, i + 1)
    if two == "//" then
      return mask(code, i, #line, COM), nil
    elseif two == "/*" then
      local a, b = line:find("*/", i + 2, true)
      if not a then return mask(code, i, #line, COM), true end
      code, i = mask(code, i, b, COM), b + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= #line and line:sub(j, j) ~= c do j = j + (line:sub(j, j) == "\\" and 2 or 1) end
      code, i = mask(code, i, math.min(j, #line), STR), j + 1
    else
      i = i + 1
    end
  end
  return code, nil
end

local LUA_WORDS = {}
for w in ("and break do else elseif end for function goto if in local not or repeat return then until while")
  :gmatch("%a+") do LUA_WORDS[w] = true end
local C_WORDS = { ["return"] = true, ["case"] = true, ["sizeof"] = true }

-- Whether the `-` or `+` at i is binary: the token before it ends an operand.
local function binary(code, i, words)
  local before = code:sub(1, i - 1):gsub("[%s" .. COM .. "]+$", "")
  if before == "" then return false end
  if before:match("[%w_]$") then
    local w = before:match("([%a_][%w_]*)$")
    return not (w and words[w])
  end
  return before:match("[%)%]}" .. STR .. "]$") ~= nil
end

-- Operator swaps: {pattern in the code, replacement, guard(code, a, b)}.
local function lua_ops()
  local function notnext(chars)
    return function(code, _, b) return not code:sub(b + 1, b + 1):match(chars) end
  end
  local function notprev(chars)
    return function(code, a) return a == 1 or not code:sub(a - 1, a - 1):match(chars) end
  end
  local function both(f, g) return function(...) return f(...) and g(...) end end
  return {
    { "==", "~=", notprev("[=<>~]") }, { "~=", "==" },
    { "<=", "<", notprev("<") }, { ">=", ">", notprev(">") },
    { "<", "<=", both(notprev("<"), notnext("[<=]")) }, { ">", ">=", both(notprev("[>=~<]"), notnext("[>=]")) },
    { "+", "-", function(code, a) return binary(code, a, LUA_WORDS) end },
    { "-", "+", function(code, a, b)
      return code:sub(b + 1, b + 1) ~= "-" and code:sub(a - 1, a - 1) ~= "-" and binary(code, a, LUA_WORDS)
    end },
    { "*", "/" }, { "/", "*", both(notprev("/"), notnext("/")) },
  }
end

local function c_ops()
  local function notnext(chars)
    return function(code, _, b) return not code:sub(b + 1, b + 1):match(chars) end
  end
  local function notprev(chars)
    return function(code, a) return a == 1 or not code:sub(a - 1, a - 1):match(chars) end
  end
  local function both(f, g) return function(...) return f(...) and g(...) end end
  return {
    { "==", "!=", notprev("[=<>!]") }, { "!=", "==" },
    { "<=", "<", notprev("<") }, { ">=", ">", notprev("[>%-]") },
    { "<", "<=", both(notprev("<"), notnext("[<=]")) }, { ">", ">=", both(notprev("[>%-=]"), notnext("[>=]")) },
    { "&&", "||" }, { "||", "&&" },
    { "+", "-", function(code, a, b)
      return code:sub(b + 1, b + 1) ~= "+" and code:sub(a - 1, a - 1) ~= "+" and binary(code, a, C_WORDS)
    end },
    { "-", "+", function(code, a, b)
      return not code:sub(b + 1, b + 1):match("[%->]") and code:sub(a - 1, a - 1) ~= "-" and binary(code, a, C_WORDS)
    end },
    { "!", "", notnext("=") },
  }
end

local function each_find(code, text, fn)
  local init = 1
  while true do
    local a, b = code:find(text, init, true)
    if not a then return end
    fn(a, b)
    init = a + 1
  end
end

local function each_word(code, pattern, fn) -- pattern: a frontier-bounded word or number
  local init = 1
  while true do
    local a, b = code:find(pattern, init)
    if not a then return end
    fn(a, b)
    init = b + 1
  end
end

local function balanced(code)
  local n = 0
  for c in code:gmatch("[%(%)%[%]{}]") do
    n = n + ((c == "(" or c == "[" or c == "{") and 1 or -1)
    if n < 0 then return false end
  end
  return n == 0
end

-- Lua: a line that is a whole call or assignment, which can go.
local function lua_statement(code, next_code)
  local t = code:gsub(COM, ""):match("^%s*(.-)%s*$")
  local first = t:match("^[%a_][%w_]*")
  if not first or (LUA_WORDS[first] and first ~= "local") then return false end
  if t:match("^local%s+function") or not balanced(t) then return false end
  if t:match("[,%({=%+%-%*/%.]$") or t:match("%f[%w]and$") or t:match("%f[%w]or$") then return false end
  if next_code and next_code:match("^%s*[%.:%(%[%+%-%*/=<>~]") then return false end
  if next_code and (next_code:match("^%s*and%f[%W]") or next_code:match("^%s*or%f[%W]")) then return false end
  return t:match("%)$") ~= nil or (t:find("=", 1, true) ~= nil and not t:match("^[^=]*==")) or false
end

local function c_statement(code)
  local t = code:gsub(COM, ""):match("^%s*(.-)%s*$")
  if not t:match(";$") or not balanced(t) or t:match("^return%f[%W]") then return false end
  if t:match("^for%s*%(") or t:match("^}") or t:match("^case%f[%W]") then return false end
  if t:match("^[%a_][%w_]*[%s%*]+[%a_][%w_]*%s*[=;%[,]") then return false end -- a declaration
  if t:match("^typedef") or t:match("^static") or t:match("^extern") or t:match("^struct") then return false end
  return true
end

-- The candidate mutants of `text` (a file's contents) in `lang` ("lua" or
-- "c"): a list of { line = number, from = line text, to = line text, kind }.
function M.find(text, lang)
  local lines = {}
  for l in (text .. "\n"):gmatch("([^\n]*)\n") do lines[#lines + 1] = l end
  if lines[#lines] == "" then lines[#lines] = nil end
  local codes, state = {}, nil
  for i, l in ipairs(lines) do codes[i], state = (lang == "lua" and lua_mask or c_mask)(l, state) end
  local ops = lang == "lua" and lua_ops() or c_ops()
  local out = {}
  for n, line in ipairs(lines) do
    local code = codes[n]
    local seen = {}
    local function add(kind, to)
      if to ~= line and not seen[to] then
        seen[to] = true
        out[#out + 1] = { line = n, from = line, to = to, kind = kind }
      end
    end
    local function swap(a, b, r, kind) add(kind, line:sub(1, a - 1) .. r .. line:sub(b + 1)) end
    for _, op in ipairs(ops) do
      each_find(code, op[1], function(a, b)
        if not op[3] or op[3](code, a, b) then swap(a, b, op[2], op[1] .. " -> " .. (op[2] == "" and "(nothing)" or op[2])) end
      end)
    end
    each_word(code, "%f[%w_.]%d+%f[^%w_.]", function(a, b)
      swap(a, b, tostring(tonumber(line:sub(a, b)) + 1), "constant + 1")
    end)
    if lang == "lua" then
      each_word(code, "%f[%w_]and%f[^%w_]", function(a, b) swap(a, b, "or", "and -> or") end)
      each_word(code, "%f[%w_]or%f[^%w_]", function(a, b) swap(a, b, "and", "or -> and") end)
      each_word(code, "%f[%w_]true%f[^%w_]", function(a, b) swap(a, b, "false", "true -> false") end)
      each_word(code, "%f[%w_]false%f[^%w_]", function(a, b) swap(a, b, "true", "false -> true") end)
      each_word(code, "%f[%w_]not%s+", function(a, b) swap(a, b, "", "not x -> x") end)
      local a, c, b = code:match("^%s*()if%s+()(.-)%s+then%s*$")
      if not a then c, b = code:match("^%s*elseif%s+()(.-)%s+then%s*$") end
      if c and b ~= "" then
        local e = c + #b - 1
        add("if c -> if not (c)", line:sub(1, c - 1) .. "not (" .. line:sub(c, e) .. ")" .. line:sub(e + 1))
      end
      local next_code
      for k = n + 1, #codes do
        if codes[k]:gsub(COM, ""):match("%S") then next_code = codes[k]; break end
      end
      if lua_statement(code, next_code) then add("statement deleted", "") end
    else
      local a, b = code:match("^%s*return%s+()(.-)%s*;%s*$")
      if a and b ~= "0" and b ~= "" then
        local e = a + #b - 1
        add("return x -> return 0", line:sub(1, a - 1) .. "0" .. line:sub(e + 1))
      end
      if c_statement(code) then add("statement deleted", "") end
    end
  end
  return out
end

return M
