-- A time limit for each test (busted loads this before the specs: .busted):
-- a test that hangs, in C where no Lua hook can stop it (a timer:run that
-- never returns), ends the process within its limit, naming itself, in
-- busted's summary form so that CI's closing line counts it; spec/run.sh
-- keeps its own limit for a whole file (setup and teardown included).
-- The limit: HWT_TEST_LIMIT seconds, else 120 stretched by HWT_SLOW, and
-- always short of the file's (HWT_FILE_LIMIT, which spec/run.sh sets).
local ok, util = pcall(require, "hwtimer_testutil")
if not ok or not util.watchdog then return end
local busted = require("busted")

local slow = tonumber(os.getenv("HWT_SLOW")) or 1
local limit = tonumber(os.getenv("HWT_TEST_LIMIT")) or 120 * math.max(slow, 1)
local file_limit = tonumber(os.getenv("HWT_FILE_LIMIT"))
if file_limit then limit = math.min(limit, file_limit - 5) end

local function full_name(element)
  local names, e = {}, element
  while e and (e.name or e.descriptor) and e.descriptor ~= "file" do
    table.insert(names, 1, e.name or e.descriptor)
    e = busted.parent(e)
  end
  return table.concat(names, " ")
end

busted.subscribe({ "test", "start" }, function(element)
  local where = element.trace and element.trace.short_src and
    (element.trace.short_src .. ":" .. tostring(element.trace.currentline)) or "?"
  util.watchdog(limit, string.format("\nError -> %s\n%s\nthe test hung: it had not ended after %d s\n" ..
    "0 successes / 0 failures / 1 errors / 0 pending : %d seconds\n", where, full_name(element), limit, limit))
  return nil, true
end)
busted.subscribe({ "test", "end" }, function()
  util.watchdog(0)
  return nil, true
end)
