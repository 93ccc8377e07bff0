-- Durable timers on an SQLite file: the C module hwtimer.sqlite (SQLite's
-- binding, which hwtimer's engine hwtimer.durable.sqlite loads), apart from
-- hwtimer so that a machine without SQLite still installs the timer (as
-- luasql-sqlite3 is to luasql). luarocks refuses it, naming SQLITE, where
-- sqlite3.h is missing (Debian: libsqlite3-dev). It builds in csrc/, which has
-- no lua/ directory: luarocks' builtin backend copies a lua/ directory's whole
-- contents into every rock built beside one.
rockspec_format = "3.0"
package = "hwtimer-sqlite"
version = "0.1.0-1"
source = {
  url = "hwtimer-0.1.0.tar.gz", -- the same source as hwtimer's
  dir = "hwtimer-0.1.0/csrc",
}
description = {
  summary = "SQLite stores for hwtimer's durable timers: the C module hwtimer.sqlite",
  detailed = [[
hwtimer.durable keeps jobs that outlive the process in a store; this rock adds
SQLite files as a store (durable.open(timer, { path = "jobs.db" })): WAL,
prepared statements, checkpoints on a thread of their own.
]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1",
  "hwtimer == 0.1.0",
}
external_dependencies = {
  SQLITE = { header = "sqlite3.h" },
}
build = {
  type = "builtin",
  modules = {
    ["hwtimer.sqlite"] = {
      sources = { "durable/lsqlite.c", "durable/checkpoint.c", "durable/lwatch.c" },
      defines = { "_POSIX_C_SOURCE=200809L", "_DEFAULT_SOURCE" },
      libraries = { "sqlite3", "pthread" },
      incdirs = { ".", "$(SQLITE_INCDIR)" },
      libdirs = { "$(SQLITE_LIBDIR)" },
    },
  },
}
