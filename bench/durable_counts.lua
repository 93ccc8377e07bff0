-- bench/durable_counts.lua: what q:counts() costs on a large Redis store.
-- counts is one script: while it runs, Redis answers no one else, so its
-- time is the stall every other client of that Redis sees. The store holds
-- PENDING jobs of 4 kinds, due over the next hour (stored by q:batch, 10,000
-- a transaction), and DEAD dead jobs (a kind whose handler fails, one attempt).
-- (STORE sqlite: the same on an SQLite file, where counts is one query.)
-- Printed: the median wall time of 5 calls of q:counts(), and Redis's own
-- time a call (INFO commandstats, evalsha), on a redis-server of its own
-- (loopback, no persistence, stopped by its pid).
--   lua5.4 bench/durable_counts.lua [PENDING] [DEAD] [STORE]
--   (defaults 10^6, 10^4 and redis; needs build/5.4: make LUA_VERSION=5.4)
package.path = "./?.lua;./lua/?.lua;" .. package.path
package.cpath = "./build/5.4/?.so;" .. package.cpath
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local N = require("spec.nginx")

local PENDING = tonumber(arg[1]) or 1000000
local DEAD = tonumber(arg[2]) or 10000
local STORE = arg[3] or "redis"
assert(STORE == "redis" or STORE == "sqlite", "the store: redis or sqlite")
local CHUNK, KINDS = 10000, 4
local redis = N.redis_lua()
if STORE == "redis" and not (redis and os.execute("command -v redis-server >/dev/null 2>&1")) then
  print("bench/durable_counts.lua: skipped, needs redis-server and redis-lua (Debian lua-redis)")
  os.exit(0)
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local server = STORE == "redis" and N.start_redis() or nil
local file = STORE == "sqlite" and os.tmpname() or nil
local ok, err = pcall(function()
  local c = server and redis.connect("127.0.0.1", server.port) or nil
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { redis = c, path = file, prefix = c and "counts" or nil,
                                         attempts = 1, on_error = function() end }))
  local function script_usec()
    if not c then return 0 end
    local cs = c:info("commandstats")
    cs = cs.commandstats or cs
    local v = cs.cmdstat_evalsha
    return type(v) == "table" and tonumber(v.usec) or tonumber(tostring(v):match("usec=(%d+)"))
  end

  -- The dead first: they run now and fail, with nothing else in the way.
  q:handle("fails", function() error("always") end)
  assert(q:batch(function(b)
    for i = 1, DEAD do b:schedule("fails", 0, "payload-" .. i) end
  end))
  local deadline = hwtimer.now() + 120
  while q:counts().dead < DEAD do
    assert(hwtimer.now() < deadline, "the dead jobs did not all die in 120 s")
    timer:run(0.05)
  end

  local t0, done = hwtimer.now(), 0
  while done < PENDING do
    local n = math.min(CHUNK, PENDING - done)
    assert(q:batch(function(b)
      for i = 1, n do
        b:schedule("kind" .. (i % KINDS), 60 + 3540 * (done + i) / PENDING, "payload-10")
      end
    end))
    done = done + n
  end
  local fill = hwtimer.now() - t0

  local walls, scripts, counts = {}, {}, nil
  for i = 1, 5 do
    local u, t = script_usec(), hwtimer.now()
    counts = assert(q:counts())
    walls[i] = (hwtimer.now() - t) * 1e3
    scripts[i] = (script_usec() - u) / 1e3
  end
  assert(counts.pending == done and counts.dead == DEAD,
    ("counts says %d pending, %d dead; stored %d, %d"):format(counts.pending, counts.dead, done, DEAD))
  print(string.format("durable (%s) q:counts() on %d pending jobs (%d kinds) and %d dead (stored in %.1f s): " ..
    "median %.2f ms a call%s, runs %.2f-%.2f ms", STORE, done, KINDS, DEAD, fill, median({ table.unpack(walls) }),
    c and string.format(" (Redis's script time %.2f ms)", median(scripts)) or "",
    math.min(table.unpack(walls)), math.max(table.unpack(walls))))
  q:close()
  timer:close()
end)
if server then server.stop() end
if file then os.remove(file); os.remove(file .. "-wal"); os.remove(file .. "-shm") end
if not ok then error(err, 0) end
