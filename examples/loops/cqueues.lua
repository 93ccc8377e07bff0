-- cqueues: attach the timer to a controller and run the loop. Callbacks run
-- in coroutines the controller owns, so they may use cqueues sockets: here
-- each does a round trip to an echo server on the same controller.
local hwtimer = require("hwtimer")
local cqueues = require("cqueues")
local socket = require("cqueues.socket")
local glue = require("hwtimer.cqueues")
local timer = hwtimer.new()

local cq = cqueues.new()
local attached = glue.attach(timer, cq)

-- an echo server on 127.0.0.1 (a port the system picks), one line at a time
local server = assert(socket.listen("127.0.0.1", 0))
assert(server:listen())
local _, _, port = server:localname()
local serving = true
cq:wrap(function()
  while serving do
    local con = server:accept(0.05)
    if con then
      cq:wrap(function()
        local line = con:read("*l")
        if line then con:write(line, "\n") end
        con:close()
      end)
    end
  end
  server:close()
end)

local left = 3
for i = 1, 3 do
  timer:schedule(i / 100, function(_, n)
    local c = assert(socket.connect("127.0.0.1", port))
    c:write("ping " .. n .. "\n")
    print(c:read("*l")) -- the callback waits here; the loop goes on
    c:close()
    left = left - 1
    if left == 0 then
      attached.detach()
      serving = false
    end
  end, i)
end
assert(cq:loop())
timer:close()
print("fired 3, done")
