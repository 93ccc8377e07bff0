--- hwtimer.jobs_cli_redis: how hwtimer-jobs reaches a Redis store: the
-- forms of --redis (HOST:PORT[/DB], unix:PATH[?db=DB],
-- redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/DB]), the password (in the URL
-- or, kept out of `ps`, in REDISCLI_AUTH as redis-cli takes it), TLS
-- (rediss://, through LuaSec: the server's certificate checked against the
-- CAs and its name against the host), and a Redis Cluster's MOVED.
-- hwtimer.jobs_cli's alone; no API of its own.
local T = require("hwtimer.jobs_cli_text")

local M = {}

local format, printable = string.format, T.printable

-- Seconds a Redis command may take before the CLI gives up.
local TIMEOUT = 30
-- Where the password comes from when the URL has none (redis-cli's name).
M.PASSWORD_ENV = "REDISCLI_AUTH"
-- Debian's CAs (package ca-certificates), where --cacert names none.
local CA_FILE, CA_PATH = "/etc/ssl/certs/ca-certificates.crt", "/etc/ssl/certs"

M.FORMS = "HOST:PORT[/DB], unix:PATH[?db=DB] or redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/DB]"

---------------------------------------------------------------------------
-- The address
---------------------------------------------------------------------------

-- A port (1-65535) and a database (0 up, nine digits at most) from their
-- digits, or nil.
local function port_db(port, db)
  if not (port and db and port:match("^%d+$") and db:match("^%d+$")) or #port > 5 or #db > 9 then return nil end
  port, db = tonumber(port), tonumber(db)
  if port < 1 or port > 65535 then return nil end
  return port, db
end

-- s with each %XX as its byte (RFC 3986), or nil where a % starts no such.
local function percent_decoded(s)
  for escape in s:gmatch("%%(.?.?)") do
    if not escape:match("^%x%x$") then return nil end
  end
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- "unix:PATH[?db=DB]" (PATH absolute; "unix:///PATH" as well).
local function unix_address(s)
  local rest = s:match("^unix:(/.*)$")
  if not rest then return nil end
  if rest:sub(1, 3) == "///" then rest = rest:sub(3)
  elseif rest:sub(1, 2) == "//" then return nil end -- (unix://HOST/...: not a path)
  local path, db = rest:match("^([^?]+)%?db=(%d+)$")
  if not path then path, db = rest:match("^([^?]+)$"), "0" end
  if not path or #db > 9 then return nil end
  return { path = path, db = tonumber(db), where = "unix:" .. path .. "?db=" .. db }
end

-- "redis://..." and "rediss://...": the userinfo up to the authority's
-- last "@", percent-decoded; a host in brackets for IPv6; port 6379 and
-- database 0 unless given.
local function url_address(s)
  local scheme, authority, db = s:match("^(rediss?)://([^/?#]*)/?(%d*)$")
  if not scheme then return nil end
  local userinfo, hostport = authority:match("^(.*)@([^@]*)$")
  hostport = hostport or authority
  local host, port = hostport:match("^(%[[%x:.]+%]):?(%d*)$")
  if not host then host, port = hostport:match("^([^:%[%]]+):?(%d*)$") end
  if not host then return nil end
  local a = { tls = scheme == "rediss" }
  a.port, a.db = port_db(port ~= "" and port or "6379", db ~= "" and db or "0")
  if not a.port then return nil end
  a.host = host:gsub("^%[(.*)%]$", "%1")
  if userinfo then
    local user, password = userinfo:match("^([^:]*):(.*)$")
    user = user or userinfo
    a.user, a.password = percent_decoded(user), password and percent_decoded(password)
    if not a.user or (password and not a.password) then return nil end
    if a.user == "" then a.user = nil end
  end
  a.where = scheme .. "://" .. (a.user and a.user .. "@" or "") .. host .. ":" .. a.port .. "/" .. a.db
  return a
end

--- The address --redis names: { host =, port = } or { path = } (a unix
-- socket), db, tls, user, password, where (as messages say it, without the
-- password); or nil.
function M.address(s)
  if s:match("^unix:") then return unix_address(s) end
  if s:match("^rediss?:") then return url_address(s) end
  local host, port, db = s:match("^([^/]+):(%d+)/(%d+)$")
  if not host then
    host, port = s:match("^([^/]+):(%d+)$")
    db = "0"
  end
  port, db = port_db(port, db)
  if not port then return nil end
  return { host = host, port = port, db = db, where = host .. ":" .. port .. "/" .. db }
end

--- s as a message may repeat it: a URL's password as "***".
function M.shown(s)
  return (s:gsub("^(rediss?://[^/?#@]-:)([^/?#]*)@", "%1***@"))
end

---------------------------------------------------------------------------
-- The connection
---------------------------------------------------------------------------

-- redis-lua (Debian lua-redis: installed for Lua 5.1-5.3; its plain Lua
-- runs on 5.4 too, found there through 5.3's directory), or nil.
local function redis_lua()
  local ok, redis = pcall(require, "redis")
  if ok then return redis end
  if _VERSION ~= "Lua 5.4" then return nil end
  local path = package.path
  package.path = path .. ";/usr/share/lua/5.3/?.lua"
  ok, redis = pcall(require, "redis")
  if ok then return redis end
  package.path = path
  return nil
end

-- Whether `name` (lower case) is one the certificate's name `pattern`
-- covers: the same, or "*." and the same but for name's first label.
local function name_matches(pattern, name)
  pattern = pattern:lower()
  if pattern == name then return true end
  local rest = pattern:match("^%*(%..+%..+)$") -- (a wildcard over two labels at least)
  return rest ~= nil and name:match("^[^.]+(%..+)$") == rest
end

-- Whether the server's certificate names `host`: its subjectAltName's
-- DNS names or IP addresses, or, where it has no DNS name, its common name
-- (as OpenSSL's X509_check_host). LuaSec checks the chain, not the name.
local function names_host(cert, host)
  host = host:lower()
  local san = (cert:extensions() or {})["2.5.29.17"] or {}
  for _, ip in ipairs(san.iPAddress or {}) do
    if ip:lower() == host then return true end
  end
  for _, dns in ipairs(san.dNSName or {}) do
    if name_matches(dns, host) then return true end
  end
  if san.dNSName then return false end
  for _, field in ipairs(cert:subject()) do
    if field.name == "commonName" and name_matches(field.value, host) then return true end
  end
  return false
end

-- A TLS connection to a.host:a.port, the certificate checked, as the
-- socket redis-lua takes (its quit calls shutdown); or nil and why not.
local function tls_socket(a, cacert)
  local ok, ssl = pcall(require, "ssl")
  if not ok then
    return nil, "rediss:// needs LuaSec (Debian: apt-get install lua-sec; luarocks install luasec)"
  end
  local tcp = require("socket").tcp()
  tcp:settimeout(TIMEOUT)
  local connected, err = tcp:connect(a.host, a.port)
  if not connected then
    tcp:close()
    return nil, err
  end
  local params = { mode = "client", protocol = "any", verify = { "peer", "fail_if_no_peer_cert" },
                   options = { "all", "no_sslv2", "no_sslv3", "no_tlsv1", "no_tlsv1_1" } }
  if cacert then params.cafile = cacert
  else params.cafile, params.capath = io.open(CA_FILE) and CA_FILE or nil, CA_PATH end
  local conn
  conn, err = ssl.wrap(tcp, params)
  if not conn then
    tcp:close()
    return nil, "TLS: " .. tostring(err)
  end
  conn:sni(a.host)
  conn:settimeout(TIMEOUT)
  ok, err = conn:dohandshake()
  if ok and not names_host(conn:getpeercertificate(), a.host) then
    ok, err = false, "the server's certificate does not name " .. a.host
  end
  if not ok then
    conn:close()
    return nil, "TLS: " .. tostring(err)
  end
  return {
    send = function(_, data) return conn:send(data) end,
    receive = function(_, pattern) return conn:receive(pattern) end,
    settimeout = function(_, t) return conn:settimeout(t) end,
    close = function() return conn:close() end,
    shutdown = function() return conn:close() end,
  }
end

-- A client of redis-lua `redis` at address `a`; or nil and why not.
local function connect(redis, a, cacert)
  if a.tls then
    local sock, err = tls_socket(a, cacert)
    if not sock then return nil, err end
    return redis.connect({ socket = sock })
  elseif a.port then
    return redis.connect(a.host, a.port, TIMEOUT)
  end
  return redis.connect({ scheme = "unix", path = a.path, timeout = TIMEOUT })
end

-- What messages say after the words of the module that said them.
local function bare(msg)
  msg = tostring(msg):gsub("^[^:\n]*%.lua:%d+: ", ""):gsub("^redis error: ", "")
  return (msg:gsub("^hwtimer%.durable: ", ""))
end
M.bare = bare

-- The password for `a`: the URL's, or the environment's; or nil.
local function password_of(a)
  if a.password then return a.password end
  local env = os.getenv(M.PASSWORD_ENV)
  if env and env ~= "" then return env end
  return nil
end

-- A client connected to `a`, authenticated, its database selected, and
-- whether the queue's store is there (true, false); or nil and why not.
local function reach(redis, a, o, meta, old_meta)
  local ok, client, err = pcall(connect, redis, a, o.cacert)
  if not (ok and client) then -- (redis-lua: "could not connect to HOST:PORT [why]")
    local why = bare(ok and err or client)
    return nil, "cannot connect to Redis at " .. a.where .. ": " .. (why:match("%[(.+)%]$") or why)
  end
  local password = password_of(a)
  local found
  ok, found = pcall(function()
    if password and a.user then client:auth(a.user, password)
    elseif password then client:auth(password) end
    if a.db ~= 0 then client:select(a.db) end
    local there = client:exists(meta)
    if (there == true or there == 1) or not old_meta then return there end
    return client:exists(old_meta)
  end)
  if not ok then
    pcall(client.quit, client)
    return nil, bare(found)
  end
  return client, found == true or found == 1
end

--- A client of the Redis store of `o` (o.redis, o.prefix, o.queue,
-- o.cacert), authenticated, its database selected, once its store is
-- found there (durable.open would make one where there is none); or nil
-- and why not. A node of a Redis Cluster that does not serve the queue's
-- slot answers MOVED with the one that does: that one is asked instead
-- (once; a queue's keys share one hash tag, so one node holds them all).
function M.client(o)
  local redis = redis_lua()
  if not redis then
    return nil, "--redis needs redis-lua (Debian: apt-get install lua-redis; luarocks install redis-lua)"
  end
  local a = M.address(o.redis)
  -- (the meta of this format's keys, or of format 6 and older's)
  local base, old, where = require("hwtimer.durable.redis").base(o.prefix, o.queue)
  local meta, old_meta = base .. ":meta", where == "same" and old .. ":meta"
  for hop = 1, 2 do
    local client, found = reach(redis, a, o, meta, old_meta)
    local moved = not client and hop == 1 and found:match("^MOVED %d+ (.+:%d+)$")
    if moved then
      local host, port = moved:match("^%[?(.-)%]?:(%d+)$")
      a.host, a.port = host, tonumber(port)
      a.where = (a.tls and "rediss://" or "") .. host .. ":" .. port .. "/" .. a.db
    elseif not client then
      if found:match("^cannot connect") then return nil, found end
      local hint = found:match("^NOAUTH") and format(" (the password: redis://[USER]:PASSWORD@HOST:PORT, or "
        .. "in %s)", M.PASSWORD_ENV) or ""
      return nil, "Redis at " .. a.where .. ": " .. found .. hint
    elseif not found then
      pcall(client.quit, client)
      return nil, format("no hwtimer.durable store {%s:%s} in Redis at %s (see --prefix and --queue)",
        printable(o.prefix), printable(o.queue), a.where)
    else
      return client
    end
  end
end

return M
