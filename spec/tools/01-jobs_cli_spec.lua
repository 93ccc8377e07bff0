-- hwtimer-jobs, the command line (bin/hwtimer-jobs over hwtimer.jobs_cli),
-- run as the command it is: `$HWT_LUA bin/hwtimer-jobs ...` in the source
-- tree, the rock's installed wrapper where make test-rock names it
-- (HWT_JOBS_CLI), its stdout, stderr and exit status captured. Every command
-- in text and in JSON against a real SQLite file and a real redis-server
-- (started on a free loopback port, stopped by its pid), the exit statuses
-- 0, 1 and 2 with their exact messages, JSON escaping, and that it never
-- runs a job. The jobs are made, and their state checked, by queues of this
-- process.
local hwtimer = require("hwtimer")
local helpers = require("spec.helpers")
local durable = require("hwtimer.durable")

local C = require("spec.tools.cli")
local LUA, sq, COMMAND, TMP = C.LUA, C.sq, C.COMMAND, C.TMP
local run_with, jobs, words, NULL, json_of = C.run_with, C.jobs, C.words, C.NULL, C.json_of
local iso, ISO, lines, usage_error = C.iso, C.ISO, C.lines, C.usage_error
local USAGE_LINE = C.USAGE_LINE

local REDIS_FORMS = "HOST:PORT[/DB], unix:PATH[?db=DB] or redis[s]://[USER[:PASSWORD]@]HOST[:PORT][/DB] expected"
local have_sqlite = helpers.optional("hwtimer.sqlite") ~= nil
local N, redis = helpers.redis_kit()

---------------------------------------------------------------------------
-- Bad usage: exit status 2, before any store is touched
---------------------------------------------------------------------------

describe("hwtimer-jobs", function()
  teardown(function() os.execute("rm -rf " .. sq(TMP)) end)

  describe("usage", function()
    local never = TMP .. "/never.db" -- no command below makes it

    it("--help prints the usage on stdout, exit 0, whatever else is given", function()
      for _, args in ipairs({ { "--help" }, { "-h" }, { "--path", never, "ls", "--help" }, { "--bogus", "-h" } }) do
        local out, err, status = jobs(args)
        assert.same({ "", 0 }, { err, status })
        assert.equal(USAGE_LINE, lines(out)[1])
        for _, word in ipairs({ "counts", "ls [--state S]", "show ID", "retry ID", "run ID", "cancel ID",
                                "schedules", "--json", "Exit status: 0" }) do
          assert.truthy(out:find(word, 1, true), word)
        end
      end
    end)

    it("refuses bad usage with exit status 2, the message and the usage line on stderr, nothing on stdout", function()
      local P = { "--path", never }
      local cases = {
        { {}, "no command" },
        { P, "no command" },
        { words(P, "list"), "unknown command 'list'" },
        { words(P, "ls", "--limt", "5"), "unknown option --limt" },
        { words(P, "-x", "ls"), "unknown option -x" },
        { words(P, "show"), "show needs a job ID" },
        { words(P, "retry"), "retry needs a job ID" },
        { words(P, "run"), "run needs a job ID" },
        { words(P, "cancel"), "cancel needs a job ID" },
        { words(P, "show", ""), "show: the job ID is empty" },
        { words(P, "show", "a", "b"), "unexpected argument 'b'" },
        { words(P, "counts", "x"), "unexpected argument 'x'" },
        { words(P, "ls", "--limit", "0"), "bad --limit '0': an integer from 1 to 1000 expected" },
        { words(P, "ls", "--limit", "1001"), "bad --limit '1001': an integer from 1 to 1000 expected" },
        { words(P, "ls", "--limit", "ten"), "bad --limit 'ten': an integer from 1 to 1000 expected" },
        { words(P, "ls", "--limit=2.5"), "bad --limit '2.5': an integer from 1 to 1000 expected" },
        { words(P, "ls", "--limit"), "option --limit needs a value" },
        { words(P, "ls", "--state", "done"), "bad --state 'done': pending, leased or dead expected" },
        { words(P, "ls", "--kind", ""), "bad --kind '': a non-empty kind expected" },
        { words(P, "ls", "--after", "nope"), "bad --after 'nope': a cursor that ls printed expected" },
        { words(P, "ls", "--after", "inf/a"), "bad --after 'inf/a': a cursor that ls printed expected" },
        { words(P, "ls", "--after", "1e999/a"), "bad --after '1e999/a': a cursor that ls printed expected" },
        { words(P, "ls", "--after", "-1e999/a"), "bad --after '-1e999/a': a cursor that ls printed expected" },
        { words(P, "counts", "--state", "dead"), "option --state is for ls only" },
        { words(P, "show", "x", "--limit", "3"), "option --limit is for ls only" },
        { { "counts" }, "--path FILE or --redis ADDRESS expected" },
        { words(P, "--redis", "127.0.0.1:6379", "counts"), "--path and --redis exclude each other" },
        { words(P, "--prefix", "app", "counts"), "--prefix is for --redis only" },
        { words(P, "--path", never, "counts"), "option --path given twice" },
        { words(P, "--json=yes", "counts"), "option --json takes no value" },
        { { "--redis", "localhost", "counts" }, "bad --redis 'localhost': " .. REDIS_FORMS },
        { { "--redis", "h:0", "counts" }, "bad --redis 'h:0': " .. REDIS_FORMS },
        { { "--redis", "h:65536", "counts" }, "bad --redis 'h:65536': " .. REDIS_FORMS },
        { { "--redis", "h:6379/x", "counts" }, "bad --redis 'h:6379/x': " .. REDIS_FORMS },
        { { "--redis", "unix:", "counts" }, "bad --redis 'unix:': " .. REDIS_FORMS },
        { { "--redis", "unix:redis.sock", "counts" }, "bad --redis 'unix:redis.sock': " .. REDIS_FORMS },
        { { "--redis", "unix://host/redis.sock", "counts" }, "bad --redis 'unix://host/redis.sock': " .. REDIS_FORMS },
        { { "--redis", "unix:/r.sock?db=x", "counts" }, "bad --redis 'unix:/r.sock?db=x': " .. REDIS_FORMS },
        { { "--redis", "unix:/r.sock?db=", "counts" }, "bad --redis 'unix:/r.sock?db=': " .. REDIS_FORMS },
        -- (a database of up to 9 digits is Redis's to refuse, below; 10 are not read)
        { { "--redis", "unix:/r.sock?db=1000000000", "counts" }, "bad --redis 'unix:/r.sock?db=1000000000': " .. REDIS_FORMS },
        { { "--redis", "h:6379/1000000000", "counts" }, "bad --redis 'h:6379/1000000000': " .. REDIS_FORMS },
        { { "--redis", "h:6379", "--queue", "", "counts" }, "bad --queue '': a non-empty queue name expected" },
        { words(P, "unknown\ncommand"), "unknown command 'unknown\\ncommand'" },
      }
      for _, c in ipairs(cases) do
        local out, err, status = jobs(c[1])
        assert.same({ "", usage_error(c[2]), 2 }, { out, err, status }, table.concat(c[1], " "))
      end
      assert.is_nil(io.open(never), "a usage error made the store")
    end)
  end)

  ---------------------------------------------------------------------------
  -- Every command against a store (SQLite, Redis: `env` says which)
  ---------------------------------------------------------------------------

  local function contract(env)
    local S = C.store_queues(env, before_each, after_each)
    local open, wait, now = S.open, S.wait, S.now

    -- hwtimer-jobs with the store's options first
    local function cli(...) return jobs(words(env.args(), ...)) end

    -- The jobs most specs start from: m1 and m3 dead (mail, "smtp down", due 2 s ago),
    -- m2 pending in an hour, o1 due 5 s ago (no process handles "other"),
    -- nightly a schedule of an hour. Returns the queue (attempts = 1).
    local function populate()
      local q = open({ attempts = 1 })
      q:handle("mail", function() error("smtp down", 0) end)
      assert(q:schedule("mail", -2, "to:ann", { id = "m1" }))
      assert(q:schedule("mail", -2, "to:cy", { id = "m3" }))
      assert(q:schedule("mail", 3600, "to:bob", { id = "m2" }))
      assert(q:schedule("other", -5, "x", { id = "o1" }))
      assert(q:every("report", 3600, nil, { id = "nightly" }))
      assert.truthy(wait(function() return q:get("m1").dead and q:get("m3").dead end))
      q:handle("mail", nil)
      return q
    end

    it("counts: by state and kind, as a table and as JSON", function()
      open()
      local out, err, status = cli("counts")
      assert.same({ "KIND   PENDING  DUE  LEASED  DEAD\n(all)        0    0       0     0\n", "", 0 },
        { out, err, status })
      out = cli("--json", "counts")
      assert.equal('{"dead":0,"due":0,"kinds":{},"leased":0,"pending":0}\n', out)
      populate()
      out, err, status = cli("counts")
      assert.same({ table.concat({
        "KIND    PENDING  DUE  LEASED  DEAD",
        "mail          1    0       0     2",
        "other         1    1       0     0",
        "report        1    0       0     0",
        "(all)         3    1       0     2",
      }, "\n") .. "\n", "", 0 }, { out, err, status })
      out, err, status = cli("counts", "--json") -- (options go anywhere)
      assert.same({ "", 0 }, { err, status })
      assert.same({ pending = 3, due = 1, leased = 0, dead = 2, kinds = {
        mail = { pending = 1, due = 0, leased = 0, dead = 2 },
        other = { pending = 1, due = 1, leased = 0, dead = 0 },
        report = { pending = 1, due = 0, leased = 0, dead = 0 },
      } }, json_of(out))
    end)

    it("ls: a page of jobs in due order with when each is due, the next page's cursor last", function()
      local q = populate()
      local out, err, status = cli("ls")
      assert.same({ "", 0 }, { err, status })
      local l = lines(out)
      assert.equal(4, #l)
      assert.matches("^ID%s+KIND%s+DUE %(UTC%)%s+WHEN%s+ATTEMPT$", l[1])
      assert.matches("^o1%s+other%s+" .. ISO .. "%s+%d+s ago%s+0$", l[2])
      assert.matches("^m2%s+mail%s+" .. ISO .. "%s+in [%dhms]+%s+0$", l[3])
      assert.matches("^nightly%s+report%s+" .. ISO .. "%s+in [%dhms]+%s+0$", l[4])
      assert.truthy(l[3]:find(iso(q:get("m2").due), 1, true), l[3])
      -- a page at a time, as text: the cursor's line is last
      local seen, args = {}, { "ls", "--limit", "2" }
      for _ = 1, 3 do
        out, err, status = cli(args)
        assert.same({ "", 0 }, { err, status })
        for _, line in ipairs(lines(out)) do
          local id = line:match("^(%S+)%s") -- rows, not the header or the cursor's line
          if id and id ~= "ID" and id ~= "next" then seen[#seen + 1] = id end
        end
        local cursor = out:match("\nnext page: %-%-after (%S+)\n$")
        if not cursor then break end
        args = { "ls", "--limit", "2", "--after", cursor }
      end
      assert.same({ "o1", "m2", "nightly" }, seen)
      -- and as JSON: each job whole, its due time the same number
      seen, args = {}, { "--json", "ls", "--limit", "1" }
      for _ = 1, 4 do
        out, err, status = cli(args)
        assert.same({ "", 0 }, { err, status })
        local doc = json_of(out)
        for _, j in ipairs(doc.jobs) do
          local job = q:get(j.id)
          seen[#seen + 1] = j.id
          local want = { id = job.id, kind = job.kind, state = "pending", due = job.due, due_utc = iso(job.due),
                         attempt = 0, every = job.every or NULL, payload = job.payload or NULL, error = NULL }
          if job.every then -- a schedule's fields too
            for _, k in ipairs({ "cron", "tz", "start", "stop", "limit", "window" }) do want[k] = NULL end
            want.missed, want.runs, want.scheduled_for, want.scheduled_for_utc = "once", 0, job.due, iso(job.due)
          end
          assert.same(want, j)
        end
        if doc.next == NULL then break end
        args = { "--json", "ls", "--limit", "1", "--after", doc.next }
      end
      assert.same({ "o1", "m2", "nightly" }, seen)
    end)

    it("ls: the dead with their errors, a kind, the leased; says when there are none", function()
      local q = populate()
      local out, err, status = cli("ls", "--state", "dead")
      assert.same({ "", 0 }, { err, status })
      local l = lines(out)
      assert.equal(3, #l)
      assert.matches("^ID%s+KIND%s+DUE %(UTC%)%s+WHEN%s+ATTEMPT%s+ERROR$", l[1])
      local first = q:get("m1").due < q:get("m3").due and "m1" or "m3"
      assert.matches("^" .. first .. "%s+mail%s+" .. ISO .. "%s+%d+s ago%s+1  smtp down$", l[2])
      out = cli("--json", "ls", "--state=dead", "--kind", "mail")
      local doc = json_of(out)
      assert.equal(NULL, doc.next)
      assert.equal(2, #doc.jobs)
      assert.same({ "dead", "smtp down", 1 }, { doc.jobs[1].state, doc.jobs[1].error, doc.jobs[1].attempt })
      assert.same({ "no dead jobs of kind other\n", "", 0 }, { cli("ls", "--state", "dead", "--kind", "other") })
      assert.same({ "no pending jobs of kind nope\n", "", 0 }, { cli("ls", "--kind", "nope") })
      assert.same({ "no leased jobs\n", "", 0 }, { cli("ls", "--state", "leased") })
      assert.same({ '{"jobs":[],"next":null}\n', "", 0 }, { cli("--json", "ls", "--state", "leased") })
    end)

    it("ls: an error longer than 60 characters is cut to 57 and '...', counted in characters; JSON keeps it whole", function()
      local q = open({ attempts = 1 })
      local long = ("\195\169"):rep(30) .. ("x"):rep(40) -- 70 characters, 100 bytes
      q:handle("mail", function() error(long, 0) end)
      assert(q:schedule("mail", -1, "p", { id = "e1" }))
      assert.truthy(wait(function() return q:get("e1").dead end))
      local out = cli("ls", "--state", "dead")
      local l = lines(out)
      assert.equal(2, #l)
      assert.equal(long:sub(1, 60 + 27) .. "...", l[2]:match("  1  (.*)$"))
      assert.equal(long, json_of(cli("--json", "ls", "--state", "dead")).jobs[1].error)
      -- 60 characters are shown whole, 61 cut
      local sixty = ("\195\169"):rep(30) .. ("y"):rep(30)
      for id, msg in pairs({ e2 = sixty, e3 = sixty .. "z" }) do
        assert(q:schedule("mail", -1, msg, { id = id }))
      end
      q:handle("mail", function(job) error(job.payload, 0) end)
      assert.truthy(wait(function() return q:get("e2").dead and q:get("e3").dead end))
      l = lines(cli("ls", "--state", "dead"))
      assert.equal(4, #l)
      local shown = {}
      for i = 2, 4 do shown[l[i]:match("^(%S+)")] = l[i]:match("  1  (.*)$") end
      assert.equal(sixty, shown.e2)
      assert.equal(sixty:sub(1, 60 + 27) .. "...", shown.e3) -- (30 two-byte characters, then 27)
    end)

    it("show: every field, the payload quoted and escaped; as JSON the same", function()
      local q = populate()
      local out, err, status = cli("show", "m1")
      assert.same({ "", 0 }, { err, status })
      local l = lines(out)
      local due = q:get("m1").due
      assert.matches("^due      " .. ISO .. " %(%d+s ago%)$", l[4])
      assert.equal("due      " .. iso(due), l[4]:sub(1, 33))
      l[4] = "due"
      assert.same({ "id       m1", "kind     mail", "state    dead", "due", "attempt  1", "every    (none)",
                    'payload  "to:ann"', 'error    "smtp down"' }, l)
      l = lines(cli("show", "nightly"))
      assert.same({ "every    1h (3600 s)", "payload  (none)", "error    (none)" }, { l[6], l[7], l[8] })
      assert.equal("state    pending", l[3])
      assert.same({ "time     " .. l[4]:sub(10), "runs     0", "missed   once" }, { l[9], l[10], l[11] })
      assert.equal(11, #l)
      out, err, status = cli("--json", "show", "m1")
      assert.same({ "", 0 }, { err, status })
      assert.same({ id = "m1", kind = "mail", state = "dead", due = due, due_utc = iso(due), attempt = 1,
                    every = NULL, payload = "to:ann", error = "smtp down" }, json_of(out))
      assert.equal(3600, json_of(cli("--json", "show", "nightly")).every)
      assert.same({ "", "hwtimer-jobs: no job nope\n", 1 }, { cli("show", "nope") })
      assert.same({ "", "hwtimer-jobs: no job nope\n", 1 }, { cli("--json", "show", "nope") })
    end)

    -- A span of seconds (every, a window, how far a time is from now) is
    -- counted in seconds below a minute, and a minute exactly is "1m".
    it("show and schedules: an interval of a minute exactly reads 1m, below it in seconds", function()
      local q = open()
      assert(q:every("k", 60, nil, { id = "minute", missed = "all", window = 60 }))
      assert(q:every("k", 59, nil, { id = "short" }))
      assert(q:every("k", 59.5, nil, { id = "shorter" }))
      local l = lines(cli("show", "minute"))
      assert.same({ "every    1m (60 s)", "missed   all within 1m" }, { l[6], l[#l] })
      assert.equal("every    59s (59 s)", lines(cli("show", "short"))[6])
      assert.equal("every    59.5s (59.5 s)", lines(cli("show", "shorter"))[6])
      l = lines(cli("schedules"))
      assert.equal(4, #l)
      local shown = {}
      for i = 2, 4 do
        local id, span = l[i]:match("^(%S+)%s+k%s+(%S+)%s")
        shown[id] = span
      end
      assert.same({ minute = "1m", short = "59s", shorter = "59.5s" }, shown)
    end)

    it("retry, run, cancel: done (0) or refused (1), with the reason", function()
      local q = populate()
      local before = now()
      assert.same({ "", "hwtimer-jobs: job m1 is dead: q:retry(id) runs it again\n", 1 }, { cli("run", "m1") })
      assert.same({ "m1: retried: pending, due now, attempts from zero\n", "", 0 }, { cli("retry", "m1") })
      local job = q:get("m1")
      assert.same({ 0, "to:ann" }, { job.attempt, job.payload })
      assert.is_nil(job.dead)
      assert.is_nil(job.error)
      assert.is_true(job.due >= before - 0.05 and job.due <= now() + 0.05)
      assert.same({ '{"command":"retry","id":"m3","ok":true}\n', "", 0 }, { cli("--json", "retry", "m3") })
      assert.is_nil(q:get("m3").dead)
      assert.same({ "", "hwtimer-jobs: job m2 is not dead (it is pending)\n", 1 }, { cli("retry", "m2") })
      assert.same({ "", "hwtimer-jobs: no job nope\n", 1 }, { cli("--json", "retry", "nope") })
      assert.same({ "m2: due now\n", "", 0 }, { cli("run", "m2") })
      assert.is_true(q:get("m2").due <= now() + 0.05)
      assert.same({ '{"command":"run","id":"nightly","ok":true}\n', "", 0 }, { cli("--json", "run", "nightly") })
      assert.is_true(q:get("nightly").due <= now() + 0.05)
      assert.same({ "", "hwtimer-jobs: no job nope\n", 1 }, { cli("run", "nope") })
      assert.same({ "o1: cancelled\n", "", 0 }, { cli("cancel", "o1") })
      assert.is_nil(q:get("o1"))
      assert.same({ "", "hwtimer-jobs: no job o1\n", 1 }, { cli("cancel", "o1") })
      assert.same({ '{"command":"cancel","id":"m2","ok":true}\n', "", 0 }, { cli("--json", "cancel", "m2") })
      assert.same({ "", "hwtimer-jobs: no job m2\n", 1 }, { cli("--json", "cancel", "m2") })
      assert.is_nil(q:get("m2"))
    end)

    it("refuses what a process holds: cancel, run and retry of a job while it runs elsewhere", function()
      local q = open()
      local got
      q:handle("slow", function(job)
        got = got or {
          cancel = { cli("cancel", job.id) }, run = { cli("run", job.id) }, retry = { cli("retry", job.id) },
          show = lines(cli("show", job.id)), ls = json_of(cli("--json", "ls", "--state", "leased")),
          counts = json_of(cli("--json", "counts")),
        }
      end)
      assert(q:schedule("slow", 0, nil, { id = "s1" }))
      assert.truthy(wait(function() return got end, 10))
      assert.same({ "", 1 }, { got.cancel[1], got.cancel[3] })
      assert.matches("^hwtimer%-jobs: job s1 is in flight in another process %(leased for %d+%.%d+ s more%)\n$",
        got.cancel[2])
      assert.same({ "", 1 }, { got.run[1], got.run[3] })
      assert.matches("^hwtimer%-jobs: job s1 is in flight %(leased for %d+%.%d+ s more%)\n$", got.run[2])
      assert.same({ "", "hwtimer-jobs: job s1 is not dead (it is leased)\n", 1 }, got.retry)
      assert.equal("state    leased", got.show[3])
      assert.same({ "s1" }, { got.ls.jobs[1].id })
      assert.equal("leased", got.ls.jobs[1].state)
      assert.same({ 0, 1 }, { got.counts.pending, got.counts.leased })
      assert.truthy(wait(function() return q:pending() == 0 end))
    end)

    it("schedules: intervals and cron expressions in next-due order, as a table and as JSON", function()
      local q = open()
      assert.same({ "no schedules\n", "", 0 }, { cli("schedules") })
      assert.same({ '{"schedules":[]}\n', "", 0 }, { cli("--json", "schedules") })
      assert(q:every("report", 3600, nil, { id = "hourly" }))
      assert(q:every("sweep", 90, "tmp/", { id = "sweeper", limit = 10 }))
      assert(q:every("backup", "30 2 * * *", nil, { id = "nightly", tz = "Europe/Berlin", missed = "all",
                                                      window = 86400, start = 4102444800 })) -- 2100-01-01
      assert(q:schedule("mail", 10, nil, { id = "once" }))
      local out, err, status = cli("schedules")
      assert.same({ "", 0 }, { err, status })
      local l = lines(out)
      assert.equal(4, #l)
      assert.matches("^ID%s+KIND%s+SCHEDULE%s+NEXT DUE %(UTC%)%s+WHEN%s+RUNS%s+ATTEMPT%s+STATE$", l[1])
      assert.matches("^sweeper%s+sweep%s+1m30s%s+" .. ISO .. "%s+in 1m%d*s?%s+0/10%s+0  pending$", l[2])
      assert.matches("^hourly%s+report%s+1h%s+" .. ISO .. "%s+in [%dhms]+%s+0%s+0  pending$", l[3])
      assert.matches("^nightly%s+backup%s+30 2 %* %* %* Europe/Berlin%s+2100%-01%-01T01:30:00%.000Z%s+in %d+d%d*h?%s+0%s+0  pending$",
        l[4])
      -- RUNS and ATTEMPT are numbers: set right, each ending under its heading's last letter
      local runs_end, attempt_end = select(2, l[1]:find("RUNS", 1, true)), select(2, l[1]:find("ATTEMPT", 1, true))
      for i = 2, 4 do
        assert.same({ "0", "0" }, { l[i]:sub(runs_end, runs_end), l[i]:sub(attempt_end, attempt_end) }, l[i])
      end
      assert.equal("0/10", l[2]:sub(runs_end - 3, runs_end))
      local doc = json_of(cli("--json", "schedules"))
      assert.equal(3, #doc.schedules)
      local due = q:get("sweeper").due
      assert.same({ id = "sweeper", kind = "sweep", state = "pending", due = due, due_utc = iso(due), attempt = 0,
                    every = 90, payload = "tmp/", error = NULL, cron = NULL, tz = NULL, start = NULL, stop = NULL,
                    limit = 10, missed = "once", window = NULL, runs = 0, scheduled_for = due,
                    scheduled_for_utc = iso(due) }, doc.schedules[1])
      assert.same({ "hourly", 3600 }, { doc.schedules[2].id, doc.schedules[2].every })
      assert.same({ id = "nightly", kind = "backup", state = "pending", due = 4102450200,
                    due_utc = "2100-01-01T01:30:00.000Z", attempt = 0, every = NULL, payload = NULL, error = NULL,
                    cron = "30 2 * * *", tz = "Europe/Berlin", start = 4102444800, stop = NULL, limit = NULL,
                    missed = "all", window = 86400, runs = 0, scheduled_for = 4102450200,
                    scheduled_for_utc = "2100-01-01T01:30:00.000Z" }, doc.schedules[3])
      l = lines(cli("show", "nightly"))
      assert.same({ "every    (none)", 'cron     "30 2 * * *" in Europe/Berlin' }, { l[6], l[9] })
      assert.matches("^time     2100%-01%-01T01:30:00%.000Z %(in %d+d%d*h?%)$", l[10])
      assert.matches("^start    2100%-01%-01T00:00:00%.000Z %(in %d+d%d*h?%)$", l[12])
      assert.same({ "runs     0", "missed   all within 1d" }, { l[11], l[13] })
      assert.equal(13, #l)
    end)

    it("never runs a job: what is due stays pending, never leased, its attempts at zero", function()
      local q = open()
      assert(q:at("k", now() - 1, "p", { id = "k1" })) -- due, of a kind no process here handles
      assert(q:schedule("k", 3600, nil, { id = "k2" }))
      assert(q:every("k", 0.2, nil, { id = "k3" }))
      local runs = {
        { "counts" }, { "ls" }, { "--json", "ls" }, { "show", "k1" }, { "schedules" }, { "run", "k2" },
        { "--json", "counts" },
      }
      local k3_due = q:get("k3").due
      for _ = 1, 2 do -- before k3's due time, and after it
        for _, args in ipairs(runs) do
          local _, err, status = cli(args)
          assert.same({ "", 0 }, { err, status }, table.concat(args, " "))
        end
        wait(function() return now() > k3_due + 0.1 end)
      end
      local c = json_of(cli("--json", "counts"))
      assert.same({ 3, 3, 0 }, { c.pending, c.due, c.leased })
      for _, id in ipairs({ "k1", "k2", "k3" }) do
        local job = q:get(id)
        assert.same({ 0, true }, { job.attempt, job.leased == nil }, id)
      end
    end)

    it("escapes what is not printable: backslashes in text; JSON's escapes, U+FFFD and base64", function()
      local q = open()
      local id = 'q"b\\s\1\127\195\169' -- quote, backslash, control, DEL, é
      local payload = "a\0b\31c\255d\237\160\128e\240\159\152\128" -- NUL, US, 0xFF, a surrogate, then an emoji
      assert(q:schedule("k", 60, payload, { id = id }))
      local l = lines(cli("show", id))
      assert.equal('id       q\\"b\\\\s\\x01\\x7F\195\169', l[1])
      assert.equal('payload  "a\\x00b\\x1Fc\\xFFd\\xED\\xA0\\x80e\240\159\152\128"', l[7])
      local out, err, status = cli("--json", "show", id)
      assert.same({ "", 0 }, { err, status })
      assert.truthy(out:find('"id":"q\\"b\\\\s\\u0001\\u007f\195\169"', 1, true), out)
      assert.truthy(out:find('"payload":"a\\u0000b\\u001fc\239\191\189d\239\191\189\239\191\189\239\191\189e'
        .. '\240\159\152\128"', 1, true), out)
      local doc = json_of(out)
      assert.equal(id, doc.id)
      assert.equal("YQBiH2P/ZO2ggGXwn5iA", doc.payload_base64)
      -- an id that starts with "-" comes after "--"
      assert(q:schedule("k", 60, "ok", { id = "-x" }))
      assert.same({ "", usage_error("unknown option -x"), 2 }, { cli("show", "-x") })
      assert.equal("id       -x", lines(cli("show", "--", "-x"))[1])
      assert.is_nil(json_of(cli("--json", "show", "--", "-x")).payload_base64) -- UTF-8: no base64
      -- the next page's cursor, of an id of escape sequences: written
      -- escaped, as bash reads it back
      assert(q:schedule("k", 61, "e", { id = "esc\27[31m\7'\\\n" }))
      assert(q:schedule("k", 62, "z", { id = "zz" }))
      local text = cli("ls", "--limit", "3")
      assert.is_nil(text:find("[\1-\9\11-\31\127]"), text) -- no raw control byte
      local word = text:match("next page: %-%-after (%$'[^\n]*')\n$")
      assert.truthy(word, text)
      local script = TMP .. "/cursor.sh"
      local f = assert(io.open(script, "wb"))
      f:write("printf %s ", word, "\n")
      f:close()
      local p = assert(io.popen("bash " .. sq(script)))
      local read_back = p:read("*a")
      p:close()
      assert.equal(json_of(cli("--json", "ls", "--limit", "3")).next, read_back)
    end)

    it("--queue: another queue of the same store", function()
      local other = open({ queue = "mail" })
      assert(other:schedule("k", 60, nil, { id = "in-mail" }))
      open()
      assert.same({ 0, 1 }, { json_of(cli("--json", "counts")).pending,
                              json_of(cli("--json", "--queue", "mail", "counts")).pending })
      assert.equal("in-mail", json_of(cli("--json", "--queue", "mail", "ls")).jobs[1].id)
      assert.same({ "", "hwtimer-jobs: no job in-mail\n", 1 }, { cli("show", "in-mail") })
    end)
  end

  describe("with an SQLite store", function()
    if not have_sqlite then
      it("needs hwtimer.sqlite", function() pending("hwtimer.sqlite not built: install libsqlite3-dev") end)
      return
    end
    contract(C.sqlite_env())

    it("refuses a file that is missing (making none) or not a store, exit 1", function()
      local missing = TMP .. "/missing.db"
      assert.same({ "", "hwtimer-jobs: " .. missing .. ": No such file or directory (hwtimer-jobs opens a store, "
        .. "never makes one)\n", 1 }, { jobs({ "--path", missing, "counts" }) })
      assert.is_nil(io.open(missing))
      local f = assert(io.open(TMP .. "/text.db", "wb"))
      f:write(string.rep("not a database\n", 100))
      f:close()
      local out, err, status = jobs({ "--path", TMP .. "/text.db", "ls" })
      assert.same({ "", 1 }, { out, status })
      assert.equal("hwtimer-jobs: " .. TMP .. "/text.db: file is not a database\n", err)
    end)

    -- Beside live processes the tool changes no store's format: a file made
    -- a store, or a store upgraded, would shut them out.
    it("neither makes a store in an empty file nor upgrades one of format 1, exit 1", function()
      local empty = TMP .. "/empty.db"
      assert(io.open(empty, "wb")):close()
      assert.same({ "", "hwtimer-jobs: " .. empty .. ": not a hwtimer.durable store (it is empty, or holds " ..
        "other tables)\n", 1 }, { jobs({ "--path", empty, "counts" }) })
      assert.equal("", helpers.read_file(empty))
      local old = TMP .. "/format1.db"
      os.remove(old)
      local db = assert(require("hwtimer.sqlite").open(old))
      assert(db:exec(require("spec.durable.format_1")))
      db:close()
      local out, err, status = jobs({ "--path", old, "counts" })
      assert.same({ "", 1 }, { out, status })
      assert.matches("store format 1: the processes of this version upgrade it", err, 1, true)
      db = assert(require("hwtimer.sqlite").open(old))
      local st = assert(db:prepare("PRAGMA user_version"))
      assert.equal(1, st:first())
      st:finalize()
      db:close()
    end)

    it("exits 1 when its output cannot be written (a full disk), saying so", function()
      if not io.open("/dev/full", "wb") then return pending("no /dev/full") end
      os.execute("rm -f " .. sq(TMP) .. "/full.db*")
      local d = assert(require("hwtimer.durable").open(require("hwtimer").new(), { path = TMP .. "/full.db" }))
      assert(d:schedule("k", 60, string.rep("x", 100)))
      d:close()
      local p = assert(io.popen(COMMAND .. " --path " .. sq(TMP .. "/full.db") .. " --json ls >/dev/full 2>" ..
        sq(TMP .. "/err") .. "; echo $?"))
      local status = tonumber(p:read("*a"))
      p:close()
      assert.equal(1, status)
      assert.matches("^hwtimer%-jobs: cannot write the output: ", helpers.read_file(TMP .. "/err"))
    end)

    it("says which rock is missing where hwtimer.sqlite is not installed, exit 1", function()
      -- (the script run by this Lua, on a C path that holds hwtimer.core alone)
      local core = package.searchpath and package.searchpath("hwtimer.core", package.cpath)
      if not core then
        for dir in package.cpath:gmatch("[^;]+") do
          local p = dir:gsub("%?", "hwtimer/core")
          if io.open(p) then core = p break end
        end
      end
      assert.truthy(core)
      if core:sub(1, 1) ~= "/" then core = helpers.shell("pwd"):gsub("\n", "") .. "/" .. core end
      os.execute("mkdir -p " .. sq(TMP .. "/cpath/hwtimer") .. " && ln -sf " .. sq(core) .. " " ..
        sq(TMP .. "/cpath/hwtimer/core.so"))
      local store = TMP .. "/present.db"
      assert(io.open(store, "wb")):close()
      local out, err, status = run_with("LUA_CPATH=" .. sq(TMP .. "/cpath/?.so"), LUA .. " bin/hwtimer-jobs",
        { "--path", store, "counts" })
      assert.same({ "", "hwtimer-jobs: SQLite stores need the hwtimer-sqlite rock (luarocks install "
        .. "hwtimer-sqlite; or make install where libsqlite3-dev is installed): module 'hwtimer.sqlite' not found\n",
        1 }, { out, err, status })
    end)
  end)

  describe("with a Redis store", function()
    if helpers.without_redis(it, pending) then return end
    local server, n, prefix = nil, 0, nil
    setup(function() server = N.start_redis() end)
    teardown(function() server.stop() end)

    -- the store: in database 2, a prefix of its own for each spec
    local function client()
      local c = redis.connect("127.0.0.1", server.port)
      c:select(2)
      return c
    end
    contract({
      fresh = function()
        n = n + 1
        prefix = "cli" .. n
      end,
      options = function() return { redis = client, prefix = prefix } end,
      args = function() return { "--redis", "127.0.0.1:" .. server.port .. "/2", "--prefix", prefix } end,
    })

    it("refuses a store that is not there (making none), a server that is not, a database out of range", function()
      local where = "127.0.0.1:" .. server.port
      assert.same({ "", "hwtimer-jobs: no hwtimer.durable store {nostore:default} in Redis at " .. where
        .. "/0 (see --prefix and --queue)\n", 1 }, { jobs({ "--redis", where, "--prefix", "nostore", "counts" }) })
      assert.same({ "", "hwtimer-jobs: no hwtimer.durable store {hwtimer:q2} in Redis at " .. where
        .. "/5 (see --prefix and --queue)\n", 1 }, { jobs({ "--redis", where .. "/5", "--queue", "q2", "counts" }) })
      assert.equal(0, N.redis_cmd(server.port, "DBSIZE"))
      assert.same({ "", "hwtimer-jobs: Redis at " .. where .. "/99: ERR DB index is out of range\n", 1 },
        { jobs({ "--redis", where .. "/99", "counts" }) })
      local port = N.free_port()
      assert.same({ "", "hwtimer-jobs: cannot connect to Redis at 127.0.0.1:" .. port .. "/0: connection refused\n",
        1 }, { jobs({ "--redis", "127.0.0.1:" .. port, "ls" }) })
      local nowhere = server.socket .. ".none"
      assert.same({ "", "hwtimer-jobs: cannot connect to Redis at unix:" .. nowhere .. "?db=0: No such file or directory\n",
        1 }, { jobs({ "--redis", "unix:" .. nowhere, "ls" }) })
      assert.same({ "", "hwtimer-jobs: Redis at unix:" .. server.socket .. "?db=99: ERR DB index is out of range\n", 1 },
        { jobs({ "--redis", "unix://" .. server.socket .. "?db=99", "counts" }) })
      assert.same({ "", "hwtimer-jobs: Redis at unix:" .. server.socket .. "?db=999999999: ERR DB index is out of range\n",
        1 }, { jobs({ "--redis", "unix:" .. server.socket .. "?db=999999999", "counts" }) })
      assert.same({ "", "hwtimer-jobs: Redis at " .. where .. "/999999999: ERR DB index is out of range\n", 1 },
        { jobs({ "--redis", where .. "/999999999", "counts" }) })
    end)

    it("reaches a store over the server's unix socket, in the database asked for", function()
      local timer = assert(hwtimer.new())
      local q = assert(durable.open(timer, { redis = client, prefix = "unixcli", queue = "mail",
        on_error = function() end }))
      assert(q:schedule("receipt", 3600, "order 1", { id = "r1" }))
      q:close()
      timer:close()
      local out, err, status = jobs({ "--redis", "unix:" .. server.socket .. "?db=2", "--prefix", "unixcli",
        "--queue", "mail", "--json", "show", "r1" })
      assert.same({ "", 0 }, { err, status })
      assert.truthy(out:find('"payload":"order 1"', 1, true), out)
      assert.same({ "", "hwtimer-jobs: no hwtimer.durable store {unixcli:mail} in Redis at unix:" .. server.socket
        .. "?db=0 (see --prefix and --queue)\n", 1 },
        { jobs({ "--redis", "unix://" .. server.socket, "--prefix", "unixcli", "--queue", "mail", "counts" }) })
    end)
  end)

  describe("with a store on a Redis Cluster", function()
    if not (redis and helpers.full_size()) then
      it("runs in the Lua 5.4 run of the source tree, with redis-server, luasocket and redis-lua", function()
        pending("three redis-servers and redis-cli --cluster create take seconds: one run is enough")
      end)
      return
    end
    local cluster
    setup(function() cluster = assert(N.start_redis_cluster(3)) end)
    teardown(function() cluster.stop() end)

    -- the port of the node that serves the queue's slot, and another's
    local function nodes(key)
      local a = redis.connect("127.0.0.1", cluster.ports[1])
      a:define_command("cluster")
      local slot = a:cluster("keyslot", key)
      for _, range in ipairs(a:cluster("slots")) do
        if slot >= range[1] and slot <= range[2] then
          local serving = range[3][2]
          for _, p in ipairs(cluster.ports) do
            if p ~= serving then return serving, p end
          end
        end
      end
    end

    it("follows the MOVED of a node that does not serve the queue's slot to the one that does", function()
      local serving, other = nodes("{clu:orders}")
      local timer = assert(hwtimer.new())
      local q = assert(durable.open(timer, { redis = redis.connect("127.0.0.1", serving), prefix = "clu",
        queue = "orders", on_error = function() end }))
      assert(q:schedule("close", 3600, "order 7", { id = "o7" }))
      q:close()
      timer:close()
      for _, port in ipairs({ serving, other }) do
        local out, err, status = jobs({ "--redis", "127.0.0.1:" .. port, "--prefix", "clu", "--queue", "orders",
          "--json", "show", "o7" })
        assert.same({ "", 0 }, { err, status }, "asked at " .. port)
        assert.truthy(out:find('"payload":"order 7"', 1, true), out)
      end
      -- no store there: named at the node that serves the slot
      assert.same({ "", "hwtimer-jobs: no hwtimer.durable store {clu:none} in Redis at 127.0.0.1:"
        .. nodes("{clu:none}") .. "/0 (see --prefix and --queue)\n", 1 },
        { jobs({ "--redis", "127.0.0.1:" .. select(2, nodes("{clu:none}")), "--prefix", "clu", "--queue", "none",
          "counts" }) })
    end)
  end)
end)
