-- The specs both engines run, in this order, each given the engine's `env`
-- (a module lists the fields it uses at its top): called by
-- spec/durable/01-sqlite_spec.lua and spec/durable/03-redis_spec.lua.
local MODULES = { "leases", "cancel", "window", "contract", "front", "runs", "acks", "processes", "concurrency", "ops", "schedules", "metrics" }

return function(env)
  for _, name in ipairs(MODULES) do require("spec.durable." .. name)(env) end
end
