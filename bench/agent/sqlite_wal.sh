#!/usr/bin/env bash
# bench/agent/sqlite_wal.sh: SQLite in WAL mode, many short-lived processes on one database in a
# mapped local directory (issue 29 §3: "200 processes x 50 transactions"), natively (the
# database at its physical path) and under `roost run --mount /db=DIR` (the database at
# /db), in turn in each of RUNS rounds so drift hits all alike. Workloads, each on a fresh
# database made natively in WAL mode (default pragmas otherwise: synchronous=FULL):
#   cli      PROCS `sqlite3` processes one after another from sh, each TX transactions
#            (BEGIN; INSERT; UPDATE; COMMIT) read from a file
#   cli-P4   the same PROCS processes, four at a time (xargs -P4; busy_timeout 10 s), so
#            the WAL's shared-memory locks are contended across processes
#   python   PROCS `python3` processes one after another, each TX transactions through
#            python's sqlite3 module (its start-up makes ~10x the trapped calls of the CLI)
# Configurations: native; floor (the database at its physical path under notify_floor.c, a
# supervisor that answers every notification CONTINUE after reading its path: what any
# notification-based agent pays for these calls without an in-process fast path); roost.
# Every run must leave PROCS x TX rows, or it counts as failed (nan). Prints each
# configuration's median wall-clock seconds, the median of the per-round ratios to native
# and their range.
#   usage: bench/agent/sqlite_wal.sh [RUNS] [PROCS] [TX]      (defaults 5, 200, 50)
#   DBDIR: where the mapped directory is made (default /dev/shm, a tmpfs, so fsync costs
#   nothing and the figure is the processes' and the agent's; on a disk the WAL's fsync per
#   commit dominates). ROOST: the agent (default target/release/roost); BASE: another roost
#   binary (an earlier commit's build), timed in the same rounds as roost-base.
#   WORKLOADS: a subset, e.g. WORKLOADS="cli python". PYTHON: the python3 to run (default
#   /usr/bin/python3: a pyenv shim on PATH would time its bash wrapper).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
PROCS=${2:-200}
TX=${3:-50}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
ROOST=$(realpath "$ROOST")
WORKLOADS=${WORKLOADS:-cli cli-P4 python}
PYTHON=${PYTHON:-/usr/bin/python3}
WORK=$(mktemp -d /tmp/roost-bench.XXXXXX)
DB=$(mktemp -d "${DBDIR:-/dev/shm}/roost-sqlite.XXXXXX")
trap 'rm -rf "$WORK" "$DB"' EXIT

gcc -O2 -o "$WORK/notify_floor" bench/agent/notify_floor.c
# The transactions of one process; $1 is its number.
python3 - "$TX" >"$WORK/tx.sql" <<'PY'
import sys
print(".timeout 10000")
for k in range(int(sys.argv[1])):
    print(f"BEGIN; INSERT INTO t(p, k, v) VALUES(:p, {k}, 'value {k}');"
          " UPDATE t SET v = v || '.' WHERE id = last_insert_rowid(); COMMIT;")
PY
cat >"$WORK/tx.py" <<EOF
import sqlite3, sys
db = sqlite3.connect(sys.argv[1] + "/t.db", timeout=10, isolation_level=None)
for k in range($TX):
    db.execute("BEGIN")
    db.execute("INSERT INTO t(p, k, v) VALUES(?, ?, ?)", (int(sys.argv[2]), k, f"value {k}"))
    db.execute("UPDATE t SET v = v || '.' WHERE id = last_insert_rowid()")
    db.execute("COMMIT")
db.close()
EOF
# workload NAME DIR: the shell command that runs workload NAME on the database in DIR.
workload() {
  local one_cli="sqlite3 -cmd \".parameter set :p \$i\" $2/t.db <$WORK/tx.sql >/dev/null"
  case $1 in
    cli) echo "for i in \$(seq $PROCS); do $one_cli || exit 1; done" ;;
    cli-P4) echo "seq $PROCS | xargs -P4 -I{} sh -c 'i={}; $one_cli'" ;;
    python) echo "for i in \$(seq $PROCS); do $PYTHON $WORK/tx.py $2 \$i || exit 1; done" ;;
  esac
}
ORDER="native floor roost"
[ -n "${BASE:-}" ] && ORDER="native floor roost-base roost"
# once CONFIG WORKLOAD: a fresh database, the workload, "seconds" (nan when it failed or
# left the wrong number of rows).
once() {
  local c=$1 w=$2 s e rc=0 rows
  rm -f "$DB"/t.db*
  sqlite3 "$DB/t.db" "PRAGMA journal_mode=WAL; CREATE TABLE t(id INTEGER PRIMARY KEY, p INTEGER, k INTEGER, v TEXT);" >/dev/null
  s=$(date +%s%N)
  case $c in
    native) sh -c "$(workload "$w" "$DB")" >"$WORK/log" 2>&1 || rc=$? ;;
    floor) "$WORK/notify_floor" sh -c "$(workload "$w" "$DB")" >"$WORK/log" 2>&1 || rc=$? ;;
    roost) "$ROOST" run --mount "/db=$DB" -- sh -c "$(workload "$w" /db)" >"$WORK/log" 2>&1 || rc=$? ;;
    roost-base) "$BASE" run --mount "/db=$DB" -- sh -c "$(workload "$w" /db)" >"$WORK/log" 2>&1 || rc=$? ;;
  esac
  e=$(date +%s%N)
  rows=$(sqlite3 "$DB/t.db" "SELECT count(*) FROM t")
  if [ "$rc" = 0 ] && [ "$rows" = $((PROCS * TX)) ]; then
    echo "$(((e - s) / 1000))e-6"
  else
    echo "== $w under $c: exit $rc, $rows rows" >&2
    tail -n 5 "$WORK/log" >&2
    echo nan
  fi
}
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$WORK/results"
for w in $WORKLOADS; do
  for c in $ORDER; do once "$c" "$w" >/dev/null; done # warm-up
  for run in $(seq "$RUNS"); do
    for c in $ORDER; do echo "$run $w $c $(once "$c" "$w")" >>"$WORK/results"; done
  done
done
echo "load average before: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg); $PROCS processes x $TX transactions, database in $DB's file system ($(stat -f -c %T "$DB"))"
python3 - "$WORK/results" "$ORDER" "$WORKLOADS" <<'PY'
import math, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
order, workloads = sys.argv[2].split(), sys.argv[3].split()
print("| workload | config | median wall s | median ratio to native (range) |")
print("|---|---|---|---|")
for w in workloads:
    t = {c: {r: float(s) for r, ww, cc, s in rows if ww == w and cc == c} for c in order}
    for c in order:
        ok = [v for v in t[c].values() if not math.isnan(v)]
        ratios = sorted(t[c][r] / t["native"][r] for r in t[c]
                        if not math.isnan(t[c][r] + t["native"].get(r, math.nan)))
        if not ok or not ratios:
            print(f"| {w} | {c} | failed | |")
            continue
        print(f"| {w} | {c} | {statistics.median(ok):.3f} | "
              f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}) |")
PY
