#!/usr/bin/env bash
# bench/pool/complib.sh: complib (the Legion paper's benchmark: 20 query sequences, 4,478
# residues, against 10,716 targets, 3,647,403 residues; Smith-Waterman, BLOSUM62, gaps open
# 10 extend 1) over 8 `roost serve --jobs` servers on this machine's loopback, each with a
# thermostat share of the machine, the shares adding up to all its cores (by default 4 hosts
# at 15% and 4 at 10% of a 2-core machine: 0.3 and 0.2 cores). Prints the kernel's rate
# per core (roost-align bench), then `roost pool complib`'s report: each host's standalone
# rate under its share, the run's CUPS, per-host throughput and efficiency.
#   usage: bench/pool/complib.sh [roost pool complib options...]   (e.g. --scale 0.25)
#   SHARES="15 15 15 15 10 10 10 10" overrides the shares (percent of the machine).
# Run as root for the cgroup v1 thermostat (else the stop/continue loop holds the shares).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOST=${ROOST:-target/release/roost}
ALIGN=${ALIGN:-$(dirname "$ROOST")/roost-align}
SHARES=${SHARES:-"15 15 15 15 10 10 10 10"}
[ -x "$ROOST" ] && [ -x "$ALIGN" ] || cargo build -q --release -p roost --bins
WORK=$(mktemp -d /tmp/roost-complib.XXXXXX)
chmod 711 "$WORK"
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The catalog, on a port of its choosing.
"$ROOST" catalog --port 0 --listen 127.0.0.1 --down-after 5 >"$WORK/catalog.out" 2>/dev/null &
PIDS+=($!)
for _ in $(seq 50); do grep -q listening "$WORK/catalog.out" 2>/dev/null && break; sleep 0.1; done
CATALOG=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$WORK/catalog.out")

# The servers, one share each.
i=0
for share in $SHARES; do
  i=$((i + 1))
  mkdir -p "$WORK/export$i" "$WORK/state$i"
  chmod 711 "$WORK/state$i"
  echo "default cpu $share%" >"$WORK/thermostat$i"
  "$ROOST" serve "$WORK/export$i" --listen 127.0.0.1 --port 0 --jobs \
    --job-dir "$WORK/state$i/jobs" --thermostat "$WORK/thermostat$i" \
    --acl address:127.0.0.1=rwldax --catalog "$CATALOG" --catalog-interval 1 \
    >"$WORK/serve$i.out" 2>"$WORK/serve$i.log" &
  PIDS+=($!)
done
for _ in $(seq 100); do
  n=$("$ROOST" status --catalog "$CATALOG" --json | grep -c '"thermostat_cpu"' || true)
  [ "$n" -ge "$i" ] && break
  sleep 0.2
done
echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# shares (percent of the machine): $SHARES; mechanism: $(grep -ho 'mechanism=[a-z0-9]*' "$WORK"/serve*.log | sort -u | tr '\n' ' ')"
echo "## the kernel, one core, no thermostat"
"$ALIGN" bench --residues 400000
echo "## roost pool complib over $i servers"
"$ROOST" pool complib --catalog "$CATALOG" --auth address --quiet \
  --work "$WORK/complib" --program "$ALIGN" "$@"
