-- A process that runs the durable jobs of a Redis store, for
-- spec/durable/03-redis_spec.lua.
--   redis_worker.lua PORT PREFIX [lease] [exit_when_empty] [stall]
-- Every job of kind "job" it runs is pushed to the list runs:PREFIX as
-- "id pid" before the handler returns, so the record survives a kill -9 that
-- the acknowledgement may not. With stall = "1" the handler then sleeps (a
-- process that hangs or dies mid-job). It prints "ready" once its queue is
-- open, and exits 0 once no job is pending (when exit_when_empty is "1").
local redis = assert(require("spec.nginx").redis_lua(), "redis-lua")
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local sleep = require("hwtimer_testutil").sleep

local port, prefix = tonumber(arg[1]), arg[2]
local lease = tonumber(arg[3] or "30")
local exit_when_empty, stall = arg[4] == "1", arg[5] == "1"

local pid = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")
local client = redis.connect("127.0.0.1", port)
local runs = redis.connect("127.0.0.1", port)

local timer = hwtimer.new()
local q = assert(durable.open(timer, { redis = client, prefix = prefix, lease = lease, sweep = 0.1,
  on_error = function(err) io.stderr:write("worker " .. pid .. ": " .. tostring(err) .. "\n") end }))
q:handle("job", function(job)
  runs:rpush("runs:" .. prefix, job.id .. " " .. pid)
  if stall then sleep(3600) end
end)
require("spec.durable.serve")(timer, q, exit_when_empty)
