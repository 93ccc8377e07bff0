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

  -- (samples are looked up by name elsewhere, and promtool takes any
  -- order: a histogram whose +Inf bucket came first passed)
  it("writes each histogram's buckets in increasing le, +Inf last, for every timer", function()
    local other = hwtimer.new({ tick = 0.001 })
    for _ = 1, 5 do other:schedule(0, function() end) end
    other:dispatch()
    local text = metrics.render({ timers = { main = timer, other = other } })
    other:close()
    local seen = {}
    for name, le in text:gmatch('hwtimer_lateness_seconds_bucket{le="([^"]+)",timer="(%w+)"}') do
      name, le = le, name
      local list = seen[name] or {}
      seen[name] = list
      list[#list + 1] = le == "+Inf" and math.huge or tonumber(le)
    end
    for _, name in ipairs({ "main", "other" }) do
      local list = seen[name]
      assert.is_true(list and #list >= 2, name)
      for i = 2, #list do
        assert.is_true(list[i - 1] < list[i], name .. ": le " .. list[i - 1] .. " before " .. list[i])
      end
      assert.equal(math.huge, list[#list])
      -- and a series' buckets come before its _sum and _count
      local last_bucket = select(2, text:find('hwtimer_lateness_seconds_bucket{le="+Inf",timer="' .. name .. '"}', 1, true))
      assert.is_true(last_bucket < text:find('hwtimer_lateness_seconds_sum{timer="' .. name .. '"}', 1, true))
    end
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

  -- Names as a user or a store may give them, and the label value each is
  -- written as in the exposition: valid UTF-8 as it is (NUL, CR, tab too:
  -- the format lets them through), any other byte as the text \xHH with
  -- the value's backslashes doubled, then the format's \\, \" and \n.
  local HOSTILE = {
    { "\255", [[\\xff]] },
    { "\254\255", [[\\xfe\\xff]] },                              -- bytes UTF-8 never uses
    { "\128", [[\\x80]] },                                     -- a lone continuation byte
    { "a\191b\128\128", [[a\\xbfb\\x80\\x80]] },
    { "\192\175", [[\\xc0\\xaf]] },                              -- "/" overlong in two bytes
    { "\193\191", [[\\xc1\\xbf]] },
    { "\224\128\128", [[\\xe0\\x80\\x80]] },                       -- NUL overlong in three
    { "\240\130\130\172", [[\\xf0\\x82\\x82\\xac]] },                -- the euro sign overlong in four
    { "\237\160\128", [[\\xed\\xa0\\x80]] },                       -- U+D800, a surrogate
    { "\237\191\191", [[\\xed\\xbf\\xbf]] },                       -- U+DFFF
    { "\237\160\189\237\184\128", [[\\xed\\xa0\\xbd\\xed\\xb8\\x80]] }, -- a surrogate pair (CESU-8)
    { "\244\144\128\128", [[\\xf4\\x90\\x80\\x80]] },                -- past U+10FFFF
    { "\248\136\128\128\128", [[\\xf8\\x88\\x80\\x80\\x80]] },         -- a five-byte form
    { "\226\130", [[\\xe2\\x82]] },                              -- a sequence cut short at the end
    { "\226\130x\226\130\172", "\\\\xe2\\\\x82x\226\130\172" },     -- cut short, then a whole one kept
    { 'q"\\\n\255', [[q\"\\\\\n\\xff]] },                        -- the format's escapes on top
    { "a\0b", "a\0b" },                                        -- NUL is valid UTF-8
    { "\r\t\127", "\r\t\127" },
    { "\\x41", [[\\x41]] },                                     -- valid text that reads as an escape
    { "\195\169\240\159\152\128", "\195\169\240\159\152\128" },    -- é and an emoji
    { "\239\191\189\239\187\191", "\239\191\189\239\187\191" },    -- U+FFFD and U+FEFF themselves
    { "\237\159\191\238\128\128\244\143\191\191", "\237\159\191\238\128\128\244\143\191\191" }, -- U+D7FF, U+E000, U+10FFFF
    -- each lead byte's first and last sequence: U+0080, U+07FF (C2, DF), U+0800
    -- (E0), U+1000 (E1), U+CFFF (EC), U+FFFF (EF), U+10000 (F0), U+40000 (F1),
    -- U+FFFFF (F3), U+100000 (F4)
    { "\194\128\223\191\224\160\128\225\128\128\236\191\191\239\191\191\240\144\128\128\241\128\128\128\243\191\191\191\244\128\128\128",
      "\194\128\223\191\224\160\128\225\128\128\236\191\191\239\191\191\240\144\128\128\241\128\128\128\243\191\191\191\244\128\128\128" },
    { "\224\159\191", [[\\xe0\\x9f\\xbf]] },                       -- U+07FF overlong in three
    { "\240\143\191\191", [[\\xf0\\x8f\\xbf\\xbf]] },                -- U+FFFF overlong in four
    { "\245\128\128\128", [[\\xf5\\x80\\x80\\x80]] },                -- a lead byte past F4
  }

  it("writes any timer name as a valid label value, as promtool accepts", function()
    for _, case in ipairs(HOSTILE) do
      local text = metrics.render({ timers = { [case[1]] = timer } })
      local ok, out = helpers.promtool(text)
      assert.is_true(ok, out .. "\n" .. text)
      assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{timer="' .. case[2] .. '"}'), text)
    end
  end)

  it("keeps different names different: every hostile name its own series, in one scrape", function()
    local timers = {}
    for _, case in ipairs(HOSTILE) do timers[case[1]] = timer end
    local text = metrics.render({ timers = timers, labels = { instance = "\255\\xff" } })
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    local series = {}
    for line in text:gmatch("hwtimer_timeouts_fired_total(%b{}) ") do series[line] = true end
    assert.equal(#HOSTILE, helpers.count(series))
    assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{instance="\\\\xff\\\\\\\\xff",timer="\\\\xff"}'))
  end)

  it("writes a constant label's hostile value as valid, and a number as a number", function()
    for _, case in ipairs(HOSTILE) do
      local text = metrics.render({ timers = { main = timer }, labels = { site = case[1], n = 3.0, f = 0.5 } })
      local ok, out = helpers.promtool(text)
      assert.is_true(ok, out .. "\n" .. text)
      assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{f="0.5",n="3",site="' .. case[2] .. '",timer="main"}'))
    end
  end)

  -- (a whole number below 2^53 is exact as a double: written as its digits,
  -- "3" not "3.0", on every Lua; from 2^53 on as Lua writes the number)
  it("writes a whole number label below 2^53 as its digits, and 2^53 as Lua writes it", function()
    local text = metrics.render({ timers = { main = timer }, labels = { a = 2 ^ 53 - 1, b = 2 ^ 53, c = -(2 ^ 53 - 1) } })
    assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{a="9007199254740991",b="' .. tostring(2 ^ 53)
      .. '",c="-9007199254740991",timer="main"}'), text)
  end)

  it("refuses two names that would show as one series", function()
    assert.has_error(function() metrics.render({ timers = { ["\255"] = timer, ["\\xff"] = timer } }) end,
      [[bad argument #1 to 'render' (field 'timers': timer names '\\xff' and '\xff' show as the same label value)]])
  end)

  -- opts.labels' keys that would make a series Prometheus refuses or misreads.
  local BAD_KEYS = {
    { "a-b", "key 'a-b' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)" },
    { "1a", "key '1a' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)" },
    { "", "key '' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)" },
    { "a b", "key 'a b' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)" },
    { "a:b", "key 'a:b' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)" },
    { "\195\169", [[key '\xc3\xa9' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)]] },
    { "a\0b", [[key 'a\x00b' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)]] },
    { "a\nb", [[key 'a\x0ab' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)]] },
    { "__name__", "key '__name__' is reserved (names starting with __ are Prometheus')" },
    { "__address__", "key '__address__' is reserved (names starting with __ are Prometheus')" },
    { "__", "key '__' is reserved (names starting with __ are Prometheus')" },
    { "le", "key 'le' is reserved (a histogram's bucket label)" },
    { "quantile", "key 'quantile' is reserved (a summary's quantile label)" },
    { "timer", "key 'timer' is reserved (hwtimer.metrics writes it)" },
    { "outcome", "key 'outcome' is reserved (hwtimer.metrics writes it)" },
    { "queue", "key 'queue' is reserved (hwtimer.metrics writes it)" },
    { "kind", "key 'kind' is reserved (hwtimer.metrics writes it)" },
    { "state", "key 'state' is reserved (hwtimer.metrics writes it)" },
  }

  it("refuses a field it does not take, at the caller's line (a misspelt one gave an empty page)", function()
    local H, here = require("spec.helpers"), "20%-metrics_spec%.lua$"
    H.raises_at(here, function() local r = metrics.render({ timer = timer }) return r end,
      "bad argument #1 to 'render' (unknown field 'timer')")
    H.raises_at(here, function() local r = metrics.collect({ queue = {} }) return r end,
      "bad argument #1 to 'collect' (unknown field 'queue')")
    H.raises_at(here, function() local r = metrics.render(5) return r end, "bad argument #1 to 'render' (table expected, got number)")
    H.raises_at(here, function() local r = metrics.format({}, 5) return r end,
      "bad argument #2 to 'format' (metric name prefix expected, got number)")
    H.raises_at(here, function() local r = metrics.format({ a = "x" }) return r end,
      "bad argument #1 to 'format' (family 'a': a metric name (after the prefix) and a table of sample lines expected)")
    assert.is_string(metrics.render({ timers = { main = timer }, labels = {}, prefix = "x_", store = false, runs = false }))
  end)

  it("refuses a label key Prometheus refuses or that hwtimer.metrics writes, naming it", function()
    for _, case in ipairs(BAD_KEYS) do
      assert.has_error(function() metrics.render({ timers = { main = timer }, labels = { [case[1]] = "x" } }) end,
        "bad argument #1 to 'render' (field 'labels': " .. case[2] .. ")")
      assert.has_error(function() metrics.collect({ labels = { [case[1]] = "x" } }) end,
        "bad argument #1 to 'collect' (field 'labels': " .. case[2] .. ")")
    end
    assert.has_error(function() metrics.render({ labels = { "x" } }) end,
      "bad argument #1 to 'render' (field 'labels': a label name expected as key, got number)")
    assert.has_error(function() metrics.render({ labels = { a = true } }) end,
      "bad argument #1 to 'render' (field 'labels': value of 'a': string or number expected, got boolean)")
    -- the ones it takes: a leading _ alone, capitals, digits after the first
    local text = metrics.render({ timers = { main = timer }, labels = { _a = "1", Zone = "2", x9 = "3" } })
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{Zone="2",_a="1",timer="main",x9="3"}'))
  end)

  it("refuses what is not a timer, naming the timer, before any is read", function()
    local cases = {
      { {}, "table" }, { { stats = function() return {} end }, "table" }, { 1, "number" }, { "t", "string" },
      { function() end, "function" }, { true, "boolean" }, { io.stdout, helpers.type_name(io.stdout) },
      { { timer = {} }, "table" },
    }
    for _, case in ipairs(cases) do
      assert.has_error(function() metrics.render({ timers = { main = timer, bad = case[1] } }) end,
        "bad argument #1 to 'render' (field 'timers': timer 'bad': hwtimer.timer expected, got " .. case[2] .. ")")
    end
    assert.has_error(function() metrics.render({ timers = { timer } }) end,
      "bad argument #1 to 'render' (field 'timers': a timer name (non-empty string) expected as key, got number)")
    assert.has_error(function() metrics.render({ timers = { [""] = timer } }) end,
      "bad argument #1 to 'render' (field 'timers': a timer name (non-empty string) expected as key, got '')")
    assert.has_error(function() metrics.render({ queues = { q = timer } }) end,
      "bad argument #1 to 'render' (field 'queues': queue 'q': hwtimer.durable queue expected, got hwtimer.timer)")
    assert.has_error(function() metrics.render({ queues = { q = { counts = function() end } } }) end,
      "bad argument #1 to 'render' (field 'queues': queue 'q': hwtimer.durable queue expected, got table)")
    assert.has_error(function() metrics.render({ queues = { ["\255"] = {} } }) end,
      [[bad argument #1 to 'render' (field 'queues': queue '\xff': hwtimer.durable queue expected, got table)]])
  end)

  it("renders a closed timer's last figures, and an object over a timer (hwtimer.ngx's)", function()
    timer:schedule(0, function() end)
    timer:run(0.001)
    local other = hwtimer.new()
    other:close()
    local text = metrics.render({ timers = { a = timer, b = other, c = { timer = timer } } })
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    assert.equal(1, sample(text, 'hwtimer_timeouts_fired_total{timer="a"}'))
    assert.equal(0, sample(text, 'hwtimer_timeouts_fired_total{timer="b"}'))
    assert.equal(1, sample(text, 'hwtimer_timeouts_fired_total{timer="c"}'))
  end)

  it("names a bad argument", function()
    assert.has_error(function() metrics.render() end, "bad argument #1 to 'render' (table expected, got nil)")
    assert.has_error(function() metrics.collect(1) end, "bad argument #1 to 'collect' (table expected, got number)")
    assert.has_error(function() metrics.render({ timers = 1 }) end,
      "bad argument #1 to 'render' (field 'timers': table expected, got number)")
    local what = "a metric name prefix ([a-zA-Z_][a-zA-Z0-9_]*, not __...) expected"
    for _, case in ipairs({ { "1x", "'1x'" }, { "a:b_", "'a:b_'" }, { "__x_", "'__x_'" }, { "a-b_", "'a-b_'" },
                            { "", "''" }, { "a\255_", [['a\xff_']] }, { 1, "number" } }) do
      assert.has_error(function() metrics.render({ prefix = case[1] }) end,
        "bad argument #1 to 'render' (field 'prefix': " .. what .. ", got " .. case[2] .. ")")
    end
    assert.has_error(function() metrics.format(nil) end, "bad argument #1 to 'format' (table expected, got nil)")
    assert.has_error(function() metrics.format({}, "a:") end,
      "bad argument #2 to 'format' (metric name prefix expected, got string)")
    for _, case in ipairs({ { { ["a-b"] = {} }, "'a-b'" }, { { ["a\255"] = {} }, [['a\xff']] },
                            { { [1] = {} }, "number" }, { { a = "x" }, "'a'" } }) do
      assert.has_error(function() metrics.format(case[1]) end, "bad argument #1 to 'format' (family " .. case[2] ..
        ": a metric name (after the prefix) and a table of sample lines expected)")
    end
    -- an exporter's own family, between hwtimer's
    local by_family, prefix = metrics.collect({ timers = { main = timer } })
    by_family.app_things_total = { "hwtimer_app_things_total 4" }
    local text = metrics.format(by_family, prefix)
    local ok, out = helpers.promtool(text)
    assert.is_true(ok, out .. "\n" .. text)
    assert.equal(4, sample(text, "hwtimer_app_things_total"))
  end)
end)
