#!/usr/bin/env bash
# bench/remote/cdf.sh: the CDF paper's Figure 5 (../shared/papers/parrot-cdf-httpfs.txt) in
# ratio form: a CPU-bound job whose software is read over HTTP, side by side in one run. The
# job is a Python program (app.py) in a served tree, importing a library also in that tree
# (copies of pure-Python packages and modules of the interpreter's own stdlib: json, email,
# http, xml, html, logging, unittest, asyncio, concurrent, _pydecimal, difflib, ...; 150
# modules, precompiled to .pyc, searched first, so they are imported from the tree and not
# from the system; app.py checks that), then computing for a few seconds (e-mails built and
# parsed, JSON, 200-digit square roots with _pydecimal, difflib, ElementTree). Configurations:
# native (the tree local, no roost); roost-local (roost run with the tree mounted at /sw
# from a local dir); roost-http-warm (/sw mounted from python's http.server on loopback,
# through a cache warmed by an untimed run before the rounds); and for the start-up figure
# (app.py --import-only: the imports and no work) also roost-http-cold (a cache fresh in
# each run, so every file is fetched; the files of a directory are prefetched in parallel
# once one of them is opened) and roost-http-cold-noprefetch (the same with --http-prefetch
# 0: each file fetched when Python opens it, one at a time). Each run is timed whole
# (roost's start-up and exit included); a run that fails or prints other than native's output reads nan ("failed").
# Prints the medians of RUNS rounds and ratios to native as markdown tables, then the
# issue's targets (the job over HTTP, warm, within 2% of native; with the tree local within
# 1%) as met or missed, judged on the median of each round's ratio to native (the rounds
# run every configuration back to back, so the machine's drift between rounds cancels),
# with the ratio of the medians beside it.
#   usage: bench/remote/cdf.sh [RUNS] [ROUNDS]      (defaults 3, 1500: the job's loop count)
#   PYTHON: the interpreter (default: python3's sys.executable, the real binary, not a shim).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
ROUNDS=${2:-1500}
ROOST=${ROOST:-target/release/roost}
PY=${PYTHON:-$(python3 -c 'import sys; print(sys.executable)')}
[ -x "$ROOST" ] || cargo build -q --release -p roost
# The loopback server is reached directly, never through a proxy of the environment.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY no_proxy NO_PROXY
# No configuration may write .pyc files (the tree ships them, as a software release would).
export PYTHONDONTWRITEBYTECODE=1
WORK=$(mktemp -d /tmp/roost-cdf.XXXXXX)
SERVER=
cleanup() { # the server first, so that nothing reads $WORK as it goes
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The served tree: app.py and lib/, copied from the interpreter's stdlib, compiled, indexed.
PACKAGES="json email http xml html logging unittest asyncio concurrent"
MODULES="_pydecimal difflib textwrap fractions statistics csv pprint argparse"
STDLIB=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
T=$WORK/tree
mkdir -p "$T/lib"
for p in $PACKAGES; do cp -r "$STDLIB/$p" "$T/lib/"; done
for m in $MODULES; do cp "$STDLIB/$m.py" "$T/lib/"; done
find "$T/lib" -name __pycache__ -prune -exec rm -rf {} +
cat >"$T/app.py" <<PYEOF
"""The CDF-like job: imports its library from lib/ beside it, then computes."""
PACKAGES = "$PACKAGES".split()
MODULES = "$MODULES".split()
PYEOF
cat >>"$T/app.py" <<'PYEOF'
import os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
LIB = os.path.join(HERE, "lib")
sys.path.insert(0, LIB)
already = sorted(m for m in PACKAGES + MODULES if m in sys.modules)
if already:
    sys.exit(f"app.py: {already} were imported before lib/ could serve them")
import importlib, pkgutil
count = 0
for name in MODULES:
    importlib.import_module(name)
    count += 1
for name in PACKAGES:  # every module of each package, found by listing lib/
    pkg = importlib.import_module(name)
    count += 1
    for info in pkgutil.walk_packages(pkg.__path__, name + "."):
        if "windows" in info.name or info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
        count += 1
stray = sorted(n for n, m in sys.modules.items()
               if n.split(".")[0] in PACKAGES + MODULES
               and getattr(m, "__file__", None) is not None  # None: made by a C module (pyexpat)
               and not m.__file__.startswith(LIB + "/"))
if stray:
    sys.exit(f"app.py: not from {LIB}: {stray}")
if sys.argv[1:2] == ["--import-only"]:
    print(f"imported {count} modules")
    sys.exit(0)

import hashlib, json, difflib, html, textwrap, _pydecimal as D
from email.message import EmailMessage
from email.parser import BytesParser
from email import policy
import xml.etree.ElementTree as ET
rounds = int(sys.argv[1])
h = hashlib.sha256()
ctx = D.Context(prec=200)
words = textwrap.dedent(D.__doc__).split()
for i in range(rounds):
    body = " ".join(words[(i * 7) % 300:(i * 7) % 300 + 200])
    data = {"round": i, "words": words[i % 50:i % 50 + 40], "root": str(ctx.sqrt(D.Decimal(i + 2)))}
    msg = EmailMessage()
    msg["Subject"] = f"round {i}: {html.escape('<sim> & <reco>')}"
    msg["From"] = "cdf@example.org"
    msg["To"] = "grid@example.org"
    msg.set_content(textwrap.fill(body, 72))
    msg.add_attachment(json.dumps(data).encode(), maintype="application", subtype="json",
                       filename="d.json")
    back = BytesParser(policy=policy.default).parsebytes(msg.as_bytes())
    got = json.loads(next(back.iter_attachments()).get_content())
    text = back.get_body(("plain",)).get_content()
    ratio = difflib.SequenceMatcher(None, text[:600], body[:600]).ratio()
    root = ET.fromstring(f"<r n='{i}'>{html.escape(text[:200])}</r>")
    h.update(f"{back['Subject']}|{got['root']}|{ratio:.6f}|{root.get('n')}".encode())
print(f"{rounds} rounds, checksum {h.hexdigest()[:16]}")
PYEOF
"$PY" -m compileall -q "$T/lib" >/dev/null
"$ROOST" index "$T" >"$WORK/index.out" 2>&1 || { cat "$WORK/index.out" >&2; exit 1; }
echo "cdf.sh: tree: $(find "$T/lib" -name '*.py' | wc -l) modules and their .pyc, $(du -sh "$T" | cut -f1)" >&2

# The server: python's http.server on a port of its choosing.
"$PY" -u -m http.server 0 --bind 127.0.0.1 --directory "$T" >"$WORK/http.out" 2>"$WORK/http.log" &
SERVER=$!
PORT=
for _ in $(seq 100); do
  PORT=$(sed -n 's/^Serving HTTP on 127\.0\.0\.1 port \([0-9]*\).*/\1/p' "$WORK/http.out")
  [ -n "$PORT" ] && break
  sleep 0.1
done
[ -n "$PORT" ] || { echo "cdf.sh: http.server did not start" >&2; exit 1; }

LOCAL=("$ROOST" run --mount "/sw=$T" --)
WARM=("$ROOST" run --cache "$WORK/cache-warm" --mount "/sw=/http/127.0.0.1:$PORT" --)
COLD=("$ROOST" run --cache "$WORK/cache-cold" --mount "/sw=/http/127.0.0.1:$PORT" --)
COLD_SERIAL=("$ROOST" run --cache "$WORK/cache-cold" --http-prefetch 0 --mount "/sw=/http/127.0.0.1:$PORT" --)
# command_of CONFIG ARGS...: the command line of CONFIG running app.py with ARGS, in CMD.
command_of() {
  local c=$1; shift
  case $c in
    native) CMD=("$PY" "$T/app.py" "$@") ;;
    roost-local) CMD=("${LOCAL[@]}" "$PY" /sw/app.py "$@") ;;
    roost-http-warm) CMD=("${WARM[@]}" "$PY" /sw/app.py "$@") ;;
    roost-http-cold) rm -rf "$WORK/cache-cold"; CMD=("${COLD[@]}" "$PY" /sw/app.py "$@") ;;
    roost-http-cold-noprefetch) rm -rf "$WORK/cache-cold"; CMD=("${COLD_SERIAL[@]}" "$PY" /sw/app.py "$@") ;;
  esac
}
# timed CONFIG METRIC SCALE UNIT EXPECTED ARGS...: runs app.py ARGS once as CONFIG, wall
# clock of the whole command, and appends "CONFIG METRIC SECONDS*SCALE UNIT" to the results,
# nan when it fails or prints other than EXPECTED.
timed() {
  local c=$1 metric=$2 scale=$3 unit=$4 expected=$5 s e ok=1; shift 5
  command_of "$c" "$@"
  s=$EPOCHREALTIME
  "${CMD[@]}" >"$WORK/out" 2>"$WORK/err" || ok=0
  e=$EPOCHREALTIME
  if [ $ok = 1 ] && [ "$(cat "$WORK/out")" = "$expected" ]; then
    echo "$c $metric $(awk "BEGIN { printf \"%.6f\", ($e - $s) * $scale }") $unit" >>"$WORK/results"
  else
    echo "cdf.sh: $c $metric failed: $(cat "$WORK/out" "$WORK/err" | tail -n 3)" >&2
    echo "$c $metric nan $unit" >>"$WORK/results"
  fi
}

# Untimed: native once each way (their output is what every run must print; the tree and
# the interpreter are then in the page cache), and the job over HTTP, which fills the warm
# cache.
echo "cdf.sh: warm-up: native, roost-http-warm" >&2
JOB_OUT=$("$PY" "$T/app.py" "$ROUNDS")
IMPORT_OUT=$("$PY" "$T/app.py" --import-only)
[ "$("${WARM[@]}" "$PY" /sw/app.py "$ROUNDS")" = "$JOB_OUT" ] ||
  { echo "cdf.sh: the job prints other output over HTTP" >&2; exit 1; }

JOB_ORDER="native roost-local roost-http-warm"
START_ORDER="native roost-local roost-http-cold-noprefetch roost-http-cold roost-http-warm"
# RUNS rounds, each running every configuration once, so drift hits all alike.
: >"$WORK/results"
for run in $(seq "$RUNS"); do
  for c in $JOB_ORDER; do
    echo "cdf.sh: round $run/$RUNS: job: $c" >&2
    timed "$c" job 1 s "$JOB_OUT" "$ROUNDS"
  done
  for c in $START_ORDER; do
    echo "cdf.sh: round $run/$RUNS: start-up: $c" >&2
    timed "$c" start-up 1000 ms "$IMPORT_OUT" --import-only
  done
done

echo "The job ($JOB_OUT; $IMPORT_OUT first), wall clock, median of $RUNS rounds"
echo
python3 bench/agent/table.py "$WORK/results" "$JOB_ORDER" job native
echo
echo "Start-up: app.py --import-only (the imports, no work), wall clock, median of $RUNS rounds"
echo
python3 bench/agent/table.py "$WORK/results" "$START_ORDER" start-up native

# The spread of each configuration's runs, and the issue's targets against native's median.
python3 - "$WORK/results" "$JOB_ORDER" "$START_ORDER" <<'PY'
import math, statistics, sys
rows, rounds = {}, {}
for line in open(sys.argv[1]):
    config, metric, value, _ = line.split()
    # In the order run: the k-th of each configuration is round k's (nan kept, for pairing).
    rounds.setdefault((config, metric), []).append(float(value))
    if not math.isnan(float(value)):
        rows.setdefault((config, metric), []).append(float(value))
med = lambda c, m="job": statistics.median(rows[(c, m)]) if rows.get((c, m)) else None

def paired(c, m="job"):
    """The median over rounds of c's time / native's in the same round: a drift of the
    machine's speed across rounds, which the medians of each configuration do not cancel,
    cancels here (the configurations of a round run back to back)."""
    pairs = [a / b for a, b in zip(rounds.get((c, m), []), rounds.get(("native", m), []))
             if not (math.isnan(a) or math.isnan(b))]
    return statistics.median(pairs) if pairs else None
print("\njob runs (s), lowest to highest: " + "; ".join(
    f"{c} " + " ".join(f"{v:.2f}" for v in sorted(rows.get((c, "job"), []))) for c in sys.argv[2].split()))
print("start-up runs (ms), lowest to highest: " + "; ".join(
    f"{c} " + " ".join(f"{v:.0f}" for v in sorted(rows.get((c, "start-up"), []))) for c in sys.argv[3].split()))
native, local, warm = med("native"), med("roost-local"), med("roost-http-warm")
if native and local and warm:
    print(f"roost-http-warm / roost-local (HTTP's own part): {warm / local:.3f}x")
    for name, v in [("roost-local", local), ("roost-http-warm", warm)]:
        up, up0 = med(name, "start-up"), med("native", "start-up")
        if up and up0:
            print(f"{name}: {(v - native) * 1e3:.0f} ms more than native on the job, "
                  f"{up - up0:.0f} ms more on the start-up alone")
    for name, v, target in [("roost-local", local, 1.01), ("roost-http-warm", warm, 1.02)]:
        r, p = v / native, paired(name)
        print(f"{name} job / native job: {r:.3f}x as a ratio of medians, {p:.3f}x as the median "
              f"of each round's ratio (target: at most {target:.2f}x: "
              f"{'met' if p <= target else 'missed'}, judged on the paired ratio)")
else:
    print("targets: not judged (a configuration failed every run)")
print("paper, Figure 5 (unmodified / Parrot local / Parrot over HTTP-FS): real simulation 1.00x / 1.02x / 1.05x, toy Monte Carlo 1.00x / 1.01x / 1.04x")
PY
