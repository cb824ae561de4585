#!/usr/bin/env bash
# perfops vs wrk on loopback nginx: throughput, CPU cost, memory, open-model accuracy.
#
#   bench/vs-wrk.sh [PERFOPS_BIN]        # default: <repo>/target/release/perfops
#   ROUNDS=1 DURATION=3 bench/vs-wrk.sh  # quick check
#   BASE=path/to/perfops-before WAKEUPS="0 50" bench/vs-wrk.sh BIN   # more clients in each round
#   WAKEUPS=0 PNAPS=0 bench/vs-wrk.sh    # perfops without naps beside it, the floor beside both
#
# Knobs (env): DURATION=10 (s per run)  CONNS=50  ROUNDS=3  RATE=20000 (open model, req/s)
#              TARGET_CPU=0 (nginx)  TOOL_CPU=1 (wrk / perfops)
#              OPEN_ROUNDS=$ROUNDS  (open-model runs; 0: none, to compare closed loops alone)
#              BASE=  (a second perfops binary, e.g. the build before a change: `quick -c` in
#                      every round too, alternating with the others)
#              WAKEUPS=  (naps in µs, e.g. "0 50": bench/wakeups, the minimal io_uring client,
#                         in every round at each nap; built first with cargo)
#              PNAPS=  (caps in µs, e.g. "0 5": perfops again in every round with its closed
#                       loop's naps capped there (PERFOPS_NAP_MAX_US; 0: no naps), the same
#                       binary, alternating with the others)
#              COUNT_S=3  (after the timed rounds, each closed-loop client once more for COUNT_S
#                          s under `perf stat`, with nginx's worker under `perf stat -p`:
#                          syscalls by kind and context switches per request of the client and
#                          of nginx; not timed, as counting tracepoints costs CPU. 0: skipped)
#              LOCK=/tmp/bench.lock  (held during each measured run so runs never overlap
#                                     another benchmark on this machine; LOCK= disables it.
#                                     Do not wrap this script in `flock $LOCK`: it deadlocks)
#              LOCK_WAIT_S=180  QUIET_MAX_S=10  (before each run, wait at most this long for
#                                                an idle machine)  NO_BUILD=1  BUILD_TIMEOUT_S=1800
#              NOISE_MAX_S=0.5  NOISE_RETRIES=2  (a run during which other processes used more
#                                 CPU seconds than this is redone, at most twice; the noisy
#                                 attempt is kept as NAME.noisyN.*)
#
# Method (same as ../shared/bench/peers): nginx, 1 worker, pinned to TARGET_CPU,
# keepalive_requests 1e8, access_log off, `return 200 "Hello, world\n"`, on
# 127.0.0.1:18090 with its own prefix in a mktemp dir. Each tool is pinned to TOOL_CPU
# and runs under `/usr/bin/time -f '%e %U %S %M'` (argv executed directly, no shell).
#   CPU s/100k = (user + sys) / completed responses * 1e5;  peak RSS = %M.
#   nginx CPU  = worker utime+stime delta (/proc/PID/stat) / wall / CLK_TCK:
#                close to 100 % means nginx, not the tool, was the bottleneck.
#   nginx CPU s/100k = the same delta / requests nginx served (its stub_status) * 1e5: what
#                one client's requests cost the server (with nginx at 100 %, rps is 1 / this).
# Steps: wrk warm-up 2 s (not recorded); ROUNDS closed-loop rounds alternating
# `wrk -t1 -c$CONNS` and `perfops quick -c $CONNS`; ROUNDS open-model runs
# `perfops quick -r $RATE`. Only 127.0.0.1 is ever contacted.
#
# Output: markdown table on stdout (progress goes to stderr), also written to
# bench/out/vs-wrk-<UTC stamp>.md; raw tool outputs in bench/out/vs-wrk-<stamp>/.
# Exit status: 0 all runs fine, 3 some run failed or perfops unavailable (the table
# is still printed, with the reason), 1 setup error (nginx did not start, ...).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=vs-wrk
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"   # DURATION ROUNDS TARGET_CPU TOOL_CPU LOCK* QUIET_MAX_S NOISE_* *BUILD*, helpers

CONNS=${CONNS:-50}
RATE=${RATE:-20000}
BASE=${BASE:-}
WAKEUPS=${WAKEUPS:-}
PNAPS=${PNAPS:-}
COUNT_S=${COUNT_S:-3}
OPEN_ROUNDS=${OPEN_ROUNDS:-$ROUNDS}

need_ints DURATION CONNS ROUNDS RATE TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S BUILD_TIMEOUT_S NOISE_RETRIES COUNT_S OPEN_ROUNDS
for n in $WAKEUPS; do [[ $n =~ ^[0-9]+$ ]] || die "WAKEUPS must be whole microseconds, got '$n'"; done
for n in $PNAPS; do [[ $n =~ ^[0-9]+$ ]] || die "PNAPS must be whole microseconds, got '$n'"; done
if [ -n "$BASE" ]; then
  case "$BASE" in /*) ;; *) BASE="$PWD/$BASE" ;; esac
  [ -x "$BASE" ] || die "BASE is not an executable: $BASE"
fi
if [ "$COUNT_S" -gt 0 ] && ! command -v perf >/dev/null 2>&1; then
  echo "[vs-wrk] perf not found (Debian: linux-perf): no syscall count (COUNT_S=0)" >&2
  COUNT_S=0
fi
need_positive DURATION ROUNDS CONNS RATE
need_tools nginx wrk taskset timeout curl python3
need_numbers NOISE_MAX_S

PORT=18090
URL="http://127.0.0.1:$PORT/"
STATUS_URL="http://127.0.0.1:$PORT/__status"
RUN_TIMEOUT_S=$((DURATION + 30))      # hard bound on every tool run

perfops_path "${1:-}"
out_dirs
cleanup_at_exit

# ------------------------------------------------------------------ perfops binary
PERFOPS_ERR=""
if [ ! -x "$PERFOPS" ] && [ "$PERFOPS" = "$PERFOPS_DEFAULT" ] && [ "$NO_BUILD" != 1 ]; then
  build_perfops missing
  if [ "$BUILD_RC" -ne 0 ]; then
    PERFOPS_ERR="cargo build --release -p perfops failed (rc $BUILD_RC): $BUILD_ERR [full log: $RAW/build.log]"
  fi
fi
if [ -z "$PERFOPS_ERR" ]; then
  if [ ! -x "$PERFOPS" ]; then
    PERFOPS_ERR="binary not found or not executable: $PERFOPS"
  else
    rc=0
    timeout -k 2 20 "$PERFOPS" quick --help >"$RAW/perfops-quick-help.txt" 2>&1 </dev/null || rc=$?
    if [ "$rc" -ne 0 ]; then
      PERFOPS_ERR="'$PERFOPS quick --help' failed (rc $rc): $(head -n1 "$RAW/perfops-quick-help.txt")"
    elif ! grep -q -- '--json' "$RAW/perfops-quick-help.txt"; then
      PERFOPS_ERR="'$PERFOPS quick --help' does not document --json (output: '$(head -c 200 "$RAW/perfops-quick-help.txt" | tr '\n' ' ')'); binary is not ready"
    fi
  fi
fi
if [ -n "$PERFOPS_ERR" ]; then
  log "perfops unavailable, only wrk will be measured: $PERFOPS_ERR"
  printf '%s\n' "$PERFOPS_ERR" >"$RAW/perfops-unavailable.txt"
fi

WAKEUPS_BIN="$HERE/wakeups/target/release/wakeups"
if [ -n "$WAKEUPS" ]; then
  log "building bench/wakeups (log: $RAW/wakeups-build.log)"
  run_child nice -n 19 cargo build --release --manifest-path "$HERE/wakeups/Cargo.toml" >"$RAW/wakeups-build.log" 2>&1 </dev/null \
    || die "cargo build of bench/wakeups failed: $(tail -n 3 "$RAW/wakeups-build.log")"
fi

# ------------------------------------------------------------------ nginx
start_nginx "$HERE/nginx.conf" "$URL"

# ------------------------------------------------------------------ environment record
{
  echo "{"
  echo "  \"stamp\": \"$STAMP\", \"duration\": $DURATION, \"conns\": $CONNS, \"rounds\": $ROUNDS, \"open_rounds\": $OPEN_ROUNDS, \"rate\": $RATE,"
  echo "  \"target_cpu\": $TARGET_CPU, \"tool_cpu\": $TOOL_CPU, \"clk_tck\": $CLK_TCK, \"url\": \"$URL\", \"noise_max_s\": $NOISE_MAX_S,"
  echo "  \"perfops_bin\": $(printf '%s' "$PERFOPS" | json_text),"
  echo "  \"perfops_err\": $(printf '%s' "$PERFOPS_ERR" | json_text),"
  echo "  \"base_bin\": $(printf '%s' "$BASE" | json_text), \"wakeups\": \"$WAKEUPS\", \"pnaps\": \"$PNAPS\", \"count_s\": $COUNT_S,"
  echo "  \"wrk_version\": \"$(dpkg-query -W -f='${Version}' wrk 2>/dev/null || echo '?')\","
  echo "  \"nginx_version\": \"$(nginx -v 2>&1 | sed -n 's|.*nginx/||p')\","
  echo "  \"perfops_version\": $( (timeout 5 "$PERFOPS" --version 2>/dev/null </dev/null || true) | head -n1 | json_str),"
  echo "  \"perfops_git\": \"$(perfops_git)\","
  echo "  \"cpu\": $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | json_str),"
  echo "  \"kernel\": \"$(uname -r)\""
  echo "}"
} >"$RAW/env.json"

# ------------------------------------------------------------------ what a run records
# besides common.sh's NAME.{out,err,time,meta.json}: nginx's stub_status request count
# (meta "nginx_requests"; the second status request counts itself) and perfops' --json.
RUN_EXTS="out err time meta.json json"
TOOL_EXTS="json"
TICKS_KEY=nginx_ticks
NGX_REQS=("" "")
probe_target() { # 0|1 BASE: stub_status request counter ("" if unavailable)
  NGX_REQS[$1]=$(curl -s --max-time 2 "$STATUS_URL" 2>/dev/null | awk 'NR==3{print $3}' || true)
}
meta_fields() {
  printf '"nginx_requests": %s, ' \
    "$( [ -n "${NGX_REQS[0]}" ] && [ -n "${NGX_REQS[1]}" ] && echo $((NGX_REQS[1] - NGX_REQS[0] - 1)) || echo null)"
}

# ------------------------------------------------------------------ runs
log "warm-up: wrk -t1 -c$CONNS -d2s (not recorded)"
warm_up wrk 30 wrk -t1 -c"$CONNS" -d2s "$URL"

for i in $(seq 1 "$ROUNDS"); do
  log "round $i/$ROUNDS: wrk -t1 -c$CONNS -d${DURATION}s"
  measure "closed.wrk.$i" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL"
  sleep 1
  if [ -z "$PERFOPS_ERR" ]; then
    log "round $i/$ROUNDS: perfops quick -c $CONNS -d ${DURATION}s"
    measure "closed.perfops.$i" "$PERFOPS" quick -c "$CONNS" -d "${DURATION}s" --json "$RAW/closed.perfops.$i.json" "$URL"
    sleep 1
  fi
  if [ -z "$PERFOPS_ERR" ]; then
    for n in $PNAPS; do
      log "round $i/$ROUNDS: perfops quick -c $CONNS -d ${DURATION}s, naps of at most $n µs"
      measure "closed.pnap$n.$i" env PERFOPS_NAP_MAX_US="$n" "$PERFOPS" quick -c "$CONNS" -d "${DURATION}s" \
        --json "$RAW/closed.pnap$n.$i.json" "$URL"
      sleep 1
    done
  fi
  if [ -n "$BASE" ]; then
    log "round $i/$ROUNDS: base quick -c $CONNS -d ${DURATION}s"
    measure "closed.base.$i" "$BASE" quick -c "$CONNS" -d "${DURATION}s" --json "$RAW/closed.base.$i.json" "$URL"
    sleep 1
  fi
  for n in $WAKEUPS; do
    log "round $i/$ROUNDS: bench/wakeups, nap $n µs"
    measure "closed.nap$n.$i" "$WAKEUPS_BIN" "$PORT" "$CONNS" "$DURATION" "$n"
    sleep 1
  done
done

# ------------------------------------------------------------------ syscalls and context switches
# count_run NAME ARGV... : ARGV under `perf stat` (pinned to TOOL_CPU), nginx's worker under
# `perf stat -p` for the same span, under the lock; NAME.count.tool / NAME.count.nginx (perf's
# CSV) and NAME.count.meta.json (nginx's served requests). Not timed: counting costs CPU.
COUNT_EVENTS="raw_syscalls:sys_enter,context-switches"
for sc in sendto recvfrom recvmsg read write writev epoll_wait epoll_pwait epoll_ctl clock_nanosleep io_uring_enter; do
  COUNT_EVENTS="$COUNT_EVENTS,syscalls:sys_enter_$sc"
done
count_run() {
  local name=$1; shift
  local base="$RAW/$name.count" rc=0 pp
  lock_take
  wait_quiet >/dev/null
  probe_target 0 "$base"
  taskset -c "$TOOL_CPU" perf stat -x, -o "$base.nginx" -e "$COUNT_EVENTS" -p "$TARGET_WORK" 9>&- </dev/null &
  pp=$!
  sleep 0.3
  run_child timeout -k 5 "$RUN_TIMEOUT_S" taskset -c "$TOOL_CPU" perf stat -x, -o "$base.tool" -e "$COUNT_EVENTS" -- "$@" \
      >"$base.out" 2>"$base.err" </dev/null 9>&- || rc=$?
  kill -INT "$pp" 2>/dev/null || true
  wait "$pp" 2>/dev/null || true
  probe_target 1 "$base"
  lock_drop
  printf '{"name": "%s", "rc": %d, %s"argv": %s}\n' "$name" "$rc" "$(meta_fields)" "$(json_argv "$@")" >"$base.meta.json"
}
if [ "$COUNT_S" -gt 0 ]; then
  log "counting syscalls and context switches (${COUNT_S}s per client, perf stat)"
  count_run "closed.wrk" wrk -t1 -c"$CONNS" -d"${COUNT_S}s" "$URL"
  if [ -z "$PERFOPS_ERR" ]; then
    count_run "closed.perfops" "$PERFOPS" quick -c "$CONNS" -d "${COUNT_S}s" --json "$RAW/closed.perfops.count.json" "$URL"
  fi
  if [ -z "$PERFOPS_ERR" ]; then
    for n in $PNAPS; do
      count_run "closed.pnap$n" env PERFOPS_NAP_MAX_US="$n" "$PERFOPS" quick -c "$CONNS" -d "${COUNT_S}s" \
        --json "$RAW/closed.pnap$n.count.json" "$URL"
    done
  fi
  if [ -n "$BASE" ]; then
    count_run "closed.base" "$BASE" quick -c "$CONNS" -d "${COUNT_S}s" --json "$RAW/closed.base.count.json" "$URL"
  fi
  for n in $WAKEUPS; do
    count_run "closed.nap$n" "$WAKEUPS_BIN" "$PORT" "$CONNS" "$COUNT_S" "$n"
  done
fi

if [ -z "$PERFOPS_ERR" ]; then
  for i in $(seq 1 "$OPEN_ROUNDS"); do
    log "open model $i/$OPEN_ROUNDS: perfops quick -r $RATE -d ${DURATION}s"
    measure "open.perfops.$i" "$PERFOPS" quick -r "$RATE" -d "${DURATION}s" --json "$RAW/open.perfops.$i.json" "$URL"
    sleep 1
  done
fi

# ------------------------------------------------------------------ report
report_and_exit "$HERE/lib/vs_wrk_report.py"
