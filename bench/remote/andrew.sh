#!/usr/bin/env bash
# bench/remote/andrew.sh: the Parrot papers' "Andrew-like" benchmark on a real C source tree
# (zlib as bundled in the libz-sys crate), side by side in one run: copy the tree in (cp -r),
# ls -lR it, grep -r it, build it (make -j2 with crates/roost/tests/run_support/zlib.mk),
# delete it (rm -rf). Configurations: native (a local temp dir, no roost); roost-local
# (roost run with the tree at /w, mounted from a local dir); roost-cached (the same with /w
# mounted from a loopback `roost serve`, through a cache fresh in each round); roost-direct
# (the same mount in direct mode: every read and write an RPC). Prints the medians of RUNS
# rounds (seconds per stage) and ratios to native as a markdown table, then each remote
# stage's ratio to roost-local.
#   usage: bench/remote/andrew.sh [RUNS]      (default 3)
#   ZSRC: a zlib source tree to use instead of fetching libz-sys with cargo (an ordinary
#   user, who measures the in-process fast path, may have no cargo).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
WORK=$(mktemp -d /tmp/roost-andrew.XXXXXX)
SERVER=
cleanup() { # the server first, so that nothing writes into $WORK as it goes
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The source tree, with the test suite's Makefile in it (as run_programs.rs does), so the
# copy-in stage copies exactly what make then builds.
ZSRC=${ZSRC:-$(bench/agent/crate_source.sh libz-sys 1)/src/zlib}
cp -r "$ZSRC" "$WORK/zlib" && cp crates/roost/tests/run_support/zlib.mk "$WORK/zlib/Makefile"

# The server: exports $WORK/export, whose w/ the roost-cached runs mount at /w.
mkdir -p "$WORK/export/w" "$WORK/native" "$WORK/local"
. bench/remote/serve.sh
start_serve andrew.sh

# One run of all five stages, as `sh -c "$STAGES" sh CONFIG SRC DIR`: the tree is copied
# from SRC to DIR/zlib. Each stage is timed on its own inside the (possibly traced) shell,
# so roost's start-up and exit are in no stage; a stage that fails reads nan ("failed").
STAGES='config=$1 src=$2 t=$3/zlib status=0
stage() {
  name=$1; shift
  s=$(date +%s.%N)
  if "$@"; then
    e=$(date +%s.%N)
    echo "$config $name $(echo "$e - $s" | bc) s"
  else
    echo "$config $name nan s"; status=1
  fi
}
lslr() { ls -lR "$1" >/dev/null; }
grepr() { grep -r inflate "$1" >/dev/null; }
build() { make -s -j2 -C "$1" && test -f "$1/libz.a"; }
stage copy-in cp -r "$src" "$t"
stage ls-lR lslr "$t"
stage grep-r grepr "$t"
stage make build "$t"
stage delete rm -rf "$t"
exit $status'

ORDER="native roost-local roost-cached roost-direct"
METRICS="copy-in ls-lR grep-r make delete"
# An untimed native round first, so the first timed one (native's) does not alone pay for
# loading gcc and the sources from disk.
echo "andrew.sh: warm-up: native" >&2
sh -c "$STAGES" sh warm-up "$WORK/zlib" "$WORK/native" >/dev/null ||
  { echo "andrew.sh: the stages fail even natively" >&2; exit 1; }
# RUNS rounds, each running every configuration once, so drift hits all alike.
: >"$WORK/results"
for run in $(seq "$RUNS"); do
  for c in $ORDER; do
    echo "andrew.sh: round $run/$RUNS: $c" >&2
    case $c in
      native) cmd=(sh -c "$STAGES" sh "$c" "$WORK/zlib" "$WORK/native") ;;
      roost-local) cmd=("$ROOST" run --mount "/w=$WORK/local" -- sh -c "$STAGES" sh "$c" "$WORK/zlib" /w) ;;
      # A fresh cache each round, so copy-in and the first reads are not served from the
      # last round's copies; it is kept over the round's later stages, as a user's would be.
      roost-cached)
        rm -rf "$WORK/cache"
        cmd=("$ROOST" run --cache "$WORK/cache" --mount "/w=/chirp/127.0.0.1:$PORT/w:cached" \
          -- sh -c "$STAGES" sh "$c" "$WORK/zlib" /w) ;;
      # Every read and write an RPC; programs executed still come through the cache.
      roost-direct)
        rm -rf "$WORK/cache"
        cmd=("$ROOST" run --cache "$WORK/cache" --mount "/w=/chirp/127.0.0.1:$PORT/w:direct" \
          -- sh -c "$STAGES" sh "$c" "$WORK/zlib" /w) ;;
    esac
    "${cmd[@]}" >>"$WORK/results" || echo "andrew.sh: round $run: $c: a stage failed" >&2
  done
done

python3 bench/agent/table.py "$WORK/results" "$ORDER" "$METRICS" native

# The issue's targets: each roost-cached stage against its own roost-local row, and the
# cached-mode make within 1.3x of native. The medians are in milliseconds here, as most
# stages of a tree this small read 0.00 s in the table above.
python3 - "$WORK/results" "$METRICS" <<'PY'
import math, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    config, metric, value, _ = line.split()
    if not math.isnan(float(value)):
        rows.setdefault((config, metric), []).append(float(value))
med = lambda c, m: statistics.median(rows[(c, m)]) if rows.get((c, m)) else None
metrics = sys.argv[2].split()
print("\n| against roost-local | " + " | ".join(metrics) + " |")
print("|---|" + "---|" * len(metrics))
for config in ("roost-cached", "roost-direct"):
    cells = []
    for m in metrics:
        remote, local = med(config, m), med("roost-local", m)
        cells.append(f"{remote * 1e3:.1f} / {local * 1e3:.1f} ms = {remote / local:.2f}x"
                     if remote and local else "failed")
    print(f"| {config} | " + " | ".join(cells) + " |")
cached, native = med("roost-cached", "make"), med("native", "make")
if cached and native:
    r = cached / native
    print(f"\nroost-cached make / native make: {r:.2f}x (target: at most 1.30x: {'met' if r <= 1.3 else 'missed'})")
PY
