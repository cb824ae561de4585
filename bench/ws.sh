#!/usr/bin/env bash
# WebSocket figures (issue #14, part 3). Not a CI test.
#
#   bench/ws.sh [PERFOPS_BIN [WS_ECHO_BIN]]   # default: <repo>/target/release/{perfops,ws-echo}
#   CONNECTIONS=200 HOLD_S=3 DURATION=2 MSG_RATE=500 bench/ws.sh target/debug/perfops target/debug/ws-echo
#
# 1. Held connections: CONNECTIONS sessions (10,000) open at ARRIVE_RATE/s (2,000),
#    each upgraded, sending one message at once and then every EVERY_S (10 s),
#    held HOLD_S (30 s): the figure is perfops' peak RSS (VmHWM, read from /proc
#    each second and at the end from its own getrusage) with every connection open;
#    the target is < 100 MiB, about 8 KiB per connection at most.
# 2. Round trips on one core: SESSIONS (1,000) sessions, each sending a message
#    every SESSIONS/MSG_RATE s (MSG_RATE 20,000/s in all), for DURATION s (10), the
#    generator on one worker: the figure is the messages answered per second and
#    their latency (from each message's due time), and the CPU perfops used.
#
# The server is the testkit's tokio-tungstenite echo (`ws-echo`, one thread), pinned
# to TARGET_CPU (0); perfops to TOOL_CPU (1), with `--workers 1`: they never share a
# core. Everything is on 127.0.0.1. perfops raises its open-files soft limit to the
# hard one; the server gets the hard one from this shell (`ulimit -n`). Both are
# stopped by their PIDs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PERFOPS=${1:-$ROOT/target/release/perfops}
WS_ECHO=${2:-$(dirname "$PERFOPS")/ws-echo}
PORT=${PORT:-18300}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}
CONNECTIONS=${CONNECTIONS:-10000}
ARRIVE_RATE=${ARRIVE_RATE:-2000}
HOLD_S=${HOLD_S:-30}
EVERY_S=${EVERY_S:-10}
SESSIONS=${SESSIONS:-1000}
MSG_RATE=${MSG_RATE:-20000}
DURATION=${DURATION:-10}

die() { echo "ws: $*" >&2; exit 1; }
for v in PORT TARGET_CPU TOOL_CPU CONNECTIONS ARRIVE_RATE HOLD_S EVERY_S SESSIONS MSG_RATE DURATION; do
  [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 0 ] || die "$v must be a whole number (got '${!v}')"
done
for v in CONNECTIONS ARRIVE_RATE HOLD_S EVERY_S SESSIONS MSG_RATE DURATION; do
  [ "${!v}" -ge 1 ] || die "$v must be >= 1"
done
[ -x "$PERFOPS" ] || die "perfops not found: $PERFOPS (cargo build --release -p perfops)"
[ -x "$WS_ECHO" ] || die "ws-echo not found: $WS_ECHO (cargo build --release -p perfops-testkit --bin ws-echo)"
command -v taskset >/dev/null || die "taskset is missing (util-linux)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fds=$(ulimit -n)
if [ "$fds" != unlimited ] && [ "$fds" -lt $((CONNECTIONS + 100)) ]; then
  die "the open-files limit is $fds, below CONNECTIONS + 100 = $((CONNECTIONS + 100)) (raise it with ulimit -Hn as root)"
fi

DIR=$(mktemp -d /tmp/perfops-ws.XXXXXX)
SRV_PID="" P_PID=""
cleanup() {
  [ -n "$P_PID" ] && kill "$P_PID" 2>/dev/null || true
  [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

taskset -c "$TARGET_CPU" "$WS_ECHO" "127.0.0.1:$PORT" </dev/null >"$DIR/server.log" 2>&1 &
SRV_PID=$!
for _ in $(seq 50); do bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && break; sleep 0.1; done
kill -0 "$SRV_PID" 2>/dev/null || die "ws-echo did not start: $(cat "$DIR/server.log")"

# The summary's figures of step NAME (a JSON file, a step name, fields).
step_figures() {
  python3 - "$1" "$2" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
st = next((x for x in s["steps"] if x["name"] == sys.argv[2]), None)
g = s.get("generator", {})
if st is None:
    print(f"no step {sys.argv[2]!r} in the summary"); sys.exit(0)
lat = st["latency_ms"]
fails = ", ".join(f"{k} {v}" for k, v in st["failures"].items()) or "none"
cpu = g.get("cpu_user_s", 0) + g.get("cpu_sys_s", 0)
print(f"{st['completed']} completed over {st['duration_s']:.1f} s, failures: {fails}; latency ms p50 {lat['p50']:.2f} "
      f"p99 {lat['p99']:.2f} max {lat['max']:.2f}; perfops CPU {cpu:.2f} s, max RSS {g.get('max_rss_kib', 0) / 1024:.1f} MiB")
EOF
}

# ---------------------------------------------------------------- 1. held connections
arrive_s=$(( (CONNECTIONS + ARRIVE_RATE - 1) / ARRIVE_RATE ))
cat >"$DIR/held.yaml" <<EOF
name: ws-held
target: ws://127.0.0.1:$PORT
defaults: { timeout: 10s }
flows:
  held:
    steps:
      - { name: held, websocket: /, send: ["hello \${seq}"], hold: ${HOLD_S}s, every: ${EVERY_S}s }
load:
  max_in_flight: $((CONNECTIONS + 1000))
  stages: [ { rate: $ARRIVE_RATE, hold: ${arrive_s}s } ]
EOF
echo "## $CONNECTIONS held connections ($ARRIVE_RATE/s, held ${HOLD_S} s, a message every ${EVERY_S} s)"
echo
taskset -c "$TOOL_CPU" "$PERFOPS" run "$DIR/held.yaml" --out "$DIR/runs-held" -q --workers 1 --wait-in-flight \
  >"$DIR/held.out" 2>"$DIR/held.err" </dev/null &
P_PID=$!
echo "| t (s) | perfops VmRSS (MiB) | VmHWM (MiB) | open fds |"
echo "|---:|---:|---:|---:|"
peak=0 peak_fds=0
for t in $(seq 1 $((arrive_s + HOLD_S + 15))); do
  sleep 1
  kill -0 "$P_PID" 2>/dev/null || break
  read -r rss hwm < <(awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} END{print r+0, h+0}' "/proc/$P_PID/status" 2>/dev/null || echo "0 0")
  n=$(find "/proc/$P_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  [ "$hwm" -gt "$peak" ] && peak=$hwm
  [ "$n" -gt "$peak_fds" ] && peak_fds=$n
  printf '| %s | %.1f | %.1f | %s |\n' "$t" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$(awk -v k="$hwm" 'BEGIN{print k/1024}')" "$n"
done
rc=0; wait "$P_PID" || rc=$?; P_PID=""
echo
summary=$(find "$DIR/runs-held" -name summary.json | head -n 1)
[ -n "$summary" ] || die "the held run left no summary (exit $rc): $(tail -n 3 "$DIR/held.err")"
own=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['generator']['max_rss_kib'])" "$summary")
[ "$own" -gt "$peak" ] && peak=$own
awk -v n="$CONNECTIONS" -v peak="$peak" -v fds="$peak_fds" -v rc="$rc" 'BEGIN{
  printf "perfops exit %d: at most %d fds open, peak RSS (VmHWM) %.1f MiB for %d held connections = %.2f KiB per connection\n", rc, fds, peak/1024, n, peak/n
}'
echo "upgrades:  $(step_figures "$summary" held)"
echo "messages:  $(step_figures "$summary" "held messages")"
echo

# ---------------------------------------------------------------- 2. round trips on one core
every_ms=$(( SESSIONS * 1000 / MSG_RATE ))
[ "$every_ms" -ge 1 ] || die "SESSIONS / MSG_RATE must be >= 1 ms (more sessions or a lower rate)"
cat >"$DIR/rtt.yaml" <<EOF
name: ws-rtt
target: ws://127.0.0.1:$PORT
defaults: { timeout: 5s }
flows:
  chat:
    steps:
      - { name: chat, websocket: /, send: ["message \${seq}"], hold: ${DURATION}s, every: ${every_ms}ms }
load:
  max_in_flight: $((SESSIONS + 100))
  stages: [ { rate: $SESSIONS, hold: 1s } ]
EOF
echo "## round trips on one core: $SESSIONS sessions, a message each every $every_ms ms (target $MSG_RATE/s), ${DURATION} s"
echo
rc=0
taskset -c "$TOOL_CPU" "$PERFOPS" run "$DIR/rtt.yaml" --out "$DIR/runs-rtt" -q --workers 1 --wait-in-flight \
  >"$DIR/rtt.out" 2>"$DIR/rtt.err" </dev/null || rc=$?
summary=$(find "$DIR/runs-rtt" -name summary.json | head -n 1)
[ -n "$summary" ] || die "the round-trip run left no summary (exit $rc): $(tail -n 3 "$DIR/rtt.err")"
python3 - "$summary" "$DURATION" "$rc" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
st = next(x for x in s["steps"] if x["name"] == "chat messages")
g = s["generator"]
secs = float(sys.argv[2])
cpu = g["cpu_user_s"] + g["cpu_sys_s"]
print(f"perfops exit {sys.argv[3]}: {st['completed']} round trips answered, {st['completed'] / secs:.0f}/s over the {secs:.0f} s hold;"
      f" failures {st['failures'] or 'none'}; latency ms p50 {st['latency_ms']['p50']:.2f} p99 {st['latency_ms']['p99']:.2f}"
      f" p99.9 {st['latency_ms'].get('p99_9', float('nan')):.2f} max {st['latency_ms']['max']:.2f};"
      f" perfops CPU {cpu:.2f} s ({100 * cpu / (secs + 1):.0f}% of its core), max RSS {g['max_rss_kib'] / 1024:.1f} MiB")
EOF
