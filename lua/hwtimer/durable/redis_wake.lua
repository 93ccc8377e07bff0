--- hwtimer.durable.redis_wake: a plain Lua process's listener for a Redis
-- queue's wake-ups (BASE:wake, published by hwtimer.durable.redis for a job
-- due now that the publishing process does not run), on a connection of its
-- own that the host's loop watches; nginx has hwtimer.durable.ngx_wake.
--
--   local wake = require("hwtimer.durable.redis_wake")
--   local l = assert(wake.listen(q))   -- q opened with redis = a function (redis-lua)
--   wake.luv(l)                         -- a luv loop watches it; or, in cqueues:
--   cq:wrap(function() while l:step() do cqueues.poll(l) end end)
--
-- The connection is the one q's opts.redis function makes (redis-lua: its
-- luasocket socket), sent SUBSCRIBE and then read without blocking: l:step()
-- reads what has come and calls q:wake() for a kind the queue handles. A
-- broken connection is made again at once, then after a backoff (0.05 s
-- doubling up to 1 s) on the queue's timer, and only while the queue's own
-- calls reach the store (durable.store_up: an outage costs no attempts
-- beyond theirs); each new one polls the queue, since pub/sub keeps
-- nothing sent while none listened.
local store_up = require("hwtimer.durable").store_up
local refused_for_good = require("hwtimer.durable.redis_client").refused_for_good

local M = {}
local Listener = {}
Listener.__index = Listener

local RETRY_FIRST, RETRY_MAX = 0.05, 1

local function bulk(s) return "$" .. #s .. "\r\n" .. s .. "\r\n" end

-- The socket of a client q's function made: redis-lua's luasocket object.
local function socket_of(c)
  local ok, sock = pcall(function() return c.network.socket end)
  if ok and sock and sock.getfd and sock.receive and sock.send then return sock end
end

local function connect(self)
  local ok, c, err = pcall(self.connect)
  if not ok or not c then return nil, "cannot connect: " .. tostring(ok and err or c) end
  local sock = socket_of(c)
  if not sock then return nil, "the client gives no luasocket socket (redis-lua's)" end
  local sent, serr = sock:send("*2\r\n" .. bulk("SUBSCRIBE") .. bulk(self.channel))
  if not sent then
    pcall(sock.close, sock)
    return nil, "SUBSCRIBE: " .. tostring(serr)
  end
  sock:settimeout(0)
  self.sock, self.buf = sock, ""
  if self.on_fd then self.on_fd(sock:getfd()) end
  self.q:wake()
  return true
end

local retry

-- Close the connection's socket. A cqueues loop that polled it must forget
-- its descriptor first (cqueues.cancel), or its next step fails on the
-- closed one ("Bad file descriptor") where the loop polls on.
local function close_socket(sock)
  local cqueues = package.loaded.cqueues
  if type(cqueues) == "table" and cqueues.cancel then
    local fd = sock:getfd()
    if fd and fd >= 0 then pcall(cqueues.cancel, fd) end
  end
  pcall(sock.close, sock)
end

local function let_go(self)
  if self.sock then close_socket(self.sock) end
  self.sock = nil
  if self.on_fd then self.on_fd(nil) end
end

-- A connection refused for now: tried again after the backoff's next step.
local function drop(self)
  let_go(self)
  if not self.closed then retry(self) end
end

local function lost(self, why)
  let_go(self)
  self.why = why
  if not self.closed and not (store_up(self.q) and connect(self)) then retry(self) end
end

retry = function(self)
  self.step_s = self.step_s and math.min(RETRY_MAX, self.step_s * 2) or RETRY_FIRST
  self.retry_at = self.timer:schedule(self.step_s, function()
    self.retry_at = nil
    if not self.closed and not (store_up(self.q) and connect(self)) then retry(self) end
  end)
end

-- The whole replies in self.buf, each { kind, channel, message } (a
-- pub/sub reply is an array of three), the rest left for the next read.
-- A reply the server refused (-ERR, -NOPERM) is returned as a string.
local function replies(self)
  local out, buf, i = {}, self.buf, 1
  while true do
    local line_end = buf:find("\r\n", i, true)
    if not line_end then break end
    local head = buf:sub(i, line_end - 1)
    if head:sub(1, 1) == "-" then
      out[#out + 1], i = head:sub(2), line_end + 2
    else
      local n = tonumber(head:match("^%*(%d+)$"))
      if not n then return nil, "unexpected reply: " .. head:sub(1, 40) end
      local parts, j = {}, line_end + 2
      for k = 1, n do
        local e = buf:find("\r\n", j, true)
        if not e then break end
        local h = buf:sub(j, e - 1)
        local len = tonumber(h:match("^%$(%d+)$"))
        if len then
          if #buf < e + 1 + len + 2 then break end
          parts[k], j = buf:sub(e + 2, e + 1 + len), e + 2 + len + 2
        else
          parts[k], j = h:sub(2), e + 2 -- (":1", the subscription count)
        end
      end
      if #parts < n then break end
      out[#out + 1], i = parts, j
    end
  end
  self.buf = buf:sub(i)
  return out
end

--- ok = l:step(): read what has come, q:wake() for each wake-up of a kind
-- the queue handles. False once the listener is closed or was refused for
-- good (an ACL without the channel): l.why says why.
function Listener:step()
  if self.closed then return false end
  if not self.sock then return true end -- (down: the timer's retry connects)
  local data, err, partial = self.sock:receive(65536)
  data = data or partial
  if data and #data > 0 then self.buf = self.buf .. data end
  local list, perr = replies(self)
  if not list then
    lost(self, perr)
    return not self.closed
  end
  for _, r in ipairs(list) do
    if type(r) == "string" then
      self.why = "SUBSCRIBE " .. self.channel .. ": " .. r
      if refused_for_good(r) then
        self:close()
        return false
      end
      drop(self) -- ("ERR max number of clients reached": the server closes; tried again after the backoff)
      return true
    elseif r[1] == "subscribe" then
      self.step_s = nil -- (listening: the next loss starts the backoff afresh)
    elseif r[1] == "message" and (r[3] == "" or self.engine.handled[r[3]]) then
      self.q:wake()
    end
  end
  if err == "closed" then lost(self, "the connection closed") end
  return not self.closed
end

--- fd = l:getfd(): the descriptor to watch for reading; nil while the
-- connection is down (it is made again on the queue's timer).
function Listener:getfd() return self.sock and self.sock:getfd() end

-- cqueues.poll(l): l is pollable (while down, it is polled again in 0.05 s).
function Listener:pollfd() return self:getfd() or -1 end
function Listener.events() return "r" end
function Listener:timeout() return (not self.sock) and RETRY_FIRST or nil end

--- l:close(): unsubscribe (the connection is closed).
function Listener:close()
  if self.closed then return end
  self.closed = true
  if self.retry_at then pcall(self.retry_at.cancel, self.retry_at) end
  let_go(self)
end

--- l, err = listen(q): a listener for q's wake-ups; nil, message where q
-- has none to listen to (SQLite, wake = false), no function to connect
-- with, or the first connection fails.
function M.listen(q)
  local engine = require("hwtimer.durable").engine(q)
  local channel = type(engine.wake_channel) == "function" and engine:wake_channel()
  if not channel then return nil, "hwtimer.durable: no wake-ups for this queue (Redis with wake = true only)" end
  if not engine.connect then return nil, "hwtimer.durable: wake-ups need opts.redis to be a function" end
  local self = setmetatable({ q = q, engine = engine, channel = channel, connect = engine.connect,
    timer = q._timer, buf = "" }, Listener)
  local ok, err = connect(self)
  if not ok then return nil, "hwtimer.durable: " .. err end
  return self
end

--- M.luv(l, [uv]): a uv poll handle on l's descriptor runs l:step(), made
-- again for each new connection; it goes with l:close().
M.luv = require("hwtimer.durable.wake_luv")

return M
