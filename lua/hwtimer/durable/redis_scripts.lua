--- hwtimer.durable.redis_scripts: the server-side scripts of the Redis engine,
-- one per operation, as text (a module, not .lua files beside it, so that
-- `require` finds them wherever the engine is installed: a rock, a copy
-- under nginx's lua_package_path, a source tree).
--
-- The keys of one queue begin with its base, {p:q} here: {prefix:queue}
-- and the prefix's length, or both escaped where one has a "}"
-- (hwtimer.durable.redis's Engine.base: two pairs never share a key, and
-- the hash tag is never empty), so that Redis Cluster keeps them in one
-- slot:
--   {p:q}:j:B        hash bucket B: job id -> the job, cmsgpack of its ten
--                    fields (kind, due, every, attempt, owner, payload,
--                    error, dead, ready, schedule: see
--                    hwtimer.durable.redis_schedules)
--   {p:q}:j:TAG:N    hash, a block: the same for the jobs whose ids one
--                    generator (TAG) made 32 in a row (N); see bucket_key
--   {p:q}:blocks     sorted set (all scores 0): the blocks' "TAG:N"
--   {p:q}:r:N:KIND   per kind (N its length), the index of its time slots: sorted set of
--                    "start/width" (microseconds) scored by start
--   {p:q}:r:N:KIND:S the slot starting at S: ids of jobs waiting to run,
--                    scored by ready time (their due time, or a retry's)
--   {p:q}:l:N:KIND   per kind, the jobs in flight: ids scored by the end of
--                    their lease (reclaimed once it passes)
--   {p:q}:kinds      set of the kinds with jobs (to count and range)
--   {p:q}:dead       sorted set: dead job ids scored by their due time
--   {p:q}:meta       hash: app = hwtimer.durable, format = 7, buckets (how
--                    many numbered buckets), jobs (how many jobs, dead ones
--                    too), hashed (how many of them the numbered buckets hold)
--   {p:q}:incoming   list, the intake: jobs with fresh ids, an entry a call,
--                    not yet in a bucket and a slot; every other script that
--                    writes moves them there first, those that only read
--                    read them where they are (see S.add, intake_each). An RPUSH of the client,
--                    which stamped the entry as it bounds the server's clock:
--                    "=" and the jobs as they are to be stored
--                    (hwtimer.durable.redis_entry); or of S.add, which reads
--                    TIME: "s us " and the jobs as `put` reads them
-- At {prefix:queue}, the base of formats 2 to 6, once such a store was
-- moved here: :meta and the intakes of formats 3 to 6 (:in, :intake,
-- :inbox, :incoming) strings, so that a process of those formats still
-- running fails every script at its first command (each reads or pushes
-- its intake first), writing nothing (see hwtimer.durable.redis_open).
-- KEYS are {p:q}:j, kinds, dead, meta (`add`: {p:q}:incoming alone); the
-- others are derived from the first (same tag, same slot).
--
-- Why buckets and slots, not one hash and one sorted set per kind: Redis
-- keeps a small hash or sorted set (up to 128 entries, values up to 64
-- bytes) as one packed array, a few bytes an entry over the data; a large
-- one costs a hash table's or a skiplist's nodes, ~120 bytes an entry each
-- (measured, Redis 7). So the jobs spread over buckets by a hash of their
-- id, whose count grows one bucket at a time (linear hashing) to keep 40
-- to 80 jobs a bucket, or over blocks of 32 by the ids the queue made; and
-- each kind's ready times spread over slots, disjoint spans of time that
-- narrow or split where 64 jobs crowd one (a timing wheel whose levels
-- follow the load). The jobs in flight are few (claimed,
-- not yet acknowledged) and move twice in a short time: a plain sorted set.
--
-- Times are integer microseconds since the epoch (exact in a double until
-- the year 2255), and "now" is always the server's TIME, never the client's.
-- Every script returns an array whose first element is that now, which the
-- client uses to track the server's clock.
local S = {}

-- 3: format 2 and the intake ({p:q}:in), which a process of format 2 would
-- not read. 4: schedules (a job's tenth value, the jobs' encoding in `put`
-- and in the intake, the acknowledgements' fields), the intake moved to
-- {p:q}:intake and {p:q}:in a string. 5: blocks (the jobs of ids the queue
-- made, which a process of format 4 would look for in numbered buckets),
-- the intake moved to {p:q}:inbox and {p:q}:intake a string. 6: entries
-- the client stamped, of jobs packed as stored (which a process of format 5
-- would fail to read), the intake moved to {p:q}:incoming and {p:q}:inbox
-- a string. 7: keys that no two (prefix, queue) pairs share (the base
-- {prefix:queue} and the prefix's length), the store moved there from
-- {prefix:queue} and that base fenced. open upgrades a store of format 2
-- to 6 (their jobs are read as they are: no schedule before 4; their ids
-- are not of the blocks' form before 5).
S.FORMAT = 7

-- The intake holds at most about this many jobs: `add` reports its length
-- in entries (calls), and the client that sent k jobs has it moved in (the
-- `drain` script) once that length times k reaches this.
S.INTAKE_MAX = 500

-- Shared by every script: keys, the clock, the job's encoding, the jobs'
-- buckets and the kinds' slots.
local PRELUDE = [[
local JOBS, KINDS, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local base = string.sub(JOBS, 1, -3)
local tunpack, floor, format = unpack, math.floor, string.format
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local pack, unpack = cmsgpack.pack, cmsgpack.unpack
-- A whole number as Redis is sent it: '%d' (an integer's printf) where it
-- can; a number handed to redis.call is written with '%.17g', and '%.0f'
-- is no faster: glibc's printf of a double of 16 digits takes ~0.5 us,
-- 6 % of Redis's time in a drain (perf).
local function int(v)
  if v % 1 == 0 and v > -2 ^ 62 and v < 2 ^ 62 then return format('%d', v) end
  return format('%.0f', v)
end
-- redis.call(cmd, key, ...list) in calls of at most CHUNK values (Lua 5.1's
-- unpack stops near 8,000, and a script that fails halfway keeps what it
-- wrote); the replies' sum.
local CHUNK = 1000
-- (of list[from..to] alone: a run of a longer list, no copy made)
local function call_range(cmd, key, list, from, to)
  local n = 0
  for i = from, to, CHUNK do
    n = n + redis.call(cmd, key, tunpack(list, i, math.min(i + CHUNK - 1, to)))
  end
  return n
end
local function call_many(cmd, key, list) return call_range(cmd, key, list, 1, #list) end
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
]] .. require("hwtimer.durable.redis_schedules") .. [[
-- a job as replies carry it: kind, has payload, payload, due, attempt,
-- every, dead, error, leased, schedule
local function fields_of(out, kind, due, every, attempt, owner, payload, err, dead, _, sched)
  out[#out + 1] = kind
  out[#out + 1] = payload and 1 or 0
  out[#out + 1] = payload or ''
  out[#out + 1] = int(due) -- (text: an integer reply holds only +-2^63 us)
  out[#out + 1] = attempt
  out[#out + 1] = every
  out[#out + 1] = dead
  out[#out + 1] = err or ''
  out[#out + 1] = owner ~= '' and 1 or 0
  out[#out + 1] = sched_text(sched)
end
local function fields(out, raw) fields_of(out, unpack(raw)) end

-- The jobs' buckets. An id the queue made (hwtimer.durable.ids: 26 hex
-- digits, its generator's tag at 13-20 and running count at 21-26; or any
-- id of that length hex there) is in the block of that generator's 32 ids
-- in a row, {p:q}:j:TAG:N (N: the count // 32), listed in BLOCKS: jobs scheduled one after another share a
-- hash, written in one HSET, found without hashing, never split. Any other
-- id is in a numbered bucket (linear hashing): with n buckets and p the
-- largest power of two <= n, a job is in bucket h % 2p, or h % p when that
-- is n or more; one more bucket splits bucket n - p between itself and n.
local PACKED = 128 -- the most entries Redis keeps packed (its default)
local LOAD = 40 -- a bucket of a round not yet split holds up to twice that
local BLOCKS = base .. ':blocks'
local buckets, jobs, hashed, pow -- (jobs: all of them; hashed: those in the numbered buckets)
local function bucket_state()
  if buckets then return end
  local m = redis.call('HMGET', META, 'buckets', 'jobs', 'hashed')
  -- (no 'hashed' before format 5, when every job was in a numbered bucket)
  buckets, jobs = tonumber(m[1]) or 1, tonumber(m[2]) or 0
  hashed = tonumber(m[3]) or jobs
  pow = 1
  while pow * 2 <= buckets do pow = pow * 2 end
end
-- (SHA-1's first 32 bits: ids that differ in a digit land far apart,
-- which a sum of their bytes does not do for "order-1", "order-2", ...)
local function hash(id) return tonumber(string.sub(redis.sha1hex(id), 1, 8), 16) end
local block_keys = {} -- an id's digits 13-25 -> its block's key, or false
-- (an id of 26 characters whose 13th to 25th are lowercase hex digits: the
-- test is made once for each run of 16 ids)
local function block_key(id)
  if #id ~= 26 then return nil end
  local d = string.sub(id, 13, 25)
  local key = block_keys[d]
  if key == nil then
    key = not string.find(d, '[^0-9a-f]') and JOBS .. ':' .. string.sub(d, 1, 8) .. ':' ..
      floor(tonumber(string.sub(d, 9), 16) / 2)
    block_keys[d] = key
  end
  return key or nil
end
local function block_name(key) return string.sub(key, #JOBS + 2) end
local last_id, last_key, last_block -- a job is read, then written: one lookup for both
local bucket_keys = {} -- bucket number -> its key, made once
-- the key of id's bucket, and whether it is a block
local function bucket_key(id)
  if id == last_id then return last_key, last_block end
  local key = block_key(id)
  last_id, last_block = id, key ~= nil
  if not key then
    local b = hash(id) % (2 * pow)
    if b >= buckets then b = b - pow end
    key = bucket_keys[b]
    if not key then
      key = JOBS .. ':' .. b
      bucket_keys[b] = key
    end
  end
  last_key = key
  return key, last_block
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
  if #move == 0 then return end
  call_many('HSET', new, move)
  if #all > 2 * PACKED then -- unpacked: written anew, to be packed again
    redis.call('DEL', key)
    call_many('HSET', key, stay)
  else
    local ids = {}
    for i = 1, #move, 2 do ids[#ids + 1] = move[i] end
    call_many('HDEL', key, ids)
  end
end
local function jget(id)
  bucket_state()
  return redis.call('HGET', bucket_key(id), id)
end
local counted -- the counts changed since META had them
local function jset(id, raw)
  bucket_state()
  local key, blk = bucket_key(id)
  if redis.call('HSET', key, id, raw) == 1 then
    counted, jobs = true, jobs + 1
    if blk then
      redis.call('ZADD', BLOCKS, 0, block_name(key))
    else
      hashed = hashed + 1
      if hashed > LOAD * buckets then split_bucket() end
    end
  end
end
local function jdel(id)
  bucket_state()
  local key, blk = bucket_key(id)
  if redis.call('HDEL', key, id) == 1 then
    counted, jobs = true, jobs - 1
    if not blk then
      hashed = hashed - 1
    elseif redis.call('EXISTS', key) == 0 then
      redis.call('ZREM', BLOCKS, block_name(key))
    end
  end
end
-- META's counts, when they changed
local function write_counts()
  if counted then
    redis.call('HSET', META, 'jobs', jobs, 'hashed', hashed)
    -- (the store's keys lost under running processes, a Redis restarted
    -- empty, whose scripts made them again: a store again, which the next
    -- process opens, not keys of "another program")
    if redis.call('HSETNX', META, 'app', 'hwtimer.durable') == 1 then
      redis.call('HSET', META, 'format', ']] .. S.FORMAT .. [[', 'buckets', buckets)
    end
  end
  counted = nil
end
-- Every script that adds or deletes jobs ends with this: the count is
-- written once, not once a job.
local function done(reply)
  write_counts()
  return reply
end

]] .. require("hwtimer.durable.redis_slots") .. [[
-- Remove a job from the index that holds it (its slot, its kind's leases,
-- or the dead).
local function unindex(id, kind, owner, dead, ready)
  if dead == 1 then
    redis.call('ZREM', DEAD, id)
  elseif owner ~= '' then
    redis.call('ZREM', lkey(kind), id)
  else
    ready_del(kind, id, ready)
  end
end
-- Write the jobs a script collected, { ids, raws, new = how many of them no
-- job has yet in a numbered bucket, by = the jobs take_stamped put in
-- their blocks (key -> { id, raw, id, raw, ... }) or nil }: those buckets
-- split first for the new ones (one split a new job at most, as writing
-- them one at a time would), then one HSET a bucket or block.
local function jset_all(w)
  bucket_state()
  for _ = 1, w.new do
    if hashed + w.new <= LOAD * buckets then break end
    split_bucket()
  end
  -- by[key]: { id, raw, id, raw, ... }
  local ids, raws, by, blocks = w.ids, w.raws, w.by or {}, {}
  for key in pairs(by) do blocks[key] = true end
  for i = 1, #ids do
    local key, blk = bucket_key(ids[i])
    local g = by[key]
    if not g then
      g = {}
      by[key] = g
      if blk then blocks[key] = true end
    end
    g[#g + 1], g[#g + 2] = ids[i], raws[i]
  end
  for key, g in pairs(by) do
    local n = call_many('HSET', key, g)
    if n > 0 then
      counted, jobs = true, jobs + n
      if not blocks[key] then
        hashed = hashed + n
      else
        redis.call('ZADD', BLOCKS, 0, block_name(key))
      end
    end
  end
end
-- Collect the jobs of `jobs_in` (as `put` takes them; a relative due time
-- counts from `at`) into `w` for jset_all, taking a replaced job out of its
-- index; each kind's { ready, id, ... } goes to kinds[kind] for ready_add,
-- each due time to `out` when given. `format`: 3 for the intake of a store
-- of format 3 (no schedule field), else 4.
-- kinds[kind], made when missing: the { ready, id, ... } of a kind's jobs
local function kind_list(kinds, kind)
  local list = kinds[kind]
  if not list then
    list = {}
    kinds[kind] = list
  end
  return list
end
local JOB_FORMAT = { [3] = '>I4c0I4c0BBBI4c0I4c0I4c0', [4] = '>I4c0I4c0BBBI4c0I4c0I4c0I4c0' }
JOB_FORMAT[5], JOB_FORMAT[6] = JOB_FORMAT[4], JOB_FORMAT[4]
local function put_jobs(jobs_in, at, kinds, w, out, format, pos)
  local read, fmt = struct.unpack, JOB_FORMAT[format or 4]
  pos = pos or 1
  local ids, raws = w.ids, w.raws
  while pos <= #jobs_in do
    local id, kind, has, relative, fresh, payload, due, every, sched
    if format == 3 then
      id, kind, has, relative, fresh, payload, due, every, pos = read(fmt, jobs_in, pos)
      sched = ''
    else
      id, kind, has, relative, fresh, payload, due, every, sched, pos = read(fmt, jobs_in, pos)
    end
    due, every = tonumber(due), tonumber(every)
    if relative == 1 then due = at + due end
    payload = has == 1 and payload
    local old = fresh ~= 1 and jget(id)
    local s, later = sched_read(sched)
    local attempt = 0
    if s then due, attempt, s = sched_put(old, kind, payload, due, every, s, later) end
    if not due then -- the same schedule: as it is (`attempt` is its due time)
      if out then out[#out + 1] = attempt end
    else
      if old then
        local old_kind, _, _, _, owner, _, _, dead, ready = unpack(old)
        unindex(id, old_kind, owner, dead, ready)
      elseif not block_key(id) then
        w.new = w.new + 1
      end
      local n = #ids + 1
      ids[n], raws[n] = id, pack(kind, due, every, attempt, '', payload, false, 0, due, s)
      local list = kind_list(kinds, kind)
      list[#list + 1], list[#list + 2] = due, id
      if out then out[#out + 1] = due end
    end
  end
end
-- Move the intake's jobs into their buckets and slots, as `put` would
-- have at each entry's time. Every script that writes but open and add
-- calls it before anything else, so that none sees the store without
-- them; those that only read see the intake where it is (intake_each).
local INTAKE = base .. ':incoming'
-- The jobs of an entry the client stamped (hwtimer.durable.redis_entry:
-- after its mark, each job's id, kind, due time as text and value, all new,
-- none a schedule) into `w` and `kinds` as put_jobs collects them, a job
-- of a block straight into its block's list for jset_all: read, not
-- decoded (the due time goes to ZADD as the text it came as), and no more
-- made of them than the writes' arguments (the drain's garbage costs it
-- the collector's time).
local function take_stamped(e, kinds, w)
  local read, by = struct.unpack, w.by
  if not by then
    by = {}
    w.by = by
  end
  local pos = 2
  while pos <= #e do
    local id, kind, due, raw
    id, kind, due, raw, pos = read('>I4c0I4c0I4c0I4c0', e, pos)
    local key = block_key(id)
    if key then
      local g = by[key]
      if not g then
        g = {}
        by[key] = g
      end
      g[#g + 1], g[#g + 2] = id, raw
    else
      local ids, n = w.ids, #w.ids + 1
      ids[n], w.raws[n] = id, raw
      w.new = w.new + 1
    end
    local list = kind_list(kinds, kind)
    list[#list + 1], list[#list + 2] = due, id
  end
end
local function drain(intake, format)
  intake = intake or INTAKE
  local items = redis.call('LRANGE', intake, 0, -1)
  if #items == 0 then return end
  local kinds, w = {}, { ids = {}, raws = {}, new = 0 }
  local match, byte = string.match, string.byte
  for i = 1, #items do
    local e = items[i]
    if byte(e) == 61 then -- '=': stamped by the client
      take_stamped(e, kinds, w)
    else -- "seconds microseconds jobs" (the `add` script's)
      local s, u, pos = match(e, '^(%d+) (%d+) ()')
      put_jobs(e, tonumber(s) * 1000000 + tonumber(u), kinds, w, nil, format, pos)
    end
  end
  jset_all(w)
  for kind, list in pairs(kinds) do ready_add(kind, list) end
  -- emptied once its jobs are in (a script that fails halfway keeps what it
  -- wrote: the next one moves the same jobs in again, to the same places)
  redis.call('DEL', intake)
  -- (the count written here: not every script that drains ends with done)
  write_counts()
end
]]

-- Acknowledgements (in claim and ack): ARGV[1] owner, ARGV[2] a blob of
-- (what, id, attempt, arg, at, runs, late) per job: done, next (a
-- schedule's next run, due at `at`, `runs` counted), retry (after arg
-- microseconds), bury (arg is the error), release (claimed, never started:
-- due as it was, the attempt not counted); a schedule's retry and bury keep
-- `at` and `late`, the run's ('' for none). Only the owner of the lease and
-- the attempt it claimed count: a job replaced, cancelled or reclaimed
-- meanwhile is left as it is. The new ready times go to `reload`.
local ACK = [[
local function ack_all(owner, blob, reload)
  local field, in_flight = reader(blob), {}
  while true do
    local what = field()
    if not what then break end
    local id, claimed, arg = field(), tonumber(field()), field()
    local at, runs, late = tonumber(field()), tonumber(field()), tonumber(field())
    local raw = jget(id)
    if raw then
      local kind, due, every, attempt, holder, payload, _, _, _, sched = unpack(raw)
      if holder == owner and attempt == claimed then
        local ids = in_flight[kind] or {}
        in_flight[kind] = ids
        ids[#ids + 1] = id
        if sched and at and what ~= 'next' then sched.a, sched.k = at, late end
        if what == 'done' then
          jdel(id)
        elseif what == 'bury' then
          jset(id, pack(kind, due, every, attempt, '', payload, arg, 1, 0, sched))
          redis.call('ZADD', DEAD, int(due), id)
        else
          local next_due, next_attempt
          if what == 'next' then -- the front computed it, once
            sched = sched or {} -- (a periodic job of format 3)
            sched.a, sched.r, sched.k = at, runs, nil
            next_due, next_attempt = at, 0
          elseif what == 'release' then -- never started: as it was
            next_due, next_attempt = due, attempt - 1
          else
            next_due, next_attempt = now + tonumber(arg), attempt
          end
          jset(id, pack(kind, next_due, every, next_attempt, '', payload, false, 0, next_due, sched))
          ready_add(kind, { next_due, id })
          reload[#reload + 1] = next_due
        end
      end
    end
  end
  for kind, ids in pairs(in_flight) do call_many('ZREM', lkey(kind), ids) end
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

-- A script: the prelude, the acknowledgements' functions when `with_ack`,
-- the body; `flags` (Redis 7's, e.g. "no-writes": Redis then refuses any
-- write the script would make) in its first line.
local function script(body, with_ack, flags)
  return (flags and "#!lua flags=" .. flags .. "\n" or "") .. PRELUDE .. (with_ack and ACK or "") .. body
end

-- The intake read where it is, for the scripts that only read: flagged
-- no-writes (Redis refuses any write they would make, and runs them past
-- maxmemory, where a script that moved the intake first would be refused
-- at that write, and with it every read; and hwtimer-jobs' reads change
-- not a byte). f(id, kind, due, raw) for each of its jobs, as the drain
-- would store it; not for one that a bucket or block holds already (a
-- drain that failed halfway wrote it there, and the next one writes it
-- again, the same). The intake's jobs have fresh ids: none dead, none
-- leased, none a schedule, none replacing another.
local INTAKE_READ = [[
local function intake_each(f)
  local items, read = redis.call('LRANGE', INTAKE, 0, -1), struct.unpack
  for i = 1, #items do
    local e = items[i]
    if string.byte(e) == 61 then -- '=': stamped by the client, the jobs as stored
      local pos = 2
      while pos <= #e do
        local id, kind, due, raw
        id, kind, due, raw, pos = read('>I4c0I4c0I4c0I4c0', e, pos)
        if not jget(id) then f(id, kind, tonumber(due), raw) end
      end
    else -- "seconds microseconds jobs" (the `add` script's), as put_jobs reads them
      local sec, us, pos = string.match(e, '^(%d+) (%d+) ()')
      local at = tonumber(sec) * 1000000 + tonumber(us)
      while pos <= #e do
        local id, kind, has, relative, payload, due, every, sched, _
        id, kind, has, relative, _, payload, due, every, sched, pos = read(JOB_FORMAT[4], e, pos)
        due = tonumber(due)
        if relative == 1 then due = at + due end
        if not jget(id) then
          local raw = pack(kind, due, tonumber(every), 0, '', has == 1 and payload, false, 0, due, sched_read(sched))
          f(id, kind, due, raw)
        end
      end
    end
  end
end
]]
-- A script that only reads (see INTAKE_READ).
local function reader(body) return script(INTAKE_READ .. body, false, "no-writes") end
-- A script that frees memory or keeps it about level (a cancel, a claim,
-- an acknowledgement; each moves the intake in first): flagged allow-oom,
-- so that a Redis past maxmemory still runs the jobs it holds and lets
-- them go. A schedule (put, add, the client's RPUSH) is refused there.
local function freeing(body, with_ack) return script(body, with_ack, "allow-oom") end

-- Open: check the keys, make a store or upgrade one (its own file); the
-- open of `existing = true` (hwtimer-jobs) makes and upgrades none, and
-- writes nothing.
local open = require("hwtimer.durable.redis_open")
S.open, S.open_existing = open(script), open(script, true)

-- Put: ARGV[1] the jobs, each (id, kind, has payload, relative, fresh,
-- payload, when, every, schedule) as hwtimer.durable.redis writes them for
-- struct.unpack (a fifth of the time the blob's reader takes here); `when`
-- is a delay from now when relative. A job with an id that exists replaces
-- it (its lease, attempts and death go with it), but for a schedule put
-- again (sched_put: the same one is left as it is, one of the same
-- calendar keeps its pending run); a fresh id (one the client made: time,
-- a random tag and a count) is not looked up. Returns { now, due... }.
S.put = script([[
drain()
local out, kinds, w = { now }, {}, { ids = {}, raws = {}, new = 0 }
put_jobs(ARGV[1], now, kinds, w, out)
jset_all(w)
-- (a job put twice in one call leaves its first entry behind, which the
-- claim that reaches it drops: its ready time is not the job's)
for kind, list in pairs(kinds) do ready_add(kind, list) end
return done(out)
]])

-- Add: ARGV[1] jobs with fresh ids, as `put` takes them, one after
-- another (one argument, not one a job: Redis makes an object of each
-- argument it is sent, ~0.2 us a job). A schedule's path when the client
-- cannot stamp the entry itself (hwtimer.durable.redis_client's
-- push_stamped, a plain RPUSH: its usual path, cheaper for Redis than any
-- script): the jobs go to the intake as they are, after this now (in
-- one RPUSH of one entry, atomic), where they are stored as surely as in a
-- bucket; the next other script moves them into their buckets and slots,
-- many at a time. It does no more than that: the prelude's functions alone
-- cost more than TIME and RPUSH (closures made at every call), a job's
-- bucket and slot six commands, string.format on the time a microsecond
-- (Redis 7.0, measured); the client adds a job's delay to this now itself.
-- An entry is "seconds microseconds jobs" (TIME's two fields as they come,
-- then the call's jobs one after another). KEYS[1] is the intake (its only
-- key: the others are not sent). Returns { now (an integer reply), the
-- intake's length in entries }.
S.add = [[
local t = redis.call('TIME')
local n = redis.call('RPUSH', KEYS[1],
  t[1] .. ' ' .. t[2] .. ' ' .. ARGV[1])
return { t[1] * 1000000 + t[2], n }
]]

-- Push and wake: one schedule of a plain client, its entry stamped by the
-- client as for a plain RPUSH (push_stamped), then PUBLISH ARGV[3] on
-- ARGV[2] (hwtimer.durable.redis's wake-up of the processes that run the
-- job's kind), in one round trip instead of two. The PUBLISH goes through
-- redis.pcall: its refusal (an ACL without the channel) neither fails nor
-- undoes the schedule, and comes back as the third field. KEYS[1] is the
-- intake (its only key, as add's). Returns { now, the intake's length in
-- entries, 0 or the refusal }.
S.push_wake = [[
local t = redis.call('TIME')
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
local p = redis.pcall('PUBLISH', ARGV[2], ARGV[3])
if type(p) == 'table' and p.err then p = p.err else p = 0 end
return { t[1] * 1000000 + t[2], n, p }
]]

-- Drain: the intake into the buckets and slots. Returns { now }.
S.drain = freeing([[
drain()
return done({ now })
]])

-- Cancel: ARGV[1] the id, ARGV[2] the caller (owner). Returns { now } when
-- unknown; { now, 'leased', lease end } when another owner holds it under a
-- live lease (it may be running there: left as it is); else { now, the ready
-- time it had (0 when dead) }.
S.cancel = freeing([[
drain()
local id = ARGV[1]
local raw = jget(id)
if not raw then return { now } end
local kind, _, _, _, owner, _, _, dead, ready = unpack(raw)
if owner ~= '' and owner ~= ARGV[2] and ready > now then return { now, 'leased', ready } end
unindex(id, kind, owner, dead, ready)
jdel(id)
return done({ now, dead == 1 and 0 or ready })
]])

-- Get: ARGV[1] the id. Returns { now } or { now, fields... }.
S.get = reader([[
local out = { now }
local raw = jget(ARGV[1])
if not raw then intake_each(function(id, _, _, r) if id == ARGV[1] then raw = r end end) end
if raw then fields(out, raw) end
return out
]])

-- Dead: { now, (id, fields...)... } by due time.
S.dead = reader([[
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
S.pending = reader([[
bucket_state()
local n = jobs - redis.call('ZCARD', DEAD)
intake_each(function() n = n + 1 end)
return { now, n }
]])

-- Range: ARGV[1], ARGV[2] bounds (excluded). Returns { now, blob of the
-- ready times }, each distinct ready time of any kind once.
S.range = reader([[
local out, seen = {}, {}
local lo, hi = tonumber(ARGV[1]), tonumber(ARGV[2])
local function add(ready)
  if not seen[ready] then
    seen[ready] = true
    out[#out + 1] = ready
  end
end
intake_each(function(_, _, due) if due > lo and due < hi then add(due) end end)
for _, kind in ipairs(redis.call('SMEMBERS', KINDS)) do
  ready_each(kind, lo, hi, nil, function(_, ready) add(ready) end)
  local l = redis.call('ZRANGEBYSCORE', lkey(kind), '(' .. ARGV[1], '(' .. ARGV[2], 'WITHSCORES')
  for i = 2, #l, 2 do add(tonumber(l[i])) end
end
return { now, blob(out) }
]])

-- Peek (the poll): ARGV the handled kinds. Returns { now, earliest ready }.
S.peek = freeing([[
drain()
return { now, earliest(ARGV) }
]], true)

-- Ack: ARGV[1] owner, ARGV[2] the acknowledgements. Returns { now, ready... }.
S.ack = freeing([[
drain()
local reload = { now }
ack_all(ARGV[1], ARGV[2], reload)
return done(reload)
]], true)

-- Renew: ARGV[1] owner, ARGV[2] lease (microseconds), ARGV[3] a blob of
-- (id, attempt) per job. Moves the end of each lease the owner still holds
-- for that attempt to now + lease. Returns { now, blob of those ids }.
S.renew = freeing([[
drain()
local owner, until_, field, kept = ARGV[1], now + tonumber(ARGV[2]), reader(ARGV[3]), {}
while true do
  local id = field()
  if not id then break end
  local claimed = tonumber(field())
  local raw = jget(id)
  if raw then
    local kind, due, every, attempt, holder, payload, _, _, _, sched = unpack(raw)
    if holder == owner and attempt == claimed then
      jset(id, pack(kind, due, every, attempt, owner, payload, false, 0, until_, sched))
      redis.call('ZADD', lkey(kind), int(until_), id)
      kept[#kept + 1] = id
    end
  end
end
return { now, blob(kept) }
]])

-- Claim: ARGV[1] owner, ARGV[2] acknowledgements written first, ARGV[3]
-- lease (microseconds), ARGV[4] most jobs, ARGV[5...] the handled kinds.
-- Takes the due jobs of those kinds, oldest ready first, moving each one's
-- ready time to the end of its lease. Returns { now, earliest ready left,
-- blob of the acknowledgements' new ready times, blob of the jobs: per job
-- its ready time, id, fields... }.
S.claim = freeing([[
drain()
local claimer, lease, most = ARGV[1], tonumber(ARGV[3]), tonumber(ARGV[4])
local kinds = {}
for i = 5, #ARGV do kinds[#kinds + 1] = ARGV[i] end
local reload = {}
ack_all(claimer, ARGV[2], reload)
-- due: { id, ready, kind, slot key or false (in flight), slot member }
local due, sort = {}, #kinds > 1
for _, kind in ipairs(kinds) do
  ready_each(kind, nil, now + 1, most, function(id, ready, key, member)
    due[#due + 1] = { id, ready, kind, key, member }
  end)
  local l = redis.call('ZRANGEBYSCORE', lkey(kind), '-inf', now, 'WITHSCORES', 'LIMIT', 0, most)
  for i = 1, #l, 2 do due[#due + 1] = { l[i], tonumber(l[i + 1]), kind, false } end
  sort = sort or #l > 0
end
if sort then table.sort(due, function(a, b) return a[2] < b[2] end) end
-- out of their slots (one ZREM a slot) or their leases (one a kind)
local from_slot, from_leases = {}, {}
for i = 1, math.min(most, #due) do
  local d = due[i]
  local id, kind, key, member = d[1], d[3], d[4], d[5]
  if key then
    local g = from_slot[key] or { kind, member, {} }
    from_slot[key] = g
    local ids = g[3]
    ids[#ids + 1] = id
  else
    local ids = from_leases[kind] or {}
    from_leases[kind] = ids
    ids[#ids + 1] = id
  end
end
for key, g in pairs(from_slot) do slot_remove(g[1], key, g[2], g[3]) end
for kind, ids in pairs(from_leases) do call_many('ZREM', lkey(kind), ids) end
local rows, leased, until_ = {}, {}, now + lease
for i = 1, math.min(most, #due) do
  local d = due[i]
  local id, ready, kind, in_slot = d[1], d[2], d[3], d[4]
  local raw = jget(id)
  local k, d, every, attempt, owner, payload, _, dead, stored, sched
  if raw then k, d, every, attempt, owner, payload, _, dead, stored, sched = unpack(raw) end
  -- (an entry its job no longer has is dropped: it was taken out above)
  if raw and k == kind and dead ~= 1 and stored == ready and (owner == '') == (in_slot and true or false) then
    jset(id, pack(k, d, every, attempt + 1, claimer, payload, false, 0, until_, sched))
    local l = leased[kind] or {}
    leased[kind] = l
    l[#l + 1], l[#l + 2] = until_, id
    rows[#rows + 1] = ready
    rows[#rows + 1] = id
    fields_of(rows, k, d, every, attempt + 1, claimer, payload, false, 0, until_, sched)
  end
end
for kind, l in pairs(leased) do call_many('ZADD', lkey(kind), l) end
return done({ now, earliest(kinds), blob(reload), blob(rows) })
]], true)

-- The scripts that operate a store (q:counts, q:jobs, q:retry, q:run_now):
-- a file of their own, on the same prelude.
for name, text in pairs(require("hwtimer.durable.redis_ops")(script, reader)) do S[name] = text end

return S
