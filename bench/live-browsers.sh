#!/usr/bin/env bash
# What the live page costs the generator (--live): a RATE/s open-model run against the
# demo, with 0 and with BROWSERS pages open on its live page, alternating in each round.
#
#   bench/live-browsers.sh [PERFOPS_BIN]            # default: <repo>/target/release/perfops
#   RATE=20000 DURATION=20 ROUNDS=3 BROWSERS=20 bench/live-browsers.sh
#   CLIENTS=curl bench/live-browsers.sh             # BROWSERS event streams read by curl
#   ROUNDS=1 DURATION=5 RATE=2000 bench/live-browsers.sh   # rehearsal
#
# Each run: `perfops quick -r RATE -d DURATION --live=127.0.0.1:LIVE_PORT URL/health`
# pinned to TOOL_CPU, the demo (`--model async --threads 1`, no I/O wait, no CPU work)
# pinned to TARGET_CPU. With browsers: headless Chromiums (Debian's, driven over the
# DevTools protocol by crates/perfops/tests/common/cdp.py) open BROWSERS tabs on the
# page as soon as it answers, at most 5 tabs a Chromium (a browser holds at most 6
# HTTP/1.1 connections to one host, and each page's event stream is one), pinned to
# BROWSER_CPU (default TARGET_CPU: on a 2-core
# machine there is no third core, so the browsers share the target's and may move the
# target's latency, which the generator's p50/p99 then include; the generator's own CPU
# is what this measures). READERS_IDLE=1 runs the readers in the idle scheduling class
# (`chrt --idle 0`): they then take only what the target leaves of its core, so they do
# not move its latency, but at 20,000/s on 2 cores most pages do not get to open (the
# "pages reading" column says how many did: 4 and 0 of 20 in two rounds). The established connections to the live port are counted
# halfway through the run (`ss`), so the table says how many pages were really reading.
# The live page's own cost is also read directly: the CPU time of the generator's
# `perfops-live` thread (its server) from /proc/PID/task/TID/schedstat, a second before
# the run ends; the collector's part (one JSON line a second) is measured by
# `cargo test -p perfops-run --lib live::tests::second_cost -- --ignored --nocapture`.
# Printed per run and as medians per browser count: the generator's CPU s per 100k
# requests (user + sys of the whole process, the live page's server thread included)
# and its share of a core, its p50 / p99 latency, and the target's CPU s per 100k.
# Only 127.0.0.1 is contacted; every process started here is stopped by its PID.
#
# Knobs (env): RATE=20000 DURATION=20 ROUNDS=3 BROWSERS=20 CLIENTS=chromium|curl
#              TARGET_CPU=0 TOOL_CPU=1 BROWSER_CPU=$TARGET_CPU PORT=18091 LIVE_PORT=15665 READERS_IDLE=0
# Output: markdown on stdout, also bench/out/live-browsers-<UTC stamp>.md; raw outputs in
# bench/out/live-browsers-<stamp>/. Exit status: 0 fine, 3 a run failed, 1 setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
RATE=${RATE:-20000}
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
BROWSERS=${BROWSERS:-20}
CLIENTS=${CLIENTS:-chromium}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}
BROWSER_CPU=${BROWSER_CPU:-$TARGET_CPU}
READERS_IDLE=${READERS_IDLE:-0}
PORT=${PORT:-18091}
LIVE_PORT=${LIVE_PORT:-15665}
PERFOPS=${1:-$ROOT/target/release/perfops}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
PY=/usr/bin/python3

die() { echo "live-browsers: $*" >&2; exit 1; }
for v in RATE DURATION ROUNDS BROWSERS TARGET_CPU TOOL_CPU BROWSER_CPU PORT LIVE_PORT READERS_IDLE; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[ -x "$PERFOPS" ] || die "perfops not found: $PERFOPS (cargo build --release -p perfops)"
case "$CLIENTS" in
  chromium) [ -x "$CHROMIUM" ] || die "$CHROMIUM missing (apt-get install chromium), or CLIENTS=curl" ;;
  curl) command -v curl >/dev/null || die "curl missing" ;;
  *) die "CLIENTS: chromium or curl (got '$CLIENTS')" ;;
esac
command -v taskset >/dev/null || die "taskset missing"
IDLE=(env)
if [ "$READERS_IDLE" != 0 ]; then
  command -v chrt >/dev/null || die "chrt missing (util-linux), or READERS_IDLE=0"
  IDLE=(chrt --idle 0)
fi
command -v ss >/dev/null || die "ss missing (iproute2)"

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT="$HERE/out/live-browsers-$STAMP"
mkdir -p "$OUT"
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

taskset -c "$TARGET_CPU" "$PERFOPS" demo --model async --threads 1 --io-wait 0ms --cpu-work 0us \
  --listen "127.0.0.1:$PORT" >"$OUT/demo.log" 2>&1 &
DEMO=$!
PIDS+=("$DEMO")
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PORT/health" && break; sleep 0.1; done
ticks() { awk '{print $14 + $15}' "/proc/$DEMO/stat"; }
HZ=$(getconf CLK_TCK)

# Pages (or streams) on the live page from the moment it answers, until killed.
readers() {
  local n=$1 tag=$2
  for _ in $(seq 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$LIVE_PORT/")" = 200 ] && break
    sleep 0.1
  done
  if [ "$CLIENTS" = chromium ]; then
    local left=$n k=0 steps i
    while [ "$left" -gt 0 ]; do
      k=$((k + 1))
      steps="["
      for i in $(seq $((left < 5 ? left : 5))); do steps+="[\"open\",\"http://127.0.0.1:$LIVE_PORT/\"],"; done
      steps+="[\"wait\",$((DURATION + 5))]]"
      left=$((left - 5))
      "${IDLE[@]}" taskset -c "$BROWSER_CPU" "$PY" "$ROOT/crates/perfops/tests/common/cdp.py" "$CHROMIUM" \
        "$OUT/profile-$tag-$k" "$steps" >"$OUT/$tag.browsers-$k.log" 2>&1 &
    done
    wait
  else
    local i
    for i in $(seq "$n"); do
      "${IDLE[@]}" taskset -c "$BROWSER_CPU" curl -sN "http://127.0.0.1:$LIVE_PORT/events" >/dev/null 2>&1 &
    done
    wait
  fi
}

failed=0
echo "| browsers | round | completed | generator CPU s / 100k | generator % of a core | live server thread, % of a core | p50 ms | p99 ms | target CPU s / 100k | pages reading |" >"$OUT/table.md"
echo "|---|---|---|---|---|---|---|---|---|---|" >>"$OUT/table.md"
for round in $(seq "$ROUNDS"); do
  for n in 0 "$BROWSERS"; do
    tag="r$round-b$n"
    before=$(ticks)
    taskset -c "$TOOL_CPU" "$PERFOPS" quick -r "$RATE" -d "${DURATION}s" --json "$OUT/$tag.json" \
      --live="127.0.0.1:$LIVE_PORT" "http://127.0.0.1:$PORT/health" >"$OUT/$tag.out" 2>"$OUT/$tag.err" &
    run=$!
    rpid=""
    if [ "$n" -gt 0 ]; then
      readers "$n" "$tag" &
      rpid=$!
      PIDS+=("$rpid")
    fi
    sleep $((DURATION / 2 + 1))
    reading=$(ss -Htn state established "( sport = :$LIVE_PORT )" | wc -l)
    sleep $((DURATION - DURATION / 2 - 2))
    live_ns=0
    for t in /proc/$run/task/*; do
      [ "$(cat "$t/comm" 2>/dev/null)" = perfops-live ] && live_ns=$(awk '{print $1}' "$t/schedstat")
    done
    wait "$run" || { echo "live-browsers: $tag failed, see $OUT/$tag.err" >&2; failed=1; }
    # The readers end on their own: Chromium's tabs after DURATION + 5 s, curl's
    # streams when the run's last event closes them.
    if [ -n "$rpid" ]; then wait "$rpid" 2>/dev/null || true; fi
    after=$(ticks)
    [ -s "$OUT/$tag.json" ] || continue
    "$PY" - "$OUT/$tag.json" "$n" "$round" "$((after - before))" "$HZ" "$DURATION" "$reading" "$live_ns" >>"$OUT/table.md" <<'EOF'
import json, sys
path, n, rnd, ticks, hz, dur, reading, live_ns = sys.argv[1:]
d = json.load(open(path))
g = d["generator"]
cpu = g["cpu_user_s"] + g["cpu_sys_s"]
done = max(d["completed"], 1)
# The live thread ran from the start to a second before the end.
live = int(live_ns) / 1e9 / max(float(dur) - 1, 1) * 100
print("| %s | %s | %d | %.3f | %.1f %% | %.3f %% | %.3f | %.3f | %.3f | %s |" % (
    n, rnd, d["completed"], cpu / done * 1e5, cpu / d["elapsed_s"] * 100, live, d["latency_ms"]["p50"],
    d["latency_ms"]["p99"], int(ticks) / int(hz) / done * 1e5, reading))
EOF
  done
done

"$PY" - "$OUT/table.md" <<'EOF' >"$OUT/medians.md"
import statistics, sys
rows = [l.split("|")[1:-1] for l in open(sys.argv[1]) if l.startswith("| ") and not l.startswith("| browsers")]
by = {}
for r in rows:
    by.setdefault(r[0].strip(), []).append(r)
print("| browsers | runs | generator CPU s / 100k | generator % of a core | live server thread, % of a core | p50 ms | p99 ms | target CPU s / 100k |")
print("|---|---|---|---|---|---|---|---|")
for n, rs in by.items():
    med = lambda i: statistics.median(float(r[i].strip().split()[0]) for r in rs)
    print("| %s | %d | %.3f | %.1f %% | %.3f %% | %.3f | %.3f | %.3f |" % (n, len(rs), med(3), med(4), med(5), med(6), med(7), med(8)))
EOF
{
  echo "# live-browsers $STAMP: $RATE/s for ${DURATION}s, 0 and $BROWSERS $CLIENTS readers, $ROUNDS round(s)"
  echo
  echo "generator on CPU $TOOL_CPU, target (demo async, 1 thread) on CPU $TARGET_CPU, readers on CPU $BROWSER_CPU$([ "$READERS_IDLE" != 0 ] && echo ' (idle class)')"
  echo
  cat "$OUT/medians.md"
  echo
  cat "$OUT/table.md"
} | tee "$HERE/out/live-browsers-$STAMP.md"
[ "$failed" = 0 ] || exit 3
