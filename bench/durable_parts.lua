-- bench/durable_parts.lua: where a schedule's time goes, one at a time on
-- Redis (redis-lua over loopback TCP, a redis-server of its own).
--   lua5.4 bench/durable_parts.lua [rounds]      (~1 min)
-- 1. Round trips, alternated rounds of 2,000, medians: q:schedule with its
--    share of the drains (the intake moved in once it holds INTAKE_MAX
--    jobs), q:schedule without (a second process whose intake is never
--    moved in), a bare RPUSH of an entry of the same size, and the floor
--    (EVALSHA of a script that only reads TIME).
-- 2. The drain's steps, Redis's time a job: the `drain` script with TIME
--    read between its steps (reading the entries, the buckets, the slots),
--    over 400 schedules of one job each (fewer than INTAKE_MAX: none moved
--    in before); the second fastest of `rounds`. Again after a full
--    collection of Redis's Lua heap (outside the timing), with one at its
--    end (inside), and as it runs again.
-- 3. The drain's writes alone: HSET of 32 jobs into a block, ZADD of 64
--    into a slot, as a script makes them, Redis's time a job (medians).
-- 3b. Redis's own time a schedule, one at a time with its share of the
--    drains (INFO commandstats), beside the floor's EVALSHA; medians of 5.
-- 4. The client's Lua: q:schedule with a client object that answers at once
--    (200,000 calls; the stamp kept tight, the intake never long), the
--    median of 3; and the same, each schedule beside a round trip on another
--    connection (caches cold, as in a process that schedules one at a time).
local N = require("spec.nginx")

if arg[1] == "schedules" then -- the child of part 1
  local S = require("hwtimer.durable.redis_scripts")
  if arg[3] == "never" then S.INTAKE_MAX = 1e12 end
  local hwtimer = require("hwtimer")
  local durable = require("hwtimer.durable")
  local redis = N.redis_lua()
  local c = redis.connect("127.0.0.1", tonumber(arg[2]))
  local q = assert(durable.open(hwtimer.new(), { redis = c, prefix = "parts_" .. arg[3] }))
  for _ = 1, 2000 do assert(q:schedule("far", 3600)) end -- (warm)
  io.stdout:setvbuf("no")
  print("ready")
  while io.read("*l") == "go" do
    local t0 = hwtimer.now()
    for _ = 1, 2000 do assert(q:schedule("far", 3600)) end
    print(string.format("%.3f", (hwtimer.now() - t0) / 2000 * 1e6))
  end
  q:pending()
  os.exit(0)
end

local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")
local S = require("hwtimer.durable.redis_scripts")
local redis = N.redis_lua()
local ROUNDS = tonumber(arg[1]) or 11
local lua = os.getenv("HWT_LUA") or arg[-1] or "lua5.4"

local function median(t)
  table.sort(t)
  return t[math.ceil(#t / 2)]
end

local server = N.start_redis()
local ok, err = pcall(function()
  local c = redis.connect("127.0.0.1", server.port)
  -- Part 1: the two schedulers are processes of their own (INTAKE_MAX is
  -- read when the engine loads), driven round by round through a pipe.
  local function child(mode)
    local inp = os.tmpname()
    local fifo = inp .. ".fifo"
    os.remove(inp)
    assert(os.execute("mkfifo " .. fifo))
    local out = io.popen(string.format("%s bench/durable_parts.lua schedules %d %s < %s", lua, server.port, mode, fifo))
    local w = io.open(fifo, "w")
    w:setvbuf("no")
    assert(out:read("*l") == "ready")
    return { w = w, out = out, fifo = fifo }
  end
  local with, without = child("drained"), child("never")
  local sha = c:script("load", "return redis.call('TIME')")
  local entry = string.rep("x", 90)
  local t = { with = {}, without = {}, rpush = {}, floor = {} }
  for r = 1, ROUNDS do
    with.w:write("go\n")
    t.with[r] = tonumber(with.out:read("*l"))
    without.w:write("go\n")
    t.without[r] = tonumber(without.out:read("*l"))
    local t0 = hwtimer.now()
    for _ = 1, 2000 do c:rpush("parts_bare", entry) end
    t.rpush[r] = (hwtimer.now() - t0) / 2000 * 1e6
    c:del("parts_bare")
    t0 = hwtimer.now()
    for _ = 1, 2000 do c:evalsha(sha, 0) end
    t.floor[r] = (hwtimer.now() - t0) / 2000 * 1e6
  end
  for _, ch in ipairs({ with, without }) do
    ch.w:write("stop\n")
    ch.w:close()
    ch.out:close()
    os.remove(ch.fifo)
  end
  print(string.format("durable (Redis) one at a time, us a call (medians of %d alternated rounds of 2,000): " ..
    "schedule %.1f with its share of the drains, %.1f without; bare RPUSH %.1f; floor (EVALSHA of TIME) %.1f",
    ROUNDS, median(t.with), median(t.without), median(t.rpush), median(t.floor)))

  -- Part 2: the drain's steps.
  -- (its flags line stays first: what is added goes after it)
  local flags, steps = S.drain:match("^(#![^\n]*\n)(.*)$")
  if not flags then flags, steps = "", S.drain end
  local function sub(find, repl)
    local s, n = steps:gsub(find, function() return repl end)
    assert(n == 1, "bench/durable_parts.lua: the drain script changed: " .. find)
    steps = s
  end
  sub("\n  jset_all%(w%)\n  for kind, list in pairs%(kinds%) do ready_add%(kind, list%) end\n",
    "\n  T[1] = redis.call('TIME')\n  jset_all(w)\n  T[2] = redis.call('TIME')\n" ..
    "  for kind, list in pairs(kinds) do ready_add(kind, list) end\n  T[3] = redis.call('TIME')\n")
  sub("return done%(%{ now %}%)", "done({})\nT[4] = redis.call('TIME')\n" ..
    "local out = { now }\nfor i = 1, 4 do out[i + 1] = T[i][1] * 1000000 + T[i][2] end\nreturn out")
  sub("^local JOBS, KINDS", "local T = {}\nlocal JOBS, KINDS")
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { redis = c, prefix = "parts_steps" }))
  local k = durable.engine(q).keys
  -- The same drain after a full collection of Redis's Lua heap (made
  -- before the first TIME): what is left is the drain's work without the
  -- collector's, whose debt the drain's garbage (its entries, their
  -- fields, the lists of arguments) otherwise pays while it runs; and with
  -- a full collection at its end, inside the time (what collecting at once
  -- would cost the drain instead). In blocks, not alternated (a collection
  -- leaves the next drain less to collect), the first one again last (the
  -- server's heap grows in the first).
  local collected, n_sub = steps:gsub("\nT%[4%] = redis.call%('TIME'%)\n", function()
    return "\ncollectgarbage('collect')\nT[4] = redis.call('TIME')\n"
  end)
  assert(n_sub == 1, "bench/durable_parts.lua: the drain's last step not found")
  local variants = { { "as it runs", steps, {} }, { "after a full collection", "collectgarbage('collect')\n" .. steps, {} },
    { "with a full collection at its end", collected, {} }, { "as it runs, again", steps, {} } }
  for _, var in ipairs(variants) do
    for r = 1, math.max(4, math.floor(ROUNDS / 2)) do
      for _ = 1, 400 do assert(q:schedule("far", 3600)) end
      local res = c:eval(flags .. var[2], 4, k[1], k[2], k[3], k[4])
      local v = {}
      for i = 1, 5 do v[i] = tonumber(res[i]) end
      var[3][r] = { read = (v[2] - v[1]) / 400, buckets = (v[3] - v[2]) / 400, slots = (v[4] - v[3]) / 400,
        whole = (v[5] - v[1]) / 400 }
    end
  end
  for _, var in ipairs(variants) do
    local rows = var[3]
    table.sort(rows, function(a, b) return a.whole < b.whole end)
    local m = rows[2]
    print(string.format("durable (Redis) drain of 400 one-job entries, %s, Redis's time a job (the second fastest of %d): " ..
      "reading the entries %.2f us, buckets %.2f, slots %.2f, whole %.2f", var[1], #rows, m.read, m.buckets, m.slots, m.whole))
  end
  q:close()

  -- Part 3: the drain's two writes alone, as its script makes them for
  -- jobs of one kind due one after another: an HSET of 32 new jobs into a
  -- new block, a ZADD of 64 into a new slot (ids of 26 hex digits, values
  -- of this job's size, due times as text), the arguments made before the
  -- clock starts. What is left of the drain over these is its Lua.
  local bare = c:script("load", [[
local r, value = tonumber(ARGV[1]), ARGV[2]
local function id(i) return string.format('%012x%08x%06x', 1795000000000 + r, 0xabcdef, i) end
local h, z = {}, {}
for b = 1, 16 do
  local args = {}
  for i = 1, 32 do args[#args + 1], args[#args + 2] = id(b * 32 + i), value end
  h[b] = args
end
for s = 1, 8 do
  local args = {}
  for i = 1, 64 do args[#args + 1], args[#args + 2] = string.format('%d', 1795000000000000 + r * 1e6 + s * 64 + i), id(s * 64 + i) end
  z[s] = args
end
local t0 = redis.call('TIME')
for b = 1, 16 do redis.call('HSET', 'parts_bare_h:' .. r .. ':' .. b, unpack(h[b])) end
local t1 = redis.call('TIME')
for s = 1, 8 do redis.call('ZADD', 'parts_bare_z:' .. r .. ':' .. s, unpack(z[s])) end
local t2 = redis.call('TIME')
local function us(t) return t[1] * 1000000 + t[2] end
return { us(t1) - us(t0), us(t2) - us(t1) }
]])
  local value = require("hwtimer.durable.redis_entry").value("far", 1795000000000000, 0, nil)
  local hs, zs = {}, {}
  for r = 1, 4 * ROUNDS do
    local res = c:evalsha(bare, 0, r, value)
    hs[r], zs[r] = res[1] / 512, res[2] / 512
  end
  print(string.format("durable (Redis) the drain's writes alone, Redis's time a job (medians of %d): HSET into a block " ..
    "of 32 %.2f us, ZADD into a slot of 64 %.2f us", 4 * ROUNDS, median(hs), median(zs)))

  -- Part 3b: Redis's own time a schedule, one at a time with its share of
  -- the drains, from the server's command statistics (its time in each
  -- command: the drain's EVALSHA includes the commands its script calls),
  -- beside the floor's EVALSHA of TIME: rounds of 5,000 of each, alternated,
  -- medians. (Its clients are this process: nothing else runs commands.)
  do
    local S_ = require("hwtimer.durable.redis_scripts")
    local qs = assert(durable.open(timer, { redis = c, prefix = "parts_stats" }))
    local time_sha = c:script("load", "return redis.call('TIME')")
    -- (redis-lua reads INFO into sections of "calls=...,usec=...,..." lines)
    local function usec(name)
      local line = c:info("commandstats").commandstats["cmdstat_" .. name]
      return line and tonumber(line:match("usec=(%d+)")) or 0
    end
    local per = 5000
    for _ = 1, S_.INTAKE_MAX do assert(qs:schedule("far", 3600)) end -- (warm: one drain)
    local ours, rpush, floor_ = {}, {}, {}
    for r = 1, 5 do
      c:config("resetstat")
      for _ = 1, per do assert(qs:schedule("far", 3600)) end
      rpush[r], ours[r] = usec("rpush") / per, (usec("rpush") + usec("evalsha")) / per
      c:config("resetstat")
      for _ = 1, per do c:evalsha(time_sha, 0) end
      floor_[r] = usec("evalsha") / per
    end
    print(string.format("durable (Redis) Redis's own time a schedule, one at a time (commandstats, medians of 5 " ..
      "alternated rounds of %d): %.2f us (the RPUSH %.2f, its share of the drains %.2f); the floor's EVALSHA %.2f us",
      per, median(ours), median(rpush), median(ours) - median(rpush), median(floor_)))
    qs:close()
  end

  -- Part 4: the client's own time.
  local calls = require("hwtimer.durable.redis_client")
  q = assert(durable.open(timer, { redis = c, prefix = "parts_client" }))
  local eng = durable.engine(q)
  -- The intake's length stays 1 (as if another process moved it in): a
  -- longer one would send a drain to this client, which has no script to
  -- run (the time of an error, not of a schedule). The bounds on the
  -- server's clock widen with time since the last reply: made tight again
  -- every 10,000 calls (1,000 beside round trips), so that every schedule
  -- is stamped here (asserted).
  eng.client = { rpush = function() return 1 end }
  local times = {}
  for r = 1, 3 do
    local t0 = hwtimer.now()
    for _ = 1, 20 do
      eng.synced_at, eng.synced_boot = calls.mono(), calls.boot and calls.boot()
      for _ = 1, 10000 do assert(q:schedule("far", 3600)) end
    end
    times[r] = (hwtimer.now() - t0) / 200000 * 1e6
  end
  print(string.format("durable (Redis) the client's Lua a schedule, %s (a client object that answers at once): %.2f us",
    _VERSION, median(times)))
  -- The same, each schedule beside a round trip (a bare RPUSH on another
  -- connection), as it runs in a process that schedules one at a time: the
  -- caches are cold after the round trip. Alternated rounds of 1,000 with
  -- and without the schedule, medians; the difference.
  local other = redis.connect("127.0.0.1", server.port)
  local entry_ = string.rep("x", 90)
  local beside, alone = {}, {}
  for r = 1, ROUNDS * 2 + 1 do
    eng.synced_at, eng.synced_boot = calls.mono(), calls.boot and calls.boot()
    local t0 = hwtimer.now()
    for _ = 1, 1000 do
      other:rpush("parts_beside", entry_)
      assert(q:schedule("far", 3600))
    end
    beside[r] = (hwtimer.now() - t0) / 1000 * 1e6
    t0 = hwtimer.now()
    for _ = 1, 1000 do other:rpush("parts_beside", entry_) end
    alone[r] = (hwtimer.now() - t0) / 1000 * 1e6
    other:del("parts_beside")
  end
  print(string.format("durable (Redis) the client's Lua a schedule, %s, beside a round trip: %.2f us " ..
    "(medians of %d alternated rounds of 1,000: %.1f us with it, %.1f without)",
    _VERSION, median(beside) - median(alone), ROUNDS * 2 + 1, median(beside), median(alone)))
  q:close()
end)
server:stop()
if not ok then error(err) end
