#!/usr/bin/env bash
# Soak (issue #12, point 5): an hour of open-model load, flat. Not a CI test.
#
#   bench/soak.sh [PERFOPS_BIN]             # default: <repo>/target/release/perfops, 1 hour
#   DURATION=120 bench/soak.sh              # a rehearsal: reference and samples scale down
#
# What runs: `perfops run bench/scenario/soak.yaml` (open model, RATE arrivals/s for
# DURATION s, a login in setup, two flows, checks, SLO, the demo's /metrics and process
# watched every 2 s, a liveness probe every 10 s: every per-second path of the generator
# and every results file is exercised), pinned to TOOL_CPU with --workers 1, against the
# demo server `perfops demo --model async` pinned to TARGET_CPU on 127.0.0.1:PORT (one
# runtime thread, IO_WAIT and CPU_WORK per /orders, backlog 1024, so it holds the rate).
# Only 127.0.0.1 is contacted; the demo and perfops are stopped by their PIDs.
#
# What is measured, against the issue's three bounds:
#   RSS    VmRSS (and VmHWM) of the perfops process from /proc/PID/status every
#          SAMPLE_S s (default DURATION/60: each minute of the hour), with its CPU
#          ticks, its open fds (mostly connections: a stall of the target opens more,
#          and kept connections hold memory) and the demo's VmRSS. Growth = the largest sample after REF_S
#          (default DURATION/12: minute 5 of the hour) over the sample at REF_S.
#          Bound: < GROWTH_MAX_PCT (5) %.
#   size   the results directory (du --apparent-size, and per file) once the run has
#          ended. Bound: < RESULTS_MAX_MIB (50) MiB.
#   open   `perfops report DIR` re-renders report.html (timed, peak RSS); then headless
#          Chromium (/usr/bin/chromium) opens a copy of it from file:// OPEN_ROUNDS times.
#          The copy has one script added after the page's own: it forces a layout and
#          writes performance.now() on <body>, i.e. the time from navigation start to a
#          page whose HTML is parsed, whose every script ran (uPlot draws each chart
#          synchronously on canvas) and whose layout is done: what a person waits for
#          after opening the file, without Chromium's own start-up (which a person with
#          a browser open does not wait for, and which varies with the machine, not the
#          report). The page's own counters (charts drawn / expected, script errors) are
#          read from the same DOM dump. Chromium's whole wall time, and that of a blank
#          page, are recorded beside it. Median of the rounds. Bound: < OPEN_MAX_S (3) s.
#   Also: the run's achieved rate, dropped arrivals, failures and exit status (from
#   summary.json), so a run that did not hold the rate is not taken for a flat one.
#
# Knobs (env): DURATION=3600 (s)  RATE=5000 (arrivals/s)  SAMPLE_S=DURATION/60
#              REF_S=DURATION/12  PORT=18093  IO_WAIT=10ms  CPU_WORK=50us
#              TARGET_CPU=0 (demo)  TOOL_CPU=1 (perfops)  OPEN_ROUNDS=3
#              GROWTH_MAX_PCT=5  RESULTS_MAX_MIB=50  OPEN_MAX_S=3
#              LOCK=/tmp/bench.lock (held for the whole soak, so no other benchmark runs
#                                    meanwhile; LOCK= disables it)  LOCK_WAIT_S=180
#              NO_BUILD=1  BUILD_TIMEOUT_S=1800
#              PRIO=rt     run the demo and perfops at real-time round-robin priority
#                          (chrt -r 20, root): for a soak on a machine that can't be kept
#                          quiet for an hour (builds, tests): their stalls would otherwise
#                          stall the target and the generator, and a stall of either
#                          opens connections (the open model keeps sending) and tests
#                          more than the hour's flatness. The kernel's RT throttling
#                          still leaves 5% of each core to everything else.
#
# Output: markdown on stdout (progress on stderr), also bench/out/soak-<UTC stamp>.md;
# raw outputs (samples.tsv, the results directory, logs) in bench/out/soak-<stamp>/.
# Exit status: 0 every bound held; 3 a bound failed or the run did not complete; 1 setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=soak
DURATION=${DURATION:-3600}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"   # TARGET_CPU TOOL_CPU LOCK* *BUILD*, helpers

RATE=${RATE:-5000}
need_ints DURATION
need_positive DURATION
SAMPLE_S=${SAMPLE_S:-$(( DURATION >= 60 ? DURATION / 60 : 1 ))}
REF_S=${REF_S:-$(( DURATION / 12 ))}
PORT=${PORT:-18093}
IO_WAIT=${IO_WAIT:-10ms}
CPU_WORK=${CPU_WORK:-50us}
OPEN_ROUNDS=${OPEN_ROUNDS:-3}
GROWTH_MAX_PCT=${GROWTH_MAX_PCT:-5}
RESULTS_MAX_MIB=${RESULTS_MAX_MIB:-50}
OPEN_MAX_S=${OPEN_MAX_S:-3}

need_ints RATE SAMPLE_S REF_S PORT TARGET_CPU TOOL_CPU OPEN_ROUNDS LOCK_WAIT_S BUILD_TIMEOUT_S
need_positive RATE SAMPLE_S PORT OPEN_ROUNDS
need_numbers GROWTH_MAX_PCT RESULTS_MAX_MIB OPEN_MAX_S
[ "$REF_S" -lt "$DURATION" ] || die "REF_S ($REF_S) must be shorter than DURATION ($DURATION)"
[[ $IO_WAIT =~ ^[0-9]+(ms|us|s)$ && $CPU_WORK =~ ^[0-9]+(ms|us|s)$ ]] || die "IO_WAIT and CPU_WORK are durations like 10ms, 50us"
need_tools taskset timeout curl python3 flock du
PRIO=${PRIO:-}
case "$PRIO" in
  "") PRIO_CMD=() ;;
  rt) need_tools chrt; PRIO_CMD=(chrt -r 20); chrt -r 20 true 2>/dev/null || die "PRIO=rt: chrt -r 20 is refused (run as root)" ;;
  *) die "PRIO is empty or rt, not $PRIO" ;;
esac
[ -x /usr/bin/chromium ] || die "/usr/bin/chromium not found (apt-get install chromium)"

BASE_URL="http://127.0.0.1:$PORT"
SCENARIO="$HERE/scenario/soak.yaml"
GRACE_S=120                       # past DURATION + GRACE_S the run is stopped (TERM, then KILL)

perfops_path "${1:-}"
out_dirs
cleanup_at_exit

# ------------------------------------------------------------------ perfops binary
STALE_WHY=""
perfops_stale() { # the default binary is missing or older than the sources
  local newer
  [ -x "$PERFOPS" ] || { STALE_WHY="missing"; return 0; }
  newer=$(find "$ROOT/crates" "$ROOT/Cargo.toml" "$ROOT/Cargo.lock" -newer "$PERFOPS" \
          \( -path '*/src/*' -o -name build.rs -o -name 'Cargo.*' \) -not -path '*/tests/*' -type f \
          -print -quit 2>/dev/null)
  [ -n "$newer" ] || return 1
  STALE_WHY="older than ${newer#"$ROOT"/}"
}
if [ "$PERFOPS" = "$PERFOPS_DEFAULT" ] && [ "$NO_BUILD" != 1 ] && perfops_stale; then
  build_perfops "$STALE_WHY"
  [ "$BUILD_RC" -eq 0 ] || { log "cargo build failed (rc $BUILD_RC): $BUILD_ERR"; exit 1; }
fi
[ -x "$PERFOPS" ] || { log "perfops binary not found: $PERFOPS"; exit 1; }
timeout -k 2 20 "$PERFOPS" check "$SCENARIO" >"$RAW/perfops-check.txt" 2>&1 </dev/null \
  || { log "perfops check $SCENARIO failed: $(cat "$RAW/perfops-check.txt")"; exit 1; }

# ------------------------------------------------------------------ target
refuse_if_answering "$BASE_URL/" "$BASE_URL" "stop it first, or PORT=..."
${PRIO_CMD[@]+"${PRIO_CMD[@]}"} taskset -c "$TARGET_CPU" "$PERFOPS" demo --model async --listen "127.0.0.1:$PORT" \
    --io-wait "$IO_WAIT" --cpu-work "$CPU_WORK" --threads 1 --backlog 1024 --cpus "$TARGET_CPU" \
    >"$RAW/demo.out" 2>"$RAW/demo.err" </dev/null &
TARGET_PID=$!
TARGET_WORK=$TARGET_PID
wait_up "$BASE_URL/health" || { log "the demo did not come up on $BASE_URL: $(tail -n 3 "$RAW/demo.err")"; exit 1; }
log "demo (async) pid $TARGET_PID on CPU $TARGET_CPU, $BASE_URL, io-wait $IO_WAIT, cpu-work $CPU_WORK"

# ------------------------------------------------------------------ environment record
{
  echo "{"
  echo "  \"stamp\": \"$STAMP\", \"duration\": $DURATION, \"rate\": $RATE, \"sample_s\": $SAMPLE_S, \"ref_s\": $REF_S,"
  echo "  \"port\": $PORT, \"io_wait\": \"$IO_WAIT\", \"cpu_work\": \"$CPU_WORK\", \"open_rounds\": $OPEN_ROUNDS,"
  echo "  \"growth_max_pct\": $GROWTH_MAX_PCT, \"results_max_mib\": $RESULTS_MAX_MIB, \"open_max_s\": $OPEN_MAX_S,"
  echo "  \"prio\": \"${PRIO:-normal}\","
  echo "  \"target_cpu\": $TARGET_CPU, \"tool_cpu\": $TOOL_CPU, \"clk_tck\": $CLK_TCK,"
  echo "  \"perfops_bin\": $(printf '%s' "$PERFOPS" | json_str),"
  echo "  \"perfops_version\": $( (timeout 5 "$PERFOPS" --version 2>/dev/null </dev/null || true) | head -n1 | json_str),"
  echo "  \"perfops_git\": \"$(perfops_git)\","
  echo "  \"chromium_version\": $( (timeout 20 /usr/bin/chromium --version 2>/dev/null </dev/null || true) | head -n1 | json_str),"
  echo "  \"cpu\": $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | json_str),"
  echo "  \"kernel\": \"$(uname -r)\""
  echo "}"
} >"$RAW/env.json"

# ------------------------------------------------------------------ the soak
status_kib() { # PID FIELD: FIELD (VmRSS, VmHWM) of /proc/PID/status in KiB, "" if gone
  awk -v f="$2:" '$1 == f {print $2; exit}' "/proc/$1/status" 2>/dev/null || true
}
sleep_until() { # EPOCH_S (decimal): sleeps until then (returns at once if past)
  local d
  d=$(awk -v t="$1" -v n="$(now)" 'BEGIN{d = t - n; printf "%.3f", (d > 0 ? d : 0)}')
  sleep "$d"
}

lock_take
log "soak: perfops run $(basename "$SCENARIO"), $RATE/s for ${DURATION}s on CPU $TOOL_CPU; RSS every ${SAMPLE_S}s, reference at ${REF_S}s (lock: $LOCK_STATE)"
mkdir -p "$RAW/runs"
t0=$(now)
${PRIO_CMD[@]+"${PRIO_CMD[@]}"} taskset -c "$TOOL_CPU" "$PERFOPS" run "$SCENARIO" --target "$BASE_URL" --out "$RAW/runs" -q --workers 1 \
    --set "load.stages[0].rate=$RATE" --set "load.stages[0].hold=${DURATION}s" \
    --set "watch.process.port=$PORT" \
    >"$RAW/run.out" 2>"$RAW/run.err" </dev/null 9>&- &
CHILD=$!          # taskset execs perfops: this is perfops' PID (cleanup stops it if we exit early)
printf 't_s\trss_kib\thwm_kib\tcpu_ticks\tdemo_rss_kib\tfds\n' >"$RAW/samples.tsv"
k=0
stopped=""
LOG_EVERY=$(( SAMPLE_S >= 60 ? 1 : (60 + SAMPLE_S - 1) / SAMPLE_S ))   # a progress line about each minute
while kill -0 "$CHILD" 2>/dev/null; do
  k=$((k + 1))
  next=$(awk -v a="$t0" -v b=$((k * SAMPLE_S)) 'BEGIN{printf "%.3f", a + b}')
  while kill -0 "$CHILD" 2>/dev/null && awk -v t="$next" -v n="$(now)" 'BEGIN{exit !(n < t)}'; do
    sleep_until "$(awk -v t="$next" -v n="$(now)" 'BEGIN{printf "%.3f", (t - n > 1) ? n + 1 : t}')"
  done
  rss=$(status_kib "$CHILD" VmRSS)
  [ -n "$rss" ] || break          # it ended between two samples
  # a zombie has no VmRSS: the run has ended, so the loop ends with the line above
  printf '%d\t%s\t%s\t%s\t%s\t%s\n' $((k * SAMPLE_S)) "$rss" "$(status_kib "$CHILD" VmHWM)" \
    "$(proc_ticks "$CHILD")" "$(status_kib "$TARGET_PID" VmRSS)" "$(find "/proc/$CHILD/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)" \
    >>"$RAW/samples.tsv"
  if [ $((k % LOG_EVERY)) -eq 0 ]; then log "  $((k * SAMPLE_S))s: perfops RSS $((rss / 1024)) MiB"; fi
  if [ $((k * SAMPLE_S)) -gt $((DURATION + GRACE_S)) ] && [ -z "$stopped" ]; then
    log "perfops still running ${GRACE_S}s past DURATION: stopping it (TERM)"
    kill -TERM "$CHILD" 2>/dev/null || true
    stopped="TERM after $((k * SAMPLE_S))s"
  fi
done
RUN_RC=0
wait "$CHILD" || RUN_RC=$?
CHILD=""
t1=$(now)
lock_drop
RUN_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b - a}')
log "perfops run exited $RUN_RC after ${RUN_WALL}s${stopped:+ ($stopped)}"

# ------------------------------------------------------------------ results directory
DIR=$(find "$RAW/runs" -mindepth 1 -maxdepth 1 -type d | head -n1)
[ -n "$DIR" ] || { log "the run wrote no results directory: $(tail -n 3 "$RAW/run.err")"; exit 3; }
du -sb --apparent-size "$DIR" | cut -f1 >"$RAW/results.bytes"
( cd "$DIR" && find . -maxdepth 1 -type f -printf '%f\t%s\n' | sort ) >"$RAW/results.files.tsv"

# ------------------------------------------------------------------ report and Chromium
REPORT_RC=0
timeout -k 5 600 /usr/bin/time -f '%e %U %S %M' -o "$RAW/report.time" "$PERFOPS" report "$DIR" \
  >"$RAW/report.out" 2>"$RAW/report.err" </dev/null || REPORT_RC=$?
echo "$REPORT_RC" >"$RAW/report.rc"
log "perfops report exited $REPORT_RC ($(tail -n1 "$RAW/report.time" 2>/dev/null))"

# The timed copy: the report with one script after its own (see the header).
TIMED="$RAW/report.timed.html"
python3 - "$DIR/report.html" "$TIMED" <<'PY' || { log "cannot make the timed copy of report.html"; exit 3; }
import sys
src, dst = sys.argv[1], sys.argv[2]
html = open(src, encoding="utf-8").read()
probe = ('<script>document.body.offsetHeight;'
         'document.body.setAttribute("data-soak-rendered-ms", performance.now().toFixed(1));'
         'window.addEventListener("load", function () {'
         ' document.body.setAttribute("data-soak-load-ms", performance.now().toFixed(1)); });</script>\n')
at = html.rfind("</body>")
if at < 0:
    sys.exit("no </body> in " + src)
open(dst, "w", encoding="utf-8").write(html[:at] + probe + html[at:])
PY
printf '<!DOCTYPE html><html><body>blank</body></html>\n' >"$RAW/blank.html"
chromium_once() { # URL OUT: dumps the DOM of URL into OUT; prints Chromium's wall seconds
  local profile a b rc=0
  profile=$(mktemp -d /tmp/perfops-soak-chromium.XXXXXX)
  a=$(now)
  timeout -k 5 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --user-data-dir="$profile" --window-size=1280,2400 --dump-dom "$1" >"$2" 2>>"$RAW/chromium.err" </dev/null || rc=$?
  b=$(now)
  rm -rf "$profile"
  [ "$rc" -eq 0 ] || log "chromium on $1 exited $rc"
  awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f\n", b - a}'
}
printf 'round\tblank_wall_s\treport_wall_s\n' >"$RAW/chromium.tsv"
for i in $(seq 1 "$OPEN_ROUNDS"); do
  wb=$(chromium_once "file://$RAW/blank.html" "$RAW/blank.$i.dom")
  wr=$(chromium_once "file://$TIMED" "$RAW/report.$i.dom")
  printf '%d\t%s\t%s\n' "$i" "$wb" "$wr" >>"$RAW/chromium.tsv"
  log "chromium round $i/$OPEN_ROUNDS: blank page ${wb}s, report ${wr}s (whole process)"
done

{
  echo "{\"run_rc\": $RUN_RC, \"run_wall_s\": $RUN_WALL, \"stopped\": $(printf '%s' "$stopped" | json_str),"
  echo " \"results_dir\": $(printf '%s' "${DIR#"$RAW"/}" | json_str)}"
} >"$RAW/run.json"

report_and_exit "$HERE/lib/soak_report.py"
