-- A process that runs the durable jobs of a store, for spec/durable/01-sqlite_spec.lua.
--   worker.lua STORE RUNS [lease] [exit_when_empty] [stall]
-- Every job of kind "job" it runs is written to RUNS (an SQLite file of its
-- own: runs(id, pid)) with its own commit before the handler returns, so the
-- record survives a kill -9 that the store's acknowledgement may not. With
-- stall = "1" the handler then sleeps (a process that hangs or dies mid-job).
-- It prints "ready" once its queue is open, and exits 0 once the store holds
-- no pending job (when exit_when_empty is "1").
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local sqlite = require("hwtimer.sqlite")
local sleep = require("hwtimer_testutil").sleep

local store, runs_path = arg[1], arg[2]
local lease = tonumber(arg[3] or "30")
local exit_when_empty, stall = arg[4] == "1", arg[5] == "1"

local pid = io.open("/proc/self/stat"):read("*l"):match("^(%d+)")

local runs = assert(sqlite.open(runs_path))
runs:busy_timeout(10)
assert(runs:exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;" ..
  "CREATE TABLE IF NOT EXISTS runs (id TEXT, pid INTEGER)"))
local record = assert(runs:prepare("INSERT INTO runs (id, pid) VALUES (?1, ?2)"))

local timer = hwtimer.new()
local q = assert(durable.open(timer, { path = store, lease = lease, sweep = 0.1, busy_timeout = 10,
  on_error = function(err) io.stderr:write("worker " .. pid .. ": " .. tostring(err) .. "\n") end }))
q:handle("job", function(job)
  assert(record:run(job.id, pid))
  if stall then sleep(3600) end
end)
require("spec.durable.serve")(timer, q, exit_when_empty, function() runs:close() end)
