-- Failback retry (Dubbo's FailbackRegistry pattern): a call that fails is
-- retried on the timer with exponential backoff until it succeeds.
local hwtimer = require("hwtimer")
local timer = hwtimer.new()

local registry_up_at = hwtimer.now() + 0.05 -- the service comes back after 50 ms
local function register()
  if hwtimer.now() < registry_up_at then return nil, "registry unreachable" end
  return true
end

hwtimer.retry(timer, register, {
  attempts = 10, delay = 0.005, factor = 2, max_delay = 0.1,
  on_failure = function(err, n) print(string.format("attempt %d failed: %s", n, err)) end,
  on_success = function(_, n) print(string.format("registered on attempt %d", n)) end,
})
timer:run()
timer:close()
