-- hwtimer-jobs and bytes it did not make (issue 42): what the operator's
-- terminal gets from it (errors that echo the words given, ids, kinds,
-- payloads, errors, cursors) holds no control character, C0, DEL or C1
-- (raw 0x80-0x9F or UTF-8 U+0080-U+009F), and no byte that is not UTF-8;
-- --json loses no byte (a string that is not UTF-8 has a *_base64 sibling,
-- a kind that is not under kinds_base64) and a cursor, text or JSON, given
-- back resumes right after the last row. Against SQLite and Redis; and
-- --path naming what is not a regular file (a FIFO, a directory, a device,
-- a socket) is refused at once.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local durable = require("hwtimer.durable")

local C = require("spec.tools.cli")
local sq, TMP, NULL = C.sq, C.TMP, C.NULL
local run_with, jobs, words, json_of, lines, usage_error = C.run_with, C.jobs, C.words, C.json_of, C.lines,
  C.usage_error

local have_sqlite = helpers.optional("hwtimer.sqlite") ~= nil
local N, redis = helpers.redis_kit()

-- Whether s is valid UTF-8 (RFC 3629), written here apart from the tool's.
local function utf8_ok(s)
  local i = 1
  while i <= #s do
    local c = s:byte(i)
    local lo, hi, n = 0x80, 0xBF
    if c < 0x80 then n = 0
    elseif c >= 0xC2 and c <= 0xDF then n = 1
    elseif c >= 0xE0 and c <= 0xEF then n, lo, hi = 2, c == 0xE0 and 0xA0 or 0x80, c == 0xED and 0x9F or 0xBF
    elseif c >= 0xF0 and c <= 0xF4 then n, lo, hi = 3, c == 0xF0 and 0x90 or 0x80, c == 0xF4 and 0x8F or 0xBF
    else return false end
    for k = 1, n do
      local b = s:byte(i + k)
      if not b or b < (k == 1 and lo or 0x80) or b > (k == 1 and hi or 0xBF) then return false end
    end
    i = i + n + 1
  end
  return true
end

-- s with every byte but printable ASCII and "\n" as \xHH (a failure's
-- message must not be what it reports)
local function shown(s)
  return (s:gsub("[^ -~\n]", function(c) return string.format("\\x%02X", c:byte()) end))
end

-- What a terminal may be given: UTF-8 with no control character but "\n".
local function assert_safe(s, what)
  what = shown(what) .. ": " .. shown(s)
  assert.is_true(utf8_ok(s), "not UTF-8: " .. what)
  assert.is_nil(s:find("[%z\1-\9\11-\31\127]"), "a C0 control or DEL: " .. what)
  assert.is_nil(s:find("\194[\128-\159]"), "a C1 control: " .. what)
end

-- Escape sequences and bytes of every sort a terminal may obey or choke on.
local HOSTILE = {
  "\27[31mred",            -- ESC [: CSI, 7-bit
  "\155" .. "2J",          -- CSI as the raw C1 byte 0x9B
  "\194\155" .. "2J",      -- CSI as UTF-8 U+009B
  "\194\157" .. "0;t\7",   -- OSC (set the title) as UTF-8 U+009D, ended by BEL
  "\157" .. "8;;x\156",    -- OSC 8 (a hyperlink) raw, ended by a raw ST
  "\255\254",              -- never UTF-8
  "\237\160\128",          -- a surrogate
  "\192\175",              -- an overlong "/"
  "d\127\8\r",             -- DEL, backspace, carriage return
}

describe("hwtimer-jobs and hostile bytes", function()
  teardown(function() os.execute("rm -rf " .. sq(TMP)) end)

  it("escapes an unknown option as it echoes it: C0, DEL, C1 (raw and UTF-8), bytes not UTF-8", function()
    local P = { "--path", TMP .. "/never.db" }
    local cases = {
      { words(P, "--\27]0;pwned\7", "ls"), "unknown option --\\x1B]0;pwned\\x07" },
      { words(P, "show", "-\155" .. "2J"), "unknown option -\\x9B2J" },
      { words(P, "show", "-\194\155" .. "2J"), "unknown option -\\xC2\\x9B2J" },
      { words(P, "--\255=1", "ls"), "unknown option --\\xFF=1" },
      { words(P, "ls", "--kind\127", "x"), "unknown option --kind\\x7F" },
      { words(P, "-\r\27[2K", "counts"), "unknown option -\\r\\x1B[2K" },
      { words(P, "--\194\157" .. "8;;http://x\194\156", "ls"), "unknown option --\\xC2\\x9D8;;http://x\\xC2\\x9C" },
      { words(P, "ls", "--after", "1/\155x"), nil }, -- a good cursor: no usage error (the store is missing)
      { words(P, "\194\155" .. "2J"), "unknown command '\\xC2\\x9B2J'" },
      { words(P, "ls", "--state", "\237\160\128"), "bad --state '\\xED\\xA0\\x80': pending, leased or dead expected" },
      { words(P, "ls", "--after", "base64:\27"), "bad --after 'base64:\\x1B': a cursor that ls printed expected" },
    }
    for _, c in ipairs(cases) do
      local out, err, status = jobs(c[1])
      assert_safe(err, table.concat(c[1], " "))
      if c[2] then assert.same({ "", usage_error(c[2]), 2 }, { out, err, status }) end
    end
    -- what the tool says of a store it cannot reach names it escaped too
    local out, err, status = jobs({ "--redis", "\27[8m\155h:1", "counts" })
    assert.same({ "", 1 }, { out, status })
    assert_safe(err, "--redis")
    assert.truthy(err:find("\\x1B[8m\\x9Bh:1", 1, true), err)
    if have_sqlite then -- (a file name in the store's refusal)
      out, err, status = jobs({ "--path", TMP .. "/\194\155" .. "2J\255.db", "counts" })
      assert.same({ "", "hwtimer-jobs: " .. TMP .. "/\\xC2\\x9B2J\\xFF.db: No such file or directory (hwtimer-jobs "
        .. "opens a store, never makes one)\n", 1 }, { out, err, status })
    end
  end)

  local function contract(env)
    local S = C.store_queues(env, before_each, after_each)
    local open = S.open

    local function cli(...) return jobs(words(env.args(), ...)) end

    it("writes every id, kind, payload, error and cursor escaped in text, whatever command shows it", function()
      local q = open({ attempts = 1 })
      local bad = HOSTILE[1] .. HOSTILE[2]
      q:handle("k" .. HOSTILE[3], function() error("boom " .. bad, 0) end)
      for i, h in ipairs(HOSTILE) do
        assert(q:schedule("k" .. h, 100 + i, "p" .. h, { id = "i" .. h }))
      end
      assert(q:schedule("k" .. HOSTILE[3], -1, "x", { id = "dead" .. HOSTILE[5] }))
      assert(q:every("k" .. HOSTILE[4], 60, "s" .. HOSTILE[6], { id = "every" .. HOSTILE[2] }))
      assert.truthy(helpers.wait_until(S.timer(), function()
        local job = q:get("dead" .. HOSTILE[5])
        return job and job.dead
      end, 5))
      q:handle("k" .. HOSTILE[3], nil)
      local runs = { { "counts" }, { "ls" }, { "ls", "--state", "dead" }, { "schedules" },
                     { "ls", "--kind", "k" .. HOSTILE[4] }, { "ls", "--kind", "none" .. HOSTILE[7] },
                     { "show", "dead" .. HOSTILE[5] }, { "show", "every" .. HOSTILE[2] },
                     { "show", "missing" .. HOSTILE[3] }, { "cancel", "missing" .. HOSTILE[2] },
                     { "retry", "i" .. HOSTILE[1] }, { "retry", "dead" .. HOSTILE[5] } }
      for _, h in ipairs(HOSTILE) do
        runs[#runs + 1] = { "show", "i" .. h }
        runs[#runs + 1] = { "run", "i" .. h }
      end
      runs[#runs + 1] = { "cancel", "i" .. HOSTILE[9] }
      for _, args in ipairs(runs) do
        local out, err = cli(args)
        assert_safe(out, "stdout of " .. table.concat(args, " "))
        assert_safe(err, "stderr of " .. table.concat(args, " "))
      end
      -- the escapes as show writes them
      local l = lines(cli("show", "i" .. HOSTILE[3]))
      assert.same({ "id       i\\xC2\\x9B2J", "kind     k\\xC2\\x9B2J", 'payload  "p\\xC2\\x9B2J"' },
        { l[1], l[2], l[7] })
      assert.same({ "", "hwtimer-jobs: no job missing\\xC2\\x9B2J\n", 1 }, { cli("show", "missing" .. HOSTILE[3]) })
      -- each page's cursor, as text: read back by bash, it goes on from there
      local seen, args = {}, { "ls", "--limit", "1" }
      for _ = 1, 20 do
        local out, err, status = cli(args)
        assert.same({ "", 0 }, { err, status })
        assert_safe(out, table.concat(args, " "))
        local word = out:match("\nnext page: %-%-after ([^\n]*)\n$")
        seen[#seen + 1] = json_of(cli(words("--json", args))).jobs[1]
        if not word then break end
        local script = TMP .. "/cursor.sh"
        local f = assert(io.open(script, "wb"))
        f:write("printf %s ", word, "\n")
        f:close()
        local p = assert(io.popen("bash " .. sq(script)))
        args = { "ls", "--limit", "1", "--after", p:read("*a") }
        p:close()
      end
      assert.equal(#HOSTILE + 1, #seen) -- every pending job once (the schedule among them)
    end)

    it("--json: ids, kinds, payloads, errors and cursors that are not UTF-8 come back whole (*_base64)", function()
      local q = open({ attempts = 1 })
      q:handle("k\255", function() error("down \254\27", 0) end)
      assert(q:schedule("k\255", 100, "a", { id = "x\255" }))
      assert(q:schedule("k\254", 101, "b\200", { id = "x\254" }))
      assert(q:schedule("k\254", 102, nil, { id = "n\0a" }))
      assert(q:schedule("c1", 103, "\194\155", { id = "\194\155c" }))
      assert(q:schedule("k\255", 104, nil, { id = "n\0b" }))
      assert(q:schedule("k\255", -1, nil, { id = "gone\255" }))
      assert.truthy(helpers.wait_until(S.timer(), function() return q:get("gone\255").dead end, 5))
      q:handle("k\255", nil)
      -- an id, read from a document: its bytes
      local function id_of(j)
        if j.id_base64 then return C.unbase64(j.id_base64) end
        return j.id
      end
      -- the pages, a job each: every job once, in due order
      local seen, args = {}, { "--json", "ls", "--limit", "1" }
      for _ = 1, 10 do
        local out, err, status = cli(args)
        assert.same({ "", 0 }, { err, status })
        assert_safe(out, table.concat(args, " "))
        local doc = json_of(out)
        seen[#seen + 1] = id_of(doc.jobs[1])
        if doc.next == NULL then break end
        assert.is_true(utf8_ok(doc.next) and not doc.next:find("%z"))
        args = { "--json", "ls", "--limit", "1", "--after", doc.next }
      end
      assert.same({ "x\255", "x\254", "n\0a", "\194\155c", "n\0b" }, seen)
      local doc = json_of(cli("--json", "ls", "--limit", "5"))
      assert.same({ id = "x\239\191\189", id_base64 = "eP8=", kind = "k\239\191\189", kind_base64 = "a/8=",
                    payload = "a" }, { id = doc.jobs[1].id, id_base64 = doc.jobs[1].id_base64, kind = doc.jobs[1].kind,
                    kind_base64 = doc.jobs[1].kind_base64, payload = doc.jobs[1].payload })
      assert.same({ "eP4=", "Ysg=" }, { doc.jobs[2].id_base64, doc.jobs[2].payload_base64 })
      assert.same({ "n\0a", "a/4=" }, { doc.jobs[3].id, doc.jobs[3].kind_base64 }) -- (UTF-8: \u0000, no base64)
      assert.is_nil(doc.jobs[3].id_base64)
      assert.same({ "\194\155c", "\194\155" }, { doc.jobs[4].id, doc.jobs[4].payload })
      assert.is_nil(doc.jobs[4].id_base64)
      -- two kinds that differ in bytes that are not UTF-8 stay two
      local c = json_of(cli("--json", "counts"))
      assert.same({ c1 = { pending = 1, due = 0, leased = 0, dead = 0 } }, c.kinds)
      assert.same({ ["a/8="] = { pending = 2, due = 0, leased = 0, dead = 1 },
                    ["a/4="] = { pending = 2, due = 0, leased = 0, dead = 0 } }, c.kinds_base64)
      assert.same({ 5, 1 }, { c.pending, c.dead })
      -- a dead job's error, a repair's id
      local dead = json_of(cli("--json", "show", "gone\255"))
      assert.same({ "down \239\191\189\27", "ZG93biD+Gw==", "Z29uZf8=" },
        { dead.error, dead.error_base64, dead.id_base64 })
      assert.same({ command = "run", id = "x\239\191\189", id_base64 = "eP8=", ok = true },
        json_of(cli("--json", "run", "x\255")))
      -- a cursor that holds a NUL: as text too, in base64 (no argument holds a NUL)
      local text = cli("ls", "--limit", "3")
      local word = text:match("\nnext page: %-%-after ([^\n]*)\n$")
      assert.equal("base64:" .. C.base64(string.format("%.17g", q:get("n\0a").due) .. "/n\0a"),
        word)
      assert.equal("\194\155c", id_of(json_of(cli("--json", "ls", "--limit", "1", "--after", word)).jobs[1]))
    end)
  end

  describe("with an SQLite store", function()
    if not have_sqlite then
      it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
      return
    end
    contract(C.sqlite_env())

    it("refuses at once a --path that is not a regular file: a FIFO, a directory, a device, a socket", function()
      local fifo, dir, sock, link = TMP .. "/fifo", TMP .. "/dir.db", TMP .. "/sock", TMP .. "/link.db"
      assert(helpers.sh("mkfifo " .. sq(fifo) .. " && mkdir -p " .. sq(dir) .. " && ln -sf " .. sq(fifo) .. " "
        .. sq(link)))
      assert(helpers.sh("python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' " .. sq(sock)))
      local cases = { { fifo, "a FIFO" }, { link, "a FIFO" }, { dir, "a directory" }, { sock, "a socket" } }
      if io.open("/dev/null") then cases[#cases + 1] = { "/dev/null", "a character device" } end
      for _, c in ipairs(cases) do
        for _, args in ipairs({ { "--path", c[1], "counts" }, { "--json", "--path=" .. c[1], "ls" } }) do
          local started = os.time()
          -- (timeout: a hang is a failure, not a spec that never ends)
          local out, err, status = run_with("timeout 20", C.COMMAND, args)
          assert.same({ "", "hwtimer-jobs: " .. c[1] .. ": not a regular file (" .. c[2] .. ")\n", 1 },
            { out, err, status }, c[1])
          assert.is_true(os.time() - started < 10)
        end
      end
      -- durable.open of this process: the same (it makes no store there either)
      local t = hwtimer.new()
      for _, c in ipairs(cases) do
        for _, existing in ipairs({ false, true }) do
          assert.same({ nil, "hwtimer.durable: " .. c[1] .. ": not a regular file (" .. c[2] .. ")" },
            { durable.open(t, { path = c[1], existing = existing }) })
        end
      end
      -- a store that is missing is not made where it must exist; one behind a symbolic link opens
      local missing = TMP .. "/missing.db"
      assert.same({ nil, "hwtimer.durable: " .. missing .. ": No such file or directory" },
        { durable.open(t, { path = missing, existing = true }) })
      assert.is_nil(io.open(missing))
      local q = assert(durable.open(t, { path = TMP .. "/real.db" }))
      assert(q:schedule("k", 60, nil, { id = "j" }))
      q:close()
      assert(helpers.sh("ln -sf " .. sq(TMP .. "/real.db") .. " " .. sq(TMP .. "/alias.db")))
      assert.same({ "id       j", "", 0 }, { lines((jobs({ "--path", TMP .. "/alias.db", "show", "j" })))[1],
        select(2, jobs({ "--path", TMP .. "/alias.db", "show", "j" })) })
      t:close()
    end)
  end)

  describe("with a Redis store", function()
    if helpers.without_redis(it, pending) then return end
    local server, n, prefix = nil, 0, nil
    setup(function() server = N.start_redis() end)
    teardown(function() server.stop() end)
    contract({
      fresh = function()
        n = n + 1
        prefix = "bytes" .. n
      end,
      options = function()
        return { redis = function() return redis.connect("127.0.0.1", server.port) end, prefix = prefix }
      end,
      args = function() return { "--redis", "127.0.0.1:" .. server.port, "--prefix", prefix } end,
    })
  end)
end)

-- How the CLI writes times (hwtimer.jobs_cli_text), at instants no run can
-- pin: a store's clock moves on while the CLI reads it.
describe("hwtimer-jobs' times", function()
  local T = require("hwtimer.jobs_cli_text")

  it("tells how far a time is from now to the nearest second, half a second up", function()
    local now = 1000
    assert.same({ "now", "now", "in 1s", "1s ago", "now", "5s ago", "4s ago", "in 1m", "in 1h", "in 1h1m", "3m20s ago" },
      { T.relative(now + 0.4, now), T.relative(now, now), T.relative(now + 0.5, now), T.relative(now - 0.6, now),
        T.relative(now - 0.5, now), T.relative(now - 5.2, now), T.relative(now - 3.6, now), T.relative(now + 59.7, now),
        T.relative(now + 3600.2, now), T.relative(now + 3659.5, now), T.relative(now - 200, now) })
  end)

  it("writes a span in one or two units, and a due time as UTC ISO-8601 with milliseconds", function()
    assert.same({ "45s", "0.25s", "5m", "1h30m", "2d4h", "1d", "59m59s" },
      { T.span(45), T.span(0.25), T.span(300), T.span(5400), T.span(187200), T.span(86400 + 59), T.span(3599) })
    assert.equal("2001-09-09T01:46:40.250Z", T.iso(1e9 + 0.25))
    assert.equal("1970-01-01T00:00:00.000Z", T.iso(0))
  end)
end)

-- The CLI's JSON writer itself (hwtimer.jobs_cli_text), on values no store
-- gives: what --json output is made of, and what it refuses.
describe("hwtimer-jobs' JSON encoder", function()
  local json = require("hwtimer.jobs_cli_text").json

  it("writes objects with their keys sorted, marked arrays, null, and numbers that read back the same", function()
    assert.equal('{"a":[1,2.5,null],"b":{},"c":true,"d":null,"e":0.1}',
      json.encode({ e = 0.1, c = true, b = {}, a = json.array({ 1, 2.5, json.null }), d = json.null }))
    assert.equal("[null,null,null]", json.encode(json.array({ 0 / 0, math.huge, -math.huge })))
    assert.equal("[]", json.encode(json.array({})))
    assert.equal("0.30000000000000004", json.encode(0.1 + 0.2))
  end)

  it("refuses a value JSON has no form for, naming its type", function()
    for _, v in ipairs({ print, coroutine.create(function() end) }) do
      assert.has_error(function() json.encode({ x = v }) end,
        "hwtimer-jobs: cannot encode a " .. type(v) .. " as JSON")
    end
  end)
end)
