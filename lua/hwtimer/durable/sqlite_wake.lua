--- hwtimer.durable.sqlite_wake: a plain Lua process's wake-ups for an
-- SQLite queue, from the other processes of the machine that write the same
-- file: inotify on its directory (hwtimer.sqlite.watch) makes a descriptor
-- readable at each write of the file or its -wal, and l:step() then polls
-- the queue at once instead of at its next poll. The poll itself is what it
-- was (PRAGMA data_version first: nothing more where no other connection
-- wrote), so a write of this process's own costs one look, not a read.
--
--   local wake = require("hwtimer.durable.sqlite_wake")
--   local l = assert(wake.listen(q))
--   wake.luv(l)                      -- or cq:wrap(function() while l:step() do cqueues.poll(l) end end)
--
-- Linux only (inotify): elsewhere listen() says so, and the poll remains.
local M = {}
local Listener = {}
Listener.__index = Listener

--- ok = l:step(): take the writes seen so far and poll the queue once if
-- there were any. False once closed.
function Listener:step()
  if self.closed then return false end
  if self.watch:drain() > 0 then self.q:wake() end
  return true
end

function Listener:getfd() return not self.closed and self.watch:getfd() or nil end

-- cqueues.poll(l)
function Listener:pollfd() return self:getfd() end
function Listener.events() return "r" end
function Listener.timeout() return nil end

function Listener:close()
  if self.closed then return end
  self.closed = true
  self.watch:close()
  if self.on_fd then self.on_fd(nil) end
end

--- l, err = listen(q): a listener for q's SQLite file; nil, message for a
-- queue of another engine or where the file cannot be watched.
function M.listen(q)
  local engine = require("hwtimer.durable").engine(q)
  local db = engine.db
  local ok, file = pcall(function() return db:filename() end)
  if not ok or type(file) ~= "string" or file == "" then
    return nil, "hwtimer.durable: wake-ups of a file need a queue on SQLite"
  end
  local watch, err = require("hwtimer.sqlite").watch(file)
  if not watch then return nil, "hwtimer.durable: " .. err end
  return setmetatable({ q = q, watch = watch }, Listener)
end

M.luv = require("hwtimer.durable.wake_luv")

return M
