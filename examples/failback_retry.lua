-- Failback retry (Dubbo's FailbackRegistry pattern): a call that fails is
-- retried on the timer with exponential backoff until it succeeds.
local hwtimer = require("hwtimer")
local timer = hwtimer.new()

local registry_up_at = hwtimer.now() + 0.05 -- the service comes back after 50 ms
local function register()
  if hwtimer.now() < registry_up_at then return nil, "registry unreachable" end
  return true
end

local r = hwtimer.retry(timer, register, {
  attempts = 10, delay = 0.005, factor = 2, max_delay = 0.1,
  max_time = 2, -- give up after 2 s whatever the attempts left
  retry_if = function(err) return err == "registry unreachable" end, -- other errors are final
  on_failure = function(err, n, last)
    print(string.format("attempt %d failed: %s%s", n, err, last and " (giving up)" or ""))
  end,
  on_success = function(_, n) print(string.format("registered on attempt %d", n)) end,
})
timer:run()
print(tostring(r)) --> hwtimer.retry (succeeded, 5 attempts, last error: registry unreachable)
timer:close()
