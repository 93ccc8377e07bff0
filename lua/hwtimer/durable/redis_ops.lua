--- hwtimer.durable.redis_ops: the Redis engine's scripts for operating a
-- store (q:counts, q:jobs, q:retry, q:run_now, q:schedules), beside the
-- scripts that run jobs (hwtimer.durable.redis_scripts, which builds each
-- of these on its prelude and lists them with its own: a function of its
-- `script` builder).
-- The store's layout is that file's; nothing here changes it.
--
-- A job is pending (in a slot of its kind), leased (in its kind's lease
-- set) or dead (in {p:q}:dead); `due`, a part of pending, is what a slot
-- holds at or before now. q:jobs reads those indexes in (due, id) order:
-- a slot, the dead set and ties within them are sorted as Redis sorts a
-- sorted set (score, then member byte by byte); across kinds, and for the
-- lease sets (scored by the lease's end), the script sorts, comparing ids
-- byte by byte (Lua's < in Redis follows the server's locale).

-- What every script here shares: the page's order, and the first index of
-- a sorted set past (due, id).
local PAGE = [[
-- a before b, byte by byte
local function less(a, b)
  if a == b then return false end
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local function by_due(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return less(a[2], b[2])
end
-- the index (0-based) in sorted set `key` of its first member past
-- (due, id): just after `id` where it is still there at `due` (its rank);
-- else the first at `due` or later, the members tied at `due` left to the
-- caller's filter
local function start_of(key, due, id)
  local score = redis.call('ZSCORE', key, id)
  if score and tonumber(score) == due then return redis.call('ZRANK', key, id) + 1 end
  return redis.call('ZCOUNT', key, '-inf', '(' .. int(due))
end
-- Call f(member, score) for the members of `key` from index `i` on, in
-- order, CHUNK at a time, until f returns false.
local function each_from(key, i, f)
  while true do
    local r = redis.call('ZRANGE', key, i, i + CHUNK - 1, 'WITHSCORES')
    for j = 1, #r, 2 do
      if f(r[j], tonumber(r[j + 1])) == false then return end
    end
    if #r < 2 * CHUNK then return end
    i = i + CHUNK
  end
end
]]

-- `reader` builds a script that only reads (no-writes: the intake read
-- where it is, intake_each; hwtimer.durable.redis_scripts).
return function(script, reader)
  local S = {}

  -- Counts: { now, blob of (kind, pending, due, leased, dead) per kind with
  -- jobs }. A slot's jobs are counted whole (ZCARD), and those due in the
  -- slot that holds now by ZCOUNT; the dead are read to know their kind.
  S.counts = reader([[
local by, order = {}, {}
local function of(kind)
  local c = by[kind]
  if not c then
    c = { kind, 0, 0, 0, 0 }
    by[kind] = c
    order[#order + 1] = kind
  end
  return c
end
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  local ik, pending, due = rkey(kind), 0, 0
  for _, member in ipairs(redis.call('ZRANGE', ik, 0, -1)) do
    local s, w = slot_of(member)
    local key = slot_key(ik, s)
    local n = redis.call('ZCARD', key)
    pending = pending + n
    if s + w - 1 <= now then
      due = due + n
    elseif s <= now then
      due = due + redis.call('ZCOUNT', key, '-inf', int(now))
    end
  end
  local leased = redis.call('ZCARD', lkey(kind))
  if pending + leased > 0 then
    local c = of(kind)
    c[2], c[3], c[4] = pending, due, leased
  end
end
for _, id in ipairs(redis.call('ZRANGE', DEAD, 0, -1)) do
  local raw = jget(id)
  if raw then
    local c = of((unpack(raw)))
    c[5] = c[5] + 1
  end
end
-- (the intake's jobs: pending, none leased nor dead)
intake_each(function(_, kind, due)
  local c = of(kind)
  c[2] = c[2] + 1
  if due <= now then c[3] = c[3] + 1 end
end)
local out = {}
for _, kind in ipairs(order) do
  for _, v in ipairs(by[kind]) do out[#out + 1] = v end
end
return { now, blob(out) }
]])

  -- Jobs: ARGV[1] state (pending, leased, dead), ARGV[2] the kind ('': all),
  -- ARGV[3] most jobs, ARGV[4] after this due time (microseconds; '': from
  -- the first), ARGV[5] and this id. Returns { now, (id, fields...)... }.
  S.jobs = reader(PAGE .. [[
local state, only, most = ARGV[1], ARGV[2], tonumber(ARGV[3])
local after_due, after_id = tonumber(ARGV[4]), ARGV[5]
local function after(due, id)
  return not after_due or due > after_due or (due == after_due and less(after_id, id))
end
local kinds = only ~= '' and { only } or redis.call('SMEMBERS', KINDS)
-- found: { due, id, raw }, by_due
local found = {}
-- the job `id` is one of this page's: in the state, of the kind, its
-- entry current (a job put twice in one call leaves an entry behind)
-- (`due`: the index's score, when it is the due time: nil for a lease set)
local function take(id, due, check)
  if due and not after(due, id) then return end
  local raw = jget(id)
  if not raw then return end
  local kind, jdue, _, _, owner, _, _, dead, ready = unpack(raw)
  if check(kind, jdue, owner, dead, ready) and after(jdue, id) then found[#found + 1] = { jdue, id, raw } end
end
if state == 'pending' then
  -- each kind's slots in order, from the one holding the cursor
  for _, kind in ipairs(kinds) do
    local ik, got = rkey(kind), #found
    local function current(k, _, owner, dead, ready) return k == kind and owner == '' and dead ~= 1 end
    local from = '-inf'
    if after_due then
      local s = slot_at(ik, after_due)
      from = s and int(s) or '(' .. int(after_due)
    end
    local offset = 0
    repeat
      local slots = redis.call('ZRANGEBYSCORE', ik, from, '+inf', 'LIMIT', offset, 16)
      for i = 1, #slots do
        local key = slot_key(ik, slot_of(slots[i]))
        each_from(key, after_due and start_of(key, after_due, after_id) or 0, function(id, ready)
          take(id, ready, function(k, d, owner, dead, r) return current(k, d, owner, dead) and r == ready end)
          return #found - got < most
        end)
        if #found - got >= most then break end
      end
      offset = offset + 16
    until #slots < 16 or #found - got >= most
  end
  -- and the intake's, all of them (the page is cut below)
  intake_each(function(id, kind, due, raw)
    if (only == '' or kind == only) and after(due, id) then found[#found + 1] = { due, id, raw } end
  end)
elseif state == 'leased' then
  for _, kind in ipairs(kinds) do
    for _, id in ipairs(redis.call('ZRANGE', lkey(kind), 0, -1)) do
      take(id, nil, function(k, _, owner, dead) return k == kind and owner ~= '' and dead ~= 1 end)
    end
  end
else
  each_from(DEAD, after_due and start_of(DEAD, after_due, after_id) or 0, function(id, due)
    take(id, due, function(k, d, _, dead) return dead == 1 and d == due and (only == '' or k == only) end)
    return #found < most
  end)
end
table.sort(found, by_due)
local out = { now }
for i = 1, math.min(most, #found) do
  out[#out + 1] = found[i][2]
  fields(out, found[i][3])
end
return out
]])

  -- Retry: ARGV[1] the id. A dead job pending again, due now, attempt 0,
  -- its error dropped (a schedule's run as it was: the same run again).
  -- Returns { now, 'ok', its ready time }; { now } when unknown; { now,
  -- 'pending' | 'leased' } when it is not dead.
  S.retry = script([[
drain()
local id = ARGV[1]
local raw = jget(id)
if not raw then return { now } end
local kind, _, every, _, owner, payload, _, dead, _, sched = unpack(raw)
if dead ~= 1 then return { now, owner ~= '' and 'leased' or 'pending' } end
redis.call('ZREM', DEAD, id)
jset(id, pack(kind, now, every, 0, '', payload, false, 0, now, sched))
ready_add(kind, { now, id })
return { now, 'ok', now }
]])

  -- Run now: ARGV[1] the id. A pending job due now, its attempts kept (one
  -- due already is left as it is); a schedule's run stands for now.
  -- Returns { now, 'ok', its ready time }; { now } when unknown; { now,
  -- 'dead' }; { now, 'leased', lease end }.
  S.run_now = script([[
drain()
local id = ARGV[1]
local raw = jget(id)
if not raw then return { now } end
local kind, _, every, attempt, owner, payload, _, dead, ready, sched = unpack(raw)
if dead == 1 then return { now, 'dead' } end
if owner ~= '' then return { now, 'leased', ready } end
if ready <= now then return { now, 'ok', ready } end
ready_del(kind, id, ready)
if sched then sched.a, sched.k = now, nil end -- a schedule's run of now
jset(id, pack(kind, now, every, attempt, '', payload, false, 0, now, sched))
ready_add(kind, { now, id })
return { now, 'ok', now }
]])

  -- Schedules: the schedules (an interval, `every`, or a schedule's tenth
  -- value) of some of the store's job buckets, read whole: a store's every
  -- job is read, a few buckets a call, so that no call holds the server for
  -- long. ARGV[1] 'n': ARGV[2] the first numbered bucket, ARGV[3] how many;
  -- returns { now, the bucket count, (id, fields...)... }. ARGV[1] 'b': the
  -- blocks after the name ARGV[2] ('': from the first), ARGV[3] of them;
  -- returns { now, the last block read ('' when none was left), (id,
  -- fields...)... }.
  S.schedules = reader([[
bucket_state()
local keys, out = {}, { now }
local first, most = ARGV[2], tonumber(ARGV[3])
if ARGV[1] == 'n' then
  out[2] = buckets
  for b = tonumber(first), math.min(tonumber(first) + most, buckets) - 1 do keys[#keys + 1] = JOBS .. ':' .. b end
else
  local names = redis.call('ZRANGE', BLOCKS, first == '' and '-' or '(' .. first, '+', 'BYLEX', 'LIMIT', 0, most)
  out[2] = names[#names] or ''
  for i = 1, #names do keys[i] = JOBS .. ':' .. names[i] end
end
-- (the intake's jobs with an interval, with the first numbered buckets)
if ARGV[1] == 'n' and tonumber(first) == 0 then
  intake_each(function(id, _, _, raw)
    if select(3, unpack(raw)) ~= 0 then
      out[#out + 1] = id
      fields(out, raw)
    end
  end)
end
for _, key in ipairs(keys) do
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local raw = all[i + 1]
    local _, _, every, _, _, _, _, _, _, sched = unpack(raw)
    if every ~= 0 or sched then
      out[#out + 1] = all[i]
      fields(out, raw)
    end
  end
end
return out
]])

  return S
end
