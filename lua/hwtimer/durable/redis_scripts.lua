--- hwtimer.durable.redis_scripts: the server-side scripts of the Redis engine,
-- one per operation, as text (a module, not .lua files beside it, so that
-- `require` finds them wherever the engine is installed: a rock, a copy
-- under nginx's lua_package_path, a source tree).
--
-- The keys of one queue share the hash tag {prefix:queue}, so that Redis
-- Cluster keeps them in one slot:
--   {p:q}:jobs     hash: job id -> the job, cmsgpack of its eight fields
--                  (kind, due, every, attempt, owner, payload, error, dead)
--   {p:q}:r:KIND   sorted set per kind: job id scored by its ready time (when
--                  it may be claimed: its due time, or while claimed the end
--                  of its lease); dead jobs leave it
--   {p:q}:kinds    set of the kinds ever scheduled (to count and range)
--   {p:q}:dead     sorted set: dead job ids scored by their due time
--   {p:q}:meta     hash: app = hwtimer.durable, format = 1
-- KEYS are always jobs, kinds, dead, meta; a kind's set is derived from
-- the first (same tag, same slot).
--
-- Times are integer microseconds since the epoch (exact in a double until
-- the year 2255), and "now" is always the server's TIME, never the client's.
-- Every script returns an array whose first element is that now, which the
-- client uses to track the server's clock.
local S = {}

S.FORMAT = 1

-- Shared by every script: keys, the clock, the job's encoding.
local PRELUDE = [[
local JOBS, KINDS, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = string.sub(JOBS, 1, -6)
local function rkey(kind) return base .. ':r:' .. kind end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local pack, unpack = cmsgpack.pack, cmsgpack.unpack
-- fields of a length-prefixed blob ("3:abc0:")
local function reader(blob)
  local pos = 1
  return function()
    if pos > #blob then return nil end
    local c = string.find(blob, ':', pos, true)
    local n = tonumber(string.sub(blob, pos, c - 1))
    local s = string.sub(blob, c + 1, c + n)
    pos = c + 1 + n
    return s
  end
end
-- the values of t as one length-prefixed blob (integers in full): a reply
-- of one element instead of many, which a client reads much faster
local function blob(t)
  for i = 1, #t do
    local v = t[i]
    if type(v) == 'number' then v = string.format('%.0f', v) end
    t[i] = #v .. ':' .. v
  end
  return table.concat(t)
end
-- a job as replies carry it: kind, has payload, payload, due, attempt, every, dead, error, leased
local function fields_of(out, kind, due, every, attempt, owner, payload, err, dead)
  out[#out + 1] = kind
  out[#out + 1] = payload and 1 or 0
  out[#out + 1] = payload or ''
  out[#out + 1] = due
  out[#out + 1] = attempt
  out[#out + 1] = every
  out[#out + 1] = dead
  out[#out + 1] = err or ''
  out[#out + 1] = owner ~= '' and 1 or 0
end
local function fields(out, raw) fields_of(out, unpack(raw)) end
]]

-- Acknowledgements (in claim and ack): ARGV[1] owner, ARGV[2] a blob of
-- (what, id, attempt, arg) per job: done, next (a periodic job's next
-- period), retry (after arg microseconds), bury (arg is the error). Only
-- the owner of the lease and the attempt it claimed count: a job replaced,
-- cancelled or reclaimed meanwhile is left as it is. The new ready times go
-- to `reload`.
local ACK = [[
local function ack_all(owner, blob, reload)
  local field = reader(blob)
  while true do
    local what = field()
    if not what then return end
    local id, claimed, arg = field(), tonumber(field()), field()
    local raw = redis.call('HGET', JOBS, id)
    if raw then
      local kind, due, every, attempt, holder, payload = unpack(raw)
      if holder == owner and attempt == claimed then
        local rk = rkey(kind)
        if what == 'done' then
          redis.call('HDEL', JOBS, id)
          redis.call('ZREM', rk, id)
        elseif what == 'bury' then
          redis.call('HSET', JOBS, id, pack(kind, due, every, attempt, '', payload, arg, 1))
          redis.call('ZREM', rk, id)
          redis.call('ZADD', DEAD, due, id)
        else
          local next_due, next_attempt
          if what == 'next' then -- periods missed while no process ran are skipped
            next_due = due + every * math.max(1, math.floor((now - due) / every) + 1)
            next_attempt = 0
          else
            next_due, next_attempt = now + tonumber(arg), attempt
          end
          redis.call('HSET', JOBS, id, pack(kind, next_due, every, next_attempt, '', payload, false, 0))
          redis.call('ZADD', rk, next_due, id)
          reload[#reload + 1] = next_due
        end
      end
    end
  end
end
-- the earliest ready time among the kinds (0: none)
local function earliest(kinds)
  local best = 0
  for i = 1, #kinds do
    local r = redis.call('ZRANGE', rkey(kinds[i]), 0, 0, 'WITHSCORES')
    local s = r[2] and tonumber(r[2])
    if s and (best == 0 or s < best) then best = s end
  end
  return best
end
]]

local function script(body, with_ack)
  return PRELUDE .. (with_ack and ACK or "") .. body
end

-- Open: check that the keys are ours (or absent: then make them ours).
-- Returns { now, 0 } or { now, 1, message }.
S.open = script([[
local function typ(k) return redis.call('TYPE', k).ok end
local function refuse(msg) return { now, 1, msg } end
local want = { [JOBS] = 'hash', [KINDS] = 'set', [DEAD] = 'zset', [META] = 'hash' }
for _, k in ipairs({ JOBS, KINDS, DEAD, META }) do
  local ty = typ(k)
  if ty ~= 'none' and ty ~= want[k] then
    return refuse('key ' .. k .. ' is a ' .. ty .. ', not a ' .. want[k] .. ' (not a hwtimer.durable store)')
  end
end
if typ(META) == 'none' then
  if typ(JOBS) ~= 'none' or typ(KINDS) ~= 'none' or typ(DEAD) ~= 'none' then
    return refuse('not a hwtimer.durable store (no ' .. META .. ')')
  end
  redis.call('HSET', META, 'app', 'hwtimer.durable', 'format', ARGV[1])
else
  local app, format = redis.call('HGET', META, 'app'), redis.call('HGET', META, 'format')
  if app ~= 'hwtimer.durable' then
    return refuse('not a hwtimer.durable store (' .. META .. ' app is ' .. tostring(app or 'missing') .. ')')
  end
  if format ~= ARGV[1] then
    return refuse('store format ' .. tostring(format) .. ', this module reads ' .. ARGV[1])
  end
end
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  local ty = typ(rkey(kind))
  if ty ~= 'none' and ty ~= 'zset' then
    return refuse('key ' .. rkey(kind) .. ' is a ' .. ty .. ', not a zset (not a hwtimer.durable store)')
  end
end
return { now, 0 }
]])

-- Put: ARGV[1] a blob of (id, kind, has payload, payload, when, relative,
-- every) per job; `when` is a delay from now when relative. A job with an
-- id that exists replaces it (its lease, attempts and death go with it).
-- Returns { now, due... }.
S.put = script([[
local field, out, kinds = reader(ARGV[1]), { now }, {}
while true do
  local id = field()
  if not id then break end
  local kind, has, payload = field(), field(), field()
  local due, relative, every = tonumber(field()), field(), tonumber(field())
  if relative == '1' then due = now + due end
  local old = redis.call('HGET', JOBS, id)
  if old then
    local old_kind = unpack(old)
    if old_kind ~= kind then redis.call('ZREM', rkey(old_kind), id) end
    redis.call('ZREM', DEAD, id)
  end
  redis.call('HSET', JOBS, id, pack(kind, due, every, 0, '', has == '1' and payload, false, 0))
  redis.call('ZADD', rkey(kind), due, id)
  if not kinds[kind] then
    kinds[kind] = true
    redis.call('SADD', KINDS, kind)
  end
  out[#out + 1] = due
end
return out
]])

-- Cancel: ARGV[1] the id. Returns { now } when unknown, else { now, the
-- ready time it had (0 when dead) }.
S.cancel = script([[
local id = ARGV[1]
local raw = redis.call('HGET', JOBS, id)
if not raw then return { now } end
local rk = rkey(unpack(raw))
local ready = tonumber(redis.call('ZSCORE', rk, id) or '0')
redis.call('ZREM', rk, id)
redis.call('ZREM', DEAD, id)
redis.call('HDEL', JOBS, id)
return { now, ready }
]])

-- Get: ARGV[1] the id. Returns { now } or { now, fields... }.
S.get = script([[
local out = { now }
local raw = redis.call('HGET', JOBS, ARGV[1])
if raw then fields(out, raw) end
return out
]])

-- Dead: { now, (id, fields...)... } by due time.
S.dead = script([[
local out = { now }
for _, id in ipairs(redis.call('ZRANGE', DEAD, 0, -1)) do
  local raw = redis.call('HGET', JOBS, id)
  if raw then
    out[#out + 1] = id
    fields(out, raw)
  end
end
return out
]])

-- Pending: { now, jobs not dead }.
S.pending = script([[
local n = 0
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do n = n + redis.call('ZCARD', rkey(kind)) end
return { now, n }
]])

-- Range: ARGV[1], ARGV[2] bounds (excluded). Returns { now, blob of the
-- ready times }, each distinct ready time of any kind once.
S.range = script([[
local out, seen = {}, {}
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  local r = redis.call('ZRANGEBYSCORE', rkey(kind), '(' .. ARGV[1], '(' .. ARGV[2], 'WITHSCORES')
  for i = 2, #r, 2 do
    local s = tonumber(r[i])
    if not seen[s] then
      seen[s] = true
      out[#out + 1] = s
    end
  end
end
return { now, blob(out) }
]])

-- Peek (the poll): ARGV the handled kinds. Returns { now, earliest ready }.
S.peek = script([[
return { now, earliest(ARGV) }
]], true)

-- Ack: ARGV[1] owner, ARGV[2] the acknowledgements. Returns { now, ready... }.
S.ack = script([[
local reload = { now }
ack_all(ARGV[1], ARGV[2], reload)
return reload
]], true)

-- Claim: ARGV[1] owner, ARGV[2] acknowledgements written first, ARGV[3]
-- lease (microseconds), ARGV[4] most jobs, ARGV[5...] the handled kinds.
-- Takes the due jobs of those kinds, oldest ready first, moving each one's
-- ready time to the end of its lease. Returns { now, earliest ready left,
-- blob of the acknowledgements' new ready times, blob of the jobs: per job
-- its ready time, id, fields... }.
S.claim = script([[
local owner, lease, most = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local kinds = {}
for i = 5, #ARGV do kinds[#kinds + 1] = ARGV[i] end
local reload = {}
ack_all(owner, ARGV[2], reload)
local due = {}
for _, kind in ipairs(kinds) do
  local r = redis.call('ZRANGEBYSCORE', rkey(kind), '-inf', now, 'WITHSCORES', 'LIMIT', 0, most)
  for i = 1, #r, 2 do due[#due + 1] = { r[i], tonumber(r[i + 1]), kind } end
end
if #kinds > 1 then table.sort(due, function(a, b) return a[2] < b[2] end) end
local rows = {}
for i = 1, math.min(most, #due) do
  local id, ready, kind = due[i][1], due[i][2], due[i][3]
  local raw = redis.call('HGET', JOBS, id)
  if not raw then
    redis.call('ZREM', rkey(kind), id) -- a job whose hash field went away
  else
    local k, d, every, attempt, _, payload = unpack(raw)
    redis.call('HSET', JOBS, id, pack(k, d, every, attempt + 1, owner, payload, false, 0))
    redis.call('ZADD', rkey(kind), now + lease, id)
    rows[#rows + 1] = ready
    rows[#rows + 1] = id
    fields_of(rows, k, d, every, attempt + 1, owner, payload, false, 0)
  end
end
return { now, earliest(kinds), blob(reload), blob(rows) }
]], true)

return S
