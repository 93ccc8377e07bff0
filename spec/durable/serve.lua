-- The loop the spec worker processes (worker.lua, redis_worker.lua) share:
-- say "ready" once the queue is open, run the timer until the queue holds no
-- pending job (with exit_when_empty) or for at most 120 s, close, and exit
-- 0 (or 3 when the 120 s ran out).
local hwtimer = require("hwtimer")

return function(timer, q, exit_when_empty, on_close)
  io.stdout:write("ready\n")
  io.stdout:flush()
  local deadline = hwtimer.now() + 120
  while hwtimer.now() < deadline do
    timer:run(0.05)
    if exit_when_empty and q:pending() == 0 then break end
  end
  q:close()
  timer:close()
  if on_close then on_close() end
  os.exit(hwtimer.now() < deadline and 0 or 3)
end
