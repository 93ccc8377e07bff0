--- hwtimer.metrics: timers' and durable queues' figures as Prometheus text
-- exposition (format 0.0.4), for a /metrics endpoint.
--
--   local metrics = require("hwtimer.metrics")
--   local text = metrics.render({ timers = { main = timer }, queues = { orders = q } })
--
-- A timer gives its stats() counts and gauges and its lateness histogram
-- (timer:lateness()); a queue gives its store's jobs by state and kind
-- (q:counts(), one round trip to the store) and this process's runs by
-- outcome (q:stats()). In nginx, where each worker has its own timer,
-- hwtimer.metrics_ngx gathers every worker's figures for one scrape.
local check = require("hwtimer.check")

local M = {}

M.CONTENT_TYPE = "text/plain; version=0.0.4"

-- The families: name (after the prefix), type, help. Samples name the
-- family they belong to; render writes each family's HELP and TYPE once.
local FAMILIES = {
  { "timeouts_scheduled_total", "counter",
    "Timeout runs armed: each schedule, each run of a periodic timeout, each reset that arms one." },
  { "timeouts_fired_total", "counter", "Timeout runs started (callbacks called, or timeouts taken by the host)." },
  { "timeouts_cancelled_total", "counter", "Armed timeout runs cancelled (cancel, stop, close)." },
  { "callback_errors_total", "counter", "Timeout callbacks that raised." },
  { "periods_skipped_total", "counter", "Periods a fixed-rate periodic timeout skipped because it fell behind." },
  { "retries_total", "counter", "Retries through hwtimer.retry, by outcome (started, succeeded, failed)." },
  { "callback_seconds_total", "counter", "Seconds dispatch spent in callbacks." },
  { "timeouts_pending", "gauge", "Timeout runs armed, neither fired nor cancelled." },
  { "timeouts_due", "gauge", "Timeouts due and not yet run." },
  { "lateness_seconds", "histogram", "How late timeout runs started after their deadline." },
  { "store_up", "gauge", "1 when the queue's store answered this scrape, 0 when it failed." },
  { "jobs", "gauge", "Durable jobs in the store by kind and state (pending, leased, dead: disjoint)." },
  { "jobs_due", "gauge", "Pending durable jobs due now, by kind." },
  { "job_runs_total", "counter", "Durable job runs by this process, by kind and outcome (succeeded, retried, dead)." },
}
local FAMILY = {}
for i, f in ipairs(FAMILIES) do FAMILY[f[1]] = { order = i, type = f[2], help = f[3] } end

-- ---- label values: valid UTF-8 whatever the bytes ---------------------------

-- (well-formed UTF-8 as hwtimer.text reads it: Unicode's table 3-7, no
-- overlong forms, no surrogates, nothing past U+10FFFF)
local text = require("hwtimer.text")

local function backslash_doubled(s, i, n)
  local piece = s:sub(i, i + n - 1)
  return piece == "\\" and "\\\\" or piece
end
local function hex_escaped(b) return ("\\x%02x"):format(b) end

-- s when it is valid UTF-8 (most are: ASCII is checked by one find).
-- Otherwise s with each byte outside a well-formed sequence written as the
-- four characters \xHH, and each backslash doubled: two such values stay
-- two, and a scrape reads valid UTF-8 (promtool and Prometheus reject a
-- line with invalid UTF-8 in it, the whole exposition with it).
local function valid_utf8(s)
  if text.valid_utf8(s) then return s end
  return text.map_utf8(s, backslash_doubled, hex_escaped)
end

-- A label value as the exposition writes it: valid UTF-8, then backslash,
-- double quote and line feed escaped as the format says (other control
-- bytes, NUL too, are valid UTF-8 the format lets through as they are).
local function escape(v)
  if type(v) == "number" and v == math.floor(v) and math.abs(v) < 2 ^ 53 then
    v = ("%d"):format(v) -- 3, not 3.0, on every Lua
  end
  return (valid_utf8(tostring(v)):gsub("[\\\"\n]", { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }))
end

-- {k = v} and more pairs as {k="v",...}, keys sorted (a stable line for a series).
local function label_text(...)
  local all, keys = {}, {}
  for i = 1, select("#", ...) do
    for k, v in pairs(select(i, ...) or {}) do
      if all[k] == nil then keys[#keys + 1] = k end
      all[k] = v
    end
  end
  if #keys == 0 then return "" end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. '="' .. escape(all[k]) .. '"' end
  return "{" .. table.concat(keys, ",") .. "}"
end

local function number(v)
  if v == math.huge then return "+Inf" end
  if v == -math.huge then return "-Inf" end
  if v ~= v then return "NaN" end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return ("%d"):format(v) end
  return ("%.17g"):format(v)
end

-- A collector of samples: add(family, suffix, labels, value).
local function samples(prefix, constant)
  local by_family = {}
  local function add(family, suffix, labels, value)
    local list = by_family[family]
    if not list then
      list = {}
      by_family[family] = list
    end
    list[#list + 1] = prefix .. family .. suffix .. label_text(constant, labels) .. " " .. number(value)
  end
  return add, by_family
end

-- The timer under a glue object (hwtimer.ngx's d.timer), or the timer itself.
local function timer_of(t)
  if type(t) == "table" then return rawget(t, "timer") end
  return t
end

local COUNTERS = { timeouts_scheduled_total = "scheduled", timeouts_fired_total = "fired",
                   timeouts_cancelled_total = "cancelled", callback_errors_total = "errors",
                   periods_skipped_total = "skipped", callback_seconds_total = "cb_time",
                   timeouts_pending = "pending", timeouts_due = "due" }

local function add_timer(add, name, timer)
  timer = timer_of(timer)
  local s, l = timer:stats(), { timer = name }
  for family, field in pairs(COUNTERS) do add(family, "", l, s[field]) end
  for _, outcome in ipairs({ "started", "succeeded", "failed" }) do
    add("retries_total", "", { timer = name, outcome = outcome }, s["retry_" .. outcome])
  end
  local buckets, sum, count = timer:lateness()
  for _, b in ipairs(buckets) do
    add("lateness_seconds", "_bucket", { timer = name, le = ("%.9f"):format(b[1]) }, b[2])
  end
  add("lateness_seconds", "_bucket", { timer = name, le = "+Inf" }, count)
  add("lateness_seconds", "_sum", l, sum)
  add("lateness_seconds", "_count", l, count)
end

-- This process's runs of a queue's jobs (no store round trip).
local function add_runs(add, name, q)
  for kind, k in pairs(q:stats().runs) do
    for _, outcome in ipairs({ "succeeded", "retried", "dead" }) do
      add("job_runs_total", "", { queue = name, kind = kind, outcome = outcome }, k[outcome])
    end
  end
end

-- The store's jobs by kind and state: one q:counts() round trip.
local function add_store(add, name, q)
  local c = q:counts()
  add("store_up", "", { queue = name }, c and 1 or 0)
  if not c then return end
  for kind, k in pairs(c.kinds) do
    for _, state in ipairs({ "pending", "leased", "dead" }) do
      add("jobs", "", { queue = name, kind = kind, state = state }, k[state])
    end
    add("jobs_due", "", { queue = name, kind = kind }, k.due)
  end
end

-- ---- the arguments, checked where they are given ----------------------------

-- The label names a caller may not give in opts.labels, and why: the ones
-- hwtimer.metrics writes itself (a constant label of that name would give
-- a series two values for it), and a histogram's and a summary's.
local RESERVED = {
  timer = "hwtimer.metrics writes it", outcome = "hwtimer.metrics writes it",
  queue = "hwtimer.metrics writes it", kind = "hwtimer.metrics writes it",
  state = "hwtimer.metrics writes it", le = "a histogram's bucket label",
  quantile = "a summary's quantile label",
}

-- A string as a message shows it: printable ASCII, a backslash as \\, other
-- bytes as \xHH.
local function shown(s)
  return "'" .. s:gsub("[%c\\\128-\255]", function(c)
    return c == "\\" and "\\\\" or ("\\x%02x"):format(c:byte())
  end) .. "'"
end

-- Nil when `labels` is a table of constant labels Prometheus takes, else
-- what is wrong. `more` adds reserved names (hwtimer.metrics_ngx's worker).
local function labels_error(labels, more)
  for k, v in pairs(labels) do
    if type(k) ~= "string" then return "a label name expected as key, got " .. type(k) end
    if not k:find("^[A-Za-z_][A-Za-z0-9_]*$") then
      return "key " .. shown(k) .. " is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
    end
    if k:sub(1, 2) == "__" then return "key " .. shown(k) .. " is reserved (names starting with __ are Prometheus')" end
    local why = RESERVED[k] or more and more[k]
    if why then return "key " .. shown(k) .. " is reserved (" .. why .. ")" end
    if type(v) ~= "string" and type(v) ~= "number" then
      return "value of " .. shown(k) .. ": string or number expected, got " .. check.type_name(v)
    end
  end
end

-- A metric name prefix: a metric name's characters, without the colon
-- (recording rules' own, which promtool refuses in a scrape) and without a
-- leading __ (Prometheus' own).
local function prefix_ok(prefix)
  return type(prefix) == "string" and prefix:find("^[A-Za-z_][A-Za-z0-9_]*$") ~= nil and prefix:sub(1, 2) ~= "__"
end

local function is_timer(t)
  return type(t) == "userdata" and check.type_name(t) == "hwtimer.timer"
end

-- What opts.timers takes: a timer, or an object over one (hwtimer.ngx's).
local function timer_error(t)
  if is_timer(t) or type(t) == "table" and is_timer(rawget(t, "timer")) then return nil end
  return "hwtimer.timer expected, got " .. check.type_name(t)
end

-- What opts.queues takes: a durable queue; an open one when its store is read.
local function queue_error(q, store)
  if type(q) ~= "table" or check.type_name(q) ~= "hwtimer.durable" then
    return "hwtimer.durable queue expected, got " .. check.type_name(q)
  end
  if store and tostring(q) == "hwtimer.durable (closed)" then
    return "an open hwtimer.durable queue expected, got a closed one (store = false renders its runs only)"
  end
end

-- Nil when every name of `by_name` (a field of opts) is a non-empty string,
-- shown as a label value no other name is shown as, and every value passes
-- `object_error`; else what is wrong.
local function named_error(field, what, by_name, object_error, store)
  local seen = {}
  for name, v in pairs(by_name) do
    if type(name) ~= "string" or name == "" then
      return ("field '%s': a %s name (non-empty string) expected as key, got %s"):format(field, what,
        type(name) == "string" and "''" or type(name))
    end
    local err = object_error(v, store)
    if err then return ("field '%s': %s %s: %s"):format(field, what, shown(name), err) end
    local as = escape(name)
    if seen[as] then
      local a, b = seen[as], name
      if b < a then a, b = b, a end
      return ("field '%s': %s names %s and %s show as the same label value"):format(field, what, shown(a), shown(b))
    end
    seen[as] = name
  end
end

-- What is wrong with opts (a field of it named), or nil.
local function opts_error(opts, store, more_reserved, known)
  if type(opts) ~= "table" then return "table expected, got " .. check.type_name(opts) end
  if known then -- (nil: the caller checks its own keys)
    for key in pairs(opts) do
      if not known[key] then return "unknown field '" .. text.message(key) .. "'" end
    end
  end
  for _, key in ipairs({ "timers", "queues", "labels" }) do
    if opts[key] ~= nil and type(opts[key]) ~= "table" then
      return ("field '%s': table expected, got %s"):format(key, check.type_name(opts[key]))
    end
  end
  if opts.prefix ~= nil and not prefix_ok(opts.prefix) then
    return "field 'prefix': a metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*, not __...) expected, got "
      .. (type(opts.prefix) == "string" and shown(opts.prefix) or check.type_name(opts.prefix))
  end
  local err = opts.labels and labels_error(opts.labels, more_reserved)
  if err then return "field 'labels': " .. err end
  return named_error("timers", "timer", opts.timers or {}, timer_error)
    or named_error("queues", "queue", opts.queues or {}, queue_error, store)
end

--- metrics.check_opts(opts, n, fname, level, store, more_reserved): raises
-- "bad argument #n to 'fname' (...)" at `level` (error()'s, counted from
-- the caller) unless opts is one collect takes; store: its queues' stores
-- are read (so they must be open); more_reserved: { label = why } names a
-- caller writes itself. For hwtimer.metrics_ngx, which checks its own
-- arguments where they are given.
M.check_opts = function(opts, n, fname, level, store, more_reserved, known)
  local err = opts_error(opts, store, more_reserved, known)
  if err then check.argerror(n, fname, err, level + 1) end
  return opts.prefix or "hwtimer_"
end

-- The fields render and collect take (a misspelt one, `timer`, would give an
-- empty page without a word).
local FIELDS = { timers = true, queues = true, labels = true, prefix = true, store = true, runs = true }

-- collect, its errors naming fname (the function the caller called).
local function collect(opts, fname)
  local prefix = M.check_opts(opts, 1, fname, 3, type(opts) == "table" and opts.store ~= false, nil, FIELDS)
  local add, by_family = samples(prefix, opts.labels)
  for name, timer in pairs(opts.timers or {}) do add_timer(add, name, timer) end
  for name, q in pairs(opts.queues or {}) do
    if opts.runs ~= false then add_runs(add, name, q) end
    if opts.store ~= false then add_store(add, name, q) end
  end
  return by_family, prefix
end

--- by_family = metrics.collect(opts): the sample lines of opts' timers and
-- queues by family (without HELP and TYPE), and the prefix. opts as for
-- render, plus store = false: leave out the store's figures (q:counts);
-- runs = false: leave out this process's runs (q:stats).
function M.collect(opts)
  local by_family, prefix = collect(opts, "collect") -- (not a tail call: the error's level counts this one)
  return by_family, prefix
end

--- text = metrics.format(by_family, [prefix]): Prometheus text from sample
-- lines by family, each family's HELP and TYPE once, families and lines in
-- a stable order.
function M.format(by_family, prefix)
  if type(by_family) ~= "table" then
    check.argerror(1, "format", "table expected, got " .. check.type_name(by_family), 2)
  end
  if prefix ~= nil and not prefix_ok(prefix) then
    check.argerror(2, "format", "metric name prefix expected, got " .. check.type_name(prefix), 2)
  end
  prefix = prefix or "hwtimer_"
  local names = {}
  for family, lines in pairs(by_family) do
    if type(family) ~= "string" or not family:find("^[A-Za-z0-9_]+$") or type(lines) ~= "table" then
      check.argerror(1, "format", "family " .. (type(family) == "string" and shown(family) or type(family))
        .. ": a metric name (after the prefix) and a table of sample lines expected", 2)
    end
    names[#names + 1] = family
  end
  table.sort(names, function(a, b)
    local fa, fb = FAMILY[a], FAMILY[b]
    return (fa and fa.order or 1e9) < (fb and fb.order or 1e9) or (fa == fb and a < b)
  end)
  local out = {}
  for _, family in ipairs(names) do
    local f = FAMILY[family] or { type = "untyped", help = family }
    out[#out + 1] = ("# HELP %s%s %s"):format(prefix, family, f.help)
    out[#out + 1] = ("# TYPE %s%s %s"):format(prefix, family, f.type)
    local lines = by_family[family]
    if f.type ~= "histogram" then table.sort(lines) end -- a histogram keeps its buckets' order
    for _, line in ipairs(lines) do out[#out + 1] = line end
  end
  out[#out + 1] = ""
  return table.concat(out, "\n")
end

--- text = metrics.render(opts): opts.timers { name = timer (or hwtimer.ngx
-- object) }, opts.queues { name = durable queue }, opts.labels (constant
-- labels on every sample), opts.prefix (default "hwtimer_").
function M.render(opts)
  local by_family, prefix = collect(opts, "render")
  return M.format(by_family, prefix)
end

return M
