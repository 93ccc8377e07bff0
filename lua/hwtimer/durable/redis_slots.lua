--- hwtimer.durable.redis_slots: the Redis engine's index of waiting jobs
-- by ready time, as text that hwtimer.durable.redis_scripts puts in the
-- prelude every script shares (after its keys, `int`, `call_range`,
-- `call_many` and the buckets' PACKED): each kind's slots (sorted sets of
-- ids by ready time, over disjoint spans of time, listed in the kind's
-- index), how a job finds its slot, how a full slot narrows or splits, the
-- walk over them, and the kind's jobs in flight (its lease set).
return [[
-- The kinds' slots: disjoint spans [start, start + width) of ready times,
-- whole microseconds, at most CELL wide; a slot that reaches SLOT_MAX jobs
-- narrows, or splits (until a width of 1 us). SLOT_MAX is half of what
-- Redis keeps packed: a ZADD scans the packed set, twice an element (its
-- member, its place), ~1.0 us an element in slots filling to 64 and ~1.5
-- filling to 128 (measured in the drain, Redis 7.0).
local SLOT_MAX, CELL = PACKED / 2, 2 ^ 40 -- 2^40 us: 12.7 days
-- (a kind's length before it: kind "x:17" and a slot of kind "x" never share a key)
local function rkey(kind) return base .. ':r:' .. #kind .. ':' .. kind end
local function slot_key(ik, start) return ik .. ':' .. int(start) end
local function slot_of(member)
  local s, w = string.match(member, '^(%-?%d+)/(%d+)$') -- (a due time before 1970 is negative)
  return tonumber(s), tonumber(w)
end
local function slot_name(start, width) return int(start) .. '/' .. int(width) end
-- the slot holding `ready`: start, width, member; or nil and the end of
-- the slot before it
local function slot_at(ik, ready)
  local r = redis.call('ZREVRANGEBYSCORE', ik, int(ready), '-inf', 'LIMIT', 0, 1)
  if not r[1] then return nil, -math.huge end
  local s, w = slot_of(r[1])
  if ready < s + w then return s, w, r[1] end
  return nil, s + w
end
-- A slot that reached SLOT_MAX: narrowed to the span of its jobs, lo to hi.
-- When the next job to come (`ready`) falls outside it, or none comes,
-- that is all (a job that comes inside it later splits it then): jobs that
-- come in order of their ready time (the common case: one delay for all)
-- fill a slot, then a new one after it, and none moves. Else it is split
-- inside Redis (ZRANGESTORE) at the middle of the smallest span of a
-- power-of-two width that holds lo and hi: the lower part keeps the key
-- when it keeps the start, the upper part moves to a key of its own. Both
-- hold fewer than SLOT_MAX, and stay packed. Jobs all at one microsecond
-- stay together in a slot 1 us wide, which grows past PACKED unpacked.
local function split_slot(ik, c, ready)
  local sk = c.key
  local lo = tonumber(redis.call('ZRANGE', sk, 0, 0, 'WITHSCORES')[2])
  local hi = tonumber(redis.call('ZRANGE', sk, -1, -1, 'WITHSCORES')[2])
  local whole = lo == hi or not ready or ready < lo or ready > hi
  redis.call('ZREM', ik, c.member)
  local key = slot_key(ik, lo)
  if lo ~= c.start then redis.call('RENAME', sk, key) end
  if whole then
    redis.call('ZADD', ik, int(lo), slot_name(lo, hi + 1 - lo))
    return
  end
  local w = 2
  while floor(lo / w) ~= floor(hi / w) do w = w * 2 end
  local mid = floor(lo / w) * w + w / 2 -- lo < mid <= hi
  redis.call('ZRANGESTORE', slot_key(ik, mid), key, int(mid), '+inf', 'BYSCORE')
  redis.call('ZREMRANGEBYSCORE', key, int(mid), '+inf')
  redis.call('ZADD', ik, int(lo), slot_name(lo, mid - lo), int(mid), slot_name(mid, hi + 1 - mid))
end
-- The slot each kind last wrote, { start, width, member, key, jobs }: a
-- batch of jobs due close together finds it without a query.
local last_slot = {}
local function slot_for(ik, kind, ready)
  local c = last_slot[kind]
  if c and ready >= c.start and ready < c.start + c.width then return c end
  local s, w, member = slot_at(ik, ready)
  local jobs = 0
  if s then
    jobs = redis.call('ZCARD', slot_key(ik, s))
  else
    -- a new slot: as wide as the slots beside it let it be, up to CELL
    local before = w
    local r = redis.call('ZRANGEBYSCORE', ik, '(' .. int(ready), '+inf', 'LIMIT', 0, 1)
    local after = r[1] and slot_of(r[1]) or math.huge
    s = math.max(before, floor(ready / CELL) * CELL)
    w = math.min(after, s + CELL) - s
    member = slot_name(s, w)
    redis.call('ZADD', ik, int(s), member)
    redis.call('SADD', KINDS, kind) -- (a kind with jobs has a slot: this is enough)
  end
  c = { start = s, width = w, member = member, key = slot_key(ik, s), jobs = jobs }
  last_slot[kind] = c
  return c
end
-- Index jobs of `kind` by ready time: list = { ready, id, ready, id, ... },
-- a ready time a number or its text (whole microseconds: what ZADD is
-- sent; a number is made text in its place). A run of them in one slot is
-- one ZADD of that part of the list (no list of arguments made: the
-- drain's garbage is what its time goes to after the writes themselves).
local function ready_add(kind, list)
  local ik = rkey(kind)
  local i, n = 1, #list
  while i <= n do
    local c = slot_for(ik, kind, tonumber(list[i]))
    local room = c.width > 1 and SLOT_MAX - c.jobs or math.huge
    local from, start, stop = i, c.start, c.start + c.width
    local most = from + 2 * room -- (the first index past the slot's room)
    while i <= n and i < most do
      local r = list[i]
      local v = tonumber(r)
      if v < start or v >= stop then break end
      if v == r then list[i] = int(v) end
      i = i + 2
    end
    c.jobs = c.jobs + call_range('ZADD', c.key, list, from, i - 1)
    if c.width > 1 and c.jobs >= SLOT_MAX then
      split_slot(ik, c, tonumber(list[i]))
      last_slot[kind] = nil
    elseif i == from then
      -- (a time past 2^53 us makes a slot of width 0, which holds nothing:
      -- the front refuses those; this never spins on one)
      error("hwtimer.durable: ready time " .. tostring(list[i]) .. " out of range")
    end
  end
end
-- Drop ids from the slot `key` (member of the index of `kind`).
local function slot_remove(kind, key, member, ids)
  if call_many('ZREM', key, ids) == 0 then return end
  local c = last_slot[kind]
  if c and c.key == key then last_slot[kind] = nil end
  if redis.call('EXISTS', key) == 0 then redis.call('ZREM', rkey(kind), member) end
end
local function ready_del(kind, id, ready)
  local ik = rkey(kind)
  local s, _, member = slot_at(ik, ready)
  if s then slot_remove(kind, slot_key(ik, s), member, { id }) end
end
-- Call f(id, ready, slot key, slot member) for at most `most` (nil: all)
-- jobs of `kind` with lo < ready < hi (lo, hi: numbers, or nil for no bound),
-- oldest first, until it returns false.
local function ready_each(kind, lo, hi, most, f)
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
      local key = slot_key(ik, slot_of(slots[i]))
      local r = redis.call('ZRANGEBYSCORE', key, lo_s, hi_s, 'WITHSCORES', 'LIMIT', 0, most or -1)
      for j = 1, #r, 2 do
        if most then most = most - 1 end
        if f(r[j], tonumber(r[j + 1]), key, slots[i]) == false or most == 0 then return end
      end
    end
    if #slots < 16 then return end
    offset = offset + 16
  end
end
-- Jobs in flight: per kind a sorted set of their ids by the end of their
-- lease (small: a process's claims not yet acknowledged), apart from the
-- slots, so that a claim and its acknowledgement touch no slot but the
-- one the job was due in.
local function lkey(kind) return base .. ':l:' .. #kind .. ':' .. kind end
-- the earliest ready time of `kind`, in flight or not (nil: none)
local function ready_first(kind)
  local ik = rkey(kind)
  local first = redis.call('ZRANGE', ik, 0, 0)[1]
  local r = first and redis.call('ZRANGE', slot_key(ik, slot_of(first)), 0, 0, 'WITHSCORES') or {}
  local l = redis.call('ZRANGE', lkey(kind), 0, 0, 'WITHSCORES')
  local a, b = r[2] and tonumber(r[2]), l[2] and tonumber(l[2])
  if a and b then return math.min(a, b) end
  return a or b
end
]]
