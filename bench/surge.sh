#!/usr/bin/env bash
# A connection surge and the memory it leaves (issue #12, point 5: what made the soak's RSS
# step up). Not a CI test.
#
#   bench/surge.sh [PERFOPS_BIN]               # default: <repo>/target/release/perfops
#   MIMALLOC_PURGE_DELAY=0 bench/surge.sh      # an allocator setting to compare
#
# What runs: the soak's scenario (bench/scenario/soak.yaml) at RATE arrivals/s for
# DURATION s, `--workers 1` on TOOL_CPU, against `perfops demo --model async` on
# TARGET_CPU (127.0.0.1:PORT). At STALL_AT s and again STALL_GAP s later the demo is
# frozen (SIGSTOP, by its PID) for STALL_MS: in the open model arrivals go on, each
# finds no free connection and opens one, so a 400 ms stall at 5,000/s opens about
# 2,000. Four seconds after they fall idle they are closed (IDLE_CLOSE). Every SAMPLE_S
# s: perfops' VmRSS and its open fds. The figure: RSS before the first stall, at the
# surge, and once the surge connections are closed, after each stall.
#
# Only 127.0.0.1 is contacted; both processes are stopped by their PIDs.
# Knobs (env): RATE=5000 DURATION=70 STALL_AT=20 STALL_GAP=20 STALL_MS=400 SAMPLE_S=5
#              PORT=18393 TARGET_CPU=0 TOOL_CPU=1 PRIO=rt (chrt -f 50 both; PRIO= none)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PERFOPS=${1:-$ROOT/target/release/perfops}
RATE=${RATE:-5000}
DURATION=${DURATION:-70}
STALL_AT=${STALL_AT:-20}
STALL_GAP=${STALL_GAP:-20}
STALL_MS=${STALL_MS:-400}
SAMPLE_S=${SAMPLE_S:-5}
PORT=${PORT:-18393}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}
PRIO=${PRIO-rt}
PRIO_CMD=()
[ "$PRIO" = rt ] && PRIO_CMD=(chrt -f 50)
OUT=$ROOT/bench/out/surge-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
[ -x "$PERFOPS" ] || { echo "no perfops binary at $PERFOPS (cargo build --release)" >&2; exit 1; }

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

${PRIO_CMD[@]+"${PRIO_CMD[@]}"} taskset -c "$TARGET_CPU" "$PERFOPS" demo --model async --listen "127.0.0.1:$PORT" \
    --io-wait 10ms --cpu-work 50us >"$OUT/demo.out" 2>"$OUT/demo.err" </dev/null &
DEMO=$!
PIDS+=("$DEMO")
sleep 1
${PRIO_CMD[@]+"${PRIO_CMD[@]}"} taskset -c "$TOOL_CPU" "$PERFOPS" run "$ROOT/bench/scenario/soak.yaml" \
    --target "http://127.0.0.1:$PORT" --out "$OUT/runs" -q --workers 1 \
    --set "load.stages[0].rate=$RATE" --set "load.stages[0].hold=${DURATION}s" --set "watch.process.port=$PORT" \
    >"$OUT/run.out" 2>"$OUT/run.err" </dev/null &
RUN=$!
PIDS+=("$RUN")

stall() {
    kill -STOP "$DEMO"
    sleep "$(awk -v ms="$STALL_MS" 'BEGIN{printf "%.3f", ms / 1000}')"
    kill -CONT "$DEMO"
}
printf 't_s\trss_mib\tfds\tevent\n' >"$OUT/samples.tsv"
t=0
stalls=0
while kill -0 "$RUN" 2>/dev/null; do
    sleep "$SAMPLE_S"
    t=$((t + SAMPLE_S))
    event=""
    if [ "$t" -eq "$STALL_AT" ] || [ "$t" -eq $((STALL_AT + STALL_GAP)) ]; then
        stall
        stalls=$((stalls + 1))
        event="stall $stalls (${STALL_MS} ms)"
    fi
    rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$RUN/status" 2>/dev/null || true)
    fds=$(find "/proc/$RUN/fd" -maxdepth 1 2>/dev/null | wc -l || true)
    [ -n "$rss" ] && printf '%s\t%s\t%s\t%s\n' "$t" "$rss" "$fds" "$event" >>"$OUT/samples.tsv"
done
wait "$RUN" || true

echo "## surge ($(basename "$OUT")): $RATE/s, the demo frozen ${STALL_MS} ms at ${STALL_AT} s and $((STALL_AT + STALL_GAP)) s"
echo
echo "allocator settings: ${MIMALLOC_PURGE_DELAY:+MIMALLOC_PURGE_DELAY=$MIMALLOC_PURGE_DELAY }(binary: $PERFOPS)"
echo
echo "| t (s) | RSS MiB | open fds | |"
echo "|---:|---:|---:|---|"
tail -n +2 "$OUT/samples.tsv" | awk -F'\t' '{printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4}'
