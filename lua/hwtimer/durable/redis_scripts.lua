--- hwtimer.durable.redis_scripts: the server-side scripts of the Redis engine,
-- one per operation, as text (a module, not .lua files beside it, so that
-- `require` finds them wherever the engine is installed: a rock, a copy
-- under nginx's lua_package_path, a source tree).
--
-- The keys of one queue share the hash tag {p:q} (prefix, queue), so that
-- Redis Cluster keeps them in one slot:
--   {p:q}:j:B        hash bucket B: job id -> the job, cmsgpack of its nine
--                    fields (kind, due, every, attempt, owner, payload,
--                    error, dead, ready)
--   {p:q}:r:KIND     per kind, the index of its time slots: sorted set of
--                    "start/width" (microseconds) scored by start
--   {p:q}:r:KIND:S   the slot starting at S: job ids scored by ready time
--                    (when a job may be claimed: its due time, or while
--                    claimed the end of its lease); dead jobs leave it
--   {p:q}:kinds      set of the kinds ever scheduled (to count and range)
--   {p:q}:dead       sorted set: dead job ids scored by their due time
--   {p:q}:meta       hash: app = hwtimer.durable, format = 2, buckets (how
--                    many job buckets), jobs (how many jobs, dead ones too)
-- KEYS are always {p:q}:j, kinds, dead, meta; the others are derived from
-- the first (same tag, same slot).
--
-- Why buckets and slots, not one hash and one sorted set per kind: Redis
-- keeps a small hash or sorted set (up to 128 entries, values up to 64
-- bytes) as one packed array, a few bytes an entry over the data; a large
-- one costs a hash table's or a skiplist's nodes, ~120 bytes an entry each
-- (measured, Redis 7). So the jobs spread over buckets by a hash of their
-- id, whose count grows one bucket at a time (linear hashing) to keep 40
-- to 80 jobs a bucket; and each kind's ready times spread over slots, power-of-
-- two spans of time that halve where more than 128 jobs crowd one (a
-- timing wheel whose levels follow the load).
--
-- Times are integer microseconds since the epoch (exact in a double until
-- the year 2255), and "now" is always the server's TIME, never the client's.
-- Every script returns an array whose first element is that now, which the
-- client uses to track the server's clock.
local S = {}

S.FORMAT = 2

-- Shared by every script: keys, the clock, the job's encoding, the jobs'
-- buckets and the kinds' slots.
local PRELUDE = [[
local JOBS, KINDS, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = string.sub(JOBS, 1, -3)
local tunpack, floor, format = unpack, math.floor, string.format
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local pack, unpack = cmsgpack.pack, cmsgpack.unpack
local function int(v) return format('%.0f', v) end
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
    if type(v) == 'number' then v = int(v) end
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

-- The jobs' buckets (linear hashing): with n buckets and p the largest
-- power of two <= n, a job is in bucket h % 2p, or h % p when that is n or
-- more; one more bucket splits bucket n - p between itself and n.
local LOAD = 40 -- a bucket of a round not yet split holds up to twice that
local buckets, jobs, pow
local function bucket_state()
  if buckets then return end
  local m = redis.call('HMGET', META, 'buckets', 'jobs')
  buckets, jobs = tonumber(m[1]) or 1, tonumber(m[2]) or 0
  pow = 1
  while pow * 2 <= buckets do pow = pow * 2 end
end
-- (SHA-1's first 32 bits: ids that differ in a digit land far apart,
-- which a sum of their bytes does not do for "order-1", "order-2", ...)
local function hash(id) return tonumber(string.sub(redis.sha1hex(id), 1, 8), 16) end
local last_id, last_key -- a job is read, then written: one hash for both
local function bucket_key(id)
  if id == last_id then return last_key end
  local b = hash(id) % (2 * pow)
  if b >= buckets then b = b - pow end
  last_id, last_key = id, JOBS .. ':' .. b
  return last_key
end
local function split_bucket()
  local from = buckets - pow
  local key, new = JOBS .. ':' .. from, JOBS .. ':' .. buckets
  local all, stay, move = redis.call('HGETALL', key), {}, {}
  for i = 1, #all, 2 do
    local to = hash(all[i]) % (2 * pow) == from and stay or move
    to[#to + 1], to[#to + 2] = all[i], all[i + 1]
  end
  buckets, last_id = buckets + 1, nil
  if buckets == 2 * pow then pow = buckets end
  redis.call('HSET', META, 'buckets', buckets)
  -- both written anew, so that both are packed again
  redis.call('DEL', key)
  if #stay > 0 then redis.call('HSET', key, tunpack(stay)) end
  if #move > 0 then redis.call('HSET', new, tunpack(move)) end
end
local function jget(id)
  bucket_state()
  return redis.call('HGET', bucket_key(id), id)
end
local counted -- the count as META holds it, when it has changed since
local function jset(id, raw)
  bucket_state()
  if redis.call('HSET', bucket_key(id), id, raw) == 1 then
    counted, jobs = counted or jobs, jobs + 1
    if jobs > LOAD * buckets then split_bucket() end
  end
end
local function jdel(id)
  bucket_state()
  if redis.call('HDEL', bucket_key(id), id) == 1 then
    counted, jobs = counted or jobs, jobs - 1
  end
end
-- Every script that adds or deletes jobs ends with this: the count is
-- written once, not once a job.
local function done(reply)
  if counted and counted ~= jobs then redis.call('HSET', META, 'jobs', jobs) end
  return reply
end

-- The kinds' slots: disjoint spans [start, start + width) of ready times,
-- width a power of two microseconds, at most CELL; a slot that reaches
-- SLOT_MAX jobs halves (until a width of 1 us).
local SLOT_MAX, CELL = 128, 2 ^ 40 -- 2^40 us: 12.7 days
local function rkey(kind) return base .. ':r:' .. kind end
local function slot_key(ik, start) return ik .. ':' .. int(start) end
local function slot_of(member)
  local s, w = string.match(member, '^(%d+)/(%d+)$')
  return tonumber(s), tonumber(w)
end
local function slot_name(start, width) return int(start) .. '/' .. int(width) end
-- the slot holding `ready`: start, width, member; or nil and the end of
-- the slot before it
local function slot_at(ik, ready)
  local r = redis.call('ZREVRANGEBYSCORE', ik, int(ready), '-inf', 'LIMIT', 0, 1)
  if not r[1] then return nil, -1 end
  local s, w = slot_of(r[1])
  if ready < s + w then return s, w, r[1] end
  return nil, s + w
end
-- Write the jobs of a slot (id, ready pairs) as slots of half its width
-- and less, each holding fewer than SLOT_MAX.
local function write_halves(ik, start, width, list)
  local half = width / 2
  local lower, upper = {}, {}
  for i = 1, #list, 2 do
    local to = tonumber(list[i + 1]) < start + half and lower or upper
    to[#to + 1], to[#to + 2] = list[i + 1], list[i]
  end
  for _, part in ipairs({ { start, lower }, { start + half, upper } }) do
    local s, items = part[1], part[2]
    if #items > 0 then
      if #items / 2 >= SLOT_MAX and half > 1 then
        local pairs_ = {}
        for i = 1, #items, 2 do pairs_[#pairs_ + 1], pairs_[#pairs_ + 2] = items[i + 1], items[i] end
        write_halves(ik, s, half, pairs_)
      else
        redis.call('ZADD', ik, int(s), slot_name(s, half))
        redis.call('ZADD', slot_key(ik, s), tunpack(items))
      end
    end
  end
end
-- The slot each kind last wrote, { start, width, member, jobs }: a batch
-- of jobs due close together finds it without a query.
local last_slot = {}
local function ready_add(kind, id, ready)
  local ik = rkey(kind)
  local c = last_slot[kind]
  local s, w, member, n
  if c and ready >= c[1] and ready < c[1] + c[2] then
    s, w, member, n = c[1], c[2], c[3], c[4]
  else
    s, w, member = slot_at(ik, ready)
  end
  if not s then
    local before = w
    local r = redis.call('ZRANGEBYSCORE', ik, '(' .. int(ready), '+inf', 'LIMIT', 0, 1)
    local after = r[1] and slot_of(r[1]) or math.huge
    w = CELL
    s = floor(ready / w) * w
    while (s < before or s + w > after) and w > 1 do
      w = w / 2
      s = floor(ready / w) * w
    end
    member = slot_name(s, w)
    redis.call('ZADD', ik, int(s), member)
  end
  local sk = slot_key(ik, s)
  local added = redis.call('ZADD', sk, int(ready), id)
  n = n and n + added or redis.call('ZCARD', sk)
  last_slot[kind] = { s, w, member, n }
  if w > 1 and n >= SLOT_MAX then
    local list = redis.call('ZRANGE', sk, 0, -1, 'WITHSCORES')
    redis.call('DEL', sk)
    redis.call('ZREM', ik, member)
    write_halves(ik, s, w, list)
    last_slot[kind] = nil
  end
end
local function ready_del(kind, id, ready)
  local ik = rkey(kind)
  local c = last_slot[kind]
  local s, member
  if c and ready >= c[1] and ready < c[1] + c[2] then
    s, member = c[1], c[3]
  else
    local _
    c = nil
    s, _, member = slot_at(ik, ready)
  end
  if not s then return end
  local sk = slot_key(ik, s)
  if redis.call('ZREM', sk, id) == 1 then
    if c then c[4] = c[4] - 1 end
    if (c and c[4] or redis.call('EXISTS', sk)) == 0 then
      redis.call('ZREM', ik, member)
      last_slot[kind] = nil
    end
  end
end
-- Call f(id, ready) for the jobs of `kind` with lo < ready < hi (lo, hi:
-- numbers, or nil for no bound), oldest first, until it returns false.
local function ready_each(kind, lo, hi, f)
  local ik = rkey(kind)
  local from = '-inf'
  if lo then
    local s = slot_at(ik, lo)
    from = s and int(s) or '(' .. int(lo)
  end
  local to = hi and '(' .. int(hi) or '+inf'
  local lo_s, hi_s = lo and '(' .. int(lo) or '-inf', to
  local offset = 0
  while true do
    local slots = redis.call('ZRANGEBYSCORE', ik, from, to, 'LIMIT', offset, 16)
    for i = 1, #slots do
      local sk = slot_key(ik, slot_of(slots[i]))
      local r = redis.call('ZRANGEBYSCORE', sk, lo_s, hi_s, 'WITHSCORES')
      for j = 1, #r, 2 do
        if f(r[j], tonumber(r[j + 1])) == false then return end
      end
    end
    if #slots < 16 then return end
    offset = offset + 16
  end
end
-- the earliest ready time of `kind` (nil: none)
local function ready_first(kind)
  local ik = rkey(kind)
  local first = redis.call('ZRANGE', ik, 0, 0)[1]
  if not first then return nil end
  local r = redis.call('ZRANGE', slot_key(ik, slot_of(first)), 0, 0, 'WITHSCORES')
  return r[2] and tonumber(r[2])
end
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
    local raw = jget(id)
    if raw then
      local kind, due, every, attempt, holder, payload, _, _, ready = unpack(raw)
      if holder == owner and attempt == claimed then
        ready_del(kind, id, ready)
        if what == 'done' then
          jdel(id)
        elseif what == 'bury' then
          jset(id, pack(kind, due, every, attempt, '', payload, arg, 1, 0))
          redis.call('ZADD', DEAD, int(due), id)
        else
          local next_due, next_attempt
          if what == 'next' then -- periods missed while no process ran are skipped
            next_due = due + every * math.max(1, floor((now - due) / every) + 1)
            next_attempt = 0
          else
            next_due, next_attempt = now + tonumber(arg), attempt
          end
          jset(id, pack(kind, next_due, every, next_attempt, '', payload, false, 0, next_due))
          ready_add(kind, id, next_due)
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
    local r = ready_first(kinds[i])
    if r and (best == 0 or r < best) then best = r end
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
local want = { [KINDS] = 'set', [DEAD] = 'zset', [META] = 'hash', [JOBS .. ':0'] = 'hash' }
for _, k in ipairs({ JOBS .. ':0', KINDS, DEAD, META }) do
  local ty = typ(k)
  if ty ~= 'none' and ty ~= want[k] then
    return refuse('key ' .. k .. ' is a ' .. ty .. ', not a ' .. want[k] .. ' (not a hwtimer.durable store)')
  end
end
if typ(META) == 'none' then
  if typ(JOBS .. ':0') ~= 'none' or typ(KINDS) ~= 'none' or typ(DEAD) ~= 'none' then
    return refuse('not a hwtimer.durable store (no ' .. META .. ')')
  end
  redis.call('HSET', META, 'app', 'hwtimer.durable', 'format', ARGV[1], 'buckets', 1, 'jobs', 0)
else
  local app, format_ = redis.call('HGET', META, 'app'), redis.call('HGET', META, 'format')
  if app ~= 'hwtimer.durable' then
    return refuse('not a hwtimer.durable store (' .. META .. ' app is ' .. tostring(app or 'missing') .. ')')
  end
  if format_ ~= ARGV[1] then
    return refuse('store format ' .. tostring(format_) .. ', this module reads ' .. ARGV[1])
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
-- every, fresh) per job; `when` is a delay from now when relative. A job
-- with an id that exists replaces it (its lease, attempts and death go with
-- it); a fresh id (96 random bits the client made) is not looked up.
-- Returns { now, due... }.
S.put = script([[
local field, out, kinds = reader(ARGV[1]), { now }, {}
while true do
  local id = field()
  if not id then break end
  local kind, has, payload = field(), field(), field()
  local due, relative, every, fresh = tonumber(field()), field(), tonumber(field()), field()
  if relative == '1' then due = now + due end
  local old = fresh ~= '1' and jget(id)
  if old then
    local old_kind, _, _, _, _, _, _, dead, ready = unpack(old)
    if dead == 1 then redis.call('ZREM', DEAD, id) else ready_del(old_kind, id, ready) end
  end
  jset(id, pack(kind, due, every, 0, '', has == '1' and payload, false, 0, due))
  ready_add(kind, id, due)
  if not kinds[kind] then
    kinds[kind] = true
    redis.call('SADD', KINDS, kind)
  end
  out[#out + 1] = due
end
return done(out)
]])

-- Cancel: ARGV[1] the id. Returns { now } when unknown, else { now, the
-- ready time it had (0 when dead) }.
S.cancel = script([[
local id = ARGV[1]
local raw = jget(id)
if not raw then return { now } end
local kind, _, _, _, _, _, _, dead, ready = unpack(raw)
if dead == 1 then redis.call('ZREM', DEAD, id) else ready_del(kind, id, ready) end
jdel(id)
return done({ now, dead == 1 and 0 or ready })
]])

-- Get: ARGV[1] the id. Returns { now } or { now, fields... }.
S.get = script([[
local out = { now }
local raw = jget(ARGV[1])
if raw then fields(out, raw) end
return out
]])

-- Dead: { now, (id, fields...)... } by due time.
S.dead = script([[
local out = { now }
for _, id in ipairs(redis.call('ZRANGE', DEAD, 0, -1)) do
  local raw = jget(id)
  if raw then
    out[#out + 1] = id
    fields(out, raw)
  end
end
return out
]])

-- Pending: { now, jobs not dead }.
S.pending = script([[
bucket_state()
return { now, jobs - redis.call('ZCARD', DEAD) }
]])

-- Range: ARGV[1], ARGV[2] bounds (excluded). Returns { now, blob of the
-- ready times }, each distinct ready time of any kind once.
S.range = script([[
local out, seen = {}, {}
local lo, hi = tonumber(ARGV[1]), tonumber(ARGV[2])
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  ready_each(kind, lo, hi, function(_, ready)
    if not seen[ready] then
      seen[ready] = true
      out[#out + 1] = ready
    end
  end)
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
return done(reload)
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
  local n = 0
  ready_each(kind, nil, now + 1, function(id, ready)
    due[#due + 1] = { id, ready, kind }
    n = n + 1
    return n < most
  end)
end
if #kinds > 1 then table.sort(due, function(a, b) return a[2] < b[2] end) end
local rows = {}
for i = 1, math.min(most, #due) do
  local id, ready, kind = due[i][1], due[i][2], due[i][3]
  local raw = jget(id)
  local k, d, every, attempt, _, payload, _, dead, stored
  if raw then k, d, every, attempt, _, payload, _, dead, stored = unpack(raw) end
  if not raw or k ~= kind or dead == 1 or stored ~= ready then
    ready_del(kind, id, ready) -- an entry its job no longer has
  else
    ready_del(kind, id, ready)
    jset(id, pack(k, d, every, attempt + 1, owner, payload, false, 0, now + lease))
    ready_add(kind, id, now + lease)
    rows[#rows + 1] = ready
    rows[#rows + 1] = id
    fields_of(rows, k, d, every, attempt + 1, owner, payload, false, 0)
  end
end
return done({ now, earliest(kinds), blob(reload), blob(rows) })
]], true)

return S
