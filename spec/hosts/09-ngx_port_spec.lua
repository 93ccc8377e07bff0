-- Code ported from ngx.timer onto hwtimer.ngx, in a real nginx: a callback
-- ported as it is (premature first) is refused loudly, d:ngx_timer() gives
-- ngx.timer's convention (premature false, then true at the worker's exit),
-- and nginx -s stop says what it drops in nginx's own log format. Runs in
-- the LuaJIT spec run.
local N = require("spec.nginx")
local socket = require("socket")

local CONF = [[
@HEAD@
events { worker_connections 64; }
http {
  access_log off;
  lua_package_path "@LPATH@;;";
  lua_package_cpath "@CPATH@;;";
  init_worker_by_lua_block {
    package.loaded.d = assert(require("hwtimer.ngx").new())
    package.loaded.seen = {}
  }
  server {
    listen 127.0.0.1:@PORT@;
    location = /ping { return 200 "up"; }
    location = /refused {   # each refusal's message, one a line, as raised to this code
      content_by_lua_block {
        local d = package.loaded.d
        local function check_target(premature, target) if premature then return end end
        local cases = {   -- (not tail calls: the error names the line that called)
          function() local t = d:schedule(0.01, check_target, "a") return t end,
          function() local t = d:every(0.5, check_target, "a") return t end,
          function() local t = d:every({ interval = 0.5 }, function(premature) end) return t end,
        }
        for _, f in ipairs(cases) do
          local ok, err = pcall(f)
          ngx.say(ok and "accepted" or err)
        end
        -- another first parameter, a callable table, and the handle named as it is: accepted
        local t1 = d:schedule(10, function(t, premature_not) end)
        local t2 = d:schedule(10, setmetatable({}, { __call = function() end }))
        local t3 = d:every(10, function(t) end)
        ngx.say(t1 and t2 and t3 and "others accepted" or "refused")
        t1:cancel() t2:cancel() t3:cancel()
      }
    }
    location = /looks {   # a timer's first 4,096 distinct callbacks are looked at, none after
      content_by_lua_block {
        local d2 = assert(require("hwtimer.ngx").new())
        local handles = {}
        for i = 1, 4095 do handles[i] = d2:schedule(10, function(t) end) end -- (each closure a new function)
        local refused = not pcall(d2.schedule, d2, 10, function(premature) end)
        local late = d2:schedule(10, function(premature) end)
        ngx.say(#handles, " ", refused and "the 4,096th refused" or "the 4,096th accepted", ", ",
          late and "the 4,097th accepted" or "the 4,097th refused")
        d2:close()
      }
    }
    location = /port {   # ngx.timer's convention: at once, every until cancelled
      content_by_lua_block {
        local timer, seen = package.loaded.d:ngx_timer(), package.loaded.seen
        seen.at, seen.every, seen.cancelled = {}, {}, "never ran"
        local ok = timer.at(0.01, function(premature, a, b)
          seen.at[#seen.at + 1] = tostring(premature) .. " " .. a .. " " .. b
        end, "x", 2)
        local gone = timer.at(0.01, function() seen.cancelled = "ran" end)
        gone:cancel()
        local beat
        beat = timer.every(0.01, function(premature, who)
          seen.every[#seen.every + 1] = tostring(premature) .. " " .. who
          if #seen.every == 3 then beat:cancel() end
        end, "beat")
        local errs = {}
        for _, f in ipairs({ function() timer.at(-1, print) end, function() timer.every(0, print) end,
                             function() timer.at(1, "print") end, function() timer.every(1, 42) end }) do
          local okf, err = pcall(f)
          errs[#errs + 1] = okf and "accepted" or err
        end
        ngx.say(ok and "ok" or "refused", "\n", table.concat(errs, "\n"))
      }
    }
    location = /slow {   # every at a fixed rate: a run that takes 12 ms of a 30 ms interval
      content_by_lua_block {
        local now = require("hwtimer").now
        local timer, seen = package.loaded.d:ngx_timer(), package.loaded.seen
        seen.starts = {}
        local slow
        slow = timer.every(0.03, function(premature)
          seen.starts[#seen.starts + 1] = now()
          if #seen.starts == 6 then slow:cancel() end
          ngx.sleep(0.012)
        end)
        ngx.say("ok")
      }
    }
    location = /starts {   # the gaps between the slow one's starts, in ms
      content_by_lua_block {
        local s, out = package.loaded.seen.starts, {}
        for i = 2, #s do out[#out + 1] = ("%.1f"):format((s[i] - s[i - 1]) * 1000) end
        ngx.say(table.concat(out, " "))
      }
    }
    location = /io {   # a ported callback doing this host's own I/O: a cosocket round trip to /ping
      content_by_lua_block {
        local seen = package.loaded.seen
        seen.io = "never ran"
        package.loaded.d:ngx_timer().at(0.01, function(premature, port)
          local sock = ngx.socket.tcp()
          sock:settimeout(2000)
          local ok, err = sock:connect("127.0.0.1", port)
          if ok then ok, err = sock:send("GET /ping HTTP/1.0\r\nHost: x\r\n\r\n") end
          local body
          if ok then body, err = sock:receive("*a") end
          sock:close()
          seen.io = tostring(premature) .. " " .. (body and body:match("\r\n\r\n(.*)$") or ("failed: " .. tostring(err)))
        end, tonumber(ngx.var.server_port))
        ngx.say(ngx.worker.pid())
      }
    }
    location = /io_seen {
      content_by_lua_block { ngx.say(package.loaded.seen.io, " ", ngx.worker.pid()) }
    }
    location = /seen {
      content_by_lua_block {
        local seen = package.loaded.seen
        ngx.say(table.concat(seen.at, ","), "|", table.concat(seen.every, ","), "|", seen.cancelled)
      }
    }
    location = /names {   # what the timer and an exit function say they are; what the host may not call
      content_by_lua_block {
        local d = package.loaded.d
        local t1, t2 = d:schedule(3600, function() end), d:schedule(3600, function() end)
        local h = d:at_exit(function() end)
        local out = { tostring(d), tostring(h) }
        out[#out + 1] = tostring(h:cancel()) .. " " .. tostring(h) .. " " .. tostring(h:cancel())
        for _, name in ipairs({ "run", "dispatch" }) do
          local ok, err = pcall(d[name], d)
          out[#out + 1] = ok and "accepted" or err
        end
        t1:cancel() t2:cancel()
        ngx.say(table.concat(out, "\n"))
      }
    }
    location = /idle_sleep {   # what the dispatcher sleeps with one timeout 3 s ahead (its own field, seconds)
      content_by_lua_block {
        local d = package.loaded.d
        local t = d:schedule(3, function() end)
        ngx.sleep(0.05)
        ngx.say(d.sleep)
        t:cancel()
      }
    }
    location = /park {   # ported timeouts still pending at the worker's exit, and plain ones
      content_by_lua_block {
        local d = package.loaded.d
        local timer = d:ngx_timer()
        if ngx.var.arg_ported ~= "0" then
          timer.at(3600, function(premature, what)
            ngx.log(ngx.WARN, "ported at premature=", tostring(premature), " ", what)
          end, "report")
          timer.every(3600, function(premature, what)
            ngx.log(ngx.WARN, "ported every premature=", tostring(premature), " ", what)
          end, "probe")
        end
        for _ = 1, tonumber(ngx.var.arg_n or 0) do d:schedule(3600, function() end) end
        ngx.say(d:pending())
      }
    }
  }
}
]]

describe("hwtimer.ngx: code ported from ngx.timer", function()
  if N.skip_unless_ready(pending) then return end

  local server, port

  local function start()
    port = N.free_port()
    server = N.start(N.config(CONF, { PORT = port }))
    assert(N.wait_listening(port, "/ping"), server.log())
  end

  -- Park timeouts (/park?n=...: two ported ones and n plain), signal nginx
  -- and wait until it is gone; its error.log.
  local function park_and_end(n, sig, parked, query)
    assert.equal(parked .. "\n", select(2, N.get(port, "/park?n=" .. n .. (query or ""))))
    local master = server.master_pid()
    assert.is_true(server.signal(sig))
    local limit = socket.gettime() + 5
    while N.alive(master) and socket.gettime() < limit do socket.sleep(0.05) end
    assert.is_false(N.alive(master), server.log())
    return server.log()
  end

  before_each(start)
  after_each(function() server.stop() end)

  it("refuses, at the caller's line, a callback whose first parameter is 'premature'", function()
    local status, body = N.get(port, "/refused")
    assert.equal(200, status, body)
    local lines = {}
    for l in body:gmatch("[^\n]+") do lines[#lines + 1] = l end
    local function expected(fname, what)
      return "bad argument #2 to '" .. fname .. "' (the callback's first parameter is named 'premature', as " ..
        "an ngx.timer callback's: hwtimer.ngx passes the timeout handle there, so 'if premature then return " ..
        "end' would always return; use d:ngx_timer()." .. what .. " for ngx.timer's arguments, or name the " ..
        "parameter otherwise)"
    end
    assert.equal(4, #lines, body)
    -- content_by_lua's chunk: the lines of the pcall'd functions in it
    assert.equal(expected("schedule", "at"), lines[1]:match(":%d+: (.*)$"))
    assert.matches("^content_by_lua%(nginx%.conf:%d+%):%d+: bad argument #2 to 'schedule'", lines[1])
    assert.matches("^content_by_lua%(nginx%.conf:%d+%):%d+: bad argument #2 to 'every'", lines[2])
    assert.equal(expected("every", "every"), lines[2]:match(":%d+: (.*)$"))
    assert.equal(expected("every", "every"), lines[3]:match(":%d+: (.*)$"))
    assert.equal("others accepted", lines[4])
  end)

  it("looks at a timer's first 4,096 distinct callbacks, and at none after them", function()
    local status, body = N.get(port, "/looks")
    assert.equal(200, status, body)
    assert.equal("4095 the 4,096th refused, the 4,097th accepted\n", body)
  end)

  it("d:ngx_timer(): at and every call fn(premature, ...) as ngx.timer does; the handle cancels", function()
    local status, body = N.get(port, "/port")
    assert.equal(200, status, body)
    assert.equal(table.concat({ "ok",
      "bad argument #1 to 'at' (non-negative number of seconds expected)",
      "bad argument #1 to 'every' (positive number of seconds expected)",
      "bad argument #2 to 'at' (function expected, got string)",
      "bad argument #2 to 'every' (function expected, got number)" }, "\n") .. "\n",
      (body:gsub("content_by_lua%(nginx%.conf:%d+%):%d+: ", "")))
    local seen
    for _ = 1, 100 do
      seen = select(2, N.get(port, "/seen"))
      if seen:find("beat,false beat,false beat|", 1, true) then break end
      socket.sleep(0.02)
    end
    socket.sleep(0.05) -- a fourth beat, or the cancelled one, would have come by now
    assert.equal("false x 2|false beat,false beat,false beat|never ran\n", select(2, N.get(port, "/seen")))
  end)

  it("the timer and an exit function name themselves; run and dispatch are refused, naming who runs callbacks",
    function()
    local status, body = N.get(port, "/names")
    assert.equal(200, status, body)
    local function refused(name)
      return "hwtimer.ngx: " .. name .. " is not available: the dispatcher and its runners run the callbacks " ..
        "(so that they may yield)"
    end
    assert.equal(table.concat({
      "hwtimer.ngx (running, 2 pending, 0 runners)",
      "hwtimer.ngx exit function (pending)",
      "true hwtimer.ngx exit function (done or cancelled) false",
      refused("run"), refused("dispatch") }, "\n") .. "\n",
      (body:gsub("content_by_lua%(nginx%.conf:%d+%):%d+: ", "")))
  end)

  -- (nginx's clock in ms against the timer's in s: a sleep to the next
  -- millisecond of nginx's at or after the deadline)
  it("sleeps until the next timeout while nothing is due, not a millisecond at a time", function()
    local status, body = N.get(port, "/idle_sleep")
    assert.equal(200, status, body)
    local secs = tonumber(body)
    -- (max_wait, 1 s by default, bounds the sleep: then it looks again. It
    -- is counted to nginx's first millisecond at or after it, on nginx's
    -- clock, which lags hwtimer.now: a millisecond more at least, never
    -- ms from hwtimer.now alone, 1000, which could end a millisecond early)
    assert.is_true(secs and secs >= 1.0015 and secs < 1.1, "the dispatcher sleeps " .. body)
  end)

  it("d:ngx_timer().at: a callback makes a cosocket round trip; the worker lives on", function()
    local status, pid = N.get(port, "/io")
    assert.equal(200, status, pid)
    local seen
    for _ = 1, 100 do
      seen = select(2, N.get(port, "/io_seen"))
      if not seen:find("never ran", 1, true) then break end
      socket.sleep(0.02)
    end
    assert.equal("false up " .. pid, seen) -- the same worker answered: it did not crash
    assert.is_nil(server.log():find("exited on signal", 1, true), server.log())
  end)

  it("d:ngx_timer().every runs at a fixed rate, as ngx.timer.every: a slow run does not push the next back", function()
    assert.equal("ok\n", select(2, N.get(port, "/slow")))
    local gaps
    for _ = 1, 100 do
      gaps = N.numbers(select(2, N.get(port, "/starts")))
      if #gaps == 5 then break end
      socket.sleep(0.02)
    end
    assert.equal(5, #gaps)
    table.sort(gaps)
    -- at a fixed delay each gap would be 30 + 12 ms and more
    assert.is_true(gaps[3] < 38, "median gap " .. gaps[3] .. " ms between starts 30 ms apart")
  end)

  it("at nginx -s quit, a ported callback that never ran gets premature = true", function()
    local log = park_and_end(0, "quit", 2)
    assert.matches("ported at premature=true report", log, 1, true)
    assert.matches("ported every premature=true probe", log, 1, true)
    assert.is_nil(log:find("premature=false", 1, true), log)
  end)

  it("at nginx -s stop, says in nginx's log format how many pending timeouts it drops", function()
    local log = park_and_end(1000, "stop", 1002)
    assert.matches("%d%d%d%d/%d%d/%d%d %d%d:%d%d:%d%d %[warn%] %d+#%d+: [^\n]-hwtimer%.ngx: the worker stopped " ..
      "%(nginx %-s stop or the Lua state's end%) with 1002 pending timeouts; they never run", log)
    assert.is_nil(log:find("\nhwtimer: timer collected", 1, true), log)
    assert.is_nil(log:find("will never run", 1, true), log)
  end)

  it("at nginx -s stop, says so for a single pending timeout too", function()
    local log = park_and_end(1, "stop", 1, "&ported=0")
    assert.matches("hwtimer.ngx: the worker stopped (nginx -s stop or the Lua state's end) with 1 pending timeouts; " ..
      "they never run", log, 1, true)
  end)
end)

-- The look itself is plain Lua (debug.getlocal): on any Lua that names a
-- function's parameters, no nginx needed.
describe("hwtimer.ngx_port's look at a callback's first parameter", function()
  local port = require("hwtimer.ngx_port")
  if not pcall(debug.getlocal, print, 1) then
    it("looks at nothing on Lua 5.1", function() assert.is_false(port.looker()(function(premature) end)) end) -- luacheck: ignore 212
    return
  end

  it("is made once for each distinct callback: one given 5,000 times leaves the others looked at", function()
    local looks = port.looker()
    local function check(t, target) return t, target end
    for _ = 1, 5000 do assert.is_false(looks(check)) end
    assert.is_true(looks(function(premature) return premature end))
  end)

  it("stops after 4,096 distinct callbacks (made afresh for each schedule: no look's cost after that)", function()
    local looks = port.looker()
    -- (each closes over its own i: Lua 5.2 hands back one cached closure
    -- for a function expression that captures nothing new)
    for i = 1, 4096 do assert.is_false(looks(function(t) return t, i end)) end
    assert.is_false(looks(function(premature) return premature end))
    assert.is_false(looks("not a function"))
  end)
end)
