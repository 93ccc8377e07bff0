--- hwtimer.durable.redis_open: the Redis engine's `open` script, a file of
-- its own beside hwtimer.durable.redis_scripts (which builds it on its
-- prelude and lists it with its own: a function of its `script` builder):
-- it checks that the keys are a store's (or makes them one) and upgrades a
-- store of an older format, once every other check has passed, so that a
-- store refused is left as it was.
--
-- Format 2 is format 4's layout without the intake and without schedules;
-- format 3 has its intake at {p:q}:in, jobs without schedules there
-- encoded as format 3's `put` read them. The upgrade moves that intake in
-- (its jobs as they are) and makes {p:q}:in a string: a process of format 3
-- still running then fails each script at its first command (every one of
-- them reads that list, or pushes to it, before anything else), writing
-- nothing, rather than rewrite a schedule's job without its tenth value. A
-- process of format 2 reads no intake: it was to be stopped before format
-- 3 came (docs/durable.md, "Upgrading a store").
return function(script)
  -- Open: ARGV[1] the format this module reads. Returns { now, 0 } or
  -- { now, 1, message }.
  return script([[
local function typ(k) return redis.call('TYPE', k).ok end
local function refuse(msg) return { now, 1, msg } end
local function wrong(k, ty, want)
  return refuse('key ' .. k .. ' is a ' .. ty .. ', not a ' .. want .. ' (not a hwtimer.durable store)')
end
local OLD_INTAKE = base .. ':in'
local want = { [KINDS] = 'set', [DEAD] = 'zset', [META] = 'hash', [JOBS .. ':0'] = 'hash', [INTAKE] = 'list' }
for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, META, INTAKE }) do
  local ty = typ(k)
  if ty ~= 'none' and ty ~= want[k] then return wrong(k, ty, want[k]) end
end
if typ(META) == 'none' then
  for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, INTAKE, OLD_INTAKE }) do
    if typ(k) ~= 'none' then return refuse('not a hwtimer.durable store (no ' .. META .. ')') end
  end
  redis.call('HSET', META, 'app', 'hwtimer.durable', 'format', ARGV[1], 'buckets', 1, 'jobs', 0)
  return { now, 0 }
end
local app, format_ = redis.call('HGET', META, 'app'), redis.call('HGET', META, 'format')
if app ~= 'hwtimer.durable' then
  return refuse('not a hwtimer.durable store (' .. META .. ' app is ' .. tostring(app or 'missing') .. ')')
end
local upgrade = (format_ == '2' or format_ == '3') and ARGV[1] == '4'
if format_ ~= ARGV[1] and not upgrade then
  return refuse('store format ' .. tostring(format_) .. ', this module reads ' .. ARGV[1])
end
-- the intake of format 3: a list before the upgrade, the fence after it
local old_want, ty = upgrade and 'list' or 'string', typ(OLD_INTAKE)
if ty ~= 'none' and ty ~= old_want then return wrong(OLD_INTAKE, ty, old_want) end
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  for _, k in ipairs({ rkey(kind), lkey(kind) }) do
    ty = typ(k)
    if ty ~= 'none' and ty ~= 'zset' then return wrong(k, ty, 'zset') end
  end
end
if upgrade then
  drain(OLD_INTAKE, 3)
  redis.call('SET', OLD_INTAKE, 'hwtimer.durable: store format 4 (its intake is ' .. INTAKE ..
    '): stop the processes of format 3')
  redis.call('HSET', META, 'format', ARGV[1])
end
return done({ now, 0 })
]])
end
