#!/bin/sh
# Group file operations on one host: N `roost serve` processes on 127.0.0.1, each holding a
# copy of /etc/services; `roost pgrep` and `roost pcp` flat and through relay trees.
#
#   bench/group/run.sh [N] [RUNS] [FANOUTS]     (defaults: 64 servers, 5 runs, "4 8 32")
#
# Prints, per configuration, the median wall time of RUNS runs and the bytes the client read
# and wrote (every read-like and write-like syscall under strace, in one separate run, so a
# few KB of program loading, the source file of pcp and the output of pgrep are included),
# next to the raw size of what plain grep prints for all the copies. Uses
# target/release/roost (or $ROOST).
set -eu
N=${1:-64}
RUNS=${2:-5}
FANOUTS=${3:-"4 8 32"}
ROOST=${ROOST:-$(dirname "$0")/../../target/release/roost}
BASE=19500
WORK=$(mktemp -d /tmp/roost-group-bench.XXXXXX)
trap 'kill $(cat "$WORK/pids") 2>/dev/null; rm -rf "$WORK"' EXIT INT TERM

(umask 077; head -c 32 /dev/urandom | base64 >"$WORK/key")
KEY="bench=$WORK/key"
mkdir "$WORK/group" "$WORK/copy"
: >"$WORK/pids"
i=1
while [ "$i" -le "$N" ]; do
    mkdir "$WORK/srv$i"
    cp /etc/services "$WORK/srv$i/services"
    "$ROOST" serve "$WORK/srv$i" --listen 127.0.0.1 --port $((BASE + i)) \
        --key "$KEY" --acl hmac:bench=rwl --log-level error --ledger "$WORK/srv$i.ledger" \
        >/dev/null 2>&1 &
    echo $! >>"$WORK/pids"
    ln -s "chirp://127.0.0.1:$((BASE + i))/services" "$WORK/group/node$i"
    ln -s "chirp://127.0.0.1:$((BASE + i))/copy" "$WORK/copy/node$i"
    i=$((i + 1))
done
sleep 1
head -c 1048576 /dev/urandom >"$WORK/payload"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# wall seconds of one run of "$@"
timed() {
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || true
    e=$(date +%s.%N)
    echo "$e - $s" | bc
}

# "READ WRITTEN": bytes through every read-like and write-like syscall of "$@"
bytes_io() {
    strace -f -qq -e trace=read,recvfrom,readv,write,sendto,sendmsg,writev \
        -o "$WORK/trace" "$@" >/dev/null 2>&1 || true
    awk -F'= ' '/= [0-9]+$/ {
        if ($0 ~ /(read|recvfrom|readv)\(/) r += $NF; else w += $NF
    } END {print r + 0, w + 0}' "$WORK/trace"
}

raw=$(cat "$WORK"/srv*/services | grep -c udp)
raw_bytes=$(grep -H udp "$WORK"/srv*/services | wc -c)
out_bytes=$("$ROOST" pgrep --key "$KEY" -F udp "$WORK/group" | wc -c)
echo "N=$N servers; grep -H udp over all copies prints $raw lines, $raw_bytes bytes;"
echo "roost pgrep prints $out_bytes bytes ($(echo "scale=2; 100 * $out_bytes / $raw_bytes" | bc)% of raw)"
echo
echo "| tool | configuration | median wall (s) | bytes read by client | bytes written by client |"
echo "|---|---|---|---|---|"
run_config() {
    tool=$1; name=$2; shift 2
    t=$(for r in $(seq "$RUNS"); do timed "$@"; done | median)
    set -- $(bytes_io "$@")
    echo "| $tool | $name | $t | $1 | $2 |"
}
run_config pgrep flat "$ROOST" pgrep --key "$KEY" -F udp "$WORK/group"
for f in $FANOUTS; do
    run_config pgrep "tree fanout $f" "$ROOST" pgrep --key "$KEY" --relay 127.0.0.1:$((BASE + 1)) \
        --fanout "$f" -F udp "$WORK/group"
done
run_config "pcp 1 MiB" flat "$ROOST" pcp --key "$KEY" "$WORK/payload" "$WORK/copy"
for f in $FANOUTS; do
    run_config "pcp 1 MiB" "tree fanout $f" "$ROOST" pcp --key "$KEY" \
        --relay 127.0.0.1:$((BASE + 1)) --fanout "$f" "$WORK/payload" "$WORK/copy"
done
