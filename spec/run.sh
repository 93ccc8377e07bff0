#!/usr/bin/env bash
# spec/run.sh [-t SECONDS] COMMAND... [-- FILE...]
# Runs each spec file (default: spec/*/*_spec.lua) in a busted of its own,
# `COMMAND FILE`, and fails when any file fails or runs past SECONDS
# (default $HWT_SPEC_LIMIT, else 300). A file past its limit is killed with
# everything it started (its own process group: nginx, redis-server) and
# counted as a failure under its name, in busted's summary form so that CI's
# closing line counts it. A hang is a failure with the file's name, not a
# suite that runs until CI's own limit.
set -u
limit=${HWT_SPEC_LIMIT:-300}
if [ "${1:-}" = "-t" ]; then limit=$2; shift 2; fi
cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(spec/*/*_spec.lua)
[ ${#cmd[@]} -gt 0 ] || { echo "usage: spec/run.sh [-t SECONDS] COMMAND... [-- FILE...]" >&2; exit 2; }

# The servers a spec file started (spec/nginx.lua writes their pids to
# $HWT_SPEC_SERVERS: they daemonize, out of its process group) and left
# running, as a file cut short leaves them: stopped by their pid, once each
# is still a redis-server or an nginx.
running() { # pid name: that process, not a zombie
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && [ "$(echo "${stat##*) }" | cut -d' ' -f1)" != Z ]
}
stop_servers() {
  local pid name
  while read -r pid; do
    for name in redis-server nginx; do
      running "$pid" "$name" || continue
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 40); do running "$pid" "$name" || break; sleep 0.05; done
      running "$pid" "$name" && kill -KILL "$pid" 2>/dev/null
      echo "spec/run.sh: $1 left $name $pid running: stopped"
    done
  done < "$HWT_SPEC_SERVERS"
}

# Specs open thousands of sockets at once (callbacks that wait each hold
# one): the soft limit on descriptors goes up to the hard one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# Each test's own limit stays short of the file's (spec/watchdog.lua).
export HWT_FILE_LIMIT=$limit

# Each file's output is kept too: at the end a failed file's failures are
# printed again, so that the tail of a long log (all CI shows) names the case.
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
log_of() { echo "$logs/$(echo "$1" | tr / _).log"; }

failed=()
times=() # "seconds file", for the slowest files named at the end
for f in "${files[@]}"; do
  start=$SECONDS
  HWT_SPEC_SERVERS=$(mktemp)
  export HWT_SPEC_SERVERS
  setsid "${cmd[@]}" "$f" > >(tee "$(log_of "$f")") 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt "$limit" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null; sleep 2; kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    echo
    echo "$f: timed out after $limit s (killed with what it started)"
    echo "0 successes / 1 failures / 0 errors / 0 pending : $limit seconds"
    failed+=("$f (timed out)")
  else
    wait "$pid" || failed+=("$f")
  fi
  stop_servers "$f"
  rm -f "$HWT_SPEC_SERVERS"
  times+=("$((SECONDS - start)) $f")
done
# Where the time went: the five slowest files (whole seconds, wall clock).
if [ ${#times[@]} -gt 1 ]; then
  echo "spec/run.sh: the slowest of ${#files[@]} files: $(printf '%s\n' "${times[@]}" | sort -rn | head -5 |
    awk '{ printf "%s%s %d s", (NR > 1 ? ", " : ""), $2, $1 }')"
fi
if [ ${#failed[@]} -gt 0 ]; then
  wait # the tees of the process substitutions (bash 5.1 and later wait for them too)
  for f in "${failed[@]}"; do
    f=${f% (timed out)}
    echo
    echo "spec/run.sh: what failed in $f:"
    what=$(sed -n '/^\(Failure\|Error\) ->/,$p' "$(log_of "$f")" | head -60)
    [ -n "$what" ] || what=$(tail -n 30 "$(log_of "$f")") # valgrind's or a crash's
    echo "$what"
  done
  echo "spec/run.sh: ${#failed[@]} of ${#files[@]} spec files failed: ${failed[*]}"
  exit 1
fi
echo "spec/run.sh: ${#files[@]} spec files passed"
