#!/usr/bin/env bash
# bench/remote/redirect.sh: what a shell's redirection to a remote file costs — a loop of N
# `echo x > FILE` (an O_TRUNC open, then dup2 to descriptor 1, a write, and the close) and
# of N `echo x >> FILE` in bash — natively on a local file, and under `roost run` on a file
# of a loopback `roost serve` in direct and in cached mode. Each round runs every
# configuration once, in turn; prints the median of RUNS rounds in microseconds per
# redirection as a markdown table (issue 28's target: direct mode <= 2 ms for `>`).
#   usage: bench/remote/redirect.sh [RUNS]      (default 5)
#   N: redirections per loop (default 100)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
N=${N:-100}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
WORK=$(mktemp -d /tmp/roost-redirect.XXXXXX)
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/export" "$WORK/local"
. bench/remote/serve.sh
start_serve redirect.sh

# The loop, timed inside bash (start-up excluded): microseconds per redirection.
cat >"$WORK/loop.sh" <<'EOF'
f=$1 op=$2 n=$3
t0=$(date +%s%N)
if [ "$op" = ">" ]; then
  for ((i = 0; i < n; i++)); do echo x >"$f"; done
else
  for ((i = 0; i < n; i++)); do echo x >>"$f"; done
fi
t1=$(date +%s%N)
echo $(((t1 - t0) / n / 1000))
EOF
run() { # CONFIG OP
  local remote="/chirp/127.0.0.1:$PORT/f"
  case $1 in
    native) bash "$WORK/loop.sh" "$WORK/local/f" "$2" "$N" ;;
    roost-direct) "$ROOST" run --cache "$WORK/cache" -- bash "$WORK/loop.sh" "$remote" "$2" "$N" ;;
    roost-cached) "$ROOST" run --cache "$WORK/cache" --chirp-mode cached -- \
      bash "$WORK/loop.sh" "$remote" "$2" "$N" ;;
  esac
}
CONFIGS="native roost-direct roost-cached"
declare -A ALL
for round in $(seq "$RUNS"); do
  for op in ">" ">>"; do
    for c in $CONFIGS; do
      ALL[$c$op]+="$(run "$c" "$op") "
    done
  done
  echo "redirect.sh: round $round of $RUNS done" >&2
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "| µs per redirection (median of $RUNS rounds of $N) | \`echo x > f\` | \`echo x >> f\` |"
echo "|---|---|---|"
for c in $CONFIGS; do
  echo "| $c | $(echo "${ALL[$c>]}" | median) | $(echo "${ALL[$c>>]}" | median) |"
done
