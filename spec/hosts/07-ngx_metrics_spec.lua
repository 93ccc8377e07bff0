-- hwtimer.metrics_ngx in a real nginx with two workers: each publishes its
-- timer's figures into a shared dict, and one scrape shows both, labelled by
-- worker, as promtool accepts; a worker killed and replaced shows again
-- under its id, counting from zero. Runs in the LuaJIT spec run.
local N = require("spec.nginx")
local socket = require("socket")
local helpers = require("spec.helpers")

local CONF = [[
@HEAD@
events { worker_connections 64; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  lua_shared_dict hwtimer_metrics 1m;
  lua_shared_dict hwtimer_hostile 1m;
  lua_shared_dict hwtimer_scratch 1m;
  init_worker_by_lua_block {
    local d = assert(require("hwtimer.ngx").new())
    package.loaded.timer = d
    -- worker 0 runs 10 callbacks, worker 1 20
    for _ = 1, 10 * (ngx.worker.id() + 1) do d:schedule(0.01, function() end) end
    assert(require("hwtimer.metrics_ngx").publish("hwtimer_metrics", { timers = { main = d }, interval = 0.1 }))
    -- the same timer under names that are not UTF-8 (HOSTILE below), and a
    -- constant label's value that is not either
    local c, hostile = string.char, {}
    for _, name in ipairs({ c(255), c(192, 175), c(237, 160, 128), c(128) .. "x", c(244, 144, 128, 128),
                            "q" .. c(34, 92, 10, 254), "a" .. c(0) .. "b", c(195, 169) }) do
      hostile[name] = d
    end
    assert(require("hwtimer.metrics_ngx").publish("hwtimer_hostile",
      { timers = hostile, labels = { site = c(255, 92) .. "xff" }, interval = 0.1 }))
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /metrics { content_by_lua_block { require("hwtimer.metrics_ngx").serve("hwtimer_metrics") } }
    location = /hostile { content_by_lua_block { require("hwtimer.metrics_ngx").serve("hwtimer_hostile") } }
    location = /bad { content_by_lua_block {
      local m = require("hwtimer.metrics_ngx")
      local d = package.loaded.timer
      ngx.say(select(2, pcall(m.serve, "no_such_dict")))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { interval = 0 })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", 5)))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { main = {} } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { main = d, other = d.timer, bad = ngx } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { d } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { queues = { q = d } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { main = d }, labels = { worker = "w" } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { main = d }, labels = { ["a-b"] = "x" } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { main = d }, labels = { le = "1" } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { timers = { main = d }, labels = { __x = "1" } })))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { prefix = "a:b_" })))
      ngx.say(select(2, pcall(m.serve, "hwtimer_metrics", { labels = { worker = 1 } })))
      ngx.say(select(2, pcall(m.collect, "hwtimer_metrics", { queues = { q = {} } })))
      ngx.say(select(2, pcall(m.collect, "hwtimer_metrics", "x")))
      -- a closed queue is taken (publish writes this worker's runs, not a store's figures)
      local path = os.tmpname()
      local closed = assert(require("hwtimer.durable").open(d, { path = path }))
      closed:close()
      local ok, err = pcall(m.publish, "hwtimer_scratch", { queues = { q = closed }, interval = 3600 })
      ngx.say("a closed queue: ", ok and err and "taken" or tostring(err))
      os.remove(path)
    } }
  }
}
]]

local sample = helpers.prom_sample

-- The fired counts of worker 0 and 1's timers, once both are published with
-- at least `want0` and `want1`.
local function scrape_until(port, want0, want1)
  local text
  for _ = 1, 100 do
    text = select(2, N.get(port, "/metrics"))
    local a = sample(text, 'hwtimer_timeouts_fired_total{timer="main",worker="0"}')
    local b = sample(text, 'hwtimer_timeouts_fired_total{timer="main",worker="1"}')
    if a and b and a >= want0 and b >= want1 then return text, a, b end
    socket.sleep(0.05)
  end
  error("not published: " .. tostring(text))
end

describe("OpenResty: hwtimer.metrics_ngx", function()
  if N.skip_unless_ready(pending) then return end
  local server, port

  setup(function()
    port = N.free_port()
    server = N.start(N.config(CONF:gsub("@HEAD@", "@HEAD@"), { PORT = port }):gsub("worker_processes 1;", "worker_processes 2;"))
    assert(N.wait_listening(port, "/ping"), server.log())
  end)
  teardown(function() server.stop() end)

  it("shows every worker's timer in one scrape, as promtool accepts", function()
    assert.equal(2, #server.worker_pids())
    local text = scrape_until(port, 10, 20)
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    for _, w in ipairs({ "0", "1" }) do
      local l = '{timer="main",worker="' .. w .. '"}'
      assert.equal(w == "0" and 10 or 20, sample(text, "hwtimer_timeouts_scheduled_total" .. l))
      assert.equal(w == "0" and 10 or 20, sample(text, "hwtimer_timeouts_fired_total" .. l))
      assert.equal(sample(text, "hwtimer_timeouts_fired_total" .. l), sample(text, "hwtimer_lateness_seconds_count" .. l))
      assert.equal(sample(text, "hwtimer_lateness_seconds_count" .. l),
        sample(text, 'hwtimer_lateness_seconds_bucket{le="+Inf",timer="main",worker="' .. w .. '"}'))
    end
    local _, count = text:gsub("# TYPE hwtimer_timeouts_fired_total counter", "")
    assert.equal(1, count)  -- one family, both workers' samples under it
  end)

  -- Each name above, as the exposition writes it: valid UTF-8 as it is,
  -- other bytes as the text \xHH with backslashes doubled, then the
  -- format's escapes (spec/core/20-metrics_spec.lua has the rule's cases).
  local HOSTILE = { [[\\xff]], [[\\xc0\\xaf]], [[\\xed\\xa0\\x80]], [[\\x80x]], [[\\xf4\\x90\\x80\\x80]],
                    [[q\"\\\\\n\\xfe]], "a\0b", "\195\169" }

  it("writes timer names and label values that are not UTF-8 as valid, every worker's, as promtool accepts", function()
    local text
    for _ = 1, 100 do
      text = select(2, N.get(port, "/hostile"))
      local _, n = text:gsub("\nhwtimer_timeouts_fired_total{", "")
      if n == 2 * #HOSTILE then break end
      socket.sleep(0.05)
    end
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    for _, w in ipairs({ "0", "1" }) do
      for _, name in ipairs(HOSTILE) do
        local l = '{site="\\\\xff\\\\\\\\xff",timer="' .. name .. '",worker="' .. w .. '"}'
        assert.equal(w == "0" and 10 or 20, sample(text, "hwtimer_timeouts_fired_total" .. l), text)
      end
    end
    -- the workers that published those names and served the scrapes survived
    local log = server.log()
    assert.is_nil(log:find("exited on signal", 1, true), log)
    assert.is_nil(log:find("[alert]", 1, true), log)
  end)

  it("shows a killed worker's replacement under its id, counting again", function()
    local pids = server.worker_pids()
    -- which pid is worker 1 is not known from outside: kill both, one at a time
    assert(helpers.sh("kill -9 " .. pids[1] .. " " .. pids[2]))
    local now
    for _ = 1, 100 do
      now = server.worker_pids()
      if #now == 2 and now[1] ~= pids[1] and now[2] ~= pids[2] and now[1] ~= pids[2] then break end
      socket.sleep(0.05)
    end
    assert.equal(2, #now)
    socket.sleep(0.4) -- the old entries expire (three intervals), the new ones are published
    local text = scrape_until(port, 10, 20)
    -- the new workers ran their own callbacks once each: a replaced
    -- worker's series starts again (a counter reset, as Prometheus expects)
    assert.equal(10, sample(text, 'hwtimer_timeouts_fired_total{timer="main",worker="0"}'))
    assert.equal(20, sample(text, 'hwtimer_timeouts_fired_total{timer="main",worker="1"}'))
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out)
  end)

  it("drops a worker that is gone: reloaded to one worker, worker 1 leaves the scrape", function()
    local path = server.prefix .. "/conf/nginx.conf"
    local conf = helpers.read_file(path)
    local f = assert(io.open(path, "w"))
    f:write((conf:gsub("worker_processes 2;", "worker_processes 1;")))
    f:close()
    local old = server.worker_pids()
    assert.is_true(server.signal("reload"))
    local now
    for _ = 1, 100 do
      now = server.worker_pids()
      if #now == 1 and now[1] ~= old[1] and now[1] ~= old[2] then break end
      socket.sleep(0.05)
    end
    assert.equal(1, #now)
    local text
    for _ = 1, 100 do  -- three intervals after worker 1's last publish
      text = select(2, N.get(port, "/metrics"))
      if not text:find('worker="1"', 1, true) then break end
      socket.sleep(0.05)
    end
    assert.is_nil(text:find('worker="1"', 1, true), text)
    assert.equal(10, sample(text, 'hwtimer_timeouts_fired_total{timer="main",worker="0"}'))
  end)

  it("names a bad argument", function()
    local _, body = N.get(port, "/bad")
    local labels = "bad argument #2 to 'publish' (field 'labels': key "
    assert.equal(table.concat({
      "bad argument #1 to 'serve' (name of a lua_shared_dict expected, got no_such_dict)",
      "bad argument #2 to 'publish' (field 'interval': positive number of seconds expected)",
      "bad argument #2 to 'publish' (table expected, got number)",
      "bad argument #2 to 'publish' (field 'timers': timer 'main': hwtimer.timer expected, got table)",
      "bad argument #2 to 'publish' (field 'timers': timer 'bad': hwtimer.timer expected, got table)",
      "bad argument #2 to 'publish' (field 'timers': a timer name (non-empty string) expected as key, got number)",
      "bad argument #2 to 'publish' (field 'queues': queue 'q': hwtimer.durable queue expected, got table)",
      labels .. "'worker' is reserved (hwtimer.metrics_ngx writes it))",
      labels .. "'a-b' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*))",
      labels .. "'le' is reserved (a histogram's bucket label))",
      labels .. "'__x' is reserved (names starting with __ are Prometheus'))",
      "bad argument #2 to 'publish' (field 'prefix': a metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*, not __...) " ..
        "expected, got 'a:b_')",
      "bad argument #2 to 'serve' (field 'labels': key 'worker' is reserved (hwtimer.metrics_ngx writes it))",
      "bad argument #2 to 'collect' (field 'queues': queue 'q': hwtimer.durable queue expected, got table)",
      "bad argument #2 to 'collect' (table expected, got string)",
      "a closed queue: taken",
      "" }, "\n"), body)
  end)
end)
