--- hwtimer.durable.redis_open: the Redis engine's `open` script, a file of
-- its own beside hwtimer.durable.redis_scripts (which builds it on its
-- prelude and lists it with its own: a function of its `script` builder):
-- it checks that the keys are a store's (or makes them one) and upgrades a
-- store of an older format, once every other check has passed, so that a
-- store refused is left as it was.
--
-- Format 2 is format 4's layout without the intake and without schedules;
-- format 3 has its intake at {p:q}:in, jobs without schedules there
-- encoded as format 3's `put` read them; format 4 has its intake at
-- {p:q}:intake and no blocks; format 5 has its intake at {p:q}:inbox and
-- no entry stamped by the client (hwtimer.durable.redis_scripts). The
-- upgrade moves those intakes in (their jobs as they are) and makes
-- {p:q}:in, {p:q}:intake and {p:q}:inbox strings: a process of format 3, 4
-- or 5 still running then fails each script at its first command (every
-- one of them reads its list, or pushes to it, before anything else),
-- writing nothing, rather than rewrite a schedule's job without its tenth
-- value (3), look for a job of a block in the numbered buckets and drop it
-- (4), or fail on an entry it cannot read, with a message that says
-- nothing of the cause (5). A process of
-- format 2 reads no intake: it was to be stopped before format 3 came
-- (docs/durable.md, "Upgrading a store").
return function(script)
  -- Open: ARGV[1] the format this module reads. Returns { now, 0 } or
  -- { now, 1, message }.
  return script([[
local function typ(k) return redis.call('TYPE', k).ok end
local function refuse(msg) return { now, 1, msg } end
local function wrong(k, ty, want)
  return refuse('key ' .. k .. ' is a ' .. ty .. ', not a ' .. want .. ' (not a hwtimer.durable store)')
end
local OLD = { base .. ':in', base .. ':intake', base .. ':inbox' } -- the intakes of formats 3, 4 and 5
local want = { [KINDS] = 'set', [DEAD] = 'zset', [META] = 'hash', [JOBS .. ':0'] = 'hash', [INTAKE] = 'list',
  [BLOCKS] = 'zset' }
for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, META, INTAKE, BLOCKS }) do
  local ty = typ(k)
  if ty ~= 'none' and ty ~= want[k] then return wrong(k, ty, want[k]) end
end
if typ(META) == 'none' then
  for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, INTAKE, BLOCKS, OLD[1], OLD[2], OLD[3] }) do
    if typ(k) ~= 'none' then return refuse('not a hwtimer.durable store (no ' .. META .. ')') end
  end
  redis.call('HSET', META, 'app', 'hwtimer.durable', 'format', ARGV[1], 'buckets', 1, 'jobs', 0, 'hashed', 0)
  return { now, 0 }
end
local app, format_ = redis.call('HGET', META, 'app'), redis.call('HGET', META, 'format')
if app ~= 'hwtimer.durable' then
  return refuse('not a hwtimer.durable store (' .. META .. ' app is ' .. tostring(app or 'missing') .. ')')
end
local old_format = tonumber(format_)
local upgrade = (format_ == '2' or format_ == '3' or format_ == '4' or format_ == '5') and ARGV[1] == '6'
if format_ ~= ARGV[1] and not upgrade then
  return refuse('store format ' .. tostring(format_) .. ', this module reads ' .. ARGV[1])
end
-- the old intakes: lists (or none) in a store of their format or older,
-- the fences (or none) in a newer one
for i, k in ipairs(OLD) do
  local ty, old_want = typ(k), old_format <= i + 2 and 'list' or 'string'
  if ty ~= 'none' and ty ~= old_want then return wrong(k, ty, old_want) end
end
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  for _, k in ipairs({ rkey(kind), lkey(kind) }) do
    local ty = typ(k)
    if ty ~= 'none' and ty ~= 'zset' then return wrong(k, ty, 'zset') end
  end
end
if upgrade then
  for i, k in ipairs(OLD) do
    if typ(k) == 'list' then drain(k, i + 2) end
    redis.call('SET', k, 'hwtimer.durable: store format ' .. ARGV[1] .. ' (its intake is ' .. INTAKE ..
      '): stop the processes of format ' .. (i + 2))
  end
  redis.call('HSET', META, 'format', ARGV[1])
  -- (before 5 every job was in a numbered bucket)
  if old_format < 5 then redis.call('HSET', META, 'hashed', redis.call('HGET', META, 'jobs') or 0) end
end
return done({ now, 0 })
]])
end
