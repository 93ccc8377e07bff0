#!/usr/bin/env bash
# spec/run.sh [-t SECONDS] [-j JOBS] COMMAND... [-- FILE...]
# Runs each spec file (default: spec/*/*_spec.lua) in a busted of its own,
# `COMMAND FILE`, and fails when any file fails or runs past SECONDS
# (default $HWT_SPEC_LIMIT, else 300). A file past its limit is killed with
# everything it started (its own process group: nginx, redis-server) and
# counted as a failure under its name, in busted's summary form so that CI's
# closing line counts it. A hang is a failure with the file's name, not a
# suite that runs until CI's own limit.
# With JOBS (default $HWT_SPEC_JOBS, else 1) above 1, that many files run
# side by side, each file's output shown whole when it ends; a file that
# says `spec: alone` in its first lines (it measures time: lateness, p99
# beside a peer, how long a step takes) runs after them, with nothing else.
set -u
limit=${HWT_SPEC_LIMIT:-300}
jobs=${HWT_SPEC_JOBS:-1}
while :; do
  case "${1:-}" in
    -t) limit=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    *) break ;;
  esac
done
cmd=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmd+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(spec/*/*_spec.lua)
[ ${#cmd[@]} -gt 0 ] || { echo "usage: spec/run.sh [-t SECONDS] [-j JOBS] COMMAND... [-- FILE...]" >&2; exit 2; }

# The servers a spec file started (spec/nginx.lua writes their pids to
# $HWT_SPEC_SERVERS: they daemonize, out of its process group) and left
# running, as a file cut short leaves them: stopped by their pid, once each
# is still a redis-server or an nginx.
running() { # pid name: that process, not a zombie
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && [ "$(echo "${stat##*) }" | cut -d' ' -f1)" != Z ]
}
stop_servers() { # file, its servers' list
  local pid name
  while read -r pid; do
    for name in redis-server nginx; do
      running "$pid" "$name" || continue
      kill -TERM "$pid" 2>/dev/null
      for _ in $(seq 40); do running "$pid" "$name" || break; sleep 0.05; done
      running "$pid" "$name" && kill -KILL "$pid" 2>/dev/null
      echo "spec/run.sh: $1 left $name $pid running: stopped"
    done
  done < "$2"
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
declare -A pid_of start_of servers_of live_of

# Start file $1; $2 = live: its output shown as it comes (tee), else kept
# in its log and shown whole when it ends (files side by side).
launch() {
  local f=$1
  servers_of[$f]=$(mktemp)
  start_of[$f]=$SECONDS
  live_of[$f]=$2
  if [ "$2" = live ]; then
    HWT_SPEC_SERVERS=${servers_of[$f]} setsid "${cmd[@]}" "$f" > >(tee "$(log_of "$f")") 2>&1 &
  else
    HWT_SPEC_SERVERS=${servers_of[$f]} setsid "${cmd[@]}" "$f" >"$(log_of "$f")" 2>&1 &
  fi
  pid_of[$f]=$!
}

# Whether file $1 has ended or run past its limit.
over() {
  ! kill -0 "${pid_of[$1]}" 2>/dev/null || [ $((SECONDS - ${start_of[$1]})) -ge "$limit" ]
}

# Reap file $1 (over): kill it past its limit, show its output, stop the
# servers it left, count it.
finish() {
  local f=$1 pid=${pid_of[$1]} timed_out=
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null; sleep 2; kill -KILL -- "-$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    timed_out=1
  elif ! wait "$pid"; then
    failed+=("$f")
  fi
  if [ "${live_of[$f]}" != live ]; then
    echo "== $f ($((SECONDS - ${start_of[$f]})) s)"
    cat "$(log_of "$f")"
  fi
  if [ -n "$timed_out" ]; then
    echo
    echo "$f: timed out after $limit s (killed with what it started)"
    echo "0 successes / 1 failures / 0 errors / 0 pending : $limit seconds"
    failed+=("$f (timed out)")
  fi
  stop_servers "$f" "${servers_of[$f]}"
  rm -f "${servers_of[$f]}"
  times+=("$((SECONDS - ${start_of[$f]})) $f")
}

# Files that measure time run alone, after the others. Side by side, the
# largest files start first (the longest, roughly: durable/01 alone takes a
# third of a Lua's run), so that no long one starts last.
together=() alone=()
for f in "${files[@]}"; do
  if [ "$jobs" -gt 1 ] && head -n 20 "$f" | grep -q 'spec: alone'; then alone+=("$f"); else together+=("$f"); fi
done
if [ "$jobs" -gt 1 ] && [ ${#together[@]} -gt 1 ]; then
  mapfile -t together < <(for f in "${together[@]}"; do echo "$(wc -c <"$f") $f"; done | sort -rn | cut -d' ' -f2-)
fi

# Files one at a time, each one's output as it comes.
one_by_one() {
  local f
  for f in "$@"; do
    launch "$f" live
    until over "$f"; do sleep 0.2; done
    finish "$f"
  done
}

if [ "$jobs" -le 1 ]; then
  one_by_one "${together[@]}"
else
  running=()
  next=0
  while [ "$next" -lt ${#together[@]} ] || [ ${#running[@]} -gt 0 ]; do
    while [ ${#running[@]} -lt "$jobs" ] && [ "$next" -lt ${#together[@]} ]; do
      launch "${together[$next]}" kept
      running+=("${together[$next]}")
      next=$((next + 1))
    done
    sleep 0.2
    still=()
    for f in "${running[@]}"; do
      if over "$f"; then finish "$f"; else still+=("$f"); fi
    done
    running=("${still[@]}")
  done
  one_by_one "${alone[@]}"
fi
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
