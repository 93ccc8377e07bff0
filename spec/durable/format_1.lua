-- The schema of a format 1 SQLite store, as hwtimer.durable made it before
-- schedules (format 2): for the specs of the upgrade and of the tools that
-- must not upgrade.
return [[
CREATE TABLE hwtimer_jobs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, queue TEXT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL,
  payload BLOB, due REAL NOT NULL, ready REAL NOT NULL, every REAL, attempt INTEGER NOT NULL DEFAULT 0,
  owner TEXT, dead INTEGER NOT NULL DEFAULT 0, error TEXT);
CREATE UNIQUE INDEX hwtimer_jobs_id ON hwtimer_jobs (queue, id);
CREATE INDEX hwtimer_jobs_ready ON hwtimer_jobs (queue, ready) WHERE dead = 0;
PRAGMA application_id = 1213682756; PRAGMA user_version = 1;
]]
