#!/usr/bin/env bash
# bench/remote/micro.sh: the Parrot paper's Figures 7 and 6 for remote I/O through the agent,
# side by side in one run, against one loopback `roost serve`.
# Figure 7, single operations (bench/remote/fig7.c: stat, open+close, pread 1 B, pread 8 KiB,
# pwrite 8 KiB, each the median of N calls): native (a local copy of the file, no roost);
# roost-local (roost run with the file at /r, mounted from a local dir); roost-cached (the
# same with /r mounted from the server, through a cache warmed by an earlier run);
# roost-direct (the same in direct mode: every call an RPC through a virtual descriptor); client-rpc
# (the same operations as RPCs issued by roost_client itself: `chirp-bench --latency-only`,
# against a server of its own). Prints the medians of RUNS rounds (microseconds per call) and
# ratios to client-rpc as a markdown table; the target is roost-cached and roost-direct within
# 1.5x of it.
# Figure 6, sequential read of a 256 MiB file in 4K, 64K and 1M blocks (readblocks.c) under
# roost-direct, and under roost-cached with a cold cache (a fresh one each time, so the
# whole-file fetch is timed) and with a warm one, against `roost get` of the whole file.
# Prints median MB/s of RUNS rounds and each one's rate as a share of roost get's (target:
# direct mode at 64K and up at least 0.70x).
#   usage: bench/remote/micro.sh [RUNS]      (default 5)
#   N: calls per Figure 7 figure (default 20000: a loop long enough to show what opens
#   cost once the kernel places wake-ups on an idle CPU, which 2,000 calls hid).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
N=${N:-20000}
ROOST=${ROOST:-target/release/roost}
BENCH=target/release/chirp-bench
[ -x "$ROOST" ] || cargo build -q --release -p roost
cargo build -q --release -p roost-bench # always: an older chirp-bench lacks --latency-only
WORK=$(mktemp -d /tmp/roost-micro.XXXXXX)
SERVER=
cleanup() { # the server first, so that nothing writes into $WORK as it goes
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
progress() { echo "micro.sh: $*" >&2; }

gcc -O2 -o "$WORK/fig7" bench/remote/fig7.c
gcc -O2 -o "$WORK/readblocks" bench/remote/readblocks.c
# The export: a 64 KiB file for Figure 7 and a 256 MiB one for Figure 6, both dated an hour
# back so that the cache keeps them (files changed in the last 2 s are fetched on each open).
progress "creating the files"
mkdir -p "$WORK/export" "$WORK/local"
head -c $((64 << 10)) /dev/urandom >"$WORK/export/small"
BIG=$((256 << 20))
head -c "$BIG" /dev/urandom >"$WORK/export/big"
touch -d '1 hour ago' "$WORK/export/small" "$WORK/export/big"
cp -p "$WORK/export/small" "$WORK/local/small"
. bench/remote/serve.sh
start_serve micro.sh
CACHED="/r=/chirp/127.0.0.1:$PORT:cached"
DIRECT="/r=/chirp/127.0.0.1:$PORT:direct"

# Figure 7. client-rpc reads chirp-bench's latency table: its rows by name, roost's column.
client_rpc() {
  "$BENCH" --roost "$ROOST" --latency-only --runs 1 --ops "$N" | awk -F' *[|] *' '
    BEGIN { m["stat"] = "stat"; m["open+close"] = "open+close"; m["pread 1 B"] = "read1"
            m["pread 8 KiB"] = "read8k"; m["pwrite 8 KiB"] = "write8k" }
    $2 in m { print m[$2], $4, "us" }'
}
declare -A CONFIGS=(
  [native]="$WORK/fig7 $WORK/local/small $WORK/local/wfile $N"
  [roost-local]="$ROOST run --mount /r=$WORK/local -- $WORK/fig7 /r/small /r/wfile $N"
  [roost-cached]="$ROOST run --cache $WORK/cache --mount $CACHED -- $WORK/fig7 /r/small /r/wfile $N"
  [roost-direct]="$ROOST run --cache $WORK/cache --mount $DIRECT -- $WORK/fig7 /r/small /r/wfile $N"
  [client-rpc]="client_rpc"
)
ORDER="native roost-local roost-cached roost-direct client-rpc"
METRICS="stat open+close read1 read8k write8k"
# A file whose change time (which touch cannot set back) is within the last two seconds is
# fetched again on every cached open (docs/mount-list.md): wait that out, so that the cached
# rows show a kept copy, as they would for any file not just written.
sleep 3
progress "warm-up: roost-cached (fills the cache)"
${CONFIGS[roost-cached]} >/dev/null
# RUNS rounds, each running every configuration once, so drift hits all alike.
: >"$WORK/results"
for run in $(seq "$RUNS"); do
  for c in $ORDER; do
    progress "figure 7: round $run/$RUNS: $c"
    ${CONFIGS[$c]} | sed "s/^/$c /" >>"$WORK/results" || progress "round $run: $c failed"
  done
done

echo "Figure 7: single operations on a 64 KiB file, µs per call (median of $N calls, median of $RUNS rounds)"
echo
python3 bench/agent/table.py "$WORK/results" "$ORDER" "$METRICS" client-rpc
python3 - "$WORK/results" "$METRICS" <<'PY'
import math, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    config, metric, value, _ = line.split()
    if not math.isnan(float(value)):
        rows.setdefault((config, metric), []).append(float(value))
cells = []
for config in ("roost-cached", "roost-direct"):
    cells = []
    for m in sys.argv[2].split():
        if rows.get((config, m)) and rows.get(("client-rpc", m)):
            r = statistics.median(rows[(config, m)]) / statistics.median(rows[("client-rpc", m)])
            cells.append(f"{m} {r:.2f}x {'met' if r <= 1.5 else 'missed'}")
        else:
            cells.append(f"{m} failed")
    print(f"\n{config} / client-rpc (target: at most 1.50x): " + ", ".join(cells))
PY

# Figure 6. rate COMMAND...: MB/s of $BIG bytes over COMMAND's wall-clock time (start-up
# included), or nan when it fails.
rate() {
  local s e
  s=$(date +%s.%N)
  if "$@" >/dev/null 2>&1; then
    e=$(date +%s.%N)
    awk -v s="$s" -v e="$e" -v b="$BIG" 'BEGIN { printf "%.1f\n", b / (e - s) / 1e6 }'
  else
    echo nan
  fi
}
# read_under CACHE BS [MOUNT]: /r/big read through its own descriptor in BS blocks (not dd,
# which reopens its input as descriptor 0: a copy direct mode makes locally).
read_under() {
  "$ROOST" run --cache "$1" --mount "${3:-$CACHED}" -- "$WORK/readblocks" /r/big "$2"
}
BLOCKS="4096 65536 1048576"
progress "warm-up: roost-cached read (fills the cache with big)"
read_under "$WORK/cache" 1048576 >/dev/null 2>&1 || { echo "micro.sh: reading under roost-cached fails" >&2; exit 1; }
: >"$WORK/bandwidth"
for run in $(seq "$RUNS"); do
  progress "figure 6: round $run/$RUNS: roost get"
  echo "roost-get whole $(rate "$ROOST" get "chirp://127.0.0.1:$PORT/big" "$WORK/got") MB/s" >>"$WORK/bandwidth"
  rm -f "$WORK/got"
  for bs in $BLOCKS; do
    progress "figure 6: round $run/$RUNS: roost-cached, bs=$bs, cold and warm cache"
    rm -rf "$WORK/cold"
    echo "roost-cached-cold $bs $(rate read_under "$WORK/cold" "$bs") MB/s" >>"$WORK/bandwidth"
    rm -rf "$WORK/cold"
    echo "roost-cached-warm $bs $(rate read_under "$WORK/cache" "$bs") MB/s" >>"$WORK/bandwidth"
    progress "figure 6: round $run/$RUNS: roost-direct, bs=$bs"
    echo "roost-direct $bs $(rate read_under "$WORK/cache" "$bs" "$DIRECT") MB/s" >>"$WORK/bandwidth"
  done
done

echo
echo "Figure 6: sequential read of a 256 MiB file, MB/s (wall clock of the whole command, roost's start-up and a cold cache's whole-file fetch included; median of $RUNS rounds)"
echo
python3 - "$WORK/bandwidth" "$BLOCKS" <<'PY'
import math, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    config, bs, value, _ = line.split()
    rows.setdefault((config, bs), [])
    if not math.isnan(float(value)):
        rows[(config, bs)].append(float(value))
med = lambda k: statistics.median(rows[k]) if rows.get(k) else None
get = med(("roost-get", "whole"))
print("| configuration | block size | MB/s | rate / roost get's |\n|---|---|---|---|")
cases = [("roost-direct", "roost-direct (no cache)"), ("roost-cached-cold", "roost-cached, cold cache"), ("roost-cached-warm", "roost-cached, warm cache")]
for config, title in cases:
    for bs in sys.argv[2].split():
        v = med((config, bs))
        print(f"| {title} | {bs} | " + (f"{v:.0f} | {v / get:.2f}x |" if v and get else "failed | — |"))
print(f"| roost get (the client's whole-file rate) | whole file | " + (f"{get:.0f} | 1.00x |" if get else "failed | — |"))
PY
