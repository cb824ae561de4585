#!/usr/bin/env bash
# Looping WebSocket users: a closed model of USERS (10,000) users, each holding a
# session SESSION_S (20 s) and then opening the next, for LOOP_S (30 s), against
# Debian's python3-websockets (bench/ws-count.py, which counts what it holds).
# Not a CI test (crates/perfops/tests/websocket.rs has the bounded one).
#
#   bench/ws-loop.sh [PERFOPS_BIN]          # default: <repo>/target/release/perfops
#   USERS=2000 SESSION_S=3 LOOP_S=8 bench/ws-loop.sh target/debug/perfops
#
# Prints perfops' peak RSS (`/usr/bin/time -v`, and the summary's own getrusage),
# the server's most TCP connections open at once (a connection counted from its
# accept to the server's read of its end, so one the client gave up on counts
# until the server gets to it) and most upgraded ones at once, and the sessions'
# outcomes (upgrades, failures by kind). The goals: peak RSS under 100 MiB for
# 10,000 users, and the server holding about as many connections as there are
# users. Not exactly as many: a user opens its next session once the server has
# answered its close and ended the connection, but the server counts the old
# one until its event loop reads the user's end, and a loop iteration that
# accepts the new connection first counts both (300 users closing together:
# 332 at most). An upgrade the server does not answer within the step's
# timeout is given up (its connection closed) and counts until the server gets
# to it: on an overloaded server, many more. The testkit's server counts
# exactly (crates/perfops/tests/websocket.rs).
#
# Knobs: BACKLOG (the server's listen backlog; 100 is asyncio's default, which a
# burst of 10,000 connects overflows: connect timeouts), TIMEOUT (10s, the
# step's), TARGET_CPU (0, the server), TOOL_CPU (1, perfops, `--workers 1`).
# Everything is on 127.0.0.1; both processes are stopped by their PIDs.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PERFOPS=${1:-$ROOT/target/release/perfops}
USERS=${USERS:-10000}
SESSION_S=${SESSION_S:-20}
LOOP_S=${LOOP_S:-30}
BACKLOG=${BACKLOG:-4096}
TIMEOUT=${TIMEOUT:-10s}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}

die() { echo "ws-loop: $*" >&2; exit 1; }
for v in USERS SESSION_S LOOP_S BACKLOG TARGET_CPU TOOL_CPU; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number (got '${!v}')"
done
[[ $TIMEOUT =~ ^[0-9]+(ms|s)$ ]] || die "TIMEOUT must be like 10s or 500ms (got '$TIMEOUT')"
[ -x "$PERFOPS" ] || die "perfops not found: $PERFOPS (cargo build --release -p perfops)"
[ -x /usr/bin/time ] || die "/usr/bin/time is missing (Debian: time)"
/usr/bin/python3 -c 'import sys; sys.path.append("/usr/lib/python3/dist-packages"); import websockets' 2>/dev/null \
  || die "python3-websockets is missing (apt-get install python3-websockets)"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
fds=$(ulimit -n)
if [ "$fds" != unlimited ] && [ "$fds" -lt $((USERS + 100)) ]; then
  die "the open-files limit is $fds, below USERS + 100 = $((USERS + 100)) (raise it with ulimit -Hn as root)"
fi

DIR=$(mktemp -d /tmp/perfops-ws-loop.XXXXXX)
SRV_PID="" P_PID=""
cleanup() {
  [ -n "$P_PID" ] && kill "$P_PID" 2>/dev/null || true
  [ -n "$SRV_PID" ] && kill "$SRV_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

mkfifo "$DIR/server.out"
taskset -c "$TARGET_CPU" /usr/bin/python3 "$HERE/ws-count.py" 0 "$BACKLOG" >"$DIR/server.out" 2>"$DIR/server.err" &
SRV_PID=$!
exec 3<"$DIR/server.out"
read -r -t 10 port <&3 || die "the server did not start: $(cat "$DIR/server.err")"

cat >"$DIR/loop.yaml" <<EOF
name: ws-loop
target: ws://127.0.0.1:$port
defaults: { timeout: $TIMEOUT }
flows:
  chat:
    steps:
      - { name: chat, websocket: /, send: ["hello \${seq}"], hold: ${SESSION_S}s }
load:
  model: closed
  stages: [ { users: $USERS, hold: ${LOOP_S}s } ]
EOF
echo "## $USERS looping users (sessions of $SESSION_S s, for $LOOP_S s) against python3-websockets (backlog $BACKLOG)"
echo
rc=0
taskset -c "$TOOL_CPU" /usr/bin/time -v "$PERFOPS" run "$DIR/loop.yaml" --out "$DIR/runs" -q --workers 1 \
  >"$DIR/perfops.out" 2>"$DIR/perfops.err" </dev/null &
P_PID=$!
wait "$P_PID" || rc=$?
P_PID=""
kill -TERM "$SRV_PID"
read -r -t 10 counts <&3 || counts="(the server said nothing)"
wait "$SRV_PID" 2>/dev/null || true
SRV_PID=""
peak=$(awk -F: '/Maximum resident set size/{gsub(/ /, "", $2); print $2}' "$DIR/perfops.err")
summary=$(find "$DIR/runs" -name summary.json | head -n 1)
[ -n "$summary" ] || die "the run left no summary (exit $rc): $(tail -n 3 "$DIR/perfops.err")"
echo "perfops exit $rc, peak RSS $(awk -v k="${peak:-0}" 'BEGIN{printf "%.1f", k/1024}') MiB (/usr/bin/time -v)"
echo "server: $counts (for $USERS users)"
python3 - "$summary" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
for st in s["steps"]:
    fails = ", ".join(f"{k} {v}" for k, v in st["failures"].items()) or "none"
    print(f"{st['name']}: {st['sent']} sent, {st['completed']} completed, failures: {fails}")
g = s["generator"]
print(f"perfops CPU {g['cpu_user_s'] + g['cpu_sys_s']:.2f} s, max RSS {g['max_rss_kib'] / 1024:.1f} MiB (its getrusage)")
EOF
