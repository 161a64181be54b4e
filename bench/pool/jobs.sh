#!/usr/bin/env bash
# bench/pool/jobs.sh: a job's turnaround through the Chirp job RPCs — `roost job run`
# (connect, create, commit, wait, reap) of a program that ends at once (/bin/true) and of
# one that runs 120 ms (/bin/sleep 0.12), against a `roost serve --jobs` on loopback.
# Prints the median of ROUNDS runs of each, for this roost and, with BASE=<other roost
# binary>, for that one in the same run (e.g. the build before a change).
#   usage: [BASE=/path/to/roost] bench/pool/jobs.sh [ROUNDS]   (default 21)
# (cctools' chirp_server --jobs is not a peer here: Debian's build fails every job_create
# with "schedule rc = 14: Bad address".)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOST=${ROOST:-target/release/roost}
ROUNDS=${1:-21}
[ -x "$ROOST" ] || cargo build -q --release -p roost --bins
WORK=$(mktemp -d /tmp/roost-jobs.XXXXXX)
chmod 711 "$WORK"
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT

# median_ms ROOST ADDRESS DESCRIPTION: the median wall-clock time of `roost job run`.
median_ms() {
  for _ in $(seq "$ROUNDS"); do
    start=$(date +%s%N)
    "$1" job run "chirp://$2" "$3" --auth address >/dev/null
    echo $((($(date +%s%N) - start) / 1000))
  done | sort -n | awk '{t[NR] = $1} END {printf "%.1f", t[int((NR + 1) / 2)] / 1000}'
}

# row LABEL ROOST: starts ROOST's server and times both jobs against it.
row() {
  rm -rf "$WORK/export" "$WORK/state"
  mkdir -p "$WORK/export" "$WORK/state"
  chmod 711 "$WORK/state"
  "$2" serve "$WORK/export" --listen 127.0.0.1 --port 0 --jobs --job-dir "$WORK/state/jobs" \
    --acl "address:127.0.0.1=rwldax" >"$WORK/serve.out" 2>"$WORK/serve.log" &
  SERVER=$!
  for _ in $(seq 50); do grep -q listening "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
  address=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$WORK/serve.out")
  [ -n "$address" ] || { echo "$1: the server did not start" >&2; exit 1; }
  printf '%-8s %12s %16s\n' "$1" "$(median_ms "$2" "$address" "$WORK/true.json")" \
    "$(median_ms "$2" "$address" "$WORK/sleep.json")"
  kill "$SERVER"
  wait "$SERVER" 2>/dev/null || true
  SERVER=
}

echo '{"executable": "/bin/true", "arguments": ["true"], "files": []}' >"$WORK/true.json"
echo '{"executable": "/bin/sleep", "arguments": ["sleep", "0.12"], "files": []}' >"$WORK/sleep.json"
echo "# $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg); median of $ROUNDS runs, ms"
printf '%-8s %12s %16s\n' build "/bin/true" "/bin/sleep 0.12"
[ -n "${BASE:-}" ] && row base "$BASE"
row this "$ROOST"
