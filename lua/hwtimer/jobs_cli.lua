--- hwtimer.jobs_cli: hwtimer-jobs, the command line that operates a
-- hwtimer.durable store (bin/hwtimer-jobs calls M.main; the rock installs
-- it). It opens the store as any process does (durable.open needs a timer:
-- it makes one), handles no kind and never runs the timer, so it never runs
-- a job: it reads the store and writes the repairs an operator asks for
-- (q:counts, q:jobs, q:get, q:retry, q:run_now, q:cancel, q:schedules),
-- prints them as text or as one JSON document, and closes the queue and
-- the timer.
--
--   status = require("hwtimer.jobs_cli").main(argv, out, err)
--
-- `out` and `err` are file handles (anything with :write); status is the
-- exit status: 0 done, 1 refused (by the store, or no store), 2 bad usage.
-- Usage errors are found before the store is touched.
local M = {}

local floor, format, concat = math.floor, string.format, table.concat

M.USAGE = [[
usage: hwtimer-jobs (--path FILE | --redis ADDRESS [--prefix P]) [--queue Q] [--json] COMMAND

Operates a hwtimer.durable store: reads its jobs and repairs them; never runs one.

commands:
  counts                 jobs by state (pending, due, leased, dead), per kind
  ls [--state S] [--kind K] [--limit N] [--after CURSOR]
                         a page of jobs in due order; S: pending (default),
                         leased or dead; N: 1 to 1000 (default 100); the next
                         page's cursor is printed last
  show ID                every field of job ID, its payload too
  retry ID               a dead job pending again, due now, attempts from zero
  run ID                 a pending job due now
  cancel ID              delete job ID (refused while a process holds it)
  schedules              the schedules (intervals, cron expressions), in
                         next-due order

options:
  --path FILE            an SQLite store (an existing file; the hwtimer-sqlite rock)
  --redis ADDRESS        a Redis store (an existing one; redis-lua) at HOST:PORT[/DB]
                         or, over a unix socket, unix:PATH[?db=DB]; database DB
                         (default 0)
  --prefix P             the Redis store's key prefix (default hwtimer)
  --queue Q              the queue (default default)
  --json                 one JSON document on stdout instead of text
  --help                 this text

Exit status: 0 done; 1 refused (no such job, not dead, in flight, no store,
the store unreachable); 2 bad usage. Messages go to stderr.
]]

local USAGE_LINE = M.USAGE:match("^([^\n]*)\n")

-- The defaults durable.open has, and the most q:jobs takes.
local QUEUE, PREFIX, LIMIT, LIMIT_MAX = "default", "hwtimer", 100, 1000
-- Seconds a Redis command may take before the CLI gives up.
local REDIS_TIMEOUT = 30

---------------------------------------------------------------------------
-- Text: UTF-8, printable forms, times
---------------------------------------------------------------------------

-- The length of the valid UTF-8 sequence at s[i] (1 to 4), or nil where
-- s[i] starts none (RFC 3629: no overlong forms, no surrogates, at most
-- U+10FFFF).
local function utf8_at(s, i)
  local c = s:byte(i)
  if c < 0x80 then return 1 end
  local n, lo, hi = nil, 0x80, 0xBF
  if c >= 0xC2 and c <= 0xDF then n = 2
  elseif c == 0xE0 then n, lo = 3, 0xA0
  elseif c == 0xED then n, hi = 3, 0x9F
  elseif c >= 0xE1 and c <= 0xEF then n = 3
  elseif c == 0xF0 then n, lo = 4, 0x90
  elseif c == 0xF4 then n, hi = 4, 0x8F
  elseif c >= 0xF1 and c <= 0xF3 then n = 4
  else return nil end
  for k = 1, n - 1 do
    local b = s:byte(i + k)
    if not b or b < (k == 1 and lo or 0x80) or b > (k == 1 and hi or 0xBF) then return nil end
  end
  return n
end

-- Call piece(s, i, n) for each valid sequence and bad(byte) for each byte
-- that starts none, in turn; the pieces' results, concatenated.
local function map_utf8(s, piece, bad)
  local out, i, n = {}, 1, #s
  while i <= n do
    local len = utf8_at(s, i)
    if len then
      out[#out + 1] = piece(s, i, len)
      i = i + len
    else
      out[#out + 1] = bad(s:byte(i))
      i = i + 1
    end
  end
  return concat(out)
end

local function valid_utf8(s)
  local i, n = 1, #s
  while i <= n do
    local len = utf8_at(s, i)
    if not len then return false end
    i = i + len
  end
  return true
end

local SHOWN = { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

-- s as a terminal may show it: valid UTF-8 as it is, but backslash, quote
-- (unless `message`: a message's quotes are its own), control characters
-- (C0, DEL, C1) and bytes that are not UTF-8 escaped (\n, \t, \r, \xHH).
local function printable(s, message)
  return map_utf8(s, function(str, i, len)
    local seq = str:sub(i, i + len - 1)
    local c = seq:byte(1)
    if SHOWN[seq] and not (message and seq == '"') then return SHOWN[seq] end
    if c < 0x20 or c == 0x7F then return format("\\x%02X", c) end
    if c == 0xC2 and seq:byte(2) < 0xA0 then return format("\\x%02X\\x%02X", seq:byte(1, 2)) end
    return seq
  end, function(b) return format("\\x%02X", b) end)
end

-- Columns a string takes: its UTF-8 characters (printable() has escaped
-- everything else).
local function width(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

-- An epoch as UTC ISO-8601 with milliseconds, or the number where os.date
-- cannot show it.
local function iso(t)
  local s = floor(t)
  local ok, date = pcall(os.date, "!%Y-%m-%dT%H:%M:%S", s)
  if not ok or not date then return format("%.3f", t) end
  return date .. format(".%03dZ", floor((t - s) * 1000))
end

-- A span of seconds in one or two units: "45s", "5m", "1h30m", "2d4h",
-- "0.25s".
local function span(secs)
  if secs < 60 then
    return (secs == floor(secs) and format("%d", secs) or format("%.3g", secs)) .. "s"
  end
  local units = { { 86400, "d" }, { 3600, "h" }, { 60, "m" }, { 1, "s" } }
  secs = floor(secs)
  for i, u in ipairs(units) do
    if secs >= u[1] then
      local n, rest = floor(secs / u[1]), secs % u[1]
      local next_u = units[i + 1]
      local small = next_u and floor(rest / next_u[1]) or 0
      return n .. u[2] .. (small > 0 and small .. next_u[2] or "")
    end
  end
end

-- When `t` is from `now`, to the nearest second: "in 5m", "3s ago", "now".
local function relative(t, now)
  local d = floor(t - now + 0.5)
  if d == 0 then return "now" end
  if d > 0 then return "in " .. span(d) end
  return span(-d) .. " ago"
end

---------------------------------------------------------------------------
-- JSON: a small encoder (objects' keys sorted, so the output is the same
-- for the same data)
---------------------------------------------------------------------------

local json = {}

local ARRAY = {}
json.null = setmetatable({}, { __tostring = function() return "null" end })

--- t, marked to be encoded as an array (an empty table is an object).
function json.array(t) return setmetatable(t, ARRAY) end

local ESCAPE = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n",
                 ["\r"] = "\\r", ["\t"] = "\\t" }
for c = 0, 31 do ESCAPE[string.char(c)] = ESCAPE[string.char(c)] or format("\\u%04x", c) end
ESCAPE["\127"] = "\\u007f"

local REPLACEMENT = "\239\191\189" -- U+FFFD

--- A JSON string: quote, backslash and control bytes escaped; each byte
-- that does not start a valid UTF-8 sequence replaced by U+FFFD.
function json.string(s)
  if s:find("[\128-\255]") then
    s = map_utf8(s, function(str, i, len) return str:sub(i, i + len - 1) end,
      function() return REPLACEMENT end)
  end
  return '"' .. s:gsub('[%z\1-\31\127"\\]', ESCAPE) .. '"'
end

-- The shortest of %.15g to %.17g that reads back as the same number;
-- null where JSON has none (NaN, infinities).
local function number(v)
  if v ~= v or v == math.huge or v == -math.huge then return "null" end
  for digits = 15, 17 do
    local s = format("%." .. digits .. "g", v)
    if tonumber(s) == v then return s end
  end
end

local function encode(v, out)
  local t = type(v)
  if v == nil or v == json.null then
    out[#out + 1] = "null"
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  elseif t == "number" then
    out[#out + 1] = number(v)
  elseif t == "string" then
    out[#out + 1] = json.string(v)
  elseif t == "table" and getmetatable(v) == ARRAY then
    out[#out + 1] = "["
    for i = 1, #v do
      if i > 1 then out[#out + 1] = "," end
      encode(v[i], out)
    end
    out[#out + 1] = "]"
  elseif t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = tostring(k) end
    table.sort(keys)
    out[#out + 1] = "{"
    for i, k in ipairs(keys) do
      if i > 1 then out[#out + 1] = "," end
      out[#out + 1] = json.string(k) .. ":"
      encode(v[k], out)
    end
    out[#out + 1] = "}"
  else
    error("hwtimer-jobs: cannot encode a " .. t .. " as JSON")
  end
end

--- v as JSON text.
function json.encode(v)
  local out = {}
  encode(v, out)
  return concat(out)
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

-- s in base64 (RFC 4648, with padding).
local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = a * 65536 + (b or 0) * 256 + (c or 0)
    local d = { floor(n / 262144), floor(n / 4096) % 64, floor(n / 64) % 64, n % 64 }
    for k = 1, 4 do d[k] = B64:sub(d[k] + 1, d[k] + 1) end
    if not c then d[4] = "=" end
    if not b then d[3] = "=" end
    out[#out + 1] = concat(d)
  end
  return concat(out)
end

---------------------------------------------------------------------------
-- The arguments
---------------------------------------------------------------------------

-- Options that take a value; flags; those of `ls` alone.
local VALUED = { path = true, redis = true, prefix = true, queue = true,
                 state = true, kind = true, limit = true, after = true }
local FLAGS = { json = true, help = true }
local LS_ONLY = { "state", "kind", "limit", "after" }
-- Commands, by the job ids they take.
local COMMANDS = { counts = 0, ls = 0, show = 1, retry = 1, run = 1, cancel = 1, schedules = 0 }

-- argv -> options, the command and its arguments; or nil and what is wrong.
-- Options go anywhere, as --name VALUE or --name=VALUE; after "--" every
-- word is an argument (an id that starts with "-").
local function read_args(argv)
  local o, words, only_words = {}, {}, false
  local i = 1
  while argv[i] ~= nil do
    local a = argv[i]
    if only_words or a:sub(1, 1) ~= "-" or a == "-" then
      words[#words + 1] = a
    elseif a == "--" then
      only_words = true
    else
      local name, value = a:match("^%-%-([^=]+)=(.*)$")
      name = name or a:match("^%-%-(.+)$")
      if a == "-h" then name = "help" end
      if not (name and (VALUED[name] or FLAGS[name])) then return nil, "unknown option " .. a end
      if o[name] ~= nil then return nil, "option --" .. name .. " given twice" end
      if FLAGS[name] then
        if value then return nil, "option --" .. name .. " takes no value" end
        value = true
      elseif not value then
        i = i + 1
        value = argv[i]
        if value == nil then return nil, "option --" .. name .. " needs a value" end
      end
      o[name] = value
    end
    i = i + 1
  end
  return o, words
end

-- "unix:PATH[?db=DB]" (PATH absolute; "unix:///PATH" as well) -> the
-- socket's path, nil, db; or nil.
local function unix_address(s)
  local rest = s:match("^unix:(/.*)$")
  if not rest then return nil end
  if rest:sub(1, 3) == "///" then rest = rest:sub(3)
  elseif rest:sub(1, 2) == "//" then return nil end -- (unix://HOST/...: not a path)
  local path, db = rest:match("^([^?]+)%?db=(%d+)$")
  if not path then path, db = rest:match("^([^?]+)$"), "0" end
  if not path or #db > 9 then return nil end
  return path, nil, tonumber(db)
end

-- "HOST:PORT[/DB]" -> host, port, db; a unix socket (unix_address): path,
-- nil, db; or nil.
local function redis_address(s)
  if s:match("^unix:") then return unix_address(s) end
  local host, port, db = s:match("^([^/]+):(%d+)/(%d+)$")
  if not host then
    host, port = s:match("^([^/]+):(%d+)$")
    db = "0"
  end
  if not host or #port > 5 or #db > 9 then return nil end
  port, db = tonumber(port), tonumber(db)
  if port < 1 or port > 65535 then return nil end
  return host, port, db
end

-- A cursor as q:jobs makes them: "due/id".
local function cursor(s)
  local due, id = s:match("^([^/]+)/(.+)$")
  due = tonumber(due)
  return due ~= nil and due == due and due > -math.huge and due < math.huge and id ~= nil
end

local function some(v) return v ~= "" end

-- The checks of the options' values, in turn: { name, test, what is expected }.
local VALUES = {
  { "path", some, "a file name" },
  { "redis", redis_address, "HOST:PORT[/DB] or unix:PATH[?db=DB]" },
  { "prefix", some, "a non-empty prefix" },
  { "queue", some, "a non-empty queue name" },
  { "state", function(v) return v == "pending" or v == "leased" or v == "dead" end, "pending, leased or dead" },
  { "kind", some, "a non-empty kind" },
  { "limit", function(v) local n = v:match("^%d+$") and tonumber(v) return n and n >= 1 and n <= LIMIT_MAX end,
    "an integer from 1 to " .. LIMIT_MAX },
  { "after", cursor, "a cursor that ls printed" },
}

-- --help or -h among the options (before any "--").
local function wants_help(argv)
  local i = 1
  while argv[i] ~= nil and argv[i] ~= "--" do
    if argv[i] == "--help" or argv[i] == "-h" then return true end
    i = i + 1
  end
  return false
end

-- The request: { command =, id =, the options } or nil and what is wrong.
local function request(argv)
  if wants_help(argv) then return { command = "help" } end
  local o, words = read_args(argv)
  if not o then return nil, words end
  local command = words[1]
  if not command then return nil, "no command" end
  local n = COMMANDS[command]
  if not n then return nil, "unknown command '" .. printable(command) .. "'" end
  if n == 1 and not words[2] then return nil, command .. " needs a job ID" end
  if n == 1 and words[2] == "" then return nil, command .. ": the job ID is empty" end
  if words[n + 2] then return nil, "unexpected argument '" .. printable(words[n + 2]) .. "'" end
  if command ~= "ls" then
    for _, name in ipairs(LS_ONLY) do
      if o[name] then return nil, "option --" .. name .. " is for ls only" end
    end
  end
  if o.path and o.redis then return nil, "--path and --redis exclude each other" end
  if not (o.path or o.redis) then return nil, "--path FILE or --redis ADDRESS expected" end
  if o.prefix and not o.redis then return nil, "--prefix is for --redis only" end
  for _, v in ipairs(VALUES) do
    local value = o[v[1]]
    if value and not v[2](value) then
      return nil, "bad --" .. v[1] .. " '" .. printable(value) .. "': " .. v[3] .. " expected"
    end
  end
  o.command, o.id = command, n == 1 and words[2] or nil
  o.queue, o.prefix, o.state = o.queue or QUEUE, o.prefix or PREFIX, o.state or "pending"
  o.limit = tonumber(o.limit) or LIMIT
  return o
end

---------------------------------------------------------------------------
-- The store
---------------------------------------------------------------------------

-- What messages say after the words of the module that said them.
local function bare(msg)
  msg = tostring(msg):gsub("^[^:\n]*%.lua:%d+: ", ""):gsub("^redis error: ", "")
  return (msg:gsub("^hwtimer%.durable: ", ""))
end

-- redis-lua (Debian lua-redis: installed for Lua 5.1-5.3; its plain Lua
-- runs on 5.4 too, found there through 5.3's directory), or nil.
local function redis_lua()
  local ok, redis = pcall(require, "redis")
  if ok then return redis end
  if _VERSION ~= "Lua 5.4" then return nil end
  local path = package.path
  package.path = path .. ";/usr/share/lua/5.3/?.lua"
  ok, redis = pcall(require, "redis")
  if ok then return redis end
  package.path = path
  return nil
end

-- A client of redis-lua `redis` at `host` and `port` (a unix socket's path
-- and no port), database `db` selected, and where it is, as messages say;
-- or nil and why not.
local function redis_at(redis, host, port, db)
  local where, ok, client
  if port then
    where = host .. ":" .. port .. "/" .. db
    ok, client = pcall(redis.connect, host, port, REDIS_TIMEOUT)
  else
    where = "unix:" .. host .. "?db=" .. db
    ok, client = pcall(redis.connect, { scheme = "unix", path = host, timeout = REDIS_TIMEOUT })
  end
  if not ok then -- (redis-lua: "could not connect to HOST:PORT [why]")
    client = bare(client)
    return nil, "cannot connect to Redis at " .. where .. ": " .. (client:match("%[(.+)%]$") or client)
  end
  return client, where
end

-- A client of the Redis store of `o`, its database selected, once its
-- store is found there (durable.open would make one where there is none);
-- or nil and why not. A node of a Redis Cluster that does not serve the
-- queue's slot answers MOVED with the one that does: that one is asked
-- instead (once; a queue's keys share one hash tag, so one node holds them
-- all).
local function redis_client(o)
  local redis = redis_lua()
  if not redis then
    return nil, "--redis needs redis-lua (Debian: apt-get install lua-redis; luarocks install redis-lua)"
  end
  local host, port, db = redis_address(o.redis)
  local base, old, where = require("hwtimer.durable.redis").base(o.prefix, o.queue)
  local meta, old_meta = base .. ":meta", where == "same" and old .. ":meta" -- (a store of format 6 or older)
  for hop = 1, 2 do
    local client, where = redis_at(redis, host, port, db)
    if not client then return nil, where end
    local ok, found = pcall(function()
      if db ~= 0 then client:select(db) end
      return client:exists(meta) or (old_meta and client:exists(old_meta))
    end)
    local moved = not ok and hop == 1 and bare(found):match("^MOVED %d+ (.+:%d+)$")
    if moved then
      pcall(client.quit, client)
      host, port = moved:match("^%[?(.-)%]?:(%d+)$")
      port = tonumber(port)
    elseif not ok then
      pcall(client.quit, client)
      return nil, "Redis at " .. where .. ": " .. bare(found)
    elseif found ~= true and found ~= 1 then
      pcall(client.quit, client)
      return nil, format("no hwtimer.durable store {%s:%s} in Redis at %s (see --prefix and --queue)",
        printable(o.prefix), printable(o.queue), where)
    else
      return client
    end
  end
end

-- Open the store of `o` on a timer of its own: queue, timer; or nil and
-- why not. The window is a millisecond and the timer never runs: nothing
-- is loaded into it, nothing is claimed.
local function open(o)
  local hwtimer = require("hwtimer")
  local durable = require("hwtimer.durable")
  local opts = { queue = o.queue, window = 0.001 }
  if o.path then
    local f, err = io.open(o.path, "rb")
    if not f then return nil, err .. " (hwtimer-jobs opens a store, never makes one)" end
    f:close()
    opts.path, opts.existing = o.path, true
  else
    local client, err = redis_client(o)
    if not client then return nil, err end
    opts.redis, opts.prefix, opts.existing = client, o.prefix, true
  end
  local timer = hwtimer.new()
  local q, err = durable.open(timer, opts)
  if not q then
    timer:close()
    return nil, bare(err)
  end
  return q, timer, durable.engine(q)
end

---------------------------------------------------------------------------
-- Output
---------------------------------------------------------------------------

-- Rows of cells as aligned columns (numbers to the right), two spaces apart.
local function columns(rows, right)
  local w = {}
  for _, row in ipairs(rows) do
    for c, cell in ipairs(row) do w[c] = math.max(w[c] or 0, width(cell)) end
  end
  local lines = {}
  for r, row in ipairs(rows) do
    local cells = {}
    for c, cell in ipairs(row) do
      local pad = string.rep(" ", w[c] - width(cell))
      if right[c] then cells[c] = pad .. cell
      elseif c < #row then cells[c] = cell .. pad
      else cells[c] = cell end
    end
    lines[r] = concat(cells, "  ")
  end
  return concat(lines, "\n") .. "\n"
end

local function state_of(job)
  return job.dead and "dead" or job.leased and "leased" or "pending"
end

local function is_schedule(job) return job.every ~= nil or job.cron ~= nil end

-- A schedule's fields beside a job's, as q:every stored them and its runs.
local SCHEDULE = { "cron", "tz", "start", "stop", "limit", "missed", "window", "runs", "scheduled_for" }

-- A job as the JSON documents show it: every field, null when unset; a
-- schedule's too, for a schedule.
local function job_json(job)
  local j = {
    id = job.id, kind = job.kind, state = state_of(job), due = job.due, due_utc = iso(job.due),
    attempt = job.attempt, every = job.every or json.null, payload = job.payload or json.null,
    error = job.error or json.null,
  }
  if job.payload and not valid_utf8(job.payload) then j.payload_base64 = base64(job.payload) end
  if is_schedule(job) then
    for _, k in ipairs(SCHEDULE) do
      local v = job[k]
      if v == nil then v = json.null end
      j[k] = v
    end
    j.scheduled_for_utc = iso(job.scheduled_for)
  end
  return j
end

local function jobs_json(list)
  local t = {}
  for i, job in ipairs(list) do t[i] = job_json(job) end
  return json.array(t)
end

local function quoted(s) return s and '"' .. printable(s) .. '"' or "(none)" end

-- Cut text longer than n columns to n, ending in "...".
local function cut(s, n)
  if width(s) <= n then return s end
  local out, w = {}, 0
  for ch in s:gmatch("[^\128-\191][\128-\191]*") do
    if w + 1 > n - 3 then break end
    out[#out + 1], w = ch, w + 1
  end
  return concat(out) .. "..."
end

-- A shell word: quoted where it has more than letters, digits and ._/:=@%+-.
local function shell_word(s)
  if s:match("^[%w._/:=@%%+-]+$") then return s end
  if not s:find("[%c\127]") then return "'" .. s:gsub("'", "'\\''") .. "'" end
  -- control bytes (an id of escape sequences): bash's $'...' with every
  -- byte past ASCII's printable ones as \xHH, written as text and pasted back as they were
  return "$'" .. s:gsub("[^ -&(-%[%]-~]", function(c) return string.format("\\x%02X", c:byte()) end) .. "'"
end

local text = {}

function text.counts(c)
  local kinds = {}
  for k in pairs(c.kinds) do kinds[#kinds + 1] = k end
  table.sort(kinds)
  local rows = { { "KIND", "PENDING", "DUE", "LEASED", "DEAD" } }
  local function row(name, n)
    rows[#rows + 1] = { name, tostring(n.pending), tostring(n.due), tostring(n.leased), tostring(n.dead) }
  end
  for _, k in ipairs(kinds) do row(printable(k), c.kinds[k]) end
  row("(all)", c)
  return columns(rows, { false, true, true, true, true })
end

function text.jobs(list, now, o, next_cursor)
  if #list == 0 then
    return "no " .. o.state .. " jobs" .. (o.kind and " of kind " .. printable(o.kind) or "") ..
      (o.after and " after that cursor" or "") .. "\n"
  end
  local dead = o.state == "dead"
  local rows = { { "ID", "KIND", "DUE (UTC)", "WHEN", "ATTEMPT" } }
  if dead then rows[1][6] = "ERROR" end
  for _, job in ipairs(list) do
    local r = { printable(job.id), printable(job.kind), iso(job.due), relative(job.due, now), tostring(job.attempt) }
    if dead then r[6] = cut(printable(job.error or ""), 60) end
    rows[#rows + 1] = r
  end
  local s = columns(rows, { [5] = true })
  if next_cursor then s = s .. "next page: --after " .. shell_word(next_cursor) .. "\n" end
  return s
end

-- A schedule's calendar in a few words: "5m", "30 2 * * * Europe/Berlin".
local function calendar(job)
  if job.cron then return printable(job.cron) .. (job.tz and " " .. printable(job.tz) or "") end
  return span(job.every)
end

-- A time as text and how far from now, or nil.
local function when(t, now) return t and iso(t) .. " (" .. relative(t, now) .. ")" end

function text.job(job, now)
  local lines = {
    { "id", printable(job.id) },
    { "kind", printable(job.kind) },
    { "state", state_of(job) },
    { "due", when(job.due, now) },
    { "attempt", tostring(job.attempt) },
    { "every", job.every and span(job.every) .. " (" .. number(job.every) .. " s)" or "(none)" },
    { "payload", quoted(job.payload) },
    { "error", quoted(job.error) },
  }
  if is_schedule(job) then -- what q:every stored, its runs, the time of its run
    local more = {
      { "cron", job.cron and quoted(job.cron) .. " in " .. printable(job.tz or "UTC") },
      { "time", when(job.scheduled_for, now) },
      { "runs", tostring(job.runs) .. (job.limit and " of " .. job.limit or "") },
      { "start", when(job.start, now) },
      { "stop", when(job.stop, now) },
      { "missed", job.missed .. (job.window and " within " .. span(job.window) or "") },
    }
    for _, l in ipairs(more) do
      if l[2] then lines[#lines + 1] = l end
    end
  end
  for i, l in ipairs(lines) do lines[i] = format("%-8s %s", l[1], l[2]) end
  return concat(lines, "\n") .. "\n"
end

function text.schedules(list, now)
  if #list == 0 then return "no schedules\n" end
  local rows = { { "ID", "KIND", "SCHEDULE", "NEXT DUE (UTC)", "WHEN", "RUNS", "ATTEMPT", "STATE" } }
  for _, job in ipairs(list) do
    rows[#rows + 1] = { printable(job.id), printable(job.kind), calendar(job), iso(job.due),
                        relative(job.due, now), tostring(job.runs) .. (job.limit and "/" .. job.limit or ""),
                        tostring(job.attempt), state_of(job) }
  end
  return columns(rows, { [6] = true, [7] = true })
end

local DONE = {
  retry = "retried: pending, due now, attempts from zero",
  run = "due now",
  cancel = "cancelled",
}

---------------------------------------------------------------------------
-- The commands: each (q, engine, o) -> text, JSON value; or nil and a
-- refusal
---------------------------------------------------------------------------

local run = {}

function run.counts(q)
  local c, err = q:counts()
  if not c then return nil, err end
  return text.counts(c), c
end

function run.ls(q, engine, o)
  local list, next_cursor = q:jobs({ state = o.state, kind = o.kind, limit = o.limit, after = o.after })
  if not list then return nil, next_cursor end
  return text.jobs(list, engine:now(), o, next_cursor),
    { jobs = jobs_json(list), next = next_cursor or json.null }
end

function run.show(q, engine, o)
  local job, err = q:get(o.id)
  if not job then return nil, err or "no job " .. o.id end
  return text.job(job, engine:now()), job_json(job)
end

local function repair(method)
  return function(q, _, o)
    local ok, err = q[method](q, o.id)
    if ok == false then err = "no job " .. o.id end
    if not ok then return nil, err end
    return printable(o.id) .. ": " .. DONE[o.command] .. "\n", { ok = true, command = o.command, id = o.id }
  end
end
run.retry, run.run, run.cancel = repair("retry"), repair("run_now"), repair("cancel")

function run.schedules(q, engine)
  local list, err = q:schedules()
  if not list then return nil, err end
  return text.schedules(list, engine:now()), { schedules = jobs_json(list) }
end

---------------------------------------------------------------------------
-- main
---------------------------------------------------------------------------

--- status = M.main(argv, out, err): run hwtimer-jobs with the words argv
-- (a list of strings), writing to the handles out and err.
function M.main(argv, out, err)
  local o, why = request(argv)
  if not o then
    err:write("hwtimer-jobs: ", why, "\n", USAGE_LINE, "\n(hwtimer-jobs --help lists the commands)\n")
    return 2
  end
  if o.command == "help" then
    out:write(M.USAGE)
    return 0
  end
  local opened, q, timer, engine = pcall(open, o)
  if not (opened and q) then
    err:write("hwtimer-jobs: ", printable(bare(opened and timer or q), true), "\n")
    return 1
  end
  local ok, shown, value = pcall(run[o.command], q, engine, o)
  q:close()
  timer:close()
  if not ok then shown, value = nil, "failed: " .. tostring(shown) end
  if not shown then
    err:write("hwtimer-jobs: ", printable(bare(value), true), "\n")
    return 1
  end
  local wrote, werr = out:write(o.json and json.encode(value) .. "\n" or shown)
  if wrote then wrote, werr = out:flush() end
  if not wrote then -- (a full disk, a closed pipe: a reader must not take a part for the whole)
    err:write("hwtimer-jobs: cannot write the output: ", tostring(werr), "\n")
    return 1
  end
  return 0
end

return M
