-- What the specs of hwtimer-jobs share: the command run as it is (its
-- stdout, stderr and exit status), a strict JSON reader, times and lines
-- as the command shows them. TMP: a directory of the spec file's own.
local helpers = require("spec.helpers")
local assert = require("luassert")

local C = {}

local LUA = os.getenv("HWT_LUA") or "lua5.4"

local function sq(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local COMMAND = os.getenv("HWT_JOBS_CLI") and sq(os.getenv("HWT_JOBS_CLI")) or LUA .. " bin/hwtimer-jobs"
local USAGE_LINE = "usage: hwtimer-jobs (--path FILE | --redis ADDRESS [--prefix P]) [--queue Q] "
  .. "[--json] COMMAND"


local TMP = helpers.tempdir("hwtimer-jobs-cli")

-- Run `prefix COMMAND args...` (prefix: environment settings, or ""; args:
-- a list, each word quoted for the shell); returns stdout, stderr, status.
local function run_with(prefix, command, args)
  local words = {}
  for i, a in ipairs(args) do words[i] = sq(a) end
  local out, err = TMP .. "/out", TMP .. "/err"
  local p = assert(io.popen(string.format("%s %s %s >%s 2>%s; echo $?", prefix, command, table.concat(words, " "),
    out, err)))
  local status = tonumber(p:read("*a"))
  p:close()
  return helpers.read_file(out), helpers.read_file(err), status
end

local function jobs(args) return run_with("", COMMAND, args) end

-- A list of the words of lists and strings, in turn.
local function words(...)
  local t = {}
  for _, a in ipairs({ ... }) do
    if type(a) == "table" then
      for _, w in ipairs(a) do t[#t + 1] = w end
    else
      t[#t + 1] = a
    end
  end
  return t
end

---------------------------------------------------------------------------
-- JSON, read strictly (no raw control bytes in strings, one document)
---------------------------------------------------------------------------

local NULL = setmetatable({}, { __tostring = function() return "null" end })

local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + math.floor(cp / 64), 0x80 + cp % 64) end
  return string.char(0xE0 + math.floor(cp / 4096), 0x80 + math.floor(cp / 64) % 64, 0x80 + cp % 64)
end

local SIMPLE = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }

local function decode(s)
  local pos = 1
  local function fail(what) error(string.format("bad JSON at byte %d (%s): %s", pos, what, s), 0) end
  local function ws() pos = s:find("[^ \t\r\n]", pos) or #s + 1 end
  local value
  local function str()
    pos = pos + 1
    local out = {}
    while true do
      local c = s:sub(pos, pos)
      if c == "" then fail("string not closed") end
      if c == '"' then
        pos = pos + 1
        return table.concat(out)
      end
      if c:byte() < 32 then fail("raw control byte") end
      if c == "\\" then
        local e = s:sub(pos + 1, pos + 1)
        if SIMPLE[e] then
          out[#out + 1], pos = SIMPLE[e], pos + 2
        elseif e == "u" and s:sub(pos + 2, pos + 5):match("^%x%x%x%x$") then
          out[#out + 1], pos = utf8_char(tonumber(s:sub(pos + 2, pos + 5), 16)), pos + 6
        else
          fail("bad escape")
        end
      else
        out[#out + 1], pos = c, pos + 1
      end
    end
  end
  local function list(close, item)
    pos = pos + 1
    ws()
    if s:sub(pos, pos) == close then
      pos = pos + 1
      return
    end
    while true do
      item()
      ws()
      local c = s:sub(pos, pos)
      pos = pos + 1
      if c == close then return end
      if c ~= "," then fail("',' or '" .. close .. "' expected") end
      ws()
    end
  end
  function value()
    ws()
    local c = s:sub(pos, pos)
    if c == "{" then
      local t = {}
      list("}", function()
        if s:sub(pos, pos) ~= '"' then fail("key expected") end
        local k = str()
        ws()
        if s:sub(pos, pos) ~= ":" then fail("':' expected") end
        pos = pos + 1
        t[k] = value()
      end)
      return t
    elseif c == "[" then
      local t = {}
      list("]", function() t[#t + 1] = value() end)
      return t
    elseif c == '"' then
      return str()
    end
    for word, v in pairs({ ["true"] = true, ["false"] = false, null = NULL }) do
      if s:sub(pos, pos + #word - 1) == word then
        pos = pos + #word
        return v
      end
    end
    local num = s:match("^-?%d+%.?%d*[eE]?[-+]?%d*", pos)
    if not num or num == "" then fail("value expected") end
    pos = pos + #num
    return tonumber(num)
  end
  local v = value()
  ws()
  if pos <= #s then fail("more after the document") end
  return v
end

-- The JSON document of a command's stdout (one line), checked by Python's
-- strict reader too.
local function json_of(out)
  assert.matches("^[^\n]*\n$", out)
  local f = assert(io.open(TMP .. "/doc.json", "wb"))
  f:write(out)
  f:close()
  assert.is_true(helpers.sh("python3 -c 'import json,sys; json.load(sys.stdin)' <" .. TMP .. "/doc.json"),
    "python3 refuses: " .. out)
  return decode(out)
end

---------------------------------------------------------------------------
-- Times as the command shows them
---------------------------------------------------------------------------

local function iso(t)
  local s = math.floor(t)
  return os.date("!%Y-%m-%dT%H:%M:%S", s) .. string.format(".%03dZ", math.floor((t - s) * 1000))
end

local ISO = "%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ"

-- lines of `s` as a list
local function lines(s)
  local t = {}
  for line in s:gmatch("([^\n]*)\n") do t[#t + 1] = line end
  return t
end

local function usage_error(msg)
  return "hwtimer-jobs: " .. msg .. "\n" .. USAGE_LINE .. "\n(hwtimer-jobs --help lists the commands)\n"
end

---------------------------------------------------------------------------

-- base64 (RFC 4648, padded) both ways, apart from the tool's
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
  local bits = s:gsub(".", function(c)
    local b, t = c:byte(), {}
    for k = 8, 1, -1 do t[k], b = b % 2, math.floor(b / 2) end
    return table.concat(t)
  end)
  local out = (bits .. "00000"):gsub("(" .. ("[01]"):rep(6) .. ")", function(six)
    return B64:sub(tonumber(six, 2) + 1, tonumber(six, 2) + 1)
  end):gsub("[01]+$", "")
  return out .. ("="):rep((3 - #s % 3) % 3)
end

local function unbase64(s)
  local bits = s:gsub("=", ""):gsub(".", function(c)
    local v, t = B64:find(c, 1, true) - 1, {}
    for k = 6, 1, -1 do t[k], v = v % 2, math.floor(v / 2) end
    return table.concat(t)
  end)
  return (bits:gsub("[01]" .. ("[01]"):rep(7), function(eight) return string.char(tonumber(eight, 2)) end)
    :gsub("[01]+$", ""))
end

C.base64, C.unbase64 = base64, unbase64
C.LUA, C.sq, C.COMMAND, C.USAGE_LINE, C.TMP = LUA, sq, COMMAND, USAGE_LINE, TMP
C.run_with, C.jobs, C.words, C.NULL, C.decode, C.json_of = run_with, jobs, words, NULL, decode, json_of
C.iso, C.ISO, C.lines, C.usage_error = iso, ISO, lines, usage_error

--- A store env (as store_queues takes it) on an SQLite file in TMP, made
-- anew for each test; `with_path(path)` is told its path each time.
function C.sqlite_env(with_path)
  local path
  return {
    fresh = function()
      os.execute("rm -f " .. sq(TMP) .. "/store.db*")
      path = TMP .. "/store.db"
      if with_path then with_path(path) end
    end,
    options = function() return { path = path } end,
    args = function() return { "--path", path } end,
  }
end

--- The queues a spec opens on `env`'s store (SQLite or Redis: env.fresh()
-- empties it before each test, env.options() selects it), on a timer of
-- each test's own, closed after it: S.open(opts) (on_error quiet),
-- S.wait(done, secs) on that timer, S.now() on the store's clock, S.timer().
function C.store_queues(env, before_each, after_each)
  local hwtimer, durable = require("hwtimer"), require("hwtimer.durable")
  local timer, queues
  before_each(function()
    timer = hwtimer.new()
    queues = {}
    env.fresh()
  end)
  after_each(function()
    for _, q in ipairs(queues) do q:close() end
    timer:close()
  end)
  local S = {}
  function S.open(opts)
    opts = opts or {}
    opts.on_error = function() end
    for k, v in pairs(env.options()) do opts[k] = opts[k] or v end
    local q = assert(durable.open(timer, opts))
    queues[#queues + 1] = q
    return q
  end
  function S.wait(done, secs) return helpers.wait_until(timer, done, secs or 5) end
  function S.now() return durable.engine(queues[1]):now() end
  function S.timer() return timer end
  return S
end

return C
