#!/usr/bin/env bash
# bench/remote/builds.sh: real builds with their tree on a loopback `roost serve`, side by side
# with native in one run. Projects: zlib 1.2.13 (`./configure && make -j2 && make test`) and
# Lua 5.4.4 (`make -j2 linux && make test`), their Debian orig tarballs fetched from
# deb.debian.org once (into $ROOST_BENCH_SRC, default ~/.cache/roost-bench). Configurations:
#   native        the tree in a local directory, no roost
#   roost-local   roost run with the tree mapped from a local directory (the agent's own cost)
#   direct        the tree on the server, mounted in direct mode (every read/write an RPC)
#   cached-cold   the tree on the server, cached mode, an empty cache
#   cached-warm   the same tree again after a clean (`make distclean`/`make clean`, run
#                 natively on the server's export), the cache holding its sources
# Each configuration but cached-warm builds a freshly unpacked tree (untimed); the build is
# timed as a whole command (`roost run` start-up and exit included). Every configuration's
# build is paired with a native build run just before it, so that a ratio compares two runs
# under the same load (the machine may be shared). Prints, as markdown, per project and
# configuration the medians of RUNS rounds: the time, the median of the paired ratios to
# native (with their range), and the server's requests per build (its --metrics).
#   usage: bench/remote/builds.sh [RUNS]      (default 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
ROOST=$(realpath "$ROOST")
SRC=${ROOST_BENCH_SRC:-$HOME/.cache/roost-bench}
WORK=$(mktemp -d /tmp/roost-builds.XXXXXX)
SERVER=
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$SRC"
fetch() { # fetch NAME URL: the tarball, downloaded once
  [ -s "$SRC/$1" ] || curl -sfL -o "$SRC/$1" "$2" ||
    { echo "builds.sh: cannot fetch $2" >&2; exit 1; }
}
fetch zlib.tar.bz2 http://deb.debian.org/debian/pool/main/z/zlib/zlib_1.2.13.dfsg.orig.tar.bz2
fetch lua.tar.gz http://deb.debian.org/debian/pool/main/l/lua5.4/lua5.4_5.4.4.orig.tar.gz

# unpack PROJECT DIR: a fresh tree of PROJECT at DIR.
unpack() {
  rm -rf "$2" && mkdir -p "$2"
  case $1 in
    zlib) tar -xjf "$SRC/zlib.tar.bz2" -C "$2" --strip-components=1 ;;
    lua) tar -xzf "$SRC/lua.tar.gz" -C "$2" --strip-components=1 ;;
  esac
}
# The build of each project, run with the tree as the current directory.
declare -A BUILD=(
  [zlib]='./configure >/dev/null && make -s -j2 >/dev/null && make -s test >/dev/null'
  [lua]='make -s -j2 linux >/dev/null 2>&1 && make -s test >/dev/null'
)

mkdir -p "$WORK/export" "$WORK/local"
METRICS=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
. bench/remote/serve.sh
start_serve builds.sh --metrics "127.0.0.1:$METRICS"
REMOTE=/chirp/127.0.0.1+$PORT

ORDER="native roost-local direct cached-cold cached-warm"
# The clean-up between cached-cold's build and cached-warm's, run natively on the export:
# the sources keep their inodes and times, so the cache's copies of them stay valid.
declare -A CLEAN=([zlib]='make -s distclean >/dev/null' [lua]='make -s clean >/dev/null')
# The server's requests answered so far.
requests() {
  curl -sf "http://127.0.0.1:$METRICS/metrics" |
    awk '/^roost_requests_total\{/ {n += $2} END {print n + 0}'
}
# timed CONFIG PROJECT: prepares the tree where CONFIG builds it (untimed), then prints
# `CONFIG PROJECT SECONDS s` for the build (nan if it failed) and
# `CONFIG PROJECT-rpcs N requests` for the server's requests it made.
timed() {
  local c=$1 p=$2 cmd
  local in_roost=(sh -c "cd /w/$p && ${BUILD[$p]}")
  case $c in
    native)
      unpack "$p" "$WORK/local/$p"; cmd=(sh -c "cd $WORK/local/$p && ${BUILD[$p]}") ;;
    roost-local)
      unpack "$p" "$WORK/local/$p"; cmd=("$ROOST" run --mount "/w=$WORK/local" -- "${in_roost[@]}") ;;
    direct)
      unpack "$p" "$WORK/export/$p"; rm -rf "$WORK/cache"
      cmd=("$ROOST" run --cache "$WORK/cache" --mount "/w=$REMOTE:direct" -- "${in_roost[@]}") ;;
    cached-cold)
      unpack "$p" "$WORK/export/$p"; rm -rf "$WORK/cache"
      cmd=("$ROOST" run --cache "$WORK/cache" --mount "/w=$REMOTE:cached" -- "${in_roost[@]}") ;;
    cached-warm)
      (cd "$WORK/export/$p" && sh -c "${CLEAN[$p]}")
      cmd=("$ROOST" run --cache "$WORK/cache" --mount "/w=$REMOTE:cached" -- "${in_roost[@]}") ;;
  esac
  local s e r
  r=$(requests)
  s=$(date +%s.%N)
  if "${cmd[@]}"; then
    e=$(date +%s.%N)
    echo "$c $p $(echo "$e - $s" | bc) s"
  else
    echo "builds.sh: $c $p failed" >&2
    echo "$c $p nan s"
  fi
  echo "$c $p-rpcs $(($(requests) - r)) requests"
}

for p in zlib lua; do
  echo "builds.sh: warm-up: native $p" >&2
  timed native "$p" >/dev/null
done
: >"$WORK/results"
for run in $(seq "$RUNS"); do
  for p in zlib lua; do
    # cached-warm follows cached-cold: it rebuilds the tree cached-cold built.
    for c in ${ORDER#native }; do
      echo "builds.sh: round $run/$RUNS: $p: native, then $c" >&2
      timed native "$p" >>"$WORK/results"
      timed "$c" "$p" >>"$WORK/results"
    done
  done
done

python3 - "$WORK/results" "$ORDER" <<'EOF'
import math, statistics, sys
lines = [l.split() for l in open(sys.argv[1])]
order = sys.argv[2].split()
print("| config | zlib: time | paired ratio (range) | requests | lua: time | paired ratio (range) | requests |")
print("|---|---|---|---|---|---|---|")
for c in order:
    cells = []
    for p in ("zlib", "lua"):
        times = [(i, float(v)) for i, (k, m, v, _) in enumerate(lines) if k == c and m == p]
        ok = [t for _, t in times if not math.isnan(t)]
        # Each build but native's follows its native pair on the line before the pair's
        # requests line.
        ratios = []
        for i, t in times:
            before = lines[i - 2] if i >= 2 else None
            if c != "native" and before and before[0] == "native" and before[1] == p:
                ratios.append(t / float(before[2]))
        ratios = [r for r in ratios if not math.isnan(r)]
        rpcs = [int(v) for k, m, v, _ in lines if k == c and m == p + "-rpcs"]
        cells.append(f"{statistics.median(ok):.2f} s" if ok else "failed")
        cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
                     if ratios else "-")
        cells.append(str(int(statistics.median(rpcs))) if rpcs else "-")
    print(f"| {c} | " + " | ".join(cells) + " |")
EOF
