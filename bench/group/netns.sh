#!/bin/sh
# Group file operations across network namespaces with capped links (needs root, ip, tc).
#
#   bench/group/netns.sh [NAMESPACES] [SERVERS_PER_NS] [RATE] [RUNS]
#   (defaults: 16 namespaces, 16 servers each, 200mbit, 3 runs)
#
# Each server namespace and the client's namespace hang off one bridge through a veth pair
# shaped with tc tbf to RATE in both directions, so the client's link is the bottleneck of a
# flat client, as on a real network. Servers hold a copy of /etc/services; the root relay is
# the first server of the first namespace. Prints median wall times, the bytes the client
# read and wrote (strace, one separate run), the client's CPU time (user+system of its whole
# process tree, one separate run) and the size of what it printed, for pgrep-like work done
# five ways — a client visiting the members one by one (`roost cat | grep` in a loop), pdsh
# and clush -b in exec mode (the same command per member, in parallel), roost pgrep flat and
# through relay trees — and for a 1 MiB pcp, flat and through trees. pdsh and clush rows
# appear when the commands are installed (Debian packages pdsh, clustershell). A last column
# gives the CPU time all the servers spent in the client's CPU-time run (user+system from
# /proc/PID/stat before and after), where the tree's work happens; a tool that exited
# non-zero in that run is marked "exit N" beside its CPU time.
# ONLY=pgrep or ONLY=pcp runs only those rows (pcp alone, to see how it grows with N).
# Uses target/release/roost (or $ROOST).
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

(umask 077; head -c 32 /dev/urandom | base64 >"$WORK/key")
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
            --ledger "$d.ledger" \
            >/dev/null 2>&1 &
        echo $! >>"$WORK/pids"
        name=$(printf 'n%02d-%02d' "$i" "$j")
        ln -s "chirp://$NET.1.$((10 + i)):$((9100 + j))/services" "$WORK/group/$name"
        ln -s "chirp://$NET.1.$((10 + i)):$((9100 + j))/copy" "$WORK/copy/$name"
        echo "$name" >>"$WORK/hosts"
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
    echo "$e - $s" | bc | awk '{printf "%.3f\n", $1}'
}
bytes_io() {
    strace -f -qq -e trace=read,recvfrom,readv,write,sendto,sendmsg,writev \
        -o "$WORK/trace" "$@" >/dev/null 2>&1 || true
    awk -F'= ' '/= [0-9]+$/ {
        if ($0 ~ /(read|recvfrom|readv)\(/) r += $NF; else w += $NF
    } END {print r + 0, w + 0}' "$WORK/trace"
}
# servers_cpu: user+system seconds all the servers have used so far.
servers_cpu() {
    for p in $(cat "$WORK/pids"); do cat "/proc/$p/stat" 2>/dev/null || true; done |
        awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); t += $12 + $13} END {print t / hz}'
}
# cpu_out CMD...: the CPU seconds (user+system, children included) of one run ("+exit N"
# if it failed), the bytes it printed, and the servers' CPU seconds meanwhile.
cpu_out() {
    before=$(servers_cpu)
    /usr/bin/time -f "%U %S" -o "$WORK/cpu" "$@" >"$WORK/out" 2>/dev/null || true
    after=$(servers_cpu)
    # (time writes a "Command exited with non-zero status N" line first when the tool fails)
    echo "$(awk '/exited with non-zero/ {e = "+exit_" $NF} END {print $1 + $2 e}' "$WORK/cpu")" \
        "$(wc -c <"$WORK/out")" "$(echo "$after - $before" | bc | awk '{printf "%.2f", $1}')"
}
run_config() {
    tool=$1; name=$2; shift 2
    t=$(for r in $(seq "$RUNS"); do timed $IN_C "$@"; done | median)
    set -- $(bytes_io $IN_C "$@") $(cpu_out $IN_C "$@")
    echo "| $tool | $name | $t | $1 | $2 | $(echo "$3" | tr _+ ' ,') | $4 | $5 |"
}

N=$((NS * PER))
raw=$(cat "$WORK"/s*/services | grep -c udp)
echo "$N servers in $NS namespaces, links capped at $RATE; grep finds $raw udp lines in all copies"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
raw_bytes=$(for d in "$WORK"/s*; do grep -H udp "$d/services"; done | wc -c)
echo "Plain grep -H over all copies prints $raw_bytes bytes."
echo
# One member's share of the pgrep-like work, as pdsh/clush run it per member (%h) and the
# one-by-one client runs it in a loop: fetch the member's file, keep the matching lines.
cat >"$WORK/member.sh" <<EOS
#!/bin/sh
ROOST_HMAC_KEY="$KEY" "$ROOST" cat "\$(readlink "$WORK/group/\$1")" | grep -F udp
EOS
chmod +x "$WORK/member.sh"
cat >"$WORK/one_by_one.sh" <<EOS
#!/bin/sh
while read -r h; do "$WORK/member.sh" "\$h" | sed "s/^/\$h: /"; done <"$WORK/hosts"
EOS
chmod +x "$WORK/one_by_one.sh"
echo "| tool | configuration | median wall (s) | bytes read by client | bytes written by client | client CPU (s) | output bytes | servers' CPU (s) |"
echo "|---|---|---|---|---|---|---|---|"
if [ "${ONLY:-pgrep}" = pgrep ]; then
run_config pgrep-like "one by one (roost cat, grep)" "$WORK/one_by_one.sh"
if command -v pdsh >/dev/null; then
    run_config pgrep-like "pdsh -R exec -f 32" env PDSH_RCMD_TYPE=exec pdsh -f 32 \
        -w "^$WORK/hosts" "$WORK/member.sh" %h
else
    echo "| pgrep-like | pdsh | not installed | | | | | |"
fi
if command -v clush >/dev/null; then
    run_config pgrep-like "clush -b -R exec -f 32" clush -b -R exec -f 32 \
        -w "$(paste -sd, "$WORK/hosts")" "$WORK/member.sh" %h
else
    echo "| pgrep-like | clush | not installed | | | | | |"
fi
run_config pgrep flat "$ROOST" pgrep --key "$KEY" -F udp "$WORK/group"
for f in 16 32; do
    run_config pgrep "tree fanout $f" "$ROOST" pgrep --key "$KEY" --relay "$ROOT" --fanout "$f" \
        -F udp "$WORK/group"
done
fi
if [ "${ONLY:-pcp}" = pcp ]; then
run_config "pcp 1 MiB" flat "$ROOST" pcp --key "$KEY" "$WORK/payload" "$WORK/copy"
for f in 16 32; do
    run_config "pcp 1 MiB" "tree fanout $f" "$ROOST" pcp --key "$KEY" --relay "$ROOT" \
        --fanout "$f" "$WORK/payload" "$WORK/copy"
done
fi
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
