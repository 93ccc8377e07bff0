--- hwtimer.durable.redis_open: the Redis engine's `open` script, a file of
-- its own beside hwtimer.durable.redis_scripts (which builds it on its
-- prelude and lists it with its own: a function of its `script` builder):
-- it checks that the keys are a store's (or makes them one) and upgrades a
-- store of an older format, once every other check has passed, so that a
-- store refused is left as it was.
--
-- Format 7 moved the keys from the base {prefix:queue} (OLD here), which
-- two pairs could share, to one that is the pair's alone
-- (hwtimer.durable.redis's Engine.base). A store of format 2 to 6 at OLD
-- is moved there whole by the first process of format 7 that opens it
-- with nothing at its own base: its keys renamed (the same hash tag, so
-- the same slot, but where a name has a "}"), its intakes moved in, and
-- OLD fenced: OLD:meta and the intakes of formats 3 to 6 (OLD:in,
-- OLD:intake, OLD:inbox, OLD:incoming) made strings that say where the
-- store went. A process of those formats still running then fails each
-- script at its first command (every one of them reads its intake, or
-- pushes to it, before anything else), writing nothing; one that opens
-- OLD is refused (its open finds a string where a hash or a list was). A
-- process of format 2 reads no intake: it was to be stopped before format
-- 3 came (docs/durable.md, "Upgrading a store").
--
-- The store moved was every pair's whose names join into OLD: the first
-- to open takes it; another then finds the fence, and is refused with
-- where the store went (the jobs are there) until OLD:meta is deleted.
-- A store of format 7 does not look at OLD.
--
-- Before 7: format 2 is format 4's layout without the intake and without
-- schedules; format 3 has its intake at OLD:in, jobs without schedules
-- there encoded as format 3's `put` read them; format 4 its intake at
-- OLD:intake and no blocks; format 5 its intake at OLD:inbox and no entry
-- stamped by the client; format 6 its intake at OLD:incoming.
--
-- `existing` (the open of hwtimer-jobs, flagged no-writes): no store is
-- made and none upgraded, both refused.
return function(script, existing)
  -- Open: ARGV[1] the format this module reads, ARGV[2] OLD, ARGV[3]
  -- where OLD is ('same' slot; 'none': an empty hash tag; 'other'),
  -- ARGV[4], ARGV[5] the prefix and the queue. Returns { now, 0 } or
  -- { now, 1, message }.
  return script([[
local EXISTING = ]] .. tostring(existing == true) .. [[

local function typ(k) return redis.call('TYPE', k).ok end
local function refuse(msg) return { now, 1, msg } end
local function wrong(k, ty, want)
  return refuse('key ' .. k .. ' is a ' .. ty .. ', not a ' .. want .. ' (not a hwtimer.durable store)')
end
local FORMAT, OLD, WHERE = ARGV[1], ARGV[2], ARGV[3]
local names = 'prefix ' .. ARGV[4] .. ', queue ' .. ARGV[5]
local want = { [KINDS] = 'set', [DEAD] = 'zset', [META] = 'hash', [JOBS .. ':0'] = 'hash', [INTAKE] = 'list',
  [BLOCKS] = 'zset' }
for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, META, INTAKE, BLOCKS }) do
  local ty = typ(k)
  if ty ~= 'none' and ty ~= want[k] then return wrong(k, ty, want[k]) end
end
local function check_kinds(b, kinds)
  for _, kind in ipairs(redis.call('SMEMBERS', kinds)) do
    for _, k in ipairs({ b .. ':r:' .. #kind .. ':' .. kind, b .. ':l:' .. #kind .. ':' .. kind }) do
      local ty = typ(k)
      if ty ~= 'none' and ty ~= 'zset' then return wrong(k, ty, 'zset') end
    end
  end
end
if typ(META) ~= 'none' then
  local app, format_ = redis.call('HGET', META, 'app'), redis.call('HGET', META, 'format')
  if app ~= 'hwtimer.durable' then
    return refuse('not a hwtimer.durable store (' .. META .. ' app is ' .. tostring(app or 'missing') .. ')')
  end
  if format_ ~= FORMAT then return refuse('store format ' .. tostring(format_) .. ', this module reads ' .. FORMAT) end
  return check_kinds(base, KINDS) or { now, 0 }
end
for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, INTAKE, BLOCKS }) do
  if typ(k) ~= 'none' then return refuse('not a hwtimer.durable store (no ' .. META .. ')') end
end
-- Nothing at this base: the store of format 6 or older at OLD, if any.
-- (Where OLD's tag is not this one's, a Redis Cluster may not let this
-- node read it: refused, but where no store could have been there.)
local old_meta = OLD .. ':meta'
local seen = redis.pcall('TYPE', old_meta)
if type(seen) == 'table' and seen.err then
  if WHERE ~= 'none' then
    return refuse('cannot read ' .. old_meta .. ' here, where a store of format 6 or older would be (' ..
      seen.err .. ')')
  end
  seen = { ok = 'none' }
end
local old_format
if seen.ok == 'string' then
  return refuse('the store of format 6 or older at ' .. OLD .. ' was moved: ' .. redis.call('GET', old_meta) ..
    ' (for ' .. names .. ', a store of its own: delete ' .. old_meta .. ')')
elseif seen.ok == 'hash' and redis.call('HGET', old_meta, 'app') == 'hwtimer.durable' then
  old_format = redis.call('HGET', old_meta, 'format')
  if not (old_format == '2' or old_format == '3' or old_format == '4' or old_format == '5' or old_format == '6') then
    return refuse('store format ' .. tostring(old_format) .. ' at ' .. OLD .. ', this module reads ' .. FORMAT)
  end
  old_format = tonumber(old_format)
end
if EXISTING then
  if old_format then
    return refuse('store format ' .. old_format .. ' at ' .. OLD .. ': this version reads ' .. FORMAT .. ' at ' ..
      base .. ', to which its processes move it when they open it (the older ones still using it would be ' ..
      'shut out)')
  end
  return refuse('no hwtimer.durable store at ' .. base .. ' (nor one of format 6 or older at ' .. OLD ..
    '): none is made here')
end
if not old_format then
  redis.call('HSET', META, 'app', 'hwtimer.durable', 'format', FORMAT, 'buckets', 1, 'jobs', 0, 'hashed', 0)
  return { now, 0 }
end
-- the old intakes: lists (or none) in a store of their format or older,
-- the fences (or none) in a newer one
local INTAKES = { OLD .. ':in', OLD .. ':intake', OLD .. ':inbox', OLD .. ':incoming' } -- formats 3 to 6
for i, k in ipairs(INTAKES) do
  local ty, old_want = typ(k), old_format <= i + 2 and 'list' or 'string'
  if ty ~= 'none' and ty ~= old_want then return wrong(k, ty, old_want) end
end
local old_want = { [OLD .. ':j:0'] = 'hash', [OLD .. ':kinds'] = 'set', [OLD .. ':dead'] = 'zset',
  [OLD .. ':blocks'] = 'zset' }
for k, w in pairs(old_want) do
  local ty = typ(k)
  if ty ~= 'none' and ty ~= w then return wrong(k, ty, w) end
end
local bad = check_kinds(OLD, OLD .. ':kinds')
if bad then return bad end
-- the move: every key of the store, renamed to this base
local function move(k)
  if redis.call('EXISTS', k) == 1 then redis.call('RENAME', k, base .. string.sub(k, #OLD + 1)) end
end
for b = 0, (tonumber(redis.call('HGET', old_meta, 'buckets')) or 1) - 1 do move(OLD .. ':j:' .. b) end
for _, name in ipairs(redis.call('ZRANGE', OLD .. ':blocks', 0, -1)) do move(OLD .. ':j:' .. name) end
for _, kind in ipairs(redis.call('SMEMBERS', OLD .. ':kinds')) do
  local ik = OLD .. ':r:' .. #kind .. ':' .. kind
  for _, member in ipairs(redis.call('ZRANGE', ik, 0, -1)) do move(slot_key(ik, (slot_of(member)))) end
  move(ik)
  move(OLD .. ':l:' .. #kind .. ':' .. kind)
end
for _, name in ipairs({ 'blocks', 'kinds', 'dead', 'meta' }) do move(OLD .. ':' .. name) end
local fence = 'hwtimer.durable: store format ' .. FORMAT .. ', moved to ' .. base .. ' (' .. names .. ')'
redis.call('SET', old_meta, fence)
for i, k in ipairs(INTAKES) do
  if typ(k) == 'list' then drain(k, i + 2) end
  redis.call('SET', k, fence .. ': stop the processes of format ' .. (i + 2))
end
redis.call('HSET', META, 'format', FORMAT)
-- (before 5 every job was in a numbered bucket)
if old_format < 5 then redis.call('HSET', META, 'hashed', redis.call('HGET', META, 'jobs') or 0) end
return done({ now, 0 })
]], false, existing and "no-writes")
end
