-- An orders service on hwtimer.durable (examples/openresty-durable/nginx.conf):
-- an order not paid within PAY_WITHIN seconds is closed by a durable job,
-- which survives reloads, restarts and crashes; paying cancels it. Every
-- worker of nginx opens the queue on one store: a SQLite file or Redis.
--
-- The orders themselves live in a shared dict here, to keep the example
-- short; a real service keeps them in its database. Each close also
-- "notifies the shop", a 50 ms HTTP call through a cosocket (to /notify of
-- this nginx), as a real handler calls a service or writes a row.
local durable_ngx = require("hwtimer.durable.ngx")

local M = {}
local orders = ngx.shared.orders
local PAY_WITHIN = tonumber(os.getenv("ORDERS_PAY_WITHIN")) or 2

-- ORDERS_STORE: "sqlite:/path/orders.db" (default: orders.db in nginx's
-- prefix; the directory must be writable by the workers' user) or
-- "redis:host:port".
local function store_options()
  local store = os.getenv("ORDERS_STORE") or ("sqlite:" .. ngx.config.prefix() .. "orders.db")
  local kind, where = store:match("^(%a+):(.+)$")
  local o = { lease = tonumber(os.getenv("ORDERS_LEASE")) or 30,
              concurrency = tonumber(os.getenv("ORDERS_CONCURRENCY")) } -- nil: the default, 32
  if kind == "sqlite" then
    o.path, o.busy_timeout = where, 10
  elseif kind == "redis" then
    local host, port = where:match("^(.+):(%d+)$")
    -- OpenResty names it resty.redis, Debian's lua-nginx-redis nginx.redis
    local ok, redis = pcall(require, "resty.redis")
    if not ok then redis = require("nginx.redis") end
    o.prefix = "orders"
    -- a function: the engine takes a connection from nginx's pool for each
    -- command (a cosocket belongs to the request or timer that made it)
    o.redis = function()
      local r = redis:new()
      r:set_timeout(2000)
      local connected, err = r:connect(host, tonumber(port))
      if not connected then return nil, err end
      return r
    end
  else
    error("ORDERS_STORE: 'sqlite:PATH' or 'redis:HOST:PORT' expected, got " .. store)
  end
  return o
end

-- A 50 ms call to another service: this nginx's /notify.
local function notify(id)
  local sock = ngx.socket.tcp()
  sock:settimeout(5000)
  assert(sock:connect("127.0.0.1", M.port))
  assert(sock:send("POST /notify?id=" .. id .. " HTTP/1.0\r\nHost: orders\r\n\r\n"))
  assert(sock:receive("*a"))
  sock:close()
end

-- The durable job: close the order unless it was paid meanwhile. Its start
-- is counted (runs:ID) with how late it ran, and its first end noted
-- (ended:ID), so that /closes can show what ran twice and why.
local function close_order(job)
  local id = job.payload
  ngx.update_time()
  orders:incr("runs:" .. id, 1, 0)
  orders:rpush("lateness", ngx.now() - job.due)
  notify(id)
  if orders:get("order:" .. id) == "unpaid" then orders:set("order:" .. id, "closed") end
  ngx.update_time()
  orders:add("ended:" .. id, ngx.now())
end

--- In init_worker_by_lua: the timer, and the queue opened in the
-- background (hwtimer.durable.ngx retries while the store is out of reach).
function M.init_worker(port)
  M.port = port
  local timer = assert(require("hwtimer.ngx").new())
  durable_ngx.open("orders", timer, store_options(), function(q)
    q:handle("close_order", close_order)
  end)
end

local function queue()
  local q, err = durable_ngx.get("orders")
  if not q then
    ngx.status = 503
    ngx.say(err)
    return ngx.exit(503)
  end
  return q
end

--- POST /order?id=ID
function M.order()
  local q, id = queue(), ngx.var.arg_id
  orders:set("order:" .. id, "unpaid")
  local ok, err = q:schedule("close_order", PAY_WITHIN, id, { id = "close-" .. id })
  if not ok then
    ngx.status = 503
    return ngx.say(err)
  end
  ngx.say("order ", id, ": pay within ", PAY_WITHIN, " s")
end

--- POST /pay?id=ID
function M.pay()
  local q, id = queue(), ngx.var.arg_id
  local cancelled, err = q:cancel("close-" .. id)
  if cancelled == nil then
    ngx.status = 503
    return ngx.say(err)
  end
  if not cancelled or orders:get("order:" .. id) ~= "unpaid" then
    ngx.status = 409
    return ngx.say("order ", id, " is closed")
  end
  orders:set("order:" .. id, "paid")
  ngx.say("order ", id, " paid")
end

--- GET /stats: orders by state, closes run, how late (seconds).
function M.stats()
  local by, runs, twice = { unpaid = 0, paid = 0, closed = 0 }, 0, 0
  for _, key in ipairs(orders:get_keys(0)) do
    local state = key:match("^order:") and orders:get(key)
    if state then by[state] = by[state] + 1 end
    if key:match("^runs:") then
      local n = orders:get(key)
      runs = runs + n
      if n > 1 then twice = twice + 1 end
    end
  end
  local late = {}
  for i = 1, orders:llen("lateness") do late[i] = orders:lpop("lateness") end
  for i = 1, #late do orders:rpush("lateness", late[i]) end
  table.sort(late)
  local function pct(p) return late[1] and late[math.max(1, math.ceil(#late * p))] or 0 end
  ngx.say(string.format("unpaid %d paid %d closed %d closes %d twice %d late p50 %.3f p99 %.3f max %.3f",
    by.unpaid, by.paid, by.closed, runs, twice, pct(0.5), pct(0.99), late[#late] or 0))
end

--- GET /closes: one line per order closed more than once: id, runs, and
-- when its first run ended (epoch seconds; "-" if it never did).
function M.closes()
  for _, key in ipairs(orders:get_keys(0)) do
    local id = key:match("^runs:(.*)$")
    if id and orders:get(key) > 1 then
      ngx.say(id, " ", orders:get(key), " ", orders:get("ended:" .. id) or "-")
    end
  end
end

return M
