#!/usr/bin/env bash
# perfops vs ghz (#14): gRPC unary calls against a Go gRPC echo server, side by side in one run.
#
#   bench/grpc.sh [PERFOPS_BIN]             # default: <repo>/target/release/perfops
#   ROUNDS=1 DURATION=2 bench/grpc.sh       # quick check
#
# Knobs (env): DURATION=10 (s per run)  CONC=50  RATE=2000 (open model, calls/s)  DELAY=10ms
#              ROUNDS=3  GHZ=ghz (or ~/go/bin/ghz)  TARGET_CPU=0  TOOL_CPU=1  and common.sh's
#              LOCK, LOCK_WAIT_S, QUIET_MAX_S, NOISE_MAX_S, NOISE_RETRIES, NO_BUILD, BUILD_TIMEOUT_S
#              PRIO=rt  the open model's server and tools at `chrt -f 50` (root): on a machine
#                       that cannot be kept quiet, the p99 otherwise measures the wait for a core
#                       (bench/README.md: latency minus service time at p99 0.3-0.5 ms real-time,
#                       1.7-3.3 ms not). The closed runs, CPU-bound, stay at normal priority.
#
# Target: bench/grpcecho (grpc-go; ../shared/bench/peers/targets/grpcecho plus its own timing of
# each call; built here into bench/out/ with `go build`), pinned to TARGET_CPU: every call echoes
# its message (`bench.Echo/Say`, echo.proto beside it); calls counted at
# http://127.0.0.1:18096/__stats, which with -timing also gives the server's own p50/p99 per
# call: from the request's HEADERS read off its connection (grpc-go's reader goroutine) to its
# status handed to the writer. Reset before each measured run, read after it (NAME.server.json).
# 1. Throughput, CONC calls in flight on one connection (ghz's default), no delay, no timing,
#    alternated per round, each tool pinned to TOOL_CPU under `/usr/bin/time`:
#      ghz --insecure --cpus 1 -c CONC --connections 1 -z DURATION --proto echo.proto --call bench.Echo/Say
#      perfops quick --workers 1 -c 1 -p CONC -d DURATION grpc://127.0.0.1:18095/bench.Echo/Say
#    rps = calls / the tool's elapsed time; CPU s per 100k = (user + sys) / calls * 1e5.
# 2. Open model at RATE calls/s against the server with -delay DELAY -timing (restarted for it):
#      perfops quick --workers 1 -r RATE -d DURATION  (latency from the intended start, and
#                                                      service time from the send)
#      ghz --rps RATE -c CONC (ghz paces its workers; its latency counts from the send)
#    p50/p99 minus the server's own p50/p99 of the same run: what the tool (and the loopback)
#    add to the server's time (the issue's bound: perfops within +0.3 / +0.5 ms).
# Only 127.0.0.1 is ever contacted; the server is stopped by its PID.
#
# Output: markdown on stdout and bench/out/grpc-<UTC stamp>.md; raw outputs in bench/out/grpc-<stamp>/.
# Exit status: 0 every run worked, 3 some run failed, 1 setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=grpc
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"

CONC=${CONC:-50}
RATE=${RATE:-2000}
DELAY=${DELAY:-10ms}
GHZ=${GHZ:-$(command -v ghz || echo "$HOME/go/bin/ghz")}
PRIO=${PRIO:-}
case "$PRIO" in
  "") PRIO_CMD=() ;;
  rt) command -v chrt >/dev/null 2>&1 && chrt -f 50 true 2>/dev/null || die "PRIO=rt: chrt -f 50 is refused (run as root)"
      PRIO_CMD=(chrt -f 50) ;;
  *) die "PRIO is empty or rt, not $PRIO" ;;
esac
need_ints DURATION CONC RATE ROUNDS TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S BUILD_TIMEOUT_S NOISE_RETRIES
need_positive DURATION ROUNDS CONC RATE
need_tools go taskset timeout curl python3
need_numbers NOISE_MAX_S
[ -x "$GHZ" ] || die "no ghz at $GHZ (go install github.com/bojand/ghz/cmd/ghz@latest, or GHZ=...)"

SRC="$HERE/grpcecho"
PROTO="$SRC/echo.proto"
ADDR=127.0.0.1:18095
STATS_URL="http://127.0.0.1:18096/__stats"
URL="grpc://$ADDR/bench.Echo/Say"
MSG='{"text":"hello"}'
RUN_TIMEOUT_S=$((DURATION + 30))

perfops_path "${1:-}"
out_dirs
cleanup_at_exit

if [ ! -x "$PERFOPS" ] && [ "$PERFOPS" = "$PERFOPS_DEFAULT" ] && [ "$NO_BUILD" != 1 ]; then
  build_perfops missing
  [ "$BUILD_RC" -eq 0 ] || die "cargo build --release -p perfops failed: $BUILD_ERR"
fi
[ -x "$PERFOPS" ] || die "no perfops binary at $PERFOPS"
SERVER="$OUTDIR/grpcecho-timed"
if [ ! -x "$SERVER" ] || [ -n "$(find "$SRC" -newer "$SERVER" -type f)" ]; then
  (cd "$SRC" && go build -o "$SERVER" .) >"$RAW/go-build.log" 2>&1 \
    || die "go build of bench/grpcecho failed: $(tail -n 2 "$RAW/go-build.log")"
fi

start_server() { # [chrt -f N] DELAY [-timing]: the echo server pinned to TARGET_CPU (TARGET_PID, TARGET_WORK)
  local prio=()
  if [ "$1" = chrt ]; then prio=("$1" "$2" "$3"); shift 3; fi
  refuse_if_answering "$STATS_URL" "$STATS_URL" "stop it first"
  ${prio[@]+"${prio[@]}"} taskset -c "$TARGET_CPU" "$SERVER" -listen "$ADDR" -delay "$@" >"$RAW/server-$1.log" 2>&1 </dev/null &
  TARGET_PID=$!
  TARGET_WORK=$TARGET_PID
  wait_up "$STATS_URL" || die "grpcecho did not come up: $(tail -n 2 "$RAW/server-$1.log")"
  log "grpcecho $TARGET_PID, delay $1, CPU $TARGET_CPU${prio[*]:+, ${prio[*]}}"
}
stop_server() {
  kill "$TARGET_PID" 2>/dev/null || true
  wait "$TARGET_PID" 2>/dev/null || true
  TARGET_PID=""
}

{
  echo "{"
  echo "  \"stamp\": \"$STAMP\", \"duration\": $DURATION, \"conc\": $CONC, \"rate\": $RATE, \"delay\": \"$DELAY\", \"rounds\": $ROUNDS,"
  echo "  \"target_cpu\": $TARGET_CPU, \"tool_cpu\": $TOOL_CPU, \"clk_tck\": $CLK_TCK,"
  echo "  \"ghz_version\": $( ("$GHZ" --version 2>&1 || true) | head -n1 | json_str),"
  echo "  \"go_version\": $(go version | json_str),"
  echo "  \"perfops_git\": \"$(perfops_git)\", \"prio\": \"${PRIO:-normal}\","
  echo "  \"cpu\": $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | json_str)"
  echo "}"
} >"$RAW/env.json"

RUN_EXTS="out err time meta.json json server.json"
TOOL_EXTS="json"
TICKS_KEY=server_ticks
CALLS=("" "")
probe_target() { # before a run: the server's counters and timings reset; after it: read (BASE.server.json)
  if [ "$1" = 0 ]; then
    curl -s --max-time 2 -o /dev/null "${STATS_URL%/__stats}/__reset" && CALLS[0]=0 || CALLS[0]=""
  else
    curl -s --max-time 5 "$STATS_URL" >"$2.server.json" 2>/dev/null || true
    CALLS[1]=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["calls"])' "$2.server.json" 2>/dev/null || true)
  fi
}
meta_fields() {
  printf '"server_calls": %s, ' "$( [ -n "${CALLS[0]}" ] && [ -n "${CALLS[1]}" ] && echo $((CALLS[1] - CALLS[0])) || echo null)"
}

ghz_run() { # NAME [chrt -f N] EXTRA...: ghz writing its JSON report to NAME.json
  local name=$1 prio=(); shift
  if [ "$1" = chrt ]; then prio=("$1" "$2" "$3"); shift 3; fi
  measure "$name" ${prio[@]+"${prio[@]}"} "$GHZ" --insecure --cpus 1 --proto "$PROTO" --call bench.Echo/Say -d "$MSG" \
    -z "${DURATION}s" --format json -o "$RAW/$name.json" "$@" "$ADDR"
}

start_server 0s
log "warm-up: ghz -c$CONC -z2s (not recorded)"
warm_up ghz 30 "$GHZ" --insecure --cpus 1 --proto "$PROTO" --call bench.Echo/Say -d "$MSG" -c "$CONC" -z 2s "$ADDR"
for i in $(seq 1 "$ROUNDS"); do
  log "round $i/$ROUNDS: ghz -c $CONC (1 connection)"
  ghz_run "closed.ghz.$i" -c "$CONC" --connections 1
  sleep 1
  log "round $i/$ROUNDS: perfops quick -c 1 -p $CONC"
  measure "closed.perfops.$i" "$PERFOPS" quick -q --workers 1 -c 1 -p "$CONC" -d "${DURATION}s" \
    --proto "$PROTO" -b "$MSG" --json "$RAW/closed.perfops.$i.json" "$URL"
  sleep 1
done
stop_server

start_server ${PRIO_CMD[@]+"${PRIO_CMD[@]}"} "$DELAY" -timing
for i in $(seq 1 "$ROUNDS"); do
  log "open model $i/$ROUNDS: perfops quick -r $RATE against a $DELAY method"
  measure "open.perfops.$i" ${PRIO_CMD[@]+"${PRIO_CMD[@]}"} "$PERFOPS" quick -q --workers 1 -r "$RATE" -d "${DURATION}s" \
    --proto "$PROTO" -b "$MSG" --json "$RAW/open.perfops.$i.json" "$URL"
  sleep 1
  log "open model $i/$ROUNDS: ghz --rps $RATE -c $CONC"
  ghz_run "open.ghz.$i" ${PRIO_CMD[@]+"${PRIO_CMD[@]}"} --rps "$RATE" -c "$CONC"
  sleep 1
done

report_and_exit "$HERE/lib/grpc_report.py"
