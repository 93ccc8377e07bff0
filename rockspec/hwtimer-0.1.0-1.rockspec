-- The timer, its loop glue, retry and durable timers' Lua side with the Redis
-- engine. Needs a C compiler and Lua's headers only; SQLite stores come with
-- the hwtimer-sqlite rock. `make dist` packs this with dist/hwtimer-0.1.0.tar.gz
-- into dist/hwtimer-0.1.0-1.src.rock (luarocks install dist/hwtimer-0.1.0-1.src.rock).
rockspec_format = "3.0"
package = "hwtimer"
version = "0.1.0-1"
source = {
  url = "hwtimer-0.1.0.tar.gz", -- beside this rockspec in dist/ and inside the .src.rock
  dir = "hwtimer-0.1.0",
}
description = {
  summary = "Hashed timing wheel timer: cancellable timeouts by the million, callbacks in your event loop",
  detailed = [[
A hierarchical hashed timing wheel in C with its own worker thread. Expired
timeouts are handed to the Lua thread through a pipe that any event loop can
poll (poll, luasocket, cqueues, luv, copas, nginx), so callbacks always run on
the Lua thread. Durable jobs on Redis come with it; on SQLite with the
hwtimer-sqlite rock.
]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1",
}
build = {
  type = "builtin",
  modules = {
    ["hwtimer"] = "lua/hwtimer.lua",
    ["hwtimer.retry"] = "lua/hwtimer/retry.lua",
    ["hwtimer.metrics"] = "lua/hwtimer/metrics.lua",
    ["hwtimer.metrics_ngx"] = "lua/hwtimer/metrics_ngx.lua",
    ["hwtimer.check"] = "lua/hwtimer/check.lua",
    ["hwtimer.text"] = "lua/hwtimer/text.lua",
    ["hwtimer.cron"] = "lua/hwtimer/cron.lua",
    ["hwtimer.tzif"] = "lua/hwtimer/tzif.lua",
    ["hwtimer.luv"] = "lua/hwtimer/luv.lua",
    ["hwtimer.cqueues"] = "lua/hwtimer/cqueues.lua",
    ["hwtimer.copas"] = "lua/hwtimer/copas.lua",
    ["hwtimer.runner"] = "lua/hwtimer/runner.lua",
    ["hwtimer.ngx"] = "lua/hwtimer/ngx.lua",
    ["hwtimer.ngx_port"] = "lua/hwtimer/ngx_port.lua",
    ["hwtimer.durable"] = "lua/hwtimer/durable.lua",
    ["hwtimer.durable.engine"] = "lua/hwtimer/durable/engine.lua",
    ["hwtimer.durable.ids"] = "lua/hwtimer/durable/ids.lua",
    ["hwtimer.durable.ngx"] = "lua/hwtimer/durable/ngx.lua",
    ["hwtimer.durable.ngx_wake"] = "lua/hwtimer/durable/ngx_wake.lua",
    ["hwtimer.durable.redis_wake"] = "lua/hwtimer/durable/redis_wake.lua",
    ["hwtimer.durable.sqlite_wake"] = "lua/hwtimer/durable/sqlite_wake.lua",
    ["hwtimer.durable.wake_luv"] = "lua/hwtimer/durable/wake_luv.lua",
    ["hwtimer.durable.runs"] = "lua/hwtimer/durable/runs.lua",
    ["hwtimer.durable.schedule"] = "lua/hwtimer/durable/schedule.lua",
    ["hwtimer.durable.window"] = "lua/hwtimer/durable/window.lua",
    ["hwtimer.durable.redis"] = "lua/hwtimer/durable/redis.lua",
    ["hwtimer.durable.sqlite"] = "lua/hwtimer/durable/sqlite.lua", -- needs hwtimer-sqlite's C module
    ["hwtimer.durable.redis_scripts"] = "lua/hwtimer/durable/redis_scripts.lua",
    ["hwtimer.durable.redis_ops"] = "lua/hwtimer/durable/redis_ops.lua",
    ["hwtimer.durable.redis_open"] = "lua/hwtimer/durable/redis_open.lua",
    ["hwtimer.durable.redis_schedules"] = "lua/hwtimer/durable/redis_schedules.lua",
    ["hwtimer.durable.redis_slots"] = "lua/hwtimer/durable/redis_slots.lua",
    ["hwtimer.durable.redis_client"] = "lua/hwtimer/durable/redis_client.lua",
    ["hwtimer.durable.redis_batch"] = "lua/hwtimer/durable/redis_batch.lua",
    ["hwtimer.durable.redis_entry"] = "lua/hwtimer/durable/redis_entry.lua",
    ["hwtimer.jobs_cli"] = "lua/hwtimer/jobs_cli.lua",
    ["hwtimer.jobs_cli_text"] = "lua/hwtimer/jobs_cli_text.lua",
    ["hwtimer.jobs_cli_redis"] = "lua/hwtimer/jobs_cli_redis.lua",
    ["hwtimer.core"] = {
      sources = { "csrc/wheel.c", "csrc/worker.c", "csrc/driver.c", "csrc/pipe.c", "csrc/clock.c",
                  "csrc/lbase.c", "csrc/larm.c", "csrc/ltimer.c", "csrc/ltimeout.c", "csrc/lstats.c",
                  "csrc/ldispatch.c", "csrc/lwake.c", "csrc/lhwtimer.c" },
      defines = { "_POSIX_C_SOURCE=200809L", "_DEFAULT_SOURCE" },
      libraries = { "pthread", "m", "dl" },
      incdirs = { "csrc" },
    },
  },
  -- hwtimer-jobs: luarocks installs a wrapper in the tree's bin/ that runs
  -- it with this rock's Lua and paths
  install = {
    bin = { ["hwtimer-jobs"] = "bin/hwtimer-jobs" },
  },
}
