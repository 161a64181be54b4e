#!/usr/bin/env bash
# What answering descriptors of remote objects with the remote identity costs
# (docs/benchmarks.md, "A remote file is one file"): OLD and NEW roost binaries alternate,
# ROUNDS times, on one `roost serve` of a generated tree on 127.0.0.1; medians printed.
#   OLD=/path/roost-before NEW=target/release/roost bench/remote/identity.sh [ROUNDS]
set -euo pipefail
rounds=${1:-5}
: "${OLD:?OLD=roost binary before}" "${NEW:=target/release/roost}"
work=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
gcc -O2 -o "$work/loop" "$(dirname "$0")/identity_loop.c"
# 40 directories of 50 files each, and one file for the loops.
for d in $(seq 1 40); do
    mkdir -p "$work/export/tree/d$d"
    for f in $(seq 1 50); do echo "$d $f" > "$work/export/tree/d$d/f$f"; done
done
echo data > "$work/export/file"
touch -d '1 min ago' "$work/export/file"
echo local > "$work/local"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$NEW" serve --listen 127.0.0.1 -p "$port" --auth address --acl address:127.0.0.1=rwldpax \
    "$work/export" >/dev/null 2>&1 &
server=$!
sleep 0.5
url=/chirp/127.0.0.1:$port
# Each case: a name and the command after `roost run --cache DIR`; prints µs or seconds.
cases=(
    "open+fstat+close, cached (µs)|--chirp-mode cached -- $work/loop 20000 $url/file"
    "open+fstat+close, direct (µs)|-- $work/loop 20000 $url/file"
    "local file after a remote one (µs)|--chirp-mode cached -- $work/loop 20000 $work/local $url/file"
    "find -printf %i, cached (s)|--chirp-mode cached -- TIME find $url/tree -printf %i\n"
    "ls -lR, direct (s)|-- TIME ls -lR $url/tree"
    "find /usr/share/doc, local, --no-notify (s)|--no-notify -- TIME find /usr/share/doc -printf %i\n"
)
declare -A seen
for r in $(seq 1 "$rounds"); do
    for bin in OLD NEW; do
        for c in "${cases[@]}"; do
            name=${c%%|*}
            read -r -a args <<<"${c#*|}"
            cache="$work/cache-$bin"
            timed=0 rest=()
            for a in "${args[@]}"; do
                if [ "$a" = TIME ]; then timed=1; else rest+=("$a"); fi
            done
            if [ $timed = 1 ]; then
                start=$(date +%s.%N)
                "${!bin}" run --cache "$cache" "${rest[@]}" >/dev/null
                v=$(echo "$(date +%s.%N) - $start" | bc)
            else
                v=$("${!bin}" run --cache "$cache" "${args[@]}")
            fi
            seen["$bin|$name"]+="$v "
        done
    done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '| %s | before | after |\n|---|---|---|\n' "case ($rounds rounds, medians)"
for c in "${cases[@]}"; do
    name=${c%%|*}
    printf '| %s | %s | %s |\n' "$name" "$(median <<<"${seen[OLD|$name]}")" "$(median <<<"${seen[NEW|$name]}")"
done
