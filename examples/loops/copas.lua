-- copas (1.x cannot wait on another descriptor): step copas and the timer
-- together instead of calling copas.loop(). Callbacks may use copas sockets:
-- here each does a round trip to an echo server copas serves.
local hwtimer = require("hwtimer")
local copas = require("copas")
local socket = require("socket")
local glue = require("hwtimer.copas")
local timer = hwtimer.new()

local server = assert(socket.bind("127.0.0.1", 0)) -- a port the system picks
local _, port = server:getsockname()
copas.addserver(server, function(skt)
  skt = copas.wrap(skt)
  local line = skt:receive("*l")
  if line then skt:send(line .. "\n") end
end)

local fired = 0
for i = 1, 3 do
  timer:schedule(i / 100, function(_, n)
    local raw = socket.tcp()
    assert(copas.connect(raw, "127.0.0.1", port))
    local c = copas.wrap(raw)
    c:send("ping " .. n .. "\n")
    print((c:receive("*l"))) -- the callback waits here; copas goes on
    raw:close()
    fired = fired + 1
  end, i)
end
while fired < 3 do glue.step(timer) end
timer:close()
print("fired " .. fired .. ", done")
