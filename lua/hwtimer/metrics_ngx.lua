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

local function shared(fname, name)
  local dict = type(name) == "string" and ngx.shared[name]
  if not dict then
    check.argerror(1, fname, "name of a lua_shared_dict expected, got " .. tostring(name), 3)
  end
  return dict
end

-- This worker's sample lines, one "family<TAB>line" a line.
local function snapshot(opts)
  local by_family = metrics.collect({ timers = opts.timers, queues = opts.queues, store = false,
                                      prefix = opts.prefix, labels = { worker = ngx.worker.id() } })
  local out = {}
  for family, lines in pairs(by_family) do
    for _, line in ipairs(lines) do out[#out + 1] = family .. "\t" .. line end
  end
  return table.concat(out, "\n")
end

--- ok, err = publish(dict_name, opts): in init_worker, this worker's
-- figures into the dict now and every opts.interval (1) seconds. opts:
-- timers, queues (their runs in this worker), prefix, as hwtimer.metrics
-- takes them. nil, message when nginx refuses the ngx.timer.every.
function M.publish(dict_name, opts)
  local dict = shared("publish", dict_name)
  opts = opts or {}
  local interval = opts.interval or 1
  if type(interval) ~= "number" or not (interval > 0) then
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
-- and, for opts.queues, the store's jobs by kind and state (q:counts, now).
local function collect(dict, opts)
  opts = opts or {}
  local by_family, prefix = metrics.collect({ queues = opts.queues, runs = false, prefix = opts.prefix })
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
  return collect(shared("collect", dict_name), opts)
end

--- serve(dict_name, [opts]): answer the request with collect's text.
function M.serve(dict_name, opts)
  local text = collect(shared("serve", dict_name), opts)
  ngx.header.content_type = metrics.CONTENT_TYPE
  ngx.print(text)
end

return M
