#!/usr/bin/env bash
# Why a closed-loop client's CPU per request on loopback is set by its wake-ups, and
# what batching them costs the measurement: wrk, perfops and bench/wakeups (a minimal
# io_uring client, see bench/wakeups/src/main.rs) against the nginx of vs-wrk.sh.
#
#   bench/wakeups.sh [PERFOPS_BIN]        # default: <repo>/target/release/perfops
#
# Knobs (env): DURATION=5 (s per run)  ROUNDS=3  CONNS=50  NAPS="0 10 50" (µs; 0 = no nap)
#              and those of lib/common.sh (TARGET_CPU, TOOL_CPU, LOCK, QUIET_MAX_S, ...).
# Each round runs, pinned to TOOL_CPU: wrk -t1 -c$CONNS --latency, perfops quick -c $CONNS,
# and bench/wakeups at each nap. Only 127.0.0.1 is contacted; nginx is stopped by PID.
# Output: markdown on stdout and in bench/out/wakeups-<stamp>.md; raw outputs beside it.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=wakeups
DURATION=${DURATION:-5}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"

CONNS=${CONNS:-50}
NAPS=${NAPS:-0 10 50}
need_ints DURATION CONNS ROUNDS TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S NOISE_RETRIES
need_positive DURATION ROUNDS CONNS
need_tools nginx wrk taskset timeout curl python3 cargo
for n in $NAPS; do [[ $n =~ ^[0-9]+$ ]] || die "NAPS must be whole microseconds, got '$n'"; done

PORT=18090
URL="http://127.0.0.1:$PORT/"
RUN_TIMEOUT_S=$((DURATION + 30))
perfops_path "${1:-}"
out_dirs
cleanup_at_exit
[ -x "$PERFOPS" ] || build_perfops missing
[ -x "$PERFOPS" ] || die "no perfops binary at $PERFOPS"
WAKEUPS="$HERE/wakeups/target/release/wakeups"
log "building bench/wakeups (log: $RAW/wakeups-build.log)"
cargo build --release --manifest-path "$HERE/wakeups/Cargo.toml" >"$RAW/wakeups-build.log" 2>&1 \
  || die "cargo build of bench/wakeups failed: $(tail -n 3 "$RAW/wakeups-build.log")"

start_nginx "$HERE/nginx.conf" "$URL"
printf '{"stamp": "%s", "duration": %d, "rounds": %d, "conns": %d, "naps": "%s", "clk_tck": %s, "perfops_git": "%s", "kernel": "%s"}\n' \
  "$STAMP" "$DURATION" "$ROUNDS" "$CONNS" "$NAPS" "$CLK_TCK" "$(perfops_git)" "$(uname -r)" >"$RAW/env.json"

RUN_EXTS="out err time meta.json json"
TOOL_EXTS="json"
TICKS_KEY=nginx_ticks
probe_target() { :; }
meta_fields() { :; }

warm_up wrk 30 wrk -t1 -c"$CONNS" -d2s "$URL"
for i in $(seq 1 "$ROUNDS"); do
  log "round $i/$ROUNDS"
  measure "wrk.$i" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency "$URL"
  measure "perfops.$i" "$PERFOPS" quick -c "$CONNS" -d "${DURATION}s" --json "$RAW/perfops.$i.json" "$URL"
  for n in $NAPS; do
    measure "nap$n.$i" "$WAKEUPS" "$PORT" "$CONNS" "$DURATION" "$n"
  done
done
report_and_exit "$HERE/lib/wakeups_report.py"
