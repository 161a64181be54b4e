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
#   NETNS=1 puts each server in a network namespace of its own (needs root and ip): its own
#   address on a bridge, as 8 hosts on a LAN; the catalog and the client stay outside.
# Run as root for the cgroup v1 thermostat (else the stop/continue loop holds the shares).
# Calibration compares 8% of the targets on each host alone (--calibrate to change it), long
# enough for the thermostat's 100 ms periods to average out; roost-align is staged stripped
# of its debugging sections (1 MB instead of 10).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOST=${ROOST:-target/release/roost}
ALIGN=${ALIGN:-$(dirname "$ROOST")/roost-align}
SHARES=${SHARES:-"15 15 15 15 10 10 10 10"}
[ -x "$ROOST" ] && [ -x "$ALIGN" ] || cargo build -q --release -p roost --bins
WORK=$(mktemp -d /tmp/roost-complib.XXXXXX)
chmod 711 "$WORK"
PIDS=()
NETNS=${NETNS:-0}
TAG=rpc$$
NET=10.79
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$NETNS" = 1 ]; then
    for n in $(ip netns list | awk '{print $1}' | grep "^$TAG-" || true); do ip netns del "$n"; done
    ip link del "${TAG}br" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# Where the catalog listens, how a server is started and whom it lets in.
HERE=127.0.0.1
IN_HOST=()
if [ "$NETNS" = 1 ]; then
  HERE=$NET.0.1
  # A fixed MAC: a bridge otherwise takes its lowest port's, which changes as hosts are
  # added, and hosts that learned the old one cannot reach the catalog for half a minute.
  ip link add "${TAG}br" address 02:00:0a:4f:00:01 type bridge
  ip addr add "$HERE/16" dev "${TAG}br"
  ip link set "${TAG}br" up
fi
# host N: prints the address of host N, in its own namespace when NETNS=1.
host() {
  if [ "$NETNS" != 1 ]; then
    echo 127.0.0.1
    return
  fi
  ns="$TAG-$1"
  ip netns add "$ns"
  ip link add "${TAG}h$1" type veth peer name "${TAG}n$1"
  ip link set "${TAG}n$1" netns "$ns"
  ip link set "${TAG}h$1" master "${TAG}br" up
  ip -n "$ns" addr add "$NET.1.$1/16" dev "${TAG}n$1"
  ip -n "$ns" link set "${TAG}n$1" up
  ip -n "$ns" link set lo up
  echo "$NET.1.$1"
}
STAGED=$ALIGN
if command -v objcopy >/dev/null; then
  objcopy --strip-debug "$ALIGN" "$WORK/roost-align"
  STAGED=$WORK/roost-align
fi

# The catalog, on a port of its choosing.
"$ROOST" catalog --port 0 --listen "$HERE" --down-after 5 >"$WORK/catalog.out" 2>/dev/null &
PIDS+=($!)
for _ in $(seq 50); do grep -q listening "$WORK/catalog.out" 2>/dev/null && break; sleep 0.1; done
CATALOG=$(sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$WORK/catalog.out")
[ -n "$CATALOG" ] || { echo "the catalog did not start" >&2; exit 1; }

# The servers, one share each.
i=0
for share in $SHARES; do
  i=$((i + 1))
  mkdir -p "$WORK/export$i" "$WORK/state$i"
  chmod 711 "$WORK/state$i"
  echo "default cpu $share%" >"$WORK/thermostat$i"
  addr=$(host "$i")
  # nsenter rather than ip netns exec, which mounts a /sys of its own without the cgroups.
  if [ "$NETNS" = 1 ]; then IN_HOST=(nsenter "--net=/var/run/netns/$TAG-$i"); fi
  "${IN_HOST[@]}" "$ROOST" serve "$WORK/export$i" --listen "$addr" --port 0 --jobs \
    --job-dir "$WORK/state$i/jobs" --thermostat "$WORK/thermostat$i" \
    --acl "address:$HERE=rwldax" --catalog "$CATALOG" --catalog-interval 1 \
    >"$WORK/serve$i.out" 2>"$WORK/serve$i.log" &
  PIDS+=($!)
done
for _ in $(seq 100); do
  n=$("$ROOST" status --catalog "$CATALOG" --json | grep -c '"thermostat_cpu"' || true)
  [ "$n" -ge "$i" ] && break
  sleep 0.2
done
echo "# $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# shares (percent of the machine): $SHARES; thermostat $(grep -ho 'mechanism=[a-z0-9]*' "$WORK"/serve*.log | sort -u | tr '\n' ' ')"
echo "# hosts: $("$ROOST" status --catalog "$CATALOG" | awk 'NR > 1 {print $1}' | tr '\n' ' ')"
echo "## the kernel, one core, no thermostat"
"$ALIGN" bench --residues 400000
echo "## roost pool complib over $i servers"
"$ROOST" pool complib --catalog "$CATALOG" --auth address --quiet \
  --work "$WORK/complib" --program "$STAGED" --calibrate 0.08 "$@"
