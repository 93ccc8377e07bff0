-- The specs both engines run, in this order, each given the engine's `env`
-- (a module lists the fields it uses at its top): called by
-- spec/durable/01-sqlite_spec.lua and spec/durable/03-redis_spec.lua.
local MODULES = { "leases", "cancel", "window", "contract", "front", "runs", "acks", "processes", "concurrency", "ops",
  "schedules", "metrics" }

return function(env)
  -- A queue whose sweep never comes within a spec: a job made due is run
  -- because a timeout or the poll brought it, not because a sweep found it.
  function env.quiet_open(opts)
    opts = opts or {}
    opts.sweep = opts.sweep or 60
    opts.on_error = opts.on_error or function() end
    return env.assert(env.open(opts))
  end
  for _, name in ipairs(MODULES) do require("spec.durable." .. name)(env) end
end
