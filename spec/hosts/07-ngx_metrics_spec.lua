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
  init_worker_by_lua_block {
    local d = assert(require("hwtimer.ngx").new())
    package.loaded.timer = d
    -- worker 0 runs 10 callbacks, worker 1 20
    for _ = 1, 10 * (ngx.worker.id() + 1) do d:schedule(0.01, function() end) end
    assert(require("hwtimer.metrics_ngx").publish("hwtimer_metrics", { timers = { main = d }, interval = 0.1 }))
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /metrics { content_by_lua_block { require("hwtimer.metrics_ngx").serve("hwtimer_metrics") } }
    location = /bad { content_by_lua_block {
      local m = require("hwtimer.metrics_ngx")
      ngx.say(select(2, pcall(m.serve, "no_such_dict")))
      ngx.say(select(2, pcall(m.publish, "hwtimer_metrics", { interval = 0 })))
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
    assert.equal("bad argument #1 to 'serve' (name of a lua_shared_dict expected, got no_such_dict)\n" ..
      "bad argument #2 to 'publish' (field 'interval': positive number of seconds expected)\n", body)
  end)
end)
