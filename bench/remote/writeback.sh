#!/usr/bin/env bash
# bench/remote/writeback.sh: writing a large file to a loopback `roost serve` through
# `roost run`, in direct mode (every write an RPC to the server) and in cached mode (the
# program writes a local copy, sent back whole when it is closed), side by side: `dd` of
# SIZE MiB in 1 MiB blocks, the whole `roost run` timed (in cached mode roost returns only
# once the copy is on the server). Each round runs both in turn on a fresh file; prints the
# median MB/s of RUNS rounds and cached as a share of direct (issue 28's target: >= 0.70).
#   usage: bench/remote/writeback.sh [RUNS]      (default 5)
#   SIZE: MiB written (default 1024)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
SIZE=${SIZE:-1024}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
WORK=$(mktemp -d /tmp/roost-writeback.XXXXXX)
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/export"
. bench/remote/serve.sh
start_serve writeback.sh

run() { # MODE: prints MB/s
  rm -f "$WORK/export/big"
  rm -rf "$WORK/cache"
  sync
  local t0 t1
  t0=$(date +%s%N)
  "$ROOST" run --cache "$WORK/cache" --chirp-mode "$1" -- \
    dd if=/dev/zero of="/chirp/127.0.0.1:$PORT/big" bs=1M count="$SIZE" status=none
  t1=$(date +%s%N)
  [ "$(stat -c %s "$WORK/export/big")" = $((SIZE << 20)) ] || { echo "writeback.sh: short file" >&2; exit 1; }
  echo $((SIZE * 1048576 * 1000 / (t1 - t0)))
}
declare -A ALL
for round in $(seq "$RUNS"); do
  for mode in direct cached; do
    ALL[$mode]+="$(run "$mode") "
  done
  echo "writeback.sh: round $round of $RUNS: ${ALL[direct]}| ${ALL[cached]}" >&2
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
direct=$(echo "${ALL[direct]}" | median)
cached=$(echo "${ALL[cached]}" | median)
echo "| $SIZE MiB by dd bs=1M (median of $RUNS) | MB/s | share of direct |"
echo "|---|---|---|"
echo "| roost-direct | $direct | 1.00 |"
echo "| roost-cached (write-back on close) | $cached | $(awk -v c="$cached" -v d="$direct" 'BEGIN {printf "%.2f", c / d}') |"
