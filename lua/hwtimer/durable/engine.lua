--- hwtimer.durable.engine: what a store engine provides to hwtimer.durable.
-- The front (hwtimer.durable) owns the timer, the window, the passes and the
-- retries; an engine owns one queue in one store: its jobs, their leases,
-- its clock. Both engines (hwtimer.durable.sqlite, hwtimer.durable.redis)
-- implement exactly this, and the front calls nothing else; a third one is a
-- module of its own, given as durable.open(timer, { engine = module, ... }).
--
-- Values:
--   epoch      seconds since 1970 as a float, on the store's clock.
--   key        what identifies a job's current run to the engine (SQLite:
--              the row's seq; Redis: its ready time in microseconds). A
--              retry or a periodic run gets a new key.
--   mark       { key, ready }: a job run that may become due at `ready`
--              (epoch); the front holds one timeout per mark in its window.
--   row        a claimed job run: { key =, id =, kind =, payload = (string
--              or nil), due = (epoch), attempt = (tries started, this one
--              included), every = (seconds, interval schedules only) }; a
--              schedule's (q:every) also carries what put stored of it
--              (`sched`, below) and `runs`, `at` (the calendar time its run
--              stands for), `late` (nil until a run of `at` started, then
--              true or false).
--   sched      a schedule's calendar and options, as q:every checked them
--              (hwtimer.durable.schedule): { cron = (expression) or nil,
--              tz, start, stop (epoch), limit, missed ("skip" | "once" |
--              "all"), window (seconds) }; `every` comes beside it.
--   ack        what a run's outcome asks the engine to write:
--              { what = "done" | "next" | "retry" | "bury" | "release", row = row,
--                arg = (retry: seconds of backoff; bury: the error text),
--                now = (epoch: when the run ended),
--                at =, late =, runs = (schedules, below) }.
--              done: delete; next: a schedule's next run, due at `at`
--              (epoch: the front computed it, hwtimer.durable.schedule;
--              the engine computes no time of a schedule), `runs` stored,
--              attempts from zero, `late` nil again; retry: due at now +
--              arg, attempts kept, a schedule's `at` and `late` stored
--              when given; bury: dead, with arg (and `at`, `late` as
--              retry); release: the run never started (a worker exiting, a
--              queue closed): due as it was, its attempt not counted.
--   job        what q:get and q:dead show: { id, kind, payload, due,
--              attempt, every, dead = true|nil, error, leased = true|nil },
--              and for a schedule cron, tz, start, stop, limit, missed,
--              window, runs, scheduled_for (its pending run's `at`).
--   hi         the end of the front's window (epoch): marks at or past it
--              are not returned (the refill reads them when their time comes).
--
-- Every method returns nil and a message when the store fails; it never
-- raises for a store error.
--
-- The module:
--   Engine.OPTIONS        the engine's own options, { name = { default, check,
--                    what is expected } } (hwtimer.check's form); the front
--                    checks them with its own.
--   Engine.open(o, owner) o: the checked options (the front's and the engine's);
--                    owner: this process's lease holder id. -> engine
-- (Job ids and owners are made by the front, hwtimer.durable.ids.)
-- An engine `e`:
--   e.name           a field: the store as messages and tostring(q) show it.
--   e:now()          -> epoch, the store's clock.
--   e:close()
--   e:put(id, kind, payload, when, relative, every, fresh, sched)
--                    store a job (replacing one of that id) due at `when`
--                    epoch, or `when` seconds from the store's now when
--                    `relative`; `fresh`: the id is new, nothing to
--                    replace. -> key, due (epoch); inside begin/commit ->
--                    true (the commit returns its mark). A schedule has
--                    `sched` (and `every` for an interval), `when` is its
--                    first run's time; over a job of that id, atomically:
--                    the same schedule (kind, payload, every and every
--                    field of sched equal) is left as it is (-> its key and
--                    due); one of the same calendar (every, cron, tz, start)
--                    whose run is pending keeps that run (its due, at,
--                    late, attempts); any other is replaced, due at `when`.
--                    A schedule keeps the `runs` of the one it replaces.
--   e:schedule(id, kind, payload, delay)   (optional)
--                    e:put(id, kind, payload, delay, true, nil, true): a
--                    job of a fresh id, due `delay` seconds from the
--                    store's now, outside begin/commit. q:schedule's usual
--                    call, in one call (the Redis engine's is one RPUSH).
--   e:cancel(id)     -> key (deleted, pending or dead); false (no such job);
--                    false, lease_end (another owner holds it under a live
--                    lease: left as it is). This owner's own lease does not
--                    stop a cancel.
--   e:get(id)        -> job or nil.     e:pending() -> count of jobs not dead.
--   e:dead()         -> list of dead jobs, by due time.
--   e:handle(kind, on) this process runs (on) or no longer runs `kind`:
--                    claims take only handled kinds. -> true
--   e:begin(hi)      -> true: puts are held until commit, atomic.
--   e:commit()       -> list of the marks of the batch's jobs before hi.
--   e:rollback()
--   e:range(lo, hi)  -> list of marks with lo < ready < hi, count.
--   e:changes(hi)    what other processes wrote since the last call, before
--                    hi: -> list of marks, count; or nil when nothing.
--   e:probe(cutoff, ready) is a claim worth making? cutoff: the front's now
--                    (epoch); ready: the ready time of the timeout asking (nil
--                    for a sweep). An engine may use either. -> boolean
--   e:claim(acks, cutoff, lease, batch, hi)
--                    write `acks`, then lease up to `batch` handled runs due
--                    by `cutoff` (or by the store's own clock, never later
--                    than it) to this owner for `lease` seconds, in one
--                    atomic step. -> rows (in due order or not), count,
--                    list of marks the acks made before hi.
--   e:ack(acks, hi)  -> list of marks the acks made before hi.
--   e:renew(rows, lease) extend these rows' leases to `lease` seconds from
--                    now, where this owner still holds them at the row's
--                    attempt. -> set { [id] = true } of those it still holds.
--
-- Operating a store (q:counts, q:jobs, q:retry, q:run_now, q:schedules:
-- tools that may handle no kind). A job is in one of three states: pending
-- (not dead, not leased), leased (a process holds it: owner set, its lease
-- live or not), dead; `due` is a part of pending: its due time reached on
-- the store's clock.
--   e:counts()       -> { [kind] = { pending =, due =, leased =, dead = } },
--                    the kinds with at least one job.
--   e:jobs(state, kind, limit, after_due, after_id)
--                    state: "pending" | "leased" | "dead"; kind: a kind or
--                    nil for all. -> list of at most `limit` jobs of that
--                    state, in (due, id) order (ids compared byte by byte),
--                    each after (after_due, after_id) when after_due is
--                    given (after_due: a job's due as a job showed it).
--   e:retry(id)      a dead job pending again, due now, attempt 0, no error,
--                    as a new write other processes' e:changes see.
--                    -> key, due (epoch); false, why ("missing", "pending",
--                    "leased"); nil, message when the store fails.
--   e:run_now(id)    a pending job due now, its attempts kept (one due
--                    already is left as it is), seen by others' e:changes.
--                    -> key, due; false, why ("missing", "dead"); false,
--                    "leased", lease_end (epoch).
--   e:schedules()    -> list of the schedules (those put with `every` or
--                    `sched`), each a job as e:get shows it, leased and
--                    dead ones too, in (due, id) order (ids compared byte
--                    by byte).
local M = {}

M.METHODS = { "now", "close", "put", "cancel", "get", "pending", "dead", "handle", "begin", "commit",
              "rollback", "range", "changes", "probe", "claim", "ack", "renew",
              "counts", "jobs", "retry", "run_now", "schedules" }

--- What an engine module lacks, as a message; nil when it has everything.
function M.missing(Engine)
  if type(Engine.open) ~= "function" then return "engine module without open()" end
  if Engine.OPTIONS ~= nil and type(Engine.OPTIONS) ~= "table" then
    return "engine module whose OPTIONS is not a table"
  end
  for _, m in ipairs(M.METHODS) do
    if type(Engine[m]) ~= "function" then return "engine module without method " .. m .. "()" end
  end
  return nil
end

return M
