#!/usr/bin/env bash
# bench/agent/compare.sh: two roost binaries side by side (a change's before and after), in
# one run so drift hits both alike: the calls the agent never traps (untrapped.c, against
# the allow-all floor) and the Figure 3 loops outside and inside a mapping (iobench.c).
# Prints medians of RUNS runs as markdown tables.
#   usage: bench/agent/compare.sh BEFORE AFTER [RUNS]      (default 5 runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
OLD=$1
NEW=$2
RUNS=${3:-5}
WORK=$(mktemp -d /tmp/roost-compare.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/data"
gcc -O2 -o "$WORK/untrapped" bench/agent/untrapped.c
gcc -O2 -o "$WORK/iobench" bench/agent/iobench.c
"$WORK/iobench" "$WORK/data/big" 1 >/dev/null # creates the 100 MB file
D=$WORK/data
M="--mount /bench-mnt=$D"
U="$WORK/untrapped 1000000"
declare -A UNTRAPPED=(
  [native]="$U"
  [floor]="$WORK/untrapped --floor 1000000"
  [before]="$OLD run $M -- $U"
  [after]="$NEW run $M -- $U"
  [before-ptrace]="$OLD run --no-notify $M -- $U"
  [after-ptrace]="$NEW run --no-notify $M -- $U"
)
N=20000
declare -A LOOPS=(
  [native]="$WORK/iobench $D/big $N"
  [before-outside]="$OLD run $M -- $WORK/iobench $D/big $N"
  [after-outside]="$NEW run $M -- $WORK/iobench $D/big $N"
  [before-inside]="$OLD run $M -- $WORK/iobench /bench-mnt/big $N"
  [after-inside]="$NEW run $M -- $WORK/iobench /bench-mnt/big $N"
  [before-ptrace-outside]="$OLD run --no-notify $M -- $WORK/iobench $D/big $N"
  [after-ptrace-outside]="$NEW run --no-notify $M -- $WORK/iobench $D/big $N"
)
# measure OUT ORDER ARRAY: RUNS rounds, each running every configuration of ORDER once.
measure() {
  local out=$1 order=$2
  local -n commands=$3
  : >"$out"
  for run in $(seq "$RUNS"); do
    for c in $order; do
      ${commands[$c]} | sed "s/^/$c /" >>"$out"
    done
  done
}
UORDER="native floor before after before-ptrace after-ptrace"
measure "$WORK/untrapped.txt" "$UORDER" UNTRAPPED
python3 bench/agent/table.py "$WORK/untrapped.txt" "$UORDER" \
  "getpid read futex kill tgkill fcntl ioctl getsockopt" floor
echo
LORDER="native before-outside after-outside before-inside after-inside before-ptrace-outside after-ptrace-outside"
measure "$WORK/loops.txt" "$LORDER" LOOPS
python3 bench/agent/table.py "$WORK/loops.txt" "$LORDER" "getpid stat open+close pread1 pread8k" native
