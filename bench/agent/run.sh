#!/usr/bin/env bash
# bench/agent/run.sh: the `roost run` micro-benchmarks (Parrot paper, Figure 3) side by side
# in one run: native, roost run (no mount list; a mount list with the file outside it; the
# file inside it; the same with --pin, with --no-notify, and with --strict: no in-process
# fast path, every call trapped), a static build of the benchmark (which loads no fast
# path) natively and under roost, strace -f and proot. Prints medians of RUNS runs
# (microseconds per call, MB/s) and ratios to native, as a markdown table.
#   usage: bench/agent/run.sh [RUNS] [ITERATIONS]      (defaults 5, 20000)
#   As root (Linux 6.12 and later) the program starts in a Landlock domain and has the whole
#   in-process fast path
#   (docs/security.md; with --no-landlock it makes lookups only).
#   with ZLIB=1: also the zlib make build, a CPU-bound job, and the agent's peak RSS.
#   PROOT: the proot to compare with (default: proot on PATH; upstream with seccomp is the
#   strongest peer, e.g. PROOT=/opt/proot-upstream/proot). PEERS=0: roost against native
#   only (no strace or proot rows, no untrapped-calls table: a proot without seccomp takes
#   minutes there).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
N=${2:-20000}
ROOST=${ROOST:-target/release/roost}
PROOT=${PROOT:-proot}
[ -x "$ROOST" ] || cargo build -q --release -p roost
WORK=$(mktemp -d /tmp/roost-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/data"
gcc -O2 -o "$WORK/iobench" bench/agent/iobench.c
gcc -O2 -static -o "$WORK/iobench-static" bench/agent/iobench.c
"$WORK/iobench" "$WORK/data/big" 1 >/dev/null # creates the 100 MB file
D=$WORK/data
M="--mount /bench-mnt=$D"

declare -A CONFIGS=(
  [native]="$WORK/iobench $D/big $N"
  [roost-nomounts]="$ROOST run -- $WORK/iobench $D/big $N"
  [roost-outside]="$ROOST run $M -- $WORK/iobench $D/big $N"
  [roost-inside]="$ROOST run $M -- $WORK/iobench /bench-mnt/big $N"
  [roost-pin-outside]="$ROOST run --pin $M -- $WORK/iobench $D/big $N"
  [roost-pin-inside]="$ROOST run --pin $M -- $WORK/iobench /bench-mnt/big $N"
  [roost-ptrace-outside]="$ROOST run --no-notify $M -- $WORK/iobench $D/big $N"
  [roost-ptrace-inside]="$ROOST run --no-notify $M -- $WORK/iobench /bench-mnt/big $N"
  [roost-strict-outside]="$ROOST run --strict $M -- $WORK/iobench $D/big $N"
  [roost-strict-inside]="$ROOST run --strict $M -- $WORK/iobench /bench-mnt/big $N"
  [native-static]="$WORK/iobench-static $D/big $N"
  [roost-static-inside]="$ROOST run $M -- $WORK/iobench-static /bench-mnt/big $N"
  [strace]="strace -f -o /dev/null $WORK/iobench $D/big $N"
  [proot-outside]="$PROOT $WORK/iobench $D/big $N"
  [proot-inside]="$PROOT -b $D:/bench-mnt $WORK/iobench /bench-mnt/big $N"
)
ORDER="native roost-nomounts roost-outside roost-inside roost-pin-outside roost-pin-inside roost-ptrace-outside roost-ptrace-inside roost-strict-outside roost-strict-inside native-static roost-static-inside strace proot-outside proot-inside"
# measure OUT ORDER ARRAY: RUNS rounds, each running every configuration of ORDER (commands
# in the associative array named ARRAY) once, so drift hits all alike; lines prefixed by
# the configuration go to OUT.
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
[ "${PEERS:-1}" = 1 ] || ORDER=$(echo "$ORDER" | sed 's/ strace.*//')
measure "$WORK/results" "$ORDER" CONFIGS

python3 bench/agent/table.py "$WORK/results" "$ORDER" "getpid stat open+close readlink pread1 pread8k bandwidth" native

# Calls the agent never traps (getpid, a 1-byte read of a local pipe, a futex wake; then
# kill, tgkill, fcntl, ioctl and getsockopt, whose arguments the filter looks at), each the best
# of 5 rounds inside a run, against the floor: the same program under a one-instruction
# allow-all seccomp filter, which any seccomp-based agent pays.
[ "${PEERS:-1}" = 1 ] || [ "${ZLIB:-0}" = 1 ] || exit 0
gcc -O2 -o "$WORK/untrapped" bench/agent/untrapped.c
U="$WORK/untrapped 1000000"
declare -A UNTRAPPED=(
  [native]="$U"
  [floor]="$WORK/untrapped --floor 1000000"
  [roost]="$ROOST run $M -- $U"
  [roost-ptrace]="$ROOST run --no-notify $M -- $U"
  [proot]="$PROOT -b $D:/bench-mnt $U"
)
UORDER="native floor roost roost-ptrace proot"
measure "$WORK/untrapped.txt" "$UORDER" UNTRAPPED
echo
python3 bench/agent/table.py "$WORK/untrapped.txt" "$UORDER" "getpid read futex kill tgkill fcntl ioctl getsockopt" floor

[ "${ZLIB:-0}" = 1 ] || exit 0
# The zlib build: the sources bundled in the libz-sys crate.
ZSRC=$(bench/agent/crate_source.sh libz-sys 1)/src/zlib
cp -r "$ZSRC" "$WORK/zlib" && cp crates/roost/tests/run_support/zlib.mk "$WORK/zlib/Makefile"
time_of() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); python3 -c "print($e - $s)"; }
declare -A BUILD=(
  [native]="make -s -j2 -C $WORK/zlib"
  [roost]="$ROOST run --mount /zsrc=$WORK/zlib -- make -s -j2 -C /zsrc"
  [roost-pin]="$ROOST run --pin --mount /zsrc=$WORK/zlib -- make -s -j2 -C /zsrc"
  [roost-ptrace]="$ROOST run --no-notify --mount /zsrc=$WORK/zlib -- make -s -j2 -C /zsrc"
  [strace]="strace -f -o /dev/null make -s -j2 -C $WORK/zlib"
  [proot]="$PROOT -b $WORK/zlib:/zsrc make -s -j2 -C /zsrc"
)
CPU="gzip -6 -c $D/big"
declare -A CPUJOB=(
  [native]="$CPU"
  [roost]="$ROOST run $M -- $CPU"
  [roost-pin]="$ROOST run --pin $M -- $CPU"
)
: >"$WORK/builds"
for run in $(seq 3); do
  for c in native roost roost-pin roost-ptrace strace proot; do
    make -s -C "$WORK/zlib" clean
    echo "build $c $(time_of ${BUILD[$c]})" >>"$WORK/builds"
  done
  for c in native roost roost-pin; do
    echo "cpu $c $(time_of ${CPUJOB[$c]})" >>"$WORK/builds"
  done
done
make -s -C "$WORK/zlib" clean
RSS=$($ROOST run --summary --mount /zsrc=$WORK/zlib -- make -s -j2 -C /zsrc 2>&1 >/dev/null | sed -n 's/.*peak RSS \([0-9]*\) KiB.*/\1/p')
python3 - "$WORK/builds" "$RSS" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, config, secs = line.split()
    rows.setdefault((kind, config), []).append(float(secs))
for kind, title in [("build", "zlib make -j2 build"), ("cpu", "gzip -6 of 100 MB (CPU-bound, light I/O)")]:
    native = statistics.median(rows[(kind, "native")])
    print(f"\n| {title} | median s | ratio |\n|---|---|---|")
    for (k, c), v in rows.items():
        if k == kind:
            m = statistics.median(v)
            print(f"| {c} | {m:.2f} | {m / native:.2f}x |")
print(f"\nagent peak RSS during the zlib build: {int(sys.argv[2]) / 1024:.1f} MiB")
PY
