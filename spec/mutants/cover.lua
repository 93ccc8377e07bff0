-- The spec files that judge a mutant of each file of lua/ and csrc/ (make
-- check-mutants-random, spec/mutants/random.lua), kept apart so that make
-- test checks them (spec/docs/05): each file there, each FILE#PART naming
-- tests of its file.
-- Which specs cover a file, and on which Lua: the files only nginx runs on
-- LuaJIT with the nginx specs, hwtimer.copas on 5.2 (Debian's copas is for
-- 5.1 and 5.2 only: on 5.4 its specs are pending), the rest on 5.4; `ngx`,
-- for a file plain Lua and nginx both run, the nginx specs that a survivor
-- of the rest runs on LuaJIT (for a file of csrc/, built for LuaJIT). Kept to a few spec files each, the ones that
-- exercise the file most, so that a mutant takes well under a minute when
-- it is caught.
-- "test-c": the C core's own tests (make test-c: the wheel against its
-- model, the worker), first for the files they build: they take seconds.
-- "check-failalloc": make check's failing allocator (seconds too).
local CORE = { "spec/core/02-schedule_spec.lua", "spec/core/03-timeout_spec.lua", "spec/core/06-stop_spec.lua" }
local SQLITE = { "spec/durable/02-sqlite_module_spec.lua", "spec/durable/01-sqlite_spec.lua" }
local REDIS = { "spec/durable/07-redis_entry_spec.lua", "spec/durable/03-redis_spec.lua" }
local COVER = {
  ["csrc/larm.c"] = { "spec/core/23-wakeup_spec.lua", "spec/core/02-schedule_spec.lua", "spec/core/03-timeout_spec.lua",
    "spec/core/10-features_spec.lua", "spec/core/05-every_spec.lua" },
  ["csrc/larm.h"] = { "spec/core/03-timeout_spec.lua", "spec/core/10-features_spec.lua", "spec/core/02-schedule_spec.lua" },
  ["csrc/ltimeout.c"] = { "spec/core/03-timeout_spec.lua", "spec/core/21-take_spec.lua", "spec/core/08-stats_spec.lua",
    "spec/core/23-wakeup_spec.lua" },
  -- (a callback's failure for memory, its traceback made up: only the failing allocator gets there)
  ["csrc/ldispatch.c"] = { "spec/core/23-wakeup_spec.lua", "spec/core/04-dispatch_spec.lua", "spec/core/03-timeout_spec.lua",
    "spec/core/21-take_spec.lua", "spec/core/08-stats_spec.lua", "spec/core/07-poll_spec.lua", "spec/core/16-gc_step_spec.lua",
    "check-failalloc" },
  ["csrc/ltimer.c"] = { "spec/core/03-timeout_spec.lua", "spec/core/06-stop_spec.lua", "spec/core/07-poll_spec.lua",
    "spec/core/23-wakeup_spec.lua", "spec/core/22-quiet_spec.lua" },
  ["csrc/lstats.c"] = { "spec/core/08-stats_spec.lua", "spec/core/20-metrics_spec.lua" },
  -- (its 5.1-5.3 parts: the uservalue a statement keeps its database by, 5.1's traceback)
  ["csrc/compat.h"] = { "test-c", CORE[1], CORE[2], CORE[3], "spec/core/08-stats_spec.lua#on_error", SQLITE[1] },
  ["csrc/lbase.c"] = { "spec/core/11-badinput_spec.lua", "spec/core/06-stop_spec.lua", "spec/core/02-schedule_spec.lua" },
  ["csrc/lbase.h"] = { "spec/core/11-badinput_spec.lua", "spec/core/06-stop_spec.lua", "spec/core/02-schedule_spec.lua" },
  ["csrc/lhwtimer.c"] = { "spec/core/01-module_spec.lua", "spec/core/11-badinput_spec.lua", "spec/core/02-schedule_spec.lua",
    "spec/core/04-dispatch_spec.lua#on_error", "spec/core/24-thread_refused_spec.lua" },
  -- (its failures reach a user through hwtimer.ngx's warning: 03 reads it)
  ["csrc/lwake.c"] = { "spec/core/19-wake_socket_spec.lua", "spec/core/07-poll_spec.lua",
    ngx = { "spec/hosts/03-openresty_spec.lua#wak" } },
  ["csrc/pipe.c"] = { "test-c", "spec/core/07-poll_spec.lua", "spec/core/19-wake_socket_spec.lua", "spec/core/17-descriptors_spec.lua" },
  ["csrc/worker.c"] = { "test-c", "spec/core/07-poll_spec.lua", "spec/core/19-wake_socket_spec.lua", "spec/core/02-schedule_spec.lua",
    "spec/core/08-stats_spec.lua" },
  ["csrc/driver.c"] = { "test-c", "spec/core/24-thread_refused_spec.lua", "spec/core/07-poll_spec.lua",
    "spec/core/19-wake_socket_spec.lua", "spec/core/02-schedule_spec.lua" },
  ["csrc/wheel.c"] = { "test-c", "spec/core/02-schedule_spec.lua", "spec/core/03-timeout_spec.lua", "spec/core/06-stop_spec.lua" },
  ["csrc/clock.c"] = { "test-c", "spec/core/02-schedule_spec.lua", "spec/core/07-poll_spec.lua" },
  ["csrc/durable/lsqlite.c"] = { SQLITE[1], SQLITE[2], "spec/tools/02-jobs_cli_bytes_spec.lua#not a regular file" },
  -- (a store of format 1 opened `existing`, as the CLI does, is refused, not upgraded: tools/01 tells)
  ["lua/hwtimer/durable/sqlite.lua"] = { SQLITE[1], SQLITE[2],
    "spec/tools/01-jobs_cli_spec.lua#neither makes a store in an empty file nor upgrades one of format 1" },
  ["csrc/durable/checkpoint.c"] = { "test-c", "spec/core/24-thread_refused_spec.lua", SQLITE[1], SQLITE[2] },
  -- (Redis stamps a job due now by the server's clock, which may read ahead of the queue's: 03 tells;
  -- store_up decides when a wake-up listener connects again: 11 tells)
  ["lua/hwtimer/durable.lua"] = { SQLITE[1], SQLITE[2], "spec/durable/03-redis_spec.lua#the window",
    "spec/durable/11-redis_wake_spec.lua#plain Lua process listens" },
  ["lua/hwtimer.lua"] = { "spec/core/01-module_spec.lua", "spec/core/02-schedule_spec.lua" },
  ["lua/hwtimer/check.lua"] = { "spec/core/09-retry_spec.lua", "spec/core/11-badinput_spec.lua" },
  ["lua/hwtimer/copas.lua"] = { lua = "5.2", "spec/hosts/08-copas_punctual_spec.lua", "spec/hosts/01-loops_spec.lua",
    "spec/hosts/02-yield_loops_spec.lua#hwtimer.copas", "spec/core/16-gc_step_spec.lua#copas:" },
  ["lua/hwtimer/cqueues.lua"] = { "spec/hosts/02-yield_loops_spec.lua", "spec/hosts/01-loops_spec.lua",
    "spec/core/16-gc_step_spec.lua#cqueues:" },
  ["lua/hwtimer/luv.lua"] = { "spec/hosts/01-loops_spec.lua", "spec/core/16-gc_step_spec.lua#luv:" },
  ["lua/hwtimer/cron.lua"] = { "spec/cron/01-parse_spec.lua", "spec/cron/02-next_spec.lua" },
  ["lua/hwtimer/tzif.lua"] = { "spec/cron/05-zones_spec.lua", "spec/cron/02-next_spec.lua" },
  ["lua/hwtimer/retry.lua"] = { "spec/core/09-retry_spec.lua" },
  ["lua/hwtimer/runner.lua"] = { "spec/core/08-stats_spec.lua", "spec/hosts/02-yield_loops_spec.lua", "spec/core/16-gc_step_spec.lua" },
  ["lua/hwtimer/metrics.lua"] = { "spec/core/20-metrics_spec.lua", "spec/durable/01-sqlite_spec.lua#figures for monitoring" },
  ["lua/hwtimer/text.lua"] = { "spec/core/09-retry_spec.lua", "spec/durable/02-sqlite_module_spec.lua", "spec/durable/01-sqlite_spec.lua" },
  ["lua/hwtimer/jobs_cli.lua"] = { "spec/tools/01-jobs_cli_spec.lua", "spec/tools/02-jobs_cli_bytes_spec.lua",
    "spec/durable/08-redis_upgrade_spec.lua" },
  ["lua/hwtimer/jobs_cli_text.lua"] = { "spec/tools/02-jobs_cli_bytes_spec.lua", "spec/tools/01-jobs_cli_spec.lua" },
  ["lua/hwtimer/jobs_cli_redis.lua"] = { "spec/tools/01-jobs_cli_spec.lua", "spec/tools/03-jobs_cli_redis_auth_spec.lua",
    "spec/durable/08-redis_upgrade_spec.lua#refuses a store of format" },
  ["lua/hwtimer/durable/redis_client.lua"] = { "spec/durable/09-redis_auth_spec.lua", "spec/durable/07-redis_entry_spec.lua",
    "spec/durable/03-redis_spec.lua#stamps", "spec/durable/03-redis_spec.lua#SCRIPT FLUSH",
    ngx = { "spec/durable/06-nginx_batch_spec.lua" } },
  ["lua/hwtimer/durable/redis.lua"] = { REDIS[1], REDIS[2], "spec/durable/11-redis_wake_spec.lua",
    ngx = { "spec/durable/06-nginx_batch_spec.lua", "spec/durable/04-nginx_spec.lua",
      "spec/durable/11-redis_wake_spec.lua#publishes" } },
  -- (its claims yield only on a cosocket: 06 cancels during one)
  -- (Redis's claims are not kept from an idle store by a window of due times, as SQLite's: 03 counts them)
  -- (a claim for no free worker: Redis's probe lets it through, and 03 counts them)
  ["lua/hwtimer/durable/runs.lua"] = { SQLITE[1], SQLITE[2],
    "spec/durable/03-redis_spec.lua#goes back to its poll once a backlog",
    "spec/durable/03-redis_spec.lua#no claim while every worker is busy", ngx = { "spec/durable/06-nginx_batch_spec.lua" } },
  -- (its calendar's decisions as pure functions: 14; what a store makes of them: 01)
  ["lua/hwtimer/durable/schedule.lua"] = { "spec/durable/14-schedule_spec.lua", SQLITE[1], SQLITE[2] },
  ["lua/hwtimer/durable/ids.lua"] = { "spec/durable/13-ids_spec.lua", "spec/durable/01-sqlite_spec.lua" },
  -- (its default on_error writes to nginx's log in nginx; a store held down
  -- is tried once a backoff step: 05 counts the connections of an outage)
  ["lua/hwtimer/durable/window.lua"] = { SQLITE[1], SQLITE[2], ngx = { "spec/durable/06-nginx_batch_spec.lua",
    "spec/durable/05-nginx_orders_spec.lua#while Redis is down" } },
  ["lua/hwtimer/durable/redis_open.lua"] = { "spec/durable/08-redis_upgrade_spec.lua", "spec/durable/03-redis_spec.lua" },
  -- only nginx runs these
  ["lua/hwtimer/ngx.lua"] = { lua = "jit", "spec/hosts/04-ngx_io_spec.lua", "spec/hosts/03-openresty_spec.lua",
    "spec/hosts/09-ngx_port_spec.lua" },
  ["lua/hwtimer/ngx_port.lua"] = { lua = "jit", "spec/hosts/09-ngx_port_spec.lua" },
  ["lua/hwtimer/metrics_ngx.lua"] = { lua = "jit", "spec/hosts/07-ngx_metrics_spec.lua" },
  ["lua/hwtimer/durable/ngx.lua"] = { lua = "jit", "spec/durable/06-nginx_batch_spec.lua", "spec/durable/04-nginx_spec.lua" },
  ["lua/hwtimer/durable/redis_batch.lua"] = { lua = "jit", "spec/durable/06-nginx_batch_spec.lua" },
  ["lua/hwtimer/durable/ngx_wake.lua"] = { lua = "jit", "spec/durable/11-redis_wake_spec.lua" },
  ["lua/hwtimer/durable/redis_wake.lua"] = { "spec/durable/11-redis_wake_spec.lua" },
  ["lua/hwtimer/durable/sqlite_wake.lua"] = { "spec/durable/12-sqlite_wake_spec.lua" },
  ["lua/hwtimer/durable/wake_luv.lua"] = { "spec/durable/12-sqlite_wake_spec.lua", "spec/durable/11-redis_wake_spec.lua" },
  ["csrc/durable/lwatch.c"] = { "spec/durable/12-sqlite_wake_spec.lua" },
}
local function cover(file)
  local c = COVER[file]
  if c then return c.lua or "5.4", c end
  if file:match("^csrc/[%w_]+%.h$") then return "5.4", { "test-c", CORE[1], CORE[2], CORE[3] } end
  if file:match("^csrc/") then return "5.4", CORE end
  if file:match("^lua/hwtimer/durable/redis") then return "5.4", REDIS end
  return "5.4", SQLITE -- hwtimer.durable and the rest of lua/hwtimer/durable/
end

-- The second ring: a mutant that survives its cover runs the rest of its
-- area's spec files too, where they take seconds (the core's, cron's, the
-- CLI's; not the durable or host ones, which take minutes): a cover entry
-- that missed the one spec that tells is then found by the run, not by hand.
local AREA = {
  ["lua/hwtimer.lua"] = "spec/core", ["lua/hwtimer/check.lua"] = "spec/core", ["lua/hwtimer/retry.lua"] = "spec/core",
  ["lua/hwtimer/runner.lua"] = "spec/core", ["lua/hwtimer/metrics.lua"] = "spec/core",
  ["lua/hwtimer/text.lua"] = "spec/core", ["lua/hwtimer/cron.lua"] = "spec/cron", ["lua/hwtimer/tzif.lua"] = "spec/cron",
  ["lua/hwtimer/jobs_cli.lua"] = "spec/tools", ["lua/hwtimer/jobs_cli_text.lua"] = "spec/tools",
  ["lua/hwtimer/jobs_cli_redis.lua"] = "spec/tools",
}
local function ring(file, specs)
  local dir = AREA[file] or (file:match("^csrc/[^/]+$") and "spec/core")
  if not dir then return {} end
  local whole = {}
  for _, spec in ipairs(specs) do whole[spec] = true end
  local p = assert(io.popen("ls " .. dir .. "/*_spec.lua"))
  local out = {}
  for f in p:lines() do
    if not whole[f] then out[#out + 1] = f end
  end
  p:close()
  return out
end

return { map = COVER, cover = cover, ring = ring }
