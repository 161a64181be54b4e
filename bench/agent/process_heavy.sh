#!/usr/bin/env bash
# bench/agent/process_heavy.sh: process-heavy workloads (many short-lived processes, fork/exec,
# many small file operations) side by side in one run: native, roost run (a mount list with
# the workload's tree reached through it at /w; the in-process fast path on, as by default),
# the same with --strict (every call trapped), with --no-notify (every trapped call a ptrace
# stop) and proot (-b TREE:/w). Prints medians of RUNS runs (wall-clock seconds) and
# ratios to native, as a markdown table. Workloads:
#   configure, make  libffi's autotools build: the sources bundled in the libffi-sys crate
#                    (fetched by cargo at run time into a throwaway project; they ship a
#                    generated `configure`), `./configure -q --disable-docs` then `make -s -j2`,
#                    each on a fresh copy of the sources
#   git              git init, 200 small files, add + commit, 20 commits of 10 changed files,
#                    log | wc -l, status, gc, in a fresh tree
#   storm-seq        3000 sequential fork/execs of /bin/true from sh
#   storm-xargs-P4   2000 execs of /bin/true from xargs -P4 -n1
#   python-200       20 python3 start-ups one after another, each importing 200 small modules
#                    (bytecode compiled) from the tree (one start-up is ~30 ms natively: 20
#                    keep `roost run`'s own start and the clock's granularity out of the ratio).
#                    PYTHON: the python3 to run (default /usr/bin/python3: a pyenv shim on
#                    PATH would time its bash wrapper)
#   usage: bench/agent/process_heavy.sh [RUNS]      (default 5)
#   As root (Linux 6.12 and later) the program starts in a Landlock domain and has the whole
#   in-process fast path;
#   with --no-landlock (BASE=a wrapper adding it) its fast path makes lookups only
#   (docs/security.md).
#   PROOT: the proot to compare with (default: /opt/proot-upstream/proot, upstream with
#   seccomp, if present, else proot on PATH). ROOST: the agent (default target/release/roost).
#   FFISRC: a libffi source tree to use instead of fetching one (an ordinary user may have
#   no cargo). BASE: another roost binary (an earlier commit's build) to add as `roost-base`, so a
#   change is measured against its base in the same rounds. WORKLOADS: the ones to run, of
#   configure (with make), git, storm-seq, storm-xargs-P4 and python-200 (default: all).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
ROOST=${ROOST:-target/release/roost}
if [ -z "${PROOT:-}" ]; then
  if [ -x /opt/proot-upstream/proot ]; then PROOT=/opt/proot-upstream/proot; else PROOT=proot; fi
fi
[ -x "$ROOST" ] || cargo build -q --release -p roost
ROOST=$(realpath "$ROOST")
WORK=$(mktemp -d /tmp/roost-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

WORKLOADS=${WORKLOADS:-configure git storm-seq storm-xargs-P4 python-200}
PYTHON=${PYTHON:-/usr/bin/python3}
wants() { [[ " $WORKLOADS " == *" $1 "* ]]; }

# libffi's sources from the libffi-sys crate (its bundled `libffi` directory holds a ready
# `configure`, so no autotools are needed).
if wants configure; then
  FFISRC=${FFISRC:-$(bench/agent/crate_source.sh libffi-sys 2)/libffi}
  [ -x "$FFISRC/configure" ] || { echo "no configure in $FFISRC" >&2; exit 1; }
fi

# The git workload, one script run inside the tree; no global or system configuration counts.
mkdir -p "$WORK/home"
cat >"$WORK/git.sh" <<EOF
set -e
export HOME=$WORK/home GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@example.com
export GIT_COMMITTER_NAME=bench GIT_COMMITTER_EMAIL=bench@example.com
EOF
cat >>"$WORK/git.sh" <<'EOF'
git init -q
for i in $(seq 200); do echo "file $i" >"f$i.txt"; done
git add -A
git commit -qm x
for k in $(seq 20); do
  for j in $(seq 10); do echo "change $k" >>"f$(( (k * 10 + j) % 200 + 1 )).txt"; done
  git commit -qam "c$k"
done
git log --oneline | wc -l
git status
git gc -q
EOF

ORDER="native roost roost-strict roost-ptrace proot"
# python-200's tree: 200 modules of a few definitions each, and one that imports them all.
mkdir -p "$WORK/modules"
for i in $(seq 0 199); do
  printf 'import os\nVALUE = %d\ndef f(x):\n    return x + VALUE\nclass C%d:\n    pass\n' "$i" "$i" >"$WORK/modules/mod$i.py"
  echo "import mod$i" >>"$WORK/modules/all200.py"
done
python3 -m compileall -q "$WORK/modules" # the bytecode is there: the imports only look up and read
if [ -n "${BASE:-}" ]; then
  BASE=$(realpath "$BASE")
  ORDER="native roost-base roost roost-strict roost-ptrace proot"
fi
# inside CONFIG TREE CMD: run the shell command CMD from inside TREE, which is /w under the agents.
inside() {
  local c=$1 tree=$2 cmd=$3
  case $c in
    native) sh -c "cd $tree && $cmd" ;;
    roost) "$ROOST" run --mount "/w=$tree" -- sh -c "cd /w && $cmd" ;;
    roost-base) "$BASE" run --mount "/w=$tree" -- sh -c "cd /w && $cmd" ;;
    roost-strict) "$ROOST" run --strict --mount "/w=$tree" -- sh -c "cd /w && $cmd" ;;
    roost-ptrace) "$ROOST" run --no-notify --mount "/w=$tree" -- sh -c "cd /w && $cmd" ;;
    proot) "$PROOT" -b "$tree:/w" sh -c "cd /w && $cmd" ;;
  esac
}
# timed WORKLOAD CONFIG TREE CMD: append "CONFIG WORKLOAD SECONDS s" to the results (nan and
# the tail of its output on stderr when it fails).
timed() {
  local w=$1 c=$2 s e rc=0
  s=$(date +%s%N)
  inside "$c" "$3" "$4" >"$WORK/log" 2>&1 || rc=$?
  e=$(date +%s%N)
  if [ "$rc" = 0 ]; then
    echo "$c $w $(( (e - s) / 1000 ))e-6 s" >>"$WORK/results"
  else
    echo "$c $w nan s" >>"$WORK/results"
    echo "== $w under $c failed (exit $rc):" >&2
    tail -n 20 "$WORK/log" >&2
  fi
}
fresh() { rm -rf "$WORK/tree"; if [ -n "${1:-}" ]; then cp -a "$1" "$WORK/tree"; else mkdir "$WORK/tree"; fi; }

: >"$WORK/results"
T=$WORK/tree
for run in $(seq "$RUNS"); do
  for c in $ORDER; do
    wants configure || break
    fresh "$FFISRC"
    timed configure "$c" "$T" "./configure -q --disable-docs"
    timed make "$c" "$T" "make -s -j2"
  done
  for c in $ORDER; do
    wants git || break
    fresh
    timed git "$c" "$T" "sh $WORK/git.sh"
  done
  for c in $ORDER; do
    wants storm-seq || break
    fresh
    timed storm-seq "$c" "$T" 'for i in $(seq 3000); do /bin/true; done'
  done
  for c in $ORDER; do
    wants storm-xargs-P4 || break
    fresh
    timed storm-xargs-P4 "$c" "$T" "seq 2000 | xargs -P4 -n1 /bin/true"
  done
  for c in $ORDER; do
    wants python-200 || break
    fresh "$WORK/modules"
    timed python-200 "$c" "$T" "for i in \$(seq 20); do $PYTHON -c 'import all200'; done"
  done
done

echo "nproc: $(nproc)"
echo "proot: $PROOT $("$PROOT" --version 2>&1 | grep -o 'v[0-9][^ ]*' | head -n1 || true)"
echo
python3 bench/agent/table.py "$WORK/results" "$ORDER" "${WORKLOADS/configure/configure make}" native
