#!/usr/bin/env bash
# The open model judged against the wire (#18): perfops' service time and its latency from
# the intended start, against each exchange's duration read off a loopback capture.
#
#   bench/open-wire.sh BIN [BIN...]                 # e.g. a build before and after a change
#   RATES="10000 20000" ROUNDS=2 DURATION=6 bench/open-wire.sh target/release/perfops
#
# For each rate and round, each binary in turn (alternating): the 10 ms delay server
# (../shared/bench/peers/targets/delayserver.go, built into bench/out/) and tcpdump on
# TARGET_CPU, `perfops quick -r RATE -d DURATION --json` on TOOL_CPU; then
# ../shared/bench/wire/wiretruth.py reads every exchange's duration from the capture (first
# request byte to last response byte, as the loopback interface saw them). Printed: the
# wire's p50/p99, perfops' service-time p50/p99 minus the wire's (what its clock adds to an
# exchange) and its latency-from-the-intended-start p99 minus the wire's (that, plus its
# pacer's lateness), the packets tcpdump dropped (want 0) and the server-seen rate.
# Each run holds LOCK (/tmp/bench.lock) from start to end. Only 127.0.0.1 is contacted;
# the server and tcpdump are stopped by their PIDs. Needs tcpdump (apt-get install tcpdump).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "$#" -ge 1 ] || { echo "usage: $0 PERFOPS_BIN [PERFOPS_BIN...]" >&2; exit 2; }
RATES=${RATES:-"2000 10000 20000"}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-6}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}
LOCK=${LOCK-/tmp/bench.lock}
PORT=${PORT:-18084}
SRC="$HERE/../../shared/bench/peers/targets/delayserver.go"
WIRE="$HERE/../../shared/bench/wire/wiretruth.py"
OUT="$HERE/out/open-wire-$(date -u +%Y%m%dT%H%M%SZ)"
for b in "$@"; do [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }; done
for f in "$SRC" "$WIRE"; do [ -f "$f" ] || { echo "$0: $f is missing (../shared/bench)" >&2; exit 1; }; done
command -v tcpdump >/dev/null || { echo "$0: tcpdump not found (apt-get install tcpdump)" >&2; exit 1; }
mkdir -p "$OUT"
[ -x "$HERE/out/delayserver" ] || go build -o "$HERE/out/delayserver" "$SRC"
if curl -s -o /dev/null "http://127.0.0.1:$PORT/__stats"; then
  echo "$0: something already answers on 127.0.0.1:$PORT" >&2; exit 1
fi
SERVER=""
TD=""
stop() { # the capture and the server we started, by PID
  if [ -n "$TD" ]; then kill -INT "$TD" 2>/dev/null || true; wait "$TD" 2>/dev/null || true; TD=""; fi
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; SERVER=""; fi
}
trap stop EXIT
taskset -c "$TARGET_CPU" "$HERE/out/delayserver" -addr "127.0.0.1:$PORT" -delay 10ms 2>"$OUT/server.log" &
SERVER=$!
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$PORT/__stats" && break; sleep 0.05; done
if [ -n "$LOCK" ]; then exec 9>>"$LOCK"; fi

for rate in $RATES; do
  for round in $(seq 1 "$ROUNDS"); do
    i=0
    for bin in "$@"; do
      i=$((i + 1))
      name="r$rate-$round-bin$i"
      [ -z "$LOCK" ] || flock 9
      curl -s -o /dev/null "http://127.0.0.1:$PORT/__reset"
      taskset -c "$TARGET_CPU" tcpdump -i lo -n -s 96 -B 262144 --time-stamp-precision=nano \
        -w "$OUT/$name.pcap" "tcp port $PORT" 2>"$OUT/$name.tcpdump" &
      TD=$!
      sleep 1
      /usr/bin/time -f '%e %U %S %M' -o "$OUT/$name.time" \
        taskset -c "$TOOL_CPU" "$bin" quick -r "$rate" -d "${DURATION}s" --json "$OUT/$name.json" \
        "http://127.0.0.1:$PORT/" >/dev/null 2>"$OUT/$name.err" </dev/null 9>&- || true
      sleep 0.5
      kill -INT "$TD" 2>/dev/null || true; wait "$TD" 2>/dev/null || true; TD=""
      curl -s "http://127.0.0.1:$PORT/__stats" >"$OUT/$name.server.json"
      [ -z "$LOCK" ] || flock -u 9
      python3 "$WIRE" "$OUT/$name.pcap" "$PORT" >"$OUT/$name.wire.json" || true
      rm -f "$OUT/$name.pcap"
      echo "[open-wire] $name done" >&2
    done
  done
done

python3 - "$OUT" "$@" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1]); bins = sys.argv[2:]
print("| rate | binary | wire p50 / p99 ms | service - wire p50 / p99 ms | latency p99 - wire p99 ms | "
      "CPU s/100k | dropped by tcpdump | server-seen rate |")
print("|---:|---|---|---|---|---:|---:|---:|")
for f in sorted(out.glob("*.wire.json"), key=lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)]):
    name = f.name[: -len(".wire.json")]
    rate, rnd, b = name[1:].split("-")
    try:
        w = json.loads(f.read_text()); q = json.loads((out / f"{name}.json").read_text())
        srv = json.loads((out / f"{name}.server.json").read_text())
    except (OSError, ValueError):
        print(f"| {rate} | {bins[int(b[3:]) - 1]} | (no figures) | | | | | |"); continue
    user, sys_ = (out / f"{name}.time").read_text().split()[-3:-1]
    cpu = (float(user) + float(sys_)) / max(q["completed"], 1) * 1e5
    drop = re.search(r"(\d+) packets? dropped by kernel", (out / f"{name}.tcpdump").read_text())
    lat, svc = q["latency_ms"], q["service_ms"]
    print(f"| {rate} | {bins[int(b[3:]) - 1]} (round {rnd}) | {w['p50_ms']:.3f} / {w['p99_ms']:.3f} | "
          f"{svc['p50'] - w['p50_ms']:+.3f} / {svc['p99'] - w['p99_ms']:+.3f} | {lat['p99'] - w['p99_ms']:+.3f} | "
          f"{cpu:.2f} | {drop.group(1) if drop else '?'} | {srv.get('arrival_rate', 0):,.1f} |")
PY
echo "raw outputs: $OUT" >&2
