#!/bin/sh
# Group file operations across network namespaces with capped links (needs root, ip, tc).
#
#   bench/group/netns.sh [NAMESPACES] [SERVERS_PER_NS] [RATE] [RUNS]
#   (defaults: 16 namespaces, 16 servers each, 200mbit, 3 runs)
#
# Each server namespace and the client's namespace hang off one bridge through a veth pair
# shaped with tc tbf to RATE in both directions, so the client's link is the bottleneck of a
# flat client, as on a real network. Servers hold a copy of /etc/services; the root relay is
# the first server of the first namespace. Prints median wall times and the bytes the client
# read and wrote (strace, one separate run) for pgrep and a 1 MiB pcp, flat and through
# trees. Uses target/release/roost (or $ROOST).
set -eu
NS=${1:-16}
PER=${2:-16}
RATE=${3:-200mbit}
RUNS=${4:-3}
ROOST=$(realpath "${ROOST:-$(dirname "$0")/../../target/release/roost}")
TAG=rgb$$
NET=10.77
WORK=$(mktemp -d /tmp/roost-netns-bench.XXXXXX)

cleanup() {
    for p in $(cat "$WORK/pids" 2>/dev/null); do kill "$p" 2>/dev/null || true; done
    for n in $(ip netns list | awk '{print $1}' | grep "^$TAG-" || true); do ip netns del "$n"; done
    ip link del "${TAG}br" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ip link add "${TAG}br" type bridge
ip link set "${TAG}br" up
# attach NAME ADDR: a namespace NAME with address ADDR on the bridge, its link capped.
attach() {
    ns="$TAG-$1"
    ip netns add "$ns"
    ip link add "${TAG}h$1" type veth peer name "${TAG}n$1"
    ip link set "${TAG}n$1" netns "$ns"
    ip link set "${TAG}h$1" master "${TAG}br" up
    ip -n "$ns" addr add "$2/16" dev "${TAG}n$1"
    ip -n "$ns" link set "${TAG}n$1" up
    ip -n "$ns" link set lo up
    tc qdisc add dev "${TAG}h$1" root tbf rate "$RATE" burst 256kb latency 100ms
    ip netns exec "$ns" tc qdisc add dev "${TAG}n$1" root tbf rate "$RATE" burst 256kb latency 100ms
}
attach c "$NET.0.2"

head -c 32 /dev/urandom | base64 >"$WORK/key"
KEY="bench=$WORK/key"
mkdir "$WORK/group" "$WORK/copy"
: >"$WORK/pids"
i=0
while [ "$i" -lt "$NS" ]; do
    attach "$i" "$NET.1.$((10 + i))"
    j=0
    while [ "$j" -lt "$PER" ]; do
        d="$WORK/s$i-$j"
        mkdir "$d"
        cp /etc/services "$d/services"
        ip netns exec "$TAG-$i" "$ROOST" serve "$d" --listen "$NET.1.$((10 + i))" \
            --port $((9100 + j)) --key "$KEY" --acl hmac:bench=rwl --log-level error \
            >/dev/null 2>&1 &
        echo $! >>"$WORK/pids"
        name=$(printf 'n%02d-%02d' "$i" "$j")
        ln -s "chirp://$NET.1.$((10 + i)):$((9100 + j))/services" "$WORK/group/$name"
        ln -s "chirp://$NET.1.$((10 + i)):$((9100 + j))/copy" "$WORK/copy/$name"
        j=$((j + 1))
    done
    i=$((i + 1))
done
sleep $((2 + NS * PER / 200))
head -c 1048576 /dev/urandom >"$WORK/payload"
ROOT="$NET.1.10:9100"
IN_C="ip netns exec $TAG-c"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timed() {
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    e=$(date +%s.%N)
    echo "$e - $s" | bc
}
bytes_io() {
    strace -f -qq -e trace=read,recvfrom,readv,write,sendto,sendmsg,writev \
        -o "$WORK/trace" "$@" >/dev/null 2>&1 || true
    awk -F'= ' '/= [0-9]+$/ {
        if ($0 ~ /(read|recvfrom|readv)\(/) r += $NF; else w += $NF
    } END {print r + 0, w + 0}' "$WORK/trace"
}
run_config() {
    tool=$1; name=$2; shift 2
    t=$(for r in $(seq "$RUNS"); do timed $IN_C "$@"; done | median)
    set -- $(bytes_io $IN_C "$@")
    echo "| $tool | $name | $t | $1 | $2 |"
}

N=$((NS * PER))
raw=$(cat "$WORK"/s*/services | grep -c udp)
echo "$N servers in $NS namespaces, links capped at $RATE; grep finds $raw udp lines in all copies"
echo
echo "| tool | configuration | median wall (s) | bytes read by client | bytes written by client |"
echo "|---|---|---|---|---|"
run_config pgrep flat "$ROOST" pgrep --key "$KEY" -F udp "$WORK/group"
for f in 16 32; do
    run_config pgrep "tree fanout $f" "$ROOST" pgrep --key "$KEY" --relay "$ROOT" --fanout "$f" \
        -F udp "$WORK/group"
done
run_config "pcp 1 MiB" flat "$ROOST" pcp --key "$KEY" "$WORK/payload" "$WORK/copy"
for f in 16 32; do
    run_config "pcp 1 MiB" "tree fanout $f" "$ROOST" pcp --key "$KEY" --relay "$ROOT" \
        --fanout "$f" "$WORK/payload" "$WORK/copy"
done
