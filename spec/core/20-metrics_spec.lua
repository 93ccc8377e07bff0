-- hwtimer.metrics: a timer's figures as Prometheus text, checked by
-- promtool (Debian: prometheus) and against the timer's own stats. The
-- queues' figures are in spec/durable/metrics.lua, nginx's in
-- spec/hosts/07-ngx_metrics_spec.lua.
local hwtimer = require("hwtimer")
local metrics = require("hwtimer.metrics")
local helpers = require("spec.helpers")

local sample = helpers.prom_sample

describe("hwtimer.metrics", function()
  local timer
  before_each(function() timer = hwtimer.new({ on_error = function() end }) end)
  after_each(function() timer:close() end)

  it("renders a timer's counts, gauges and lateness histogram, as promtool accepts", function()
    for i = 1, 20 do timer:schedule(i / 1000, function() end) end
    timer:schedule(0, function() error("x") end)
    timer:schedule(10, function() end):cancel()
    timer:schedule(10, function() end)
    helpers.wait_until(timer, function() return timer:stats().fired == 21 end, 5)
    local text = metrics.render({ timers = { main = timer } })
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    local s = timer:stats()
    local l = '{timer="main"}'
    assert.equal(23, sample(text, "hwtimer_timeouts_scheduled_total" .. l))
    assert.equal(21, sample(text, "hwtimer_timeouts_fired_total" .. l))
    assert.equal(1, sample(text, "hwtimer_timeouts_cancelled_total" .. l))
    assert.equal(1, sample(text, "hwtimer_callback_errors_total" .. l))
    assert.equal(1, sample(text, "hwtimer_timeouts_pending" .. l))
    assert.equal(21, sample(text, "hwtimer_lateness_seconds_count" .. l))
    assert.equal(21, sample(text, 'hwtimer_lateness_seconds_bucket{le="+Inf",timer="main"}'))
    assert.is_true(math.abs(sample(text, "hwtimer_lateness_seconds_sum" .. l) - s.late_sum) < 1e-12)
    local buckets = timer:lateness()
    for _, b in ipairs(buckets) do
      assert.equal(b[2], sample(text, ('hwtimer_lateness_seconds_bucket{le="%.9f",timer="main"}'):format(b[1])))
    end
    assert.equal(0, sample(text, 'hwtimer_retries_total{outcome="started",timer="main"}'))
  end)

  it("escapes label values and adds the constant labels to every sample", function()
    local text = metrics.render({ timers = { ['a "b" \\ c\nd'] = timer }, labels = { instance = "x" } })
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{instance="x",timer="a \\"b\\" \\\\ c\\nd"}'))
    for line in text:gmatch("[^\n]+") do
      if line:sub(1, 1) ~= "#" then assert.matches('instance="x"', line, 1, true) end
    end
  end)

  it("writes each family's HELP and TYPE once, for several timers", function()
    local other = hwtimer.new()
    local text = metrics.render({ timers = { a = timer, b = other } })
    other:close()
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out)
    local _, n = text:gsub("\n# TYPE hwtimer_lateness_seconds histogram\n", "")
    assert.equal(1, n)
    assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{timer="b"}'))
  end)

  it("takes a prefix", function()
    local text = metrics.render({ timers = { main = timer }, prefix = "app_timer_" })
    assert.equal(0, sample(text, 'app_timer_timeouts_fired_total{timer="main"}'))
    assert.is_nil(text:find("hwtimer_", 1, true))
  end)

  it("names a bad argument", function()
    assert.has_error(function() metrics.render() end, "bad argument #1 to 'render' (table expected, got nil)")
    assert.has_error(function() metrics.render({ timers = 1 }) end,
      "bad argument #1 to 'render' (field 'timers': table expected, got number)")
    assert.has_error(function() metrics.render({ prefix = "1x" }) end,
      "bad argument #1 to 'render' (field 'prefix': a metric name prefix expected)")
  end)
end)
