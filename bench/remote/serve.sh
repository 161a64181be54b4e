# bench/remote/serve.sh, sourced by the remote benchmarks: start_serve NAME [OPTIONS...]
# starts a loopback `roost serve` ($ROOST) of $WORK/export granting 127.0.0.1 every right,
# its ledger in $WORK, its first line in $WORK/serve.out; sets SERVER (its pid, for the
# script's cleanup) and PORT, or exits naming NAME when it does not start.
start_serve() {
  local name=$1
  shift
  "$ROOST" serve "$WORK/export" --listen 127.0.0.1 --port 0 --auth address \
    --acl address:127.0.0.1=rwldpax --log-level error --ledger "$WORK/ledger" "$@" \
    >"$WORK/serve.out" &
  SERVER=$!
  PORT=
  for _ in $(seq 100); do
    PORT=$(sed -n 's/^roost serve: listening on 127\.0\.0\.1:\([0-9]*\),.*/\1/p' "$WORK/serve.out")
    [ -n "$PORT" ] && break
    sleep 0.1
  done
  [ -n "$PORT" ] || { echo "$name: roost serve did not start" >&2; exit 1; }
}
