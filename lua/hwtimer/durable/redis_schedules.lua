--- hwtimer.durable.redis_schedules: what the Redis engine's scripts know of
-- schedules (q:every), as text that hwtimer.durable.redis_scripts puts in
-- the prelude every script shares: a schedule as its job holds it, as the
-- client sends it and as replies carry it, and the upsert of one. The
-- scripts compute no time of a schedule: the front does
-- (hwtimer.durable.schedule), and an acknowledgement brings its next time.
return [[
-- A schedule is the tenth value of its job (after ready; false for a job
-- that is none): { c = cron expression, z = zone, s = start, t = stop,
-- l = limit, m = missed policy, w = window, r = runs so far, a = the
-- calendar time its run stands for, k = late (nil until a run of `a`
-- started, then 0 or 1) }, times in microseconds. A job of format 3 made by
-- q:every has none: its interval (every) says that it is one.
local SCHED_KEYS = { 'c', 'z', 's', 't', 'l', 'm', 'w', 'r', 'a', 'k' }
local SCHED_TEXT = { c = true, z = true, m = true }
-- The client's (its first seven fields, '' for none; '' for no schedule).
local function sched_read(text)
  if text == '' then return false end
  local field, s = reader(text), {}
  for i = 1, 7 do
    local k, v = SCHED_KEYS[i], field()
    if v ~= '' then s[k] = SCHED_TEXT[k] and v or tonumber(v) end
  end
  return s, tonumber(field() or '') -- (and the first time after now: not stored)
end
-- As replies carry it: all ten fields, '' for none; '' for no schedule.
local function sched_text(s)
  if not s then return '' end
  local t = {}
  for i, k in ipairs(SCHED_KEYS) do t[i] = s[k] or '' end
  return blob(t)
end
-- A schedule `s` put over the job `old` (its raw value, or nil): the due
-- time, attempts and schedule to write; or false and the job's due time
-- when it is the same schedule (kind, payload, interval and every option
-- alike): left as it is. One of the same calendar (interval, cron, zone,
-- start) whose run is pending keeps that run; the runs so far stay with
-- the id.
local function sched_put(old, kind, payload, due, every, s, later)
  s.r, s.a = 0, due
  if not old then return due, 0, s end
  local okind, odue, oevery, oattempt, oowner, opayload, _, odead, _, os = unpack(old)
  local was = oevery ~= 0 or (os and os.c ~= nil)
  os = os or {}
  local same = was and oevery == every and os.c == s.c and os.z == s.z and os.s == s.s
  if same and okind == kind and opayload == payload and os.t == s.t and os.l == s.l and os.m == s.m
    and os.w == s.w then
    return false, odue
  end
  if was then s.r = os.r or 0 end
  if same and oowner == '' and odead ~= 1 then
    s.a, s.k = os.a or odue, os.k
    return odue, oattempt, s
  end
  -- a run in flight: the new schedule's first run comes after its time
  if oowner ~= '' and odead ~= 1 and later and due <= (os.a or odue) then due = later end
  s.a = due
  return due, 0, s
end
]]
