#!/usr/bin/env bash
# bench/remote/blocks.sh: how long roost run takes to fetch one large file over HTTP
# (docs/httpfs.md, "Large files in blocks"). A file of SIZE MiB of random bytes, indexed with
# roost index's defaults (block hashes of 4 MiB for files of 64 MiB or more), is served by
# nginx on loopback (sendfile on, two workers); `roost run -- head -c 1 FILE` opens it with
# a cache fresh in each run, so the open fetches and checks the whole file before head reads
# a byte. Each run is timed whole (roost's start-up and exit included). Configurations:
# whole (one GET, hashed as it arrives: --http-block-threshold above the file's size) and
# blocks-N (a Range request per block, N at a time, each block hashed as it arrives:
# --http-streams N). For scale: curl's GET of the file to /dev/null (no hashing, no
# writing), and sha256sum of the local file (the hashing alone). Rounds run every
# configuration in turn; prints the median of RUNS rounds of each as a markdown table.
#   usage: bench/remote/blocks.sh [RUNS] [SIZE_MIB]     (defaults 3, 256)
#   ROOST: the binary (default target/release/roost, built if missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
SIZE=${2:-256}
ROOST=${ROOST:-target/release/roost}
[ -x "$ROOST" ] || cargo build -q --release -p roost
ROOST=$(realpath "$ROOST")
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY
WORK=$(mktemp -d /tmp/roost-blocks.XXXXXX)
cleanup() {
  if [ -f "$WORK/nginx/nginx.pid" ]; then kill "$(cat "$WORK/nginx/nginx.pid")" 2>/dev/null || true; fi
  sleep 0.2
  rm -rf "$WORK"
}
trap cleanup EXIT

mkdir -p "$WORK/srv/d" "$WORK/nginx"
head -c "${SIZE}M" /dev/urandom >"$WORK/srv/d/big"
"$ROOST" index "$WORK/srv/d" >/dev/null
grep -q '^b 4194304 ' "$WORK/srv/d/.roostindex" || { echo "no block hashes in the index" >&2; exit 1; }
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
N=$WORK/nginx
cat >"$N/nginx.conf" <<EOF
worker_processes 2; error_log $N/error.log; pid $N/nginx.pid;
events { worker_connections 256; }
http { access_log off; sendfile on; tcp_nopush on;
  client_body_temp_path $N/body; proxy_temp_path $N/proxy; fastcgi_temp_path $N/fastcgi;
  uwsgi_temp_path $N/uwsgi; scgi_temp_path $N/scgi;
  server { listen 127.0.0.1:$PORT; root $WORK/srv; } }
EOF
# nginx run by root would serve as nobody, who may not read $WORK.
if [ "$(id -u)" = 0 ]; then sed -i '1s/^/user root root; /' "$N/nginx.conf"; fi
nginx -p "$N" -c "$N/nginx.conf"
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break; sleep 0.05; done
URL=/http/127.0.0.1:$PORT/d/big

# One timed run of a configuration: seconds, or nan when it failed.
run() {
  local cache=$WORK/cache start end ok=1
  rm -rf "$cache"
  start=$(date +%s%N)
  case $1 in
    whole) "$ROOST" run --cache "$cache" --http-block-threshold 1T -- head -c 1 "$URL" >/dev/null || ok=0 ;;
    blocks-*) "$ROOST" run --cache "$cache" --http-streams "${1#blocks-}" -- head -c 1 "$URL" >/dev/null || ok=0 ;;
    curl) curl -sf -o /dev/null "http://127.0.0.1:$PORT/d/big" || ok=0 ;;
    sha256sum) sha256sum "$WORK/srv/d/big" >/dev/null || ok=0 ;;
  esac
  end=$(date +%s%N)
  rm -rf "$cache"
  if [ $ok = 1 ]; then echo "$(( (end - start) / 1000000 ))"; else echo nan; fi
}

CONFIGS="whole blocks-1 blocks-2 blocks-4 blocks-8 curl sha256sum"
run whole >/dev/null # warms the page cache with the served file
: >"$WORK/results"
for round in $(seq "$RUNS"); do
  for c in $CONFIGS; do echo "$c $(run "$c")" >>"$WORK/results"; done
done
python3 - "$WORK/results" "$SIZE" "$RUNS" <<'PYEOF'
import statistics, sys
rows, size, runs = {}, int(sys.argv[2]), sys.argv[3]
for line in open(sys.argv[1]):
    name, ms = line.split()
    rows.setdefault(name, []).append(float(ms))
whole = statistics.median(rows["whole"])
print(f"A {size} MiB file over loopback nginx, median of {runs} runs:\n")
print("| configuration | seconds | MB/s | whole / this | runs (ms) |")
print("|---|---|---|---|---|")
for name, ms in rows.items():
    m = statistics.median(ms)
    print(f"| {name} | {m / 1000:.2f} | {size * 1.048576 / (m / 1000):.0f} | "
          f"{whole / m:.2f}x | {' '.join(f'{x:.0f}' for x in ms)} |")
PYEOF
