-- spec: alone (p99 lateness beside copas.sleep's; spec/run.sh -j runs it with nothing beside it)
-- hwtimer.copas keeps callbacks that do not wait on time while others wait
-- on I/O: the shape of spec/hosts/05-ngx_punctual_spec.lua and
-- 06-cqueues_punctual_spec.lua. Copas 1.x (Debian's) has no sleep of its own
-- to compare with, so the peer is the same 1,000 callbacks on hwtimer.copas
-- with no I/O beside them. 400 callbacks due over 10-59 ms each make a round
-- trip through copas sockets to a server in another process
-- (spec/slow_server.lua) that answers after 0.6 s; 1,000 due at 0.3 s (after
-- the connects, while every round trip waits) note how late they ran. Their
-- p99 lateness must stay within 1 ms, beyond the timer's tick, of the
-- same 1,000's alone. (400: copas waits in luasocket's select, which takes at
-- most 1,024 descriptors.)
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")

local ok_copas, copas = pcall(require, "copas")
local ok_socket, socket = pcall(require, "socket")

-- Under valgrind (HWT_SLOW) everything runs ~20x slower: the hold, the due
-- time and the margin stretch with it (at most 10x).
local SLOW = math.min(tonumber(os.getenv("HWT_SLOW")) or 1, 10)
local N_IO, HOLD, AT, TICK = 400, 0.6 * SLOW, 0.3 * SLOW, 0.001

-- The slow server: its pid and port.
local function start_server(dir)
  local portfile = dir .. "/port"
  local lua = os.getenv("HWT_LUA") or "lua5.4"
  local pid = helpers.spawn(string.format("exec %s spec/slow_server.lua %s %g %g >%s/log 2>&1",
    lua, portfile, HOLD, 60 * SLOW, dir))
  local limit = hwtimer.now() + 10
  local port
  repeat
    local f = io.open(portfile)
    if f then port = tonumber(f:read("*a")); f:close() end
    if not port then socket.sleep(0.02) end
  until port or hwtimer.now() > limit
  assert(port, "spec/slow_server.lua did not start: " .. tostring(helpers.read_file(dir .. "/log")))
  return pid, port
end

-- One burst; with `port`, N_IO round trips beside the 1,000. Returns the
-- 1,000's p99 lateness and how many round trips came back.
local function burst(port)
  local glue = require("hwtimer.copas")
  local timer = hwtimer.new({ tick = TICK })
  local back, late = 0, {}
  local function trip()
    local raw = socket.tcp()
    assert(copas.connect(raw, "127.0.0.1", port))
    local c = copas.wrap(raw)
    c:send("x\n")
    if c:receive("*l") == "ok" then back = back + 1 end
    raw:close()
  end
  for _ = 1, 1000 do
    local due = hwtimer.now() + AT
    assert(timer:schedule(AT, function() late[#late + 1] = math.max(0, hwtimer.now() - due) end))
  end
  if port then
    for i = 1, N_IO do assert(timer:schedule(0.01 + (i % 50) * 0.001, trip)) end
  end
  local want = port and N_IO or 0
  local limit = hwtimer.now() + 20 * SLOW
  while (back < want or #late < 1000) and hwtimer.now() < limit do glue.step(timer) end
  timer:close()
  assert.equal(1000, #late)
  assert.equal(want, back)
  return helpers.p99(late)
end

describe("copas: callbacks that do not wait stay on time amid I/O (hwtimer.copas)", function()
  if not (ok_copas and ok_socket) then
    it("needs copas and luasocket", function() pending("copas is not installed for " .. _VERSION) end)
    return
  end

  local dir, pid, port
  setup(function()
    dir = helpers.tempdir("hwt-copas")
    pid, port = start_server(dir)
  end)
  teardown(function()
    if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
    if dir then os.execute("rm -rf " .. dir) end
  end)

  it("keeps 1,000 counting callbacks within 1 ms (beyond the tick) of their p99 alone while 400 wait on sockets",
  function()
    burst(port) -- the process's first burst, not measured (as in spec 06)
    local ms = helpers.ms
    assert.is_false(helpers.miss_twice(function()
      local h, alone = burst(port), burst(nil)
      print(("\n  400 waiting on sockets: p99 lateness of 1,000: %s; alone: %s"):format(ms(h), ms(alone)))
      return h > alone + (TICK + 0.001) * SLOW and ("amid I/O %s, alone %s"):format(ms(h), ms(alone))
    end))
  end)
end)
