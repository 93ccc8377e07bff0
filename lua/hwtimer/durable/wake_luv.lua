--- hwtimer.durable.wake_luv: a luv loop watching a listener of wake-ups
-- (hwtimer.durable.redis_wake's, hwtimer.durable.sqlite_wake's): a uv poll
-- handle on the listener's descriptor that calls l:step(), made again when
-- the listener says its descriptor changed (l.on_fd, a new connection).
return function(l, uv)
  uv = uv or require("luv")
  local handle
  local function drop()
    if handle then
      handle:stop()
      if not handle:is_closing() then handle:close() end
      handle = nil
    end
  end
  local function watch(fd)
    drop()
    if not fd then return end
    handle = assert(uv.new_poll(fd))
    handle:start("r", function() l:step() end)
  end
  l.on_fd = watch
  watch(l:getfd())
  return l
end
