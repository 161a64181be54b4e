#!/usr/bin/env bash
# bench/agent/cpu_job.sh: a CPU-bound job with light I/O (gzip -9 of 100 MB of mixed text, a
# few seconds), natively and under `roost run` with a mount list, in alternating pairs so a
# drifting machine skews both alike. Prints each pair's times and ratio and the median ratio.
#   usage: bench/agent/cpu_job.sh [PAIRS]      (default 7)
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=${1:-7}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
WORK=$(mktemp -d /tmp/roost-cpujob.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# Compressible but not trivial input: numbered lines of a repeating vocabulary.
python3 -c '
import sys
words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
out = sys.stdout
for i in range(2_400_000):
    out.write(f"{i} {words[i % 12]} {words[(i * 7) % 12]} {i * 31 % 9973}\n")
' >"$WORK/input"
JOB="gzip -9 -c $WORK/input"
time_of() { local s e; s=$(date +%s.%N); "$@" >/dev/null; e=$(date +%s.%N); python3 -c "print($e - $s)"; }
echo "| pair | native s | roost s | ratio |"
echo "|---|---|---|---|"
ratios=()
for i in $(seq "$PAIRS"); do
  n=$(time_of $JOB)
  r=$(time_of "$ROOST" run --mount "/job=$WORK" -- $JOB)
  ratio=$(python3 -c "print(f'{$r / $n:.3f}')")
  ratios+=("$ratio")
  printf '| %s | %.2f | %.2f | %s |\n' "$i" "$n" "$r" "$ratio"
done
python3 -c "import statistics, sys; print(f'\nmedian ratio: {statistics.median(map(float, sys.argv[1:])):.3f}')" "${ratios[@]}"
