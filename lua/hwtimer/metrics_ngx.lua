--- hwtimer.metrics_ngx: one /metrics for every nginx worker's timers.
--
-- Each worker's timers and its runs of durable jobs are its own, and a
-- scrape reaches one worker. So each worker publishes its figures, labelled
-- worker="<ngx.worker.id()>", into a shared dict every `interval` seconds
-- (an ngx.timer.every: publishing adds nothing to the timers it shows), and
-- the worker serving the scrape puts every worker's together, with the
-- store's jobs by state read once, now.
--
--   lua_shared_dict hwtimer_metrics 1m;
--   init_worker_by_lua_block {
--     local d = assert(require("hwtimer.ngx").new())
--     package.loaded.timer = d
--     require("hwtimer.metrics_ngx").publish("hwtimer_metrics", { timers = { main = d } })
--   }
--   location = /metrics {
--     content_by_lua_block { require("hwtimer.metrics_ngx").serve("hwtimer_metrics") }
--   }
--
-- A worker's entry expires after three intervals: a worker that is gone
-- (killed, or reloaded away) drops out of the scrape.
local check = require("hwtimer.check")
local metrics = require("hwtimer.metrics")

local M = {}
local KEY = "hwtimer_metrics:worker:"
-- The label this module writes on every worker's sample: not one a caller gives.
local RESERVED = { worker = "hwtimer.metrics_ngx writes it" }

local function shared(fname, name)
  local dict = type(name) == "string" and ngx.shared[name]
  if not dict then
    check.argerror(1, fname, "name of a lua_shared_dict expected, got " .. tostring(name), 3)
  end
  return dict
end

-- opts (nil or a table) checked as argument #2 of fname, raising at
-- fname's caller; `store`: its queues' stores are read. The opts, a table.
local function checked(opts, fname, store)
  if opts == nil then return {} end
  metrics.check_opts(opts, 2, fname, 3, store, RESERVED)
  return opts
end

-- This worker's sample lines, one "family<TAB>line" a line. (A label value
-- holds no line feed: the exposition writes it as \n.)
local function snapshot(opts)
  local labels = { worker = ngx.worker.id() }
  for k, v in pairs(opts.labels or {}) do labels[k] = v end
  local by_family = metrics.collect({ timers = opts.timers, queues = opts.queues, store = false,
                                      prefix = opts.prefix, labels = labels })
  local out = {}
  for family, lines in pairs(by_family) do
    for _, line in ipairs(lines) do out[#out + 1] = family .. "\t" .. line end
  end
  return table.concat(out, "\n")
end

--- ok, err = publish(dict_name, opts): in init_worker, this worker's
-- figures into the dict now and every opts.interval (1) seconds. opts:
-- timers, queues (their runs in this worker), labels (on this worker's
-- samples, beside worker), prefix, as hwtimer.metrics takes them; checked
-- here. nil, message when nginx refuses the ngx.timer.every.
function M.publish(dict_name, opts)
  local dict = shared("publish", dict_name)
  opts = checked(opts, "publish", false)
  local interval = opts.interval or 1
  if type(interval) ~= "number" or not (interval > 0) then -- luacheck: ignore 581 (not (x > 0) rejects NaN too)
    check.argerror(2, "publish", "field 'interval': positive number of seconds expected", 2)
  end
  local key = KEY .. ngx.worker.id()
  local function publish(premature)
    if premature then return end
    local ok, err = dict:set(key, snapshot(opts), interval * 3)
    if not ok then ngx.log(ngx.WARN, "hwtimer.metrics_ngx: cannot publish: ", err) end
  end
  publish()
  return ngx.timer.every(interval, publish)
end

--- text = collect(dict_name, [opts]): every live worker's published figures
-- and, for opts.queues, the store's jobs by kind and state (q:counts, now),
-- with opts.labels on them.
local function collect(dict, opts)
  local by_family, prefix = metrics.collect({ queues = opts.queues, runs = false, prefix = opts.prefix,
                                              labels = opts.labels })
  for _, key in ipairs(dict:get_keys(0)) do
    if key:sub(1, #KEY) == KEY then
      for family, line in (dict:get(key) or ""):gmatch("([^\t\n]+)\t([^\n]+)") do
        local lines = by_family[family]
        if not lines then
          lines = {}
          by_family[family] = lines
        end
        lines[#lines + 1] = line
      end
    end
  end
  return metrics.format(by_family, prefix)
end

function M.collect(dict_name, opts)
  local dict = shared("collect", dict_name)
  return collect(dict, checked(opts, "collect", true))
end

--- serve(dict_name, [opts]): answer the request with collect's text.
function M.serve(dict_name, opts)
  local dict = shared("serve", dict_name)
  local text = collect(dict, checked(opts, "serve", true))
  ngx.header.content_type = metrics.CONTENT_TYPE
  ngx.print(text)
end

return M
