-- hwtimer-jobs and a Redis server that wants a password, an ACL user, TLS
-- (issue 42): --redis redis://[USER[:PASSWORD]@]HOST[:PORT][/DB] (user and
-- password percent-encoded), the password in REDISCLI_AUTH (out of `ps`)
-- for every form, rediss:// through LuaSec with the certificate checked
-- (its CA, its name), and what is refused, said without the password.
-- Real redis-servers (one with --requirepass and an ACL user, one with TLS
-- too, its certificates made by openssl here), stopped by their pids.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local durable = require("hwtimer.durable")

local C = require("spec.tools.cli")
local sq, TMP, run_with, jobs, json_of, usage_error = C.sq, C.TMP, C.run_with, C.jobs, C.json_of, C.usage_error

local N, redis = helpers.redis_kit()
local have_ssl = pcall(require, "ssl")
local have_openssl = helpers.sh("command -v openssl >/dev/null 2>&1")

local FORMS = "HOST:PORT[/DB], unix:PATH[?db=DB] or redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/DB] expected"
local PASSWORD, ALICE = "s3cret", "a p@ss:w/rd%"
local ALICE_URL = "a%20p%40ss%3Aw%2Frd%25" -- (ALICE percent-encoded)

-- hwtimer-jobs with REDISCLI_AUTH set to `password` (nil: unset)
local function jobs_env(password, args)
  return run_with(password and "REDISCLI_AUTH=" .. sq(password) or "env -u REDISCLI_AUTH", C.COMMAND, args)
end

describe("hwtimer-jobs with a Redis server that wants a password", function()
  if helpers.without_redis(it, pending) then return end
  teardown(function() os.execute("rm -rf " .. sq(TMP)) end)

  it("refuses a --redis URL it cannot read, its password shown as ***, before any server is asked", function()
    local cases = {
      { "redis://:%zz@h:1", "redis://:***@h:1" }, { "redis://u:p%4@h:1", "redis://u:***@h:1" },
      { "redis://%g0@h", "redis://%g0@h" }, { "redis://h:0", "redis://h:0" },
      { "rediss://h:70000", "rediss://h:70000" },
      { "redis://", "redis://" }, { "redis://h:1/x", "redis://h:1/x" }, { "redis://[::1:1", "redis://[::1:1" },
      { "redis:h:1", "redis:h:1" }, { "redis://h:1/2/3", "redis://h:1/2/3" },
    }
    for _, c in ipairs(cases) do
      assert.same({ "", usage_error("bad --redis '" .. c[2] .. "': " .. FORMS), 2 },
        { jobs({ "--redis", c[1], "counts" }) }, c[1])
    end
    assert.same({ "", usage_error("--cacert is for --redis rediss://... only"), 2 },
      { jobs({ "--redis", "redis://h:1", "--cacert", "/x", "counts" }) })
    assert.same({ "", usage_error("--cacert is for --redis rediss://... only"), 2 },
      { jobs({ "--path", "/x", "--cacert", "/x", "counts" }) })
  end)

  it("says which package to install where redis-lua cannot be found, and leaves package.path as it was", function()
    local cli_redis = require("hwtimer.jobs_cli_redis")
    local real, path = _G.require, package.path
    _G.require = function(name) -- (a machine without redis-lua)
      if name == "redis" then error("module 'redis' not found", 2) end
      return real(name)
    end
    local ok, client, err = pcall(cli_redis.client, { redis = "redis://127.0.0.1:1" })
    _G.require = real
    assert.is_true(ok, tostring(client))
    assert.is_nil(client)
    assert.equal("--redis needs redis-lua (Debian: apt-get install lua-redis; luarocks install redis-lua)", err)
    assert.equal(path, package.path)
  end)

  describe("(a password, an ACL user)", function()
    local server, where
    setup(function()
      server = N.start_redis("--requirepass " .. PASSWORD .. " --user alice on " .. sq(">" .. ALICE)
        .. " '~*' '&*' '+@all'")
      where = "127.0.0.1:" .. server.port
      -- a store in database 2, made by a client that authenticated
      local c = redis.connect("127.0.0.1", server.port)
      c:auth(PASSWORD)
      c:select(2)
      local timer = hwtimer.new()
      local q = assert(durable.open(timer, { redis = c, prefix = "auth", on_error = function() end }))
      assert(q:schedule("mail", 3600, "to:ann", { id = "m1" }))
      q:close()
      timer:close()
    end)
    teardown(function() server.stop() end)

    local function shows_m1(what, out, err, status)
      assert.same({ "", 0 }, { err, status }, what)
      assert.equal("to:ann", json_of(out).payload, what)
    end

    it("reaches the store with the password in the URL, or in REDISCLI_AUTH for every form", function()
      local args = { "--prefix", "auth", "--json", "show", "m1" }
      local function with(address) return { "--redis", address, args[1], args[2], args[3], args[4], args[5] } end
      shows_m1("the URL's password", jobs_env(nil, with("redis://:" .. PASSWORD .. "@" .. where .. "/2")))
      shows_m1("default:", jobs_env(nil, with("redis://default:" .. PASSWORD .. "@" .. where .. "/2")))
      shows_m1("alice, encoded", jobs_env(nil, with("redis://alice:" .. ALICE_URL .. "@" .. where .. "/2")))
      shows_m1("alice, REDISCLI_AUTH", jobs_env(ALICE, with("redis://alice@" .. where .. "/2")))
      shows_m1("the URL's first", jobs_env("wrong", with("redis://:" .. PASSWORD .. "@" .. where .. "/2")))
      for _, address in ipairs({ where .. "/2", "redis://" .. where .. "/2", "unix:" .. server.socket .. "?db=2" }) do
        shows_m1("REDISCLI_AUTH for " .. address, jobs_env(PASSWORD, with(address)))
      end
    end)

    it("says NOAUTH without a password, WRONGPASS with a wrong one, and never shows the password", function()
      local hint = " (the password: redis://[USER]:PASSWORD@HOST:PORT, or in REDISCLI_AUTH)"
      assert.same({ "", "hwtimer-jobs: Redis at " .. where .. "/0: NOAUTH Authentication required." .. hint .. "\n",
        1 }, { jobs_env(nil, { "--redis", where, "counts" }) })
      assert.same({ "", "hwtimer-jobs: Redis at redis://" .. where .. "/2: NOAUTH Authentication required." .. hint
        .. "\n", 1 }, { jobs_env("", { "--redis", "redis://" .. where .. "/2", "counts" }) })
      local wrongpass = "WRONGPASS invalid username-password pair or user is disabled.\n"
      assert.same({ "", "hwtimer-jobs: Redis at redis://" .. where .. "/2: " .. wrongpass, 1 },
        { jobs_env(nil, { "--redis", "redis://:Hunter2@" .. where .. "/2", "counts" }) })
      assert.same({ "", "hwtimer-jobs: Redis at redis://alice@" .. where .. "/0: " .. wrongpass, 1 },
        { jobs_env("Hunter2", { "--redis", "redis://alice@" .. where, "counts" }) })
      assert.same({ "", "hwtimer-jobs: Redis at unix:" .. server.socket .. "?db=0: " .. wrongpass, 1 },
        { jobs_env("Hunter2", { "--redis", "unix:" .. server.socket, "counts" }) })
    end)
  end)

  describe("(TLS)", function()
    if not have_ssl or not have_openssl then
      it("needs LuaSec and openssl", function()
        pending((have_ssl and "openssl" or "LuaSec") .. " missing for this Lua: apt-get install lua-sec openssl; "
          .. "rediss:// says it needs LuaSec")
      end)
      return
    end
    local server, tls_port, certs
    setup(function()
      certs = TMP .. "/certs"
      -- a CA; the server's certificate for the name localhost alone (not
      -- 127.0.0.1); another CA that signed nothing here
      assert(helpers.sh("mkdir -p " .. sq(certs) .. " && cd " .. sq(certs) .. " && (" .. table.concat({
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj '/CN=hwt test CA'",
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 -subj '/CN=other CA'",
        "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj '/CN=localhost'",
        "printf 'subjectAltName=DNS:localhost\\n' >ext",
        "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile ext",
      }, " && ") .. ") >/dev/null 2>&1"))
      tls_port = N.free_port()
      server = N.start_redis(string.format("--tls-port %d --tls-cert-file %s --tls-key-file %s --tls-ca-cert-file %s "
        .. "--tls-auth-clients no --requirepass %s", tls_port, sq(certs .. "/srv.crt"), sq(certs .. "/srv.key"),
        sq(certs .. "/ca.crt"), PASSWORD))
      local c = redis.connect("127.0.0.1", server.port) -- (the plain port, for the store)
      c:auth(PASSWORD)
      local timer = hwtimer.new()
      local q = assert(durable.open(timer, { redis = c, prefix = "tls", on_error = function() end }))
      assert(q:schedule("mail", 3600, "over tls", { id = "t1" }))
      q:close()
      timer:close()
    end)
    teardown(function() if server then server.stop() end end)

    it("reaches the store over TLS, the certificate checked against --cacert and the name", function()
      -- (the certificate names localhost: a root without /etc/hosts, as a
      -- bare debootstrap is, cannot resolve it)
      if not require("socket").dns.toip("localhost") then
        return pending("the name localhost does not resolve on this machine (no /etc/hosts entry)")
      end
      local url = "rediss://localhost:" .. tls_port
      local out, err, status = jobs_env(PASSWORD, { "--redis", url, "--cacert", certs .. "/ca.crt", "--prefix", "tls",
        "--json", "show", "t1" })
      assert.same({ "", 0 }, { err, status })
      assert.equal("over tls", json_of(out).payload)
      out, err, status = jobs_env(nil, { "--redis", "rediss://:" .. PASSWORD .. "@localhost:" .. tls_port,
        "--cacert=" .. certs .. "/ca.crt", "--prefix", "tls", "counts" })
      assert.same({ "", 0 }, { err, status })
      assert.matches("^KIND%s+PENDING", out)
      -- a CA that did not sign it, the system's CAs
      local refused = {
        { { "--redis", url, "--cacert", certs .. "/other.crt" }, "cannot connect to Redis at rediss://localhost:"
          .. tls_port .. "/0: TLS: certificate verify failed" },
        { { "--redis", url }, "cannot connect to Redis at rediss://localhost:" .. tls_port
          .. "/0: TLS: certificate verify failed" },
      }
      for _, r in ipairs(refused) do
        local args = r[1]
        args[#args + 1] = "counts"
        out, err, status = jobs_env(PASSWORD, args)
        assert.same({ "", 1 }, { out, status }, table.concat(args, " "))
        local want = "hwtimer-jobs: " .. r[2]
        assert.equal(want, err:sub(1, #want))
        assert.matches("^[^\n]*\n$", err)
      end
    end)

    -- (by address: this case needs no name to resolve)
    it("refuses a TLS server whose certificate does not name the host, and plain text to its TLS port", function()
      local out, err, status = jobs_env(PASSWORD, { "--redis", "rediss://127.0.0.1:" .. tls_port,
        "--cacert", certs .. "/ca.crt", "counts" })
      assert.same({ "", 1 }, { out, status })
      local want = "hwtimer-jobs: cannot connect to Redis at rediss://127.0.0.1:" .. tls_port ..
        "/0: TLS: the server's certificate does not name 127.0.0.1"
      assert.equal(want, err:sub(1, #want))
      assert.matches("^[^\n]*\n$", err)
      -- plain text to the TLS port: refused, not hung
      out, err, status = jobs_env(PASSWORD, { "--redis", "redis://127.0.0.1:" .. tls_port, "counts" })
      assert.same({ "", 1 }, { out, status })
      assert.matches("^hwtimer%-jobs: Redis at redis://127.0.0.1:" .. tls_port .. "/0: ", err)
    end)
  end)

  -- hwtimer-jobs with `args` against a TLS server at host:port (certs' CA),
  -- every name under example.test taken to 127.0.0.1 by LUA_INIT
  local function jobs_by_name(host, port, certs, prefix, args)
    local init = "local m = getmetatable(require('socket').tcp()).__index; local connect = m.connect; "
      .. "m.connect = function(s, h, ...) if tostring(h):lower():match('%.example%.test$') then h = '127.0.0.1' end "
      .. "return connect(s, h, ...) end"
    local all = { "--redis", "rediss://" .. host .. ":" .. port, "--cacert", certs .. "/ca.crt", "--prefix", prefix }
    for _, a in ipairs(args) do all[#all + 1] = a end
    return run_with("env -u REDISCLI_AUTH LUA_INIT=" .. sq(init), C.COMMAND, all)
  end

  -- A TLS redis-server (its plain port for the store) whose certificate, of
  -- a CA of its own in TMP/dir, has common name `cn` and, if `san`, that DNS
  -- subjectAltName (or `san` itself where it says its kind: "IP:127.0.0.1"); one job `id` with `payload` stored under `prefix`.
  -- Returns the server, its TLS port and the certificates' directory.
  local function tls_server(dir, cn, san, prefix, id, payload)
    local certs = TMP .. "/" .. dir
    local cmds = {
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj '/CN=hwt " .. dir .. " CA'",
      "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj '/CN=" .. cn .. "'",
      "printf '" .. (san and "subjectAltName=" .. (san:find(":", 1, true) and san or "DNS:" .. san) or "")
        .. "\\n' >ext",
      "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2"
        .. (san and " -extfile ext" or ""),
    }
    assert(helpers.sh("mkdir -p " .. sq(certs) .. " && cd " .. sq(certs) .. " && (" .. table.concat(cmds, " && ")
      .. ") >/dev/null 2>&1"))
    local tls_port = N.free_port()
    local server = N.start_redis(string.format("--tls-port %d --tls-cert-file %s --tls-key-file %s --tls-ca-cert-file %s "
      .. "--tls-auth-clients no", tls_port, sq(certs .. "/srv.crt"), sq(certs .. "/srv.key"), sq(certs .. "/ca.crt")))
    local timer = hwtimer.new()
    local q = assert(durable.open(timer, { redis = redis.connect("127.0.0.1", server.port), prefix = prefix,
      on_error = function() end }))
    assert(q:schedule("mail", 3600, payload, { id = id }))
    q:close()
    timer:close()
    return server, tls_port, certs
  end

  -- describe(title) around a TLS server made by tls_server(unpack(args))
  -- (pending without LuaSec or openssl); body(t) declares its tests, which
  -- read the server's t.port and t.certs once setup has run.
  local function tls_describe(title, args, body)
    describe(title, function()
      if not have_ssl or not have_openssl then
        it("needs LuaSec and openssl", function() pending("LuaSec or openssl missing for this Lua") end)
        return
      end
      local t = {}
      setup(function() t.server, t.port, t.certs = tls_server(helpers.unpack(args, 1, 6)) end)
      teardown(function() if t.server then t.server.stop() end end)
      body(t)
    end)
  end

  -- The CLI asked for other.hwt.example.test, which the server's certificate
  -- does not name: refused, saying so.
  local function refuses_other(t, prefix)
    local out, err, status = jobs_by_name("other.hwt.example.test", t.port, t.certs, prefix, { "counts" })
    assert.same({ "", 1 }, { out, status })
    local want = "hwtimer-jobs: cannot connect to Redis at rediss://other.hwt.example.test:" .. t.port ..
      "/0: TLS: the server's certificate does not name other.hwt.example.test"
    assert.equal(want, err:sub(1, #want))
  end

  -- A certificate with no subjectAltName: its common name is the name
  -- checked (as OpenSSL's X509_check_host does).
  tls_describe("(TLS, a certificate named by its common name alone)",
    { "cn-certs", "cn.hwt.example.test", nil, "cn", "c1", "by its common name" }, function(t)
    it("reaches the host its common name names, and refuses another", function()
      local out, err, status = jobs_by_name("cn.hwt.example.test", t.port, t.certs, "cn", { "--json", "show", "c1" })
      assert.same({ "", 0 }, { err, status })
      assert.equal("by its common name", json_of(out).payload)
      refuses_other(t, "cn")
    end)
  end)

  -- A certificate for an address: its subjectAltName holds 127.0.0.1 and
  -- no name, so a name is checked against its common name.
  tls_describe("(TLS, a certificate for 127.0.0.1 by its address)",
    { "ip-certs", "named.hwt.example.test", "IP:127.0.0.1", "ip", "i1", "by its address" }, function(t)
    it("reaches the address it names, and by name only the name its common name gives", function()
      local url = "rediss://127.0.0.1:" .. t.port
      local out, err, status = jobs_env(nil, { "--redis", url, "--cacert", t.certs .. "/ca.crt", "--prefix", "ip",
        "--json", "show", "i1" })
      assert.same({ "", 0 }, { err, status })
      assert.equal("by its address", json_of(out).payload)
      out, err, status = jobs_by_name("named.hwt.example.test", t.port, t.certs, "ip", { "--json", "show", "i1" })
      assert.same({ "", 0 }, { err, status })
      assert.equal("by its address", json_of(out).payload)
      refuses_other(t, "ip")
    end)
  end)

  -- A certificate whose one name is a wildcard, *.hwt.example.test: it
  -- covers one label before .hwt.example.test, not 127.0.0.1 nor localhost
  -- (names of no such suffix). No name under it resolves here: jobs_by_name takes them
  -- to 127.0.0.1 (the name checked is still the one asked).
  tls_describe("(TLS, a certificate for a wildcard name alone)",
    { "wildcard-certs", "*.hwt.example.test", "*.hwt.example.test", "wild", "w1", "under a wildcard" }, function(t)
    it("refuses the hosts a wildcard certificate does not cover", function()
      local hosts = { "127.0.0.1" }
      if require("socket").dns.toip("localhost") then hosts[2] = "localhost" end
      for _, host in ipairs(hosts) do
        local url = "rediss://" .. host .. ":" .. t.port
        local out, err, status = jobs_env(nil, { "--redis", url, "--cacert", t.certs .. "/ca.crt", "counts" })
        assert.same({ "", 1 }, { out, status }, url)
        local want = "hwtimer-jobs: cannot connect to Redis at " .. url ..
          "/0: TLS: the server's certificate does not name " .. host
        assert.equal(want, err:sub(1, #want))
        assert.matches("^[^\n]*\n$", err)
      end
    end)

    it("reaches a host the wildcard covers, and refuses its parent and a name two labels under", function()
      local function jobs_at(host, args) return jobs_by_name(host, t.port, t.certs, "wild", args) end
      local out, err, status = jobs_at("a.hwt.example.test", { "--json", "show", "w1" })
      assert.same({ "", 0 }, { err, status })
      assert.equal("under a wildcard", json_of(out).payload)
      out, err, status = jobs_at("A-2.HWT.Example.Test", { "--json", "show", "w1" }) -- (names have no case)
      assert.same({ "", 0 }, { err, status })
      assert.equal("under a wildcard", json_of(out).payload)
      for _, host in ipairs({ "hwt.example.test", "b.a.hwt.example.test", "a.other.example.test" }) do
        out, err, status = jobs_at(host, { "counts" })
        assert.same({ "", 1 }, { out, status }, host)
        local want = "hwtimer-jobs: cannot connect to Redis at rediss://" .. host .. ":" .. t.port ..
          "/0: TLS: the server's certificate does not name " .. host
        assert.equal(want, err:sub(1, #want))
      end
    end)
  end)
end)
