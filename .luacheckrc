-- luacheck's settings for the tree (make lint runs `luacheck .` here; make
-- test runs make lint first).

-- The code runs on Lua 5.1, 5.2, 5.3, 5.4 and LuaJIT, and picks what each has
-- at run time (table.unpack or unpack, string.pack when there is one): "max"
-- knows every global of all of them, so none of those is reported undefined.
std = "max"

-- Every Lua file of ours, and bin/hwtimer-jobs (a Lua script without the .lua
-- ending, which luacheck would not pick up in a directory on its own).
include_files = { "**/*.lua", "bin/hwtimer-jobs" }

-- build/ holds what make builds and copies, none of it ours to lint: the
-- compat/ copies of Debian's copas and coxpcall (third-party code, as
-- Debian ships it) and the installed rock's tree (test-rock).
exclude_files = { "build/**" }

-- The code's own width (lua/, bin/, examples/); spec/ and bench/ get more below.
max_line_length = 120

-- The specs hold long assertion messages and long test names (a name is
-- what a hand mutant's filter quotes, spec/mutants/list.lua), and the list's
-- entries quote source lines whole; the benches print long report lines.
files["spec/"] = { std = "max+busted", max_line_length = 140 }
files["bench/"] = { max_line_length = 140 }

-- ngx (OpenResty's API) is there only inside nginx: it is a global for the
-- files that run in nginx and use it, named one by one, so that a use of
-- ngx slipping into a module that runs outside nginx is still reported.
-- Their writes: ngx.status and ngx.header (a response's status and headers).
local nginx = {
  read_globals = {
    ngx = {
      other_fields = true,
      fields = {
        status = { read_only = false },
        header = { read_only = false, other_fields = true },
      },
    },
  },
}
files["lua/hwtimer/ngx.lua"] = nginx
files["lua/hwtimer/ngx_port.lua"] = nginx
files["lua/hwtimer/metrics_ngx.lua"] = nginx
files["lua/hwtimer/durable/ngx.lua"] = nginx
files["lua/hwtimer/durable/ngx_wake.lua"] = nginx
files["lua/hwtimer/durable/redis_batch.lua"] = nginx
files["examples/openresty-durable/orders.lua"] = nginx
