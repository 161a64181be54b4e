#!/usr/bin/env bash
# bench/agent/find_xdev.sh: `find TREE -xdev | wc -l` (default TREE /) natively and under
# `roost run` with a mapping in place (--mount /bench-scratch=A_TEMP_DIR, which the walk never
# enters: every path call is trapped, none is rewritten), in turn in each of RUNS rounds (after
# one warm-up each), so drift hits both alike. Prints each one's median wall-clock seconds,
# the median of the per-round ratios, and the entry counts (which must be equal).
#   usage: bench/agent/find_xdev.sh [RUNS] [TREE]      (defaults 7, /)
#   ROOST: the agent (default target/release/roost); BASE: another roost binary (an earlier
#   commit's build), timed in the same rounds as roost-base.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-7}
TREE=${2:-/}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
SCRATCH=$(mktemp -d /tmp/roost-bench.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
declare -A CMD=(
  [native]="sh -c 'find $TREE -xdev | wc -l'"
  [roost]="$ROOST run --mount /bench-scratch=$SCRATCH -- sh -c 'find $TREE -xdev | wc -l'"
)
ORDER="native roost"
if [ -n "${BASE:-}" ]; then
  CMD[roost-base]="$BASE run --mount /bench-scratch=$SCRATCH -- sh -c 'find $TREE -xdev | wc -l'"
  ORDER="$ORDER roost-base"
fi
# one run of configuration $1: "seconds count"
once() {
  local start end count
  start=$(date +%s.%N)
  count=$(eval "${CMD[$1]}" 2>/dev/null)
  end=$(date +%s.%N)
  echo "$(echo "$end - $start" | bc) $count"
}
for c in $ORDER; do once "$c" >/dev/null; done
: >"$SCRATCH.results"
for run in $(seq "$RUNS"); do
  for c in $ORDER; do echo "$run $c $(once "$c")" >>"$SCRATCH.results"; done
done
python3 - "$SCRATCH.results" "$ORDER" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
order = sys.argv[2].split()
times = {c: {r: float(t) for r, cc, t, _ in rows if cc == c} for c in order}
counts = {c: sorted({int(n) for _, cc, _, n in rows if cc == c}) for c in order}
print("| config | median wall s | median ratio to native | entries |")
print("|---|---|---|---|")
for c in order:
    ratios = [times[c][r] / times["native"][r] for r in times[c]]
    print(f"| {c} | {statistics.median(times[c].values()):.3f} | {statistics.median(ratios):.2f}x | {counts[c]} |")
PY
rm -f "$SCRATCH.results"
