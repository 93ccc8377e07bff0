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
  { "timeouts_scheduled_total", "counter", "Timeout runs armed: each schedule, each run of a periodic timeout, each reset that arms one." },
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
M.FAMILIES = FAMILY

local function escape(v)
  return (tostring(v):gsub("[\\\"\n]", { ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n" }))
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
  if type(t) == "table" and t.timer then return t.timer end
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
  for _, b in ipairs(buckets) do add("lateness_seconds", "_bucket", { timer = name, le = ("%.9f"):format(b[1]) }, b[2]) end
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

-- opts checked (raising at the caller of collect or render); the prefix.
local function check_opts(opts)
  if type(opts) ~= "table" then
    check.argerror(1, "render", "table expected, got " .. check.type_name(opts), 3)
  end
  for _, key in ipairs({ "timers", "queues", "labels" }) do
    if opts[key] ~= nil and type(opts[key]) ~= "table" then
      check.argerror(1, "render", ("field '%s': table expected, got %s"):format(key, check.type_name(opts[key])), 3)
    end
  end
  local prefix = opts.prefix or "hwtimer_"
  if type(prefix) ~= "string" or not prefix:match("^[%a_:][%w_:]*$") then
    check.argerror(1, "render", "field 'prefix': a metric name prefix expected", 3)
  end
  return prefix
end

--- by_family = metrics.collect(opts): the sample lines of opts' timers and
-- queues by family (without HELP and TYPE), and the prefix. opts as for
-- render, plus store = false: leave out the store's figures (q:counts);
-- runs = false: leave out this process's runs (q:stats).
function M.collect(opts)
  local prefix = check_opts(opts)
  local add, by_family = samples(prefix, opts.labels)
  for name, timer in pairs(opts.timers or {}) do add_timer(add, name, timer) end
  for name, q in pairs(opts.queues or {}) do
    if opts.runs ~= false then add_runs(add, name, q) end
    if opts.store ~= false then add_store(add, name, q) end
  end
  return by_family, prefix
end

--- text = metrics.format(by_family, [prefix]): Prometheus text from sample
-- lines by family, each family's HELP and TYPE once, families and lines in
-- a stable order.
function M.format(by_family, prefix)
  prefix = prefix or "hwtimer_"
  local names = {}
  for family in pairs(by_family) do names[#names + 1] = family end
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
  return M.format(M.collect(opts))
end

return M
