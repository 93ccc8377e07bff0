-- hwtimer.tzif, the zones under hwtimer.cron: every zone of the system's
-- zoneinfo against Python's zoneinfo (one python3 process), TZif version 1
-- files, damaged files, POSIX TZ strings (the v2+ footer: M, J and n dates,
-- negative and past-24 h times, DST all year), the cache, and "local" as
-- $TZ or /etc/localtime make it (in child processes: nothing here sets TZ).
local cron = require("hwtimer.cron")
local tzif = require("hwtimer.tzif")
local helpers = require("spec.helpers")

local PYTHON = "/usr/bin/python3"
local ZONEINFO = "/usr/share/zoneinfo"

-- The zone files: names under ZONEINFO, without right/, posix/ and the tables.
local function zone_names()
  return helpers.lines_of("cd " .. ZONEINFO .. " && find . -type f | sed 's,^\\./,,' | "
    .. "grep -v -E '^(right|posix)/|\\.(tab|zi|list)$|^(leapseconds|tzdata|SECURITY|localtime|posixrules)' | sort")
end

-- The instants to check in a zone: spread over 1900-2200, each transition
-- of its table since 1900 and a second before it, and those the footer
-- makes from 2030 to 2060.
local function instants(zone)
  local ts = {}
  for i = 1, 40 do ts[#ts + 1] = -2208988800 + i * 157783678 end
  for _, tr in ipairs(zone.list) do
    if tr.t > -2208988800 then ts[#ts + 1], ts[#ts + 1] = tr.t, tr.t - 1 end
  end
  local t = 1893456000
  while t < 2840140800 do
    local _, b = zone:segment(t)
    if not b then break end
    ts[#ts + 1], ts[#ts + 1], t = b, b - 1, b
  end
  return ts
end

-- Write "name t offset" for each zone of `zones` (name -> zone) at its
-- instants (and `extra` ones), and have Python's zoneinfo, reading the zone
-- files under `tzpath`, check each offset: the number checked, and Python's
-- report ("checked N differ M", then the first lines that differ).
local function python_check(zones, tzpath, extra)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  local n = 0
  for name, zone in pairs(zones) do
    local ts = instants(zone)
    for _, t in ipairs(extra or {}) do ts[#ts + 1] = t end
    for _, t in ipairs(ts) do
      f:write(string.format("%s %d %d\n", name, t, zone:offset(t)))
      n = n + 1
    end
  end
  f:close()
  local out = helpers.shell(PYTHON .. [==[ -c '
import sys, zoneinfo
from datetime import datetime, timezone
zoneinfo.reset_tzpath([sys.argv[2]])
zones, checked, bad = {}, 0, []
for line in open(sys.argv[1]):
    name, t, off = line.split()
    z = zones.get(name) or zones.setdefault(name, zoneinfo.ZoneInfo(name))
    o = int(datetime.fromtimestamp(int(t), timezone.utc).astimezone(z).utcoffset().total_seconds())
    checked += 1
    if o != int(off): bad.append(line.strip() + " python " + str(o))
print("checked", checked, "differ", len(bad))
print("\n".join(bad[:10]))
' ]==] .. path .. " " .. tzpath .. " 2>&1")
  os.remove(path)
  return n, out
end

local function has_python()
  return helpers.sh(PYTHON .. " -c 'import zoneinfo' 2>/dev/null")
end

describe("hwtimer.tzif", function()
  it("agrees with Python's zoneinfo on every zone of the system, 1900-2200", function()
    if not has_python() then return pending(PYTHON .. " has no zoneinfo") end
    local names = zone_names()
    assert.is_true(#names > 300, "zones found: " .. #names)
    local every = os.getenv("HWT_SLOW") and 10 or 1
    local zones = {}
    for i, name in ipairs(names) do
      if i % every == 0 then zones[name] = assert(tzif.load(name)) end
    end
    local n, out = python_check(zones, ZONEINFO)
    assert.matches("^checked " .. n .. " differ 0\n", out)
  end)

  -- Every zone compiled slim into a directory of its own (removed by the
  -- caller), or nil and why not.
  local function slim_zones()
    local zi = ZONEINFO .. "/tzdata.zi"
    if not (helpers.sh("test -x /usr/sbin/zic || command -v zic >/dev/null") and io.open(zi)) then
      return nil, "needs zic and " .. zi
    end
    local dir = os.tmpname()
    os.remove(dir)
    assert(helpers.sh("PATH=$PATH:/usr/sbin zic -b slim -d " .. dir .. " " .. zi))
    return dir
  end

  -- zic -b slim (upstream's default since 2020b) ends a zone's table at its
  -- last rule change and leaves the years after it to the footer's rule; a
  -- table may end with transitions that change only the name or the DST
  -- flag, after the last change of offset.
  it("reads slim zone files (zic -b slim) as Python's zoneinfo does, every zone, 1990-2040 every 5 days", function()
    if not has_python() then return pending(PYTHON .. " has no zoneinfo") end
    local dir, why = slim_zones()
    if not dir then return pending(why) end
    local zones = {}
    for _, name in ipairs(zone_names()) do
      local f = io.open(dir .. "/" .. name, "rb")
      if f then
        zones[name] = assert(tzif.from_data(f:read("*a"), name))
        f:close()
      end
    end
    local extra = {}
    for t = 631152000, 2208988800, 5 * 86400 + 3607 do extra[#extra + 1] = t end
    local n, out = python_check(zones, dir, extra)
    helpers.sh("rm -rf " .. dir)
    assert.is_true(n > 1000000, "instants checked: " .. n)
    assert.matches("^checked " .. n .. " differ 0\n", out)
  end)

  -- (a segment ends where the offset changes, not at the end of the table
  -- where the rule goes on with the same offset: cron steps by segments)
  it("gives each slim zone's segments whole: the offset changes at both ends, around each table's end", function()
    local dir, why = slim_zones()
    if not dir then return pending(why) end
    local checked, joined = 0, 0
    for _, name in ipairs(zone_names()) do
      local f = io.open(dir .. "/" .. name, "rb")
      local z = f and assert(tzif.from_data(f:read("*a"), name))
      if f then f:close() end
      local edge = z and z.table_end
      for _, t in ipairs(edge and { edge - 86400, edge - 1, edge, edge + 86400 } or {}) do
        local a, b, off, before = z:segment(t)
        assert.equal(off, z:offset(t), name)
        if b then assert.are_not.equal(off, z:offset(b), name .. ": segment of " .. t .. " ends at " .. b) end
        if a then
          assert.are_not.equal(off, before, name .. ": segment of " .. t .. " begins at " .. a)
          assert.equal(before, z:offset(a - 1), name)
        end
        if t < edge and b and b > edge then joined = joined + 1 end
        checked = checked + 1
      end
    end
    helpers.sh("rm -rf " .. dir)
    assert.is_true(checked > 1000, checked .. " instants")
    assert.is_true(joined > 0, "no table joined the rule after it")
  end)

  it("reads a version 1 file (no 64-bit block, no footer)", function()
    local data = helpers.read_file(ZONEINFO .. "/Europe/Berlin")
    local count = function(k) local a, b, c, d = data:byte(21 + k * 4, 24 + k * 4)
      return ((a * 256 + b) * 256 + c) * 256 + d end
    local isut, isstd, leap, time, type, char = count(0), count(1), count(2), count(3), count(4), count(5)
    local len = 44 + time * 5 + type * 6 + char + leap * 8 + isstd + isut
    local v1 = assert(tzif.from_data("TZif\0" .. data:sub(6, len), "v1"))
    assert.same({ nil, "truncated" }, { tzif.from_data("TZif\0" .. data:sub(6, len - 1), "v1") }) -- (a byte short)
    local full = assert(tzif.load("Europe/Berlin"))
    assert.is_nil(v1.rule)
    for t = -2147483648, 2147483647, 86400 * 97 do assert.equal(full:offset(t), v1:offset(t)) end
    assert.equal(3600, v1:offset(2200000000)) -- past its last transition (2037): the last offset stays
  end)

  it("refuses damaged data, saying why", function()
    local data = helpers.read_file(ZONEINFO .. "/Europe/Berlin")
    assert.same({ nil, "not a TZif file" }, { tzif.from_data("hello", "x") })
    assert.same({ nil, "not a TZif file" }, { tzif.from_data("", "x") })
    assert.same({ nil, "truncated" }, { tzif.from_data(data:sub(1, 200), "x") })
    assert.same({ nil, "truncated" }, { tzif.from_data(data:sub(1, #data - 60), "x") })
    assert.same({ nil, "no footer" }, { tzif.from_data(data:sub(1, #data - 28), "x") })
    local footer = data:match("\n([^\n]*)\n$")
    assert.same({ nil, "bad footer 'CET-1CEST,M3.5.0'" },
      { tzif.from_data(data:sub(1, #data - #footer - 1) .. "CET-1CEST,M3.5.0\n", "x") })
  end)

  it("reads POSIX TZ strings", function()
    assert.same({ std = 3600, dst = 7200, start = { kind = "M", m = 3, w = 5, d = 0, time = 7200 },
      finish = { kind = "M", m = 10, w = 5, d = 0, time = 10800 } }, tzif.parse_posix("CET-1CEST,M3.5.0,M10.5.0/3"))
    local lh = tzif.parse_posix("<+1030>-10:30<+11>-11,M10.1.0,M4.1.0")
    assert.same({ 37800, 39600 }, { lh.std, lh.dst })
    assert.same({ std = 19800 }, tzif.parse_posix("IST-5:30"))
    assert.same({ std = -10800 }, tzif.parse_posix("<-03>3"))
    assert.same({ std = 0 }, tzif.parse_posix("GMT0"))
    local nuuk = tzif.parse_posix("<-02>2<-01>,M3.5.0/-1,M10.5.0/0")
    assert.same({ -7200, -3600, -3600, 0 }, { nuuk.std, nuuk.dst, nuuk.start.time, nuuk.finish.time })
    assert.same({ kind = "J", n = 365, time = 90000 }, tzif.parse_posix("EST5EDT,0/0,J365/25").finish)
    -- DST without rules: glibc's default, the US rules (second Sunday of
    -- March to the first of November, each at 02:00 local time)
    local us = tzif.parse_posix("EST5EDT")
    assert.same({ kind = "M", m = 3, w = 2, d = 0, time = 7200 }, us.start)
    assert.same({ kind = "M", m = 11, w = 1, d = 0, time = 7200 }, us.finish)
    for _, bad in ipairs({ "", "X1", "CET", "CE-1", "CET-1CEST,M3.5.0", "CET-1CEST,M13.1.0,M10.5.0",
                           "CET-1CEST,M3.5.0,M10.5.0/3x", "CET-1CEST,M3.6.0,M10.5.0", "CET-1CEST,J0,J365",
                           "CET-1CEST,366,5", "CET-1:60", "CET-168", "<A>1", "CET-1CEST,", "EST5EDT4," }) do
      assert.is_nil(tzif.parse_posix(bad), bad)
    end
    -- Each field at both ends of its range, and one past it (POSIX: month
    -- 1-12, week 1-5, day 0-6, Jn 1-365, n 0-365).
    for _, edge in ipairs({ "M1.1.0,M12.5.6", "M12.1.6,M1.5.0", "M1.5.6,M12.1.0", "J1,J365", "0,365", "J365,J1" }) do
      assert.is_table(tzif.parse_posix("CET-1CEST," .. edge), edge)
    end
    for _, bad in ipairs({ "M0.1.0,M10.5.0", "M3.0.0,M10.5.0", "M3.1.7,M10.5.0", "M3.5.0,M10.6.0", "J366,J1", "0,366" }) do
      assert.is_nil(tzif.parse_posix("CET-1CEST," .. bad), bad)
    end
  end)

  it("makes transitions from M, J and n dates, with negative and past-24 h times", function()
    local function changes(s, from, to)
      local zone, out, t = assert(tzif.from_posix(s)), {}, from
      while true do
        local _, b, _, _ = zone:segment(t)
        if not b or b > to then return out end
        out[#out + 1] = string.format("%s %d", os.date("!%Y-%m-%d %H:%M", b + zone:offset(b - 1)),
          math.floor(zone:offset(b) / 60))
        t = b
      end
    end
    local y2024, y2025 = 1704067200, 1735689600
    -- local standard times of the changes, and the new offset in minutes
    assert.same({ "2024-03-31 02:00 120", "2024-10-27 03:00 60" }, changes("CET-1CEST,M3.5.0,M10.5.0/3", y2024, y2025))
    assert.same({ "2024-03-01 02:00 -120", "2024-10-27 02:00 -180" }, changes("<-03>3<-02>,J60,J300", y2024, y2025))
    assert.same({ "2024-02-29 02:00 -120", "2024-10-26 02:00 -180" }, changes("<-03>3<-02>,59,299", y2024, y2025))
    -- Nuuk: at -01:00 on the last Sunday of March (Saturday 23:00), back at 00:00 of October's
    assert.same({ "2024-03-30 23:00 -60", "2024-10-27 00:00 -120" },
      changes("<-02>2<-01>,M3.5.0/-1,M10.5.0/0", y2024, y2025))
    -- the last Sunday of December 2022 is the 25th (its week 5 would be January 1st)
    local y2022 = 1640995200
    assert.same({ "2022-03-27 02:00 120", "2022-12-25 03:00 60" }, changes("CET-1CEST,M3.5.0,M12.5.0/3", y2022, y2024 - 366 * 86400))
    -- DST all year: no change at all, the DST offset
    assert.same({}, changes("EST5EDT,0/0,J365/25", y2024, y2024 + 10 * 31556952))
    assert.equal(-4 * 3600, tzif.from_posix("EST5EDT,0/0,J365/25"):offset(y2024))
    -- DST that starts and ends at one instant (01:00 standard, 02:00 DST):
    -- none at all, as glibc reads it (in DST while start <= t < end)
    local none = assert(tzif.from_posix("<+00>0<+01>,M3.5.0/1,M3.5.0/2"))
    local mar31 = 1711846800 -- 2024-03-31 01:00 UTC, that instant
    for _, t in ipairs({ y2024, mar31 - 1, mar31, mar31 + 1, mar31 + 3600, y2025 - 1 }) do
      assert.equal(0, none:offset(t), os.date("!%Y-%m-%d %H:%M:%S", t))
    end
  end)

  -- The date arithmetic under every zone: each day from 1600 to 2401
  -- against a count kept by hand, across the ends of 400-year eras and
  -- the century years that are not leap (1700, 1800, 1900, 2100, 2200,
  -- 2300) and those that are (1600, 2000, 2400).
  it("counts days to and from dates in every day of 1600-2400", function()
    local y, m, d = 1600, 1, 1
    local z = tzif.days_from_civil(y, m, d)
    assert.equal(-135140, z)
    while y < 2401 do
      local y2, m2, d2 = tzif.civil_from_days(z)
      if y2 ~= y or m2 ~= m or d2 ~= d then
        error(string.format("day %d: %d-%d-%d, not %d-%d-%d", z, y2, m2, d2, y, m, d))
      end
      if tzif.days_from_civil(y, m, d) ~= z then error(string.format("%d-%d-%d is not day %d", y, m, d, z)) end
      z, d = z + 1, d + 1
      if d > tzif.days_in_month(y, m) then d, m = 1, m + 1 end
      if m > 12 then m, y = 1, y + 1 end
    end
    assert.is_false(tzif.is_leap(2100))
    assert.is_true(tzif.is_leap(2400))
    assert.equal(28, tzif.days_in_month(1900, 2))
  end)

  -- (every zone read is read whole and its file closed then: loading many
  -- holds no descriptor, whenever the collector runs)
  it("closes each zone file it reads", function()
    -- (in a fresh process: this one holds these zones in its cache)
    local out, ok = helpers.run_lua([[
      local tzif = require("hwtimer.tzif")
      local function fds()
        local p = io.popen("ls /proc/self/fd | wc -l") -- (ls's own: the same count each time)
        local n = tonumber(p:read("*a"))
        p:close()
        return n
      end
      collectgarbage("stop")
      local before, read = fds(), 0
      for _, name in ipairs({ "America/New_York", "America/Chicago", "America/Denver", "America/Los_Angeles",
        "Europe/London", "Europe/Paris", "Europe/Rome", "Europe/Madrid", "Asia/Tokyo", "Asia/Shanghai",
        "Australia/Sydney", "Africa/Cairo", "America/Sao_Paulo", "Pacific/Auckland", "Asia/Tehran" }) do
        if tzif.load(name) then read = read + 1 end
      end
      print(read, fds() - before)
    ]])
    assert.is_true(ok, out)
    local read, left = out:match("^(%d+)%s+(%-?%d+)")
    assert.is_true(tonumber(read) >= 10, out)
    assert.equal("0", left, left .. " descriptors left open after " .. read .. " zones")
  end)

  it("caches a zone by name: one read of the file", function()
    assert.equal(tzif.load("Asia/Kolkata"), tzif.load("Asia/Kolkata"))
    assert.equal(tzif.load("UTC"), tzif.load("UTC"))
  end)
end)

describe('tz = "local"', function()
  -- What a child process with TZ set (or unset) answers: the next three
  -- times of "30 2 * * *" from 2026-03-28 00:00 UTC, or the error.
  local function child(tz_env)
    local lua = os.getenv("HWT_LUA") or "lua5.4"
    local code = 'local c, err = require("hwtimer.cron").parse("30 2 * * *", { tz = "local" }) '
      .. 'if not c then print(err) else local t = 1774656000 for _ = 1, 3 do t = c:next(t) io.write(t, " ") end '
      .. 'print(tostring(c)) end'
    local env = tz_env and "env TZ='" .. tz_env .. "'" or "env -u TZ"
    return (helpers.shell(string.format("%s %s -e '%s' 2>&1", env, lua, code:gsub("'", "'\\''"))):gsub("%s+$", ""))
  end

  local BERLIN = "1774661400 1774746000 1774830600 hwtimer.cron (30 2 * * *, local)"
  local UTC = "1774665000 1774751400 1774837800 hwtimer.cron (30 2 * * *, local)"

  it("is the zone $TZ names, as a name, :name, a path or a POSIX string", function()
    assert.equal(BERLIN, child("Europe/Berlin"))
    assert.equal(BERLIN, child(":Europe/Berlin"))
    assert.equal(BERLIN, child(ZONEINFO .. "/Europe/Berlin"))
    assert.equal(BERLIN, child("CET-1CEST,M3.5.0,M10.5.0/3"))
    assert.equal(UTC, child(""))
    assert.equal(UTC, child("UTC"))
  end)

  it("without $TZ, /etc/localtime", function()
    local data = io.open("/etc/localtime") and helpers.read_file("/etc/localtime")
    if not data then return pending("no /etc/localtime") end
    local zone = assert(tzif.from_data(data, "localtime"))
    local c = assert(cron.parse("30 2 * * *"))
    c.zone = zone -- (the schedule in that zone, as parse({ tz = "local" }) makes it)
    local t, want = 1774656000, {}
    for i = 1, 3 do t = c:next(t) want[i] = t end
    assert.equal(table.concat(want, " ") .. " hwtimer.cron (30 2 * * *, local)", child(nil))
  end)

  it("a $TZ that names nothing: nil and a message", function()
    assert.equal("cron: TZ 'Nowhere/Land' is neither a time zone name nor a POSIX TZ string", child("Nowhere/Land"))
    assert.equal("cron: TZ '/nonexistent': no such file", child("/nonexistent"))
  end)
end)
