-- lheap.lua: the peer a Lua user writes instead: a binary min-heap of
-- timeouts in plain Lua, with O(log n) schedule and cancel (each entry knows
-- its position). Entries are {deadline, callback, position}.
local Heap = {}
Heap.__index = Heap

function Heap.new(now)
  return setmetatable({ n = 0, now = now }, Heap)
end

local function swap(h, i, j)
  local a, b = h[i], h[j]
  h[i], h[j] = b, a
  a[3], b[3] = j, i
end

local function up(h, i)
  while i > 1 do
    local p = i // 2
    if h[p][1] <= h[i][1] then return end
    swap(h, i, p)
    i = p
  end
end

local function down(h, i)
  local n = h.n
  while true do
    local l, m = 2 * i, i
    if l <= n and h[l][1] < h[m][1] then m = l end
    if l + 1 <= n and h[l + 1][1] < h[m][1] then m = l + 1 end
    if m == i then return end
    swap(h, i, m)
    i = m
  end
end

function Heap:schedule(delay, cb)
  local n = self.n + 1
  local e = { self.now() + delay, cb, n }
  self.n, self[n] = n, e
  up(self, n)
  return e
end

-- Remove entry e; returns false if it is not in the heap.
function Heap:cancel(e)
  local i, n = e[3], self.n
  if i == 0 then return false end
  if i ~= n then swap(self, i, n) end
  self[n], self.n, e[3] = nil, n - 1, 0
  if i < n then down(self, i); up(self, i) end
  return true
end

-- Seconds until the first deadline, or nil when empty.
function Heap:timeout()
  local top = self[1]
  return top and math.max(0, top[1] - self.now())
end

-- Run every entry whose deadline has passed.
function Heap:dispatch()
  local now, ran = self.now(), 0
  while self.n > 0 and self[1][1] <= now do
    local e = self[1]
    self:cancel(e)
    e[2](e)
    ran = ran + 1
  end
  return ran
end

return Heap
