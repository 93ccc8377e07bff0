-- hwtimer.durable on a real Redis Cluster, for spec/durable/03-redis_spec.lua
-- (which has checked that redis-server, luasocket and redis-lua are here): a
-- queue's keys share one hash tag, so one node serves them all and every
-- script runs there (a kind's key is derived inside the scripts, in the same
-- slot). `b` gives busted's words: describe, it, pending, assert, setup,
-- teardown, before_each, after_each.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local durable = require("hwtimer.durable")
local N = require("spec.nginx")
local redis = N.redis_lua()

return function(b)
  local describe, it, pending, assert = b.describe, b.it, b.pending, b.assert
  local setup, teardown, before_each, after_each = b.setup, b.teardown, b.before_each, b.after_each
  if not helpers.full_size() then
    describe("hwtimer.durable on a real Redis Cluster", function()
      it("runs in the Lua 5.4 run of the source tree", function()
        pending("three redis-servers and redis-cli --cluster create take seconds: one run is enough")
      end)
    end)
    return
  end

  describe("hwtimer.durable on a real Redis Cluster", function()
    local cluster, timer, q
    setup(function() cluster = assert(N.start_redis_cluster(3)) end)
    teardown(function() cluster.stop() end)
    before_each(function() timer = hwtimer.new() end)
    after_each(function()
      if q then q:close() end
      q = nil
      timer:close()
    end)

    local function admin(port)
      local c = redis.connect("127.0.0.1", port)
      c:define_command("cluster") -- not among redis-lua's commands
      return c
    end

    -- The port of the node that serves `key`'s slot.
    local function node_of(key)
      local a = admin(cluster.ports[1])
      local slot = a:cluster("keyslot", key)
      for _, range in ipairs(a:cluster("slots")) do
        if slot >= range[1] and slot <= range[2] then return range[3][2], slot end
      end
    end

    it("runs every script on the node that serves the queue's slot", function()
      local port, slot = node_of("{app:orders}")
      q = assert(durable.open(timer, { redis = admin(port), prefix = "app", queue = "orders",
                                       attempts = 1, on_error = function() end }))
      local ran = {}
      q:handle("close", function(job) ran[#ran + 1] = job.id end)
      q:handle("fail", function() error("no") end)
      for i = 1, 10 do assert(q:schedule("close", 0.02 * i, "order-" .. i)) end
      assert(q:batch(function(batch) for _ = 1, 100 do batch:schedule("close", 0.1) end end))
      assert(q:schedule("fail", 0.05, nil, { id = "bad" }))
      local later = assert(q:schedule("close", 60))
      assert.equal("close", q:get(later).kind)
      assert.equal(112, q:pending())
      assert.is_true(q:cancel(later))
      assert.is_true(helpers.wait_until(timer, function() return #ran == 110 and #q:dead() == 1 end, 5))
      assert.equal("bad", q:dead()[1].id)
      assert.equal(0, q:pending())
      -- every key the queue made is in that one slot, on that node
      local keys = admin(port):keys("{app:orders}*")
      assert.is_true(#keys >= 4, #keys .. " keys")
      local a = admin(port)
      for _, k in ipairs(keys) do assert.equal(slot, a:cluster("keyslot", k), k) end
    end)

    it("refuses a node that does not serve the slot with nil, message", function()
      local port = node_of("{app:orders}")
      local other
      for _, p in ipairs(cluster.ports) do if p ~= port then other = p end end
      local got, err = durable.open(timer, { redis = admin(other), prefix = "app", queue = "orders" })
      assert.is_nil(got)
      assert.matches("^hwtimer%.durable: redis {app:orders}3: MOVED %d+ 127%.0%.0%.1:" .. port .. "$", err)
    end)

    -- ("}" began the keys of format 6 and older with an empty hash tag:
    -- every script of such a store was refused, CROSSSLOT)
    it("runs a queue whose prefix or queue has a '}' (its keys under one hash tag), or says why not", function()
      local base_of = require("hwtimer.durable.redis").base
      local base = base_of("}", "orders")
      local port, slot = node_of(base)
      q = assert(durable.open(timer, { redis = admin(port), prefix = "}", queue = "orders" }))
      local ran = {}
      q:handle("close", function(job) ran[#ran + 1] = job.payload end)
      assert(q:schedule("close", 0.02, "one"))
      assert.is_true(helpers.wait_until(timer, function() return #ran == 1 and q:pending() == 0 end, 5))
      local a = admin(port)
      local keys = a:keys(base .. "*")
      assert.is_true(#keys >= 2, #keys .. " keys")
      for _, k in ipairs(keys) do assert.equal(slot, a:cluster("keyslot", k), k) end
      q:close()
      -- a "}" inside: the keys of format 6 and older had a tag of their
      -- own ("a" here), in another slot, where a store may be: read when
      -- this node serves it, else refused, saying so
      local old
      base, old = base_of("a}b", "orders")
      port = node_of(base)
      local got, err = durable.open(timer, { redis = admin(port), prefix = "a}b", queue = "orders" })
      if node_of(old .. ":meta") == port then
        q = assert(got, err)
      else
        assert.is_nil(got)
        assert.matches("^hwtimer%.durable: redis {a%%7Db:orders}%%: cannot read {a}b:orders}:meta here, where a " ..
          "store of format 6 or older would be %(.+%)$", err)
      end
    end)
  end)
end
