-- examples/orders.lua: an order is closed 30 minutes after it was placed
-- unless it was paid, and neither a restart nor a crash forgets one: the
-- close is a durable timer (hwtimer.durable), kept in an SQLite file.
--
--   lua examples/orders.lua        -- 30 minutes, as in a shop
--   lua examples/orders.lua 1      -- the same story in about a second
--
-- A checkout process places three orders, order 2 is paid, and the process
-- exits without closing anything (it could as well be killed: a job is on disk
-- once schedule returns). The shop, started after it, closes orders 1 and 3
-- when they come due.
local hwtimer = require("hwtimer")
local durable = require("hwtimer.durable")

local delay = tonumber(arg[1]) or 1800
local store, role = arg[2], arg[3]

if role == "checkout" then
  local timer = hwtimer.new()
  local q = assert(durable.open(timer, { path = store }))
  for i = 1, 3 do
    assert(q:schedule("close_order", delay, "order " .. i, { id = "order-" .. i }))
  end
  q:cancel("order-2") -- paid: it will never be closed
  print("checkout: orders 1, 2 and 3 placed; order 2 paid")
  os.exit(0) -- no q:close(), as if the process died here
end

-- The shop: run the checkout in a process of its own, then start (as after
-- a restart) and close what comes due.
store = os.tmpname()
assert(os.execute(string.format("%s %s %s %s checkout", arg[-1], arg[0], delay, store)))

local timer = hwtimer.new()
local q = assert(durable.open(timer, { path = store }))
local closed = {}
q:handle("close_order", function(job)
  closed[#closed + 1] = job.payload
  print(string.format("shop: closing %s, unpaid %.0f s after it was placed", job.payload,
    delay + require("hwtimer.sqlite").now() - job.due))
end)
print(string.format("shop: %d orders to close within %g s", q:pending(), delay))
while q:pending() > 0 do timer:run(0.1) end
table.sort(closed)
print("closed " .. table.concat(closed, ", ") .. "; order 2 was paid")

q:close()
timer:close()
for _, suffix in ipairs({ "", "-wal", "-shm" }) do os.remove(store .. suffix) end
