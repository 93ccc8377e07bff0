--- hwtimer.durable.redis_client: the Redis engine's calls to the server,
-- and the server's clock as the engine tracks it (hwtimer.durable.redis
-- installs these as its methods). A call gives `nil, message` whichever
-- client raised or returned it, drops a broken connection (the next call
-- gets a new one when opts.redis was a function), and survives NOSCRIPT.
local scripts = require("hwtimer.durable.redis_scripts")

local M = {}

-- The clock the window runs on: the timer's monotonic clock, corrected by
-- the server's TIME from every reply (see M.sync).
-- boot: a clock that goes on while the machine is suspended, when the
-- module is there (the monotonic one stands still then); stamp needs it.
-- (without the module, only the CLI's Lua runs this file: luasocket's clock)
local mono, boot
do
  local ok, core = pcall(require, "hwtimer.core")
  if ok and core.now then
    mono, boot = core.now, core.boot_now
  else
    mono = require("socket").gettime
  end
end

---------------------------------------------------------------------------
-- The client: calls that give nil, message and survive NOSCRIPT
---------------------------------------------------------------------------

--- Whether the server's refusal of a SUBSCRIBE (its error reply, `msg`)
-- is for good: an ACL that denies the channel (NOPERM) or SUBSCRIBE renamed
-- away (unknown command). Any other ("ERR max number of clients reached", a
-- server loading or busy) passes, and a listener tries again after its
-- backoff.
function M.refused_for_good(msg)
  local e = tostring(msg)
  return e:find("NOPERM", 1, true) ~= nil or e:find("unknown command", 1, true) ~= nil
end

-- A reply's nil: resty's ngx.null (a lightuserdata) or plain nil.
local function null(v) return v == nil or type(v) == "userdata" end

-- Strip what redis-lua puts before the server's message.
local function server_error(msg)
  msg = tostring(msg)
  local m = msg:match("redis error: (.*)$")
  if m then return m, true end
  msg = msg:gsub("^[^:]*%.lua:%d+: ", "") -- redis-lua's own raise: where it was
  -- resty: the server's message as it came ("ERR ...", "NOSCRIPT ...")
  return msg, msg:match("^[A-Z][A-Z]+ ") ~= nil
end

local function client(self)
  if self.client then return self.client end
  if not self.connect then return nil, "no connection (the Redis client was lost)" end
  local ok, c, err = pcall(self.connect)
  if not ok or null(c) or not c then
    return nil, "cannot connect: " .. tostring(ok and err or c)
  end
  -- lua-resty-redis's, in nginx: one from the pool for each command, never
  -- kept here (commands of different contexts run at once: each yields)
  self.pooled = rawget(_G, "ngx") ~= nil and type(c.set_keepalive) == "function"
  if not self.pooled then self.client = c end
  -- a connection that is new (not one from nginx's pool used before) may
  -- reach another server than the last reply came from
  local reused = self.pooled and type(c.get_reused_times) == "function" and c:get_reused_times()
  if not (reused and reused > 0) then M.unsync(self) end
  return c
end

-- One command on the client: res or nil, message, server (true when the
-- server answered with an error, false when the connection failed).
-- A lua-resty-redis client made by opts.redis (a function) goes back to
-- nginx's pool after each command and is taken again for the next: a
-- cosocket belongs to the request or timer context that made it, and the
-- jobs run in many.
local function call(self, c, method, ...)
  local ok, res, e = pcall(c[method], c, ...)
  local msg, from_server
  if not (ok and res and not null(res)) then
    msg, from_server = server_error(ok and (e or "no reply") or res)
    if self.connect and not from_server then self.client = nil end -- a new one next time
  end
  if self.pooled and (res or from_server) then pcall(c.set_keepalive, c, 10000, 16) end
  if msg then return nil, msg, from_server end
  return res
end

M.call = call

function M.command(self, method, ...)
  local c, err = client(self)
  if not c then return nil, err, false end
  return call(self, c, method, ...)
end

--- n = publish(channel, message): PUBLISH on the client; nil, message,
-- server as a call's, and nil, why, true where the client has no publish
-- method (a refusal: the caller stops asking).
function M.publish(self, channel, msg)
  local c, err = client(self)
  if not c then return nil, err, false end
  local ok, yes = pcall(function() return type(c.publish) == "function" end)
  if not (ok and yes) then return nil, "the client has no publish method", true end
  return call(self, c, "publish", channel, msg)
end

--- len, at = push_stamped(key, entry_of, jobs): RPUSH to `key` of one
-- entry, entry_of(at, jobs), `at` the time stamp gives, once the connection
-- it goes on is known (a new one may reach another server): the list's
-- length and that time (us); or nil, message, server; or false when there
-- is no stamp to give (the caller then goes through the `add` script, which
-- reads TIME).
function M.push_stamped(self, key, entry_of, jobs)
  local c, err = client(self)
  if not c then return nil, err, false end
  local at = M.stamp(self)
  if not at then
    if self.pooled then pcall(c.set_keepalive, c, 10000, 16) end
    return false
  end
  local len, e, from_server = call(self, c, "rpush", key, entry_of(at, jobs))
  if not len then return nil, e, from_server end
  return len, at
end

-- A small SCRIPT LOAD first, once a connection (each time for nginx's
-- pooled ones): a server drops a client that has not authenticated as soon
-- as it sends a bulk string past a few kilobytes (Redis 7: 16 KiB), so the
-- load of a script (the open script: 25 KB) got 'closed', never the NOAUTH
-- the server has for it; the small one gets the refusal (NOAUTH, NOPERM) as
-- the large one would.
local function may_load(self)
  if self.client ~= nil and self.load_checked == self.client then return true end
  local ok, err, from_server = self:command("script", "load", "return 0")
  if not ok then return nil, err, from_server end
  self.load_checked = self.client
  return true
end

local function load_script(self, name)
  local sha, err, from_server = may_load(self)
  if not sha then return nil, err, from_server end
  sha, err, from_server = self:command("script", "load", scripts[name])
  if not sha then return nil, err, from_server end
  self.sha[name] = sha
  return sha
end

-- EVALSHA (or EVAL) of script `name`: its keys (the queue's four; `add`,
-- and `push_wake`, the intake alone: one key less to send is measurably less work a
-- schedule, for the client and for Redis) and `...` as ARGV.
local function eval(self, how, script, name, ...)
  if name == "add" or name == "push_wake" then return self:command(how, script, 1, self.intake, ...) end
  local k = self.keys
  return self:command(how, script, 4, k[1], k[2], k[3], k[4], ...)
end

-- Whether a refusal of SCRIPT LOAD says that the command is not there (a
-- server or proxy without it, renamed away): EVAL of the whole script may
-- still do. Any other refusal is the server's answer to this client too
-- (NOAUTH, WRONGPASS, NOPERM, READONLY, LOADING, ...): told as it is, not
-- hidden behind an EVAL of kilobytes (a server whose client has not
-- authenticated drops the connection after it: 'closed').
local function no_script_load(err)
  local lower = err:lower()
  return lower:find("^err unknown command") ~= nil or lower:find("^err unknown subcommand") ~= nil
    or lower:find("^err unsupported command") ~= nil
end

-- Run script `name` with `...` as ARGV. Loaded on first use, again after
-- NOSCRIPT (a restarted or flushed server), and sent whole with EVAL where
-- the server has no SCRIPT LOAD.
function M.run(self, name, ...)
  local sha = self.sha[name]
  local res, err, sent
  if sha then
    sent = mono()
    res, err = eval(self, "evalsha", sha, name, ...)
    if res or not err:find("^NOSCRIPT") then return self:sync(res, err, sent) end
  end
  local from_server
  sha, err, from_server = load_script(self, name)
  if not sha and not (from_server and no_script_load(err)) then return nil, err end
  sent = mono()
  if sha then
    res, err = eval(self, "evalsha", sha, name, ...)
  else
    res, err = eval(self, "eval", scripts[name], name, ...)
  end
  return self:sync(res, err, sent)
end

-- Every reply starts with the server's TIME, read when its script began:
-- somewhere between our send and our receipt. Each reply bounds the offset
-- of the server's clock from ours (TIME - receipt <= offset <= TIME - send);
-- the bounds kept are the tightest seen, each widened by a drift of 500 ppm
-- since, and the offset is their middle. Taking the receipt alone would make
-- the clock as late as a long script (a large batch) took, and every job
-- loaded with it would fire that much late.
local DRIFT = 5e-4

function M.sync(self, res, err, sent)
  if not res then return nil, err end
  -- (the boot clock first: a suspend between the two reads is then seen
  -- by stamp, which reads them the other way round)
  local booted = boot and boot()
  local got, server = mono(), tonumber(res[1]) / 1e6
  local lo, hi = server - got, server - sent
  local widen = (got - self.synced_at) * DRIFT
  local old_lo, old_hi = self.offset_lo - widen, self.offset_hi + widen
  if lo < old_lo then lo = old_lo end
  if hi > old_hi then hi = old_hi end
  if lo > hi then lo, hi = server - got, server - sent end -- a clock stepped: start over
  self.offset_lo, self.offset_hi, self.synced_at = lo, hi, got
  self.synced_boot = booted
  self.offset = (lo + hi) / 2
  return res
end

-- Forget the bounds of the server's clock: a new connection may reach
-- another server (a failover, a proxy), whose clock they are not of. The
-- offset stays, as a guess, until the next reply.
function M.unsync(self)
  self.offset_lo, self.offset_hi = -math.huge, math.huge
end

--- The server's clock, as this process estimates it (epoch seconds).
function M.now(self) return mono() + self.offset end

-- The widest the bounds may be for stamp to answer: a job it stamps may be
-- due this much later than the server's TIME would have made it.
M.STAMP_SPREAD = 0.001
-- The most the monotonic clock may have stood still since the last reply
-- (the machine suspended: the bounds know nothing of that time) for stamp
-- to answer. Two reads of the clocks in a row may be that far apart when
-- the thread is preempted between them (stamp then refuses: the script
-- path); a suspend takes far longer.
local STILL = 1e-3

--- A time (integer microseconds on the server's clock) that the server's
-- TIME has reached by now, or may reach a little later: the upper bound,
-- widened for drift since the last reply (the clocks' rates within DRIFT
-- of each other, as the window also assumes), and a microsecond for
-- rounding. nil when the bounds are wider than STAMP_SPREAD (none yet, a
-- new connection, or no reply for about a second), when the machine was
-- suspended since the last reply, or without hwtimer.core's clocks: a
-- script must read TIME, and its reply narrows the bounds again.
function M.stamp(self)
  if not (boot and self.synced_boot) then return nil end
  local at = mono()
  local since = at - self.synced_at
  if boot() - self.synced_boot - since > STILL then return nil end -- (boot read after mono: see sync)
  local widen = since * DRIFT
  local hi = self.offset_hi + widen
  if hi - (self.offset_lo - widen) > M.STAMP_SPREAD then return nil end
  return math.floor((at + hi) * 1e6) + 1
end

M.mono, M.boot = mono, boot

return M
