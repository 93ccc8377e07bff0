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

local format, concat = string.format, table.concat

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
  --redis ADDRESS        a Redis store (an existing one; redis-lua) at HOST:PORT[/DB],
                         over a unix socket at unix:PATH[?db=DB], or at
                         redis://[USER[:PASSWORD]@]HOST[:PORT][/DB] (rediss://:
                         TLS, with LuaSec); database DB (default 0), port 6379;
                         USER and PASSWORD percent-encoded; the password is
                         taken from $REDISCLI_AUTH where the URL has none
  --cacert FILE          the CAs rediss:// trusts (default: the system's)
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
local T = require("hwtimer.jobs_cli_text")
local R = require("hwtimer.jobs_cli_redis")
local bare = R.bare
local printable, width, json, number = T.printable, T.width, T.json, T.number
local valid_utf8, base64, unbase64, cut, shell_word = T.valid_utf8, T.base64, T.unbase64, T.cut, T.shell_word
local iso, span, relative = T.iso, T.span, T.relative

---------------------------------------------------------------------------
-- Times
---------------------------------------------------------------------------



---------------------------------------------------------------------------
-- The arguments
---------------------------------------------------------------------------

-- Options that take a value; flags; those of `ls` alone.
local VALUED = { path = true, redis = true, prefix = true, queue = true, cacert = true,
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
      if not (name and (VALUED[name] or FLAGS[name])) then return nil, "unknown option " .. printable(a) end
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

-- A cursor as ls prints them: "due/id" as q:jobs makes them, or
-- "base64:" and that in base64 (a cursor that is not UTF-8 text, or holds
-- a NUL, which no argument can); the cursor q:jobs takes, or nil.
local function cursor(s)
  local encoded = s:match("^base64:(.*)$")
  if encoded then s = unbase64(encoded) end
  local due, id = (s or ""):match("^([^/]+)/(.+)$")
  due = tonumber(due)
  if due ~= nil and due == due and due > -math.huge and due < math.huge and id ~= nil then return s end
  return nil
end

-- A cursor as ls prints it: as text where it is UTF-8 without a NUL, and
-- otherwise in base64 (see cursor): for JSON (whose strings are UTF-8) and
-- for an argument (a NUL ends it).
local function cursor_text(s)
  if valid_utf8(s) and not s:find("%z") then return s end
  return "base64:" .. base64(s)
end

local function some(v) return v ~= "" end

-- The checks of the options' values, in turn: { name, test, what is expected }.
local VALUES = {
  { "path", some, "a file name" },
  { "redis", R.address, R.FORMS },
  { "cacert", some, "a file name" },
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
  if o.cacert and not (o.redis and o.redis:match("^rediss:")) then
    return nil, "--cacert is for --redis rediss://... only"
  end
  for _, v in ipairs(VALUES) do
    local value = o[v[1]]
    if value and not v[2](value) then
      return nil, "bad --" .. v[1] .. " '" .. printable(R.shown(value)) .. "': " .. v[3] .. " expected"
    end
  end
  o.command, o.id = command, n == 1 and words[2] or nil
  o.queue, o.prefix, o.state = o.queue or QUEUE, o.prefix or PREFIX, o.state or "pending"
  o.limit = tonumber(o.limit) or LIMIT
  if o.after then o.after = cursor(o.after) end
  return o
end

---------------------------------------------------------------------------
-- The store
---------------------------------------------------------------------------

-- Open the store of `o` on a timer of its own: queue, timer; or nil and
-- why not. The window is a millisecond and the timer never runs: nothing
-- is loaded into it, nothing is claimed.
local function open(o)
  local hwtimer = require("hwtimer")
  local durable = require("hwtimer.durable")
  local opts = { queue = o.queue, window = 0.001 }
  if o.path then -- (no io.open to see that it is there: the open of a FIFO would wait for a writer)
    opts.path, opts.existing = o.path, true
  else
    local client, err = R.client(o)
    if not client then return nil, err end
    opts.redis, opts.prefix, opts.existing = client, o.prefix, true
  end
  local timer = hwtimer.new()
  local q, err = durable.open(timer, opts)
  if not q then
    timer:close()
    err = bare(err)
    if o.path and err == o.path .. ": No such file or directory" then
      err = err .. " (hwtimer-jobs opens a store, never makes one)"
    end
    return nil, err
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

-- t, where a string of it is not UTF-8 (JSON's strings are, and show such
-- bytes as U+FFFD), with the bytes in base64 beside it: name_base64.
local function with_base64(t)
  local extra = {}
  for k, v in pairs(t) do
    if type(v) == "string" and not valid_utf8(v) then extra[k .. "_base64"] = base64(v) end
  end
  for k, v in pairs(extra) do t[k] = v end
  return t
end

-- A job as the JSON documents show it: every field, null when unset; a
-- schedule's too, for a schedule.
local function job_json(job)
  local j = {
    id = job.id, kind = job.kind, state = state_of(job), due = job.due, due_utc = iso(job.due),
    attempt = job.attempt, every = job.every or json.null, payload = job.payload or json.null,
    error = job.error or json.null,
  }
  if is_schedule(job) then
    for _, k in ipairs(SCHEDULE) do
      local v = job[k]
      if v == nil then v = json.null end
      j[k] = v
    end
    j.scheduled_for_utc = iso(job.scheduled_for)
  end
  return with_base64(j)
end

local function jobs_json(list)
  local t = {}
  for i, job in ipairs(list) do t[i] = job_json(job) end
  return json.array(t)
end

local function quoted(s) return s and '"' .. printable(s) .. '"' or "(none)" end


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
  if next_cursor then
    local word = next_cursor:find("%z") and cursor_text(next_cursor) or shell_word(next_cursor)
    s = s .. "next page: --after " .. word .. "\n"
  end
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
      { "missed", printable(job.missed) .. (job.window and " within " .. span(job.window) or "") },
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

-- q:counts() as JSON: a kind that is not UTF-8 under kinds_base64, by its
-- bytes in base64 (under kinds, as JSON's U+FFFD, two such would be one).
local function counts_json(c)
  local kinds, odd = {}, {}
  for k, n in pairs(c.kinds) do
    if valid_utf8(k) then kinds[k] = n else odd[base64(k)] = n end
  end
  local j = {}
  for k, v in pairs(c) do j[k] = v end
  j.kinds = kinds
  if next(odd) then j.kinds_base64 = odd end
  return j
end

function run.counts(q)
  local c, err = q:counts()
  if not c then return nil, err end
  return text.counts(c), counts_json(c)
end

function run.ls(q, engine, o)
  local list, next_cursor = q:jobs({ state = o.state, kind = o.kind, limit = o.limit, after = o.after })
  if not list then return nil, next_cursor end
  return text.jobs(list, engine:now(), o, next_cursor),
    { jobs = jobs_json(list), next = next_cursor and cursor_text(next_cursor) or json.null }
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
    return printable(o.id) .. ": " .. DONE[o.command] .. "\n",
      with_base64({ ok = true, command = o.command, id = o.id })
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
