# shellcheck shell=bash
# shellcheck disable=SC2034  # knobs and paths set here are read by the sourcing script
# What the bench scripts share (vs-wrk.sh, scenario.sh, open-model.sh, open-wire.sh, ...):
# the common knobs and their checks, the lock around each measured run, waiting for a
# quiet machine, one run pinned to TOOL_CPU under /usr/bin/time with noise detection and
# retry, /proc readings, and stopping, by PID only, what the script started.
#
# Sourced by the scripts (`. "$HERE/lib/common.sh"`) after they set
#   BENCH  short name of the script: log prefix, error prefix, output names
#   HERE   the bench/ folder;  ROOT  the repository
# Before measuring, the script sets
#   TARGET_PID       the process it started (nginx master, demo server): stopped at exit
#   TARGET_NGINX=1   when TARGET_PID is an nginx master (graceful QUIT, orphan worker check)
#   TARGET_WORK      the process whose CPU is the target's (nginx worker, demo server)
#   NGX_DIR          the nginx prefix dir (mktemp), removed at exit
#   RUN_TIMEOUT_S    the hard bound on every measured run
#   RUN_EXTS         the files NAME.<ext> one run leaves in $RAW (moved aside when redone)
#   TOOL_EXTS        those of them the tool itself writes (removed before each attempt)
#   TICKS_KEY        the NAME.meta.json key of the target's CPU ticks
# and defines the hooks measure_once calls:
#   probe_target 0|1 BASE   reads the target's own counters before (0) / after (1) a run
#   meta_fields             prints extra '"key": value, ' members for NAME.meta.json

# ------------------------------------------------------------------ common knobs
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}
LOCK=${LOCK-/tmp/bench.lock}
LOCK_WAIT_S=${LOCK_WAIT_S:-180}
QUIET_MAX_S=${QUIET_MAX_S:-10}
BUILD_TIMEOUT_S=${BUILD_TIMEOUT_S:-1800}
NO_BUILD=${NO_BUILD:-0}
NOISE_MAX_S=${NOISE_MAX_S:-0.5}
NOISE_RETRIES=${NOISE_RETRIES:-2}

die() { echo "$BENCH: $*" >&2; exit 1; }
need_ints() { # VAR...: each a non-negative integer
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
  done
}
need_numbers() { # VAR...: each a non-negative decimal number
  local v
  for v in "$@"; do
    [[ ${!v} =~ ^[0-9]+([.][0-9]+)?$ ]] || die "$v must be a number (got '${!v}')"
  done
}
need_positive() { # VAR... (integers): each >= 1
  local v names
  for v in "$@"; do
    if [ "${!v}" -lt 1 ]; then
      names=$(printf '%s, ' "${@:1:$#-1}"); names=${names%, }
      die "${names:+$names and }${!#} must be >= 1"
    fi
  done
}
need_tools() { # CMD...: each on PATH, and GNU time at /usr/bin/time
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || die "'$c' not found"
  done
  [ -x /usr/bin/time ] || die "/usr/bin/time not found (apt-get install time)"
}

CLK_TCK=$(getconf CLK_TCK)

perfops_path() { # [BIN]: sets PERFOPS_DEFAULT (<repo>/target/release/perfops) and PERFOPS (absolute)
  PERFOPS_DEFAULT="$ROOT/target/release/perfops"
  PERFOPS="${1:-$PERFOPS_DEFAULT}"
  case "$PERFOPS" in /*) ;; *) PERFOPS="$PWD/$PERFOPS" ;; esac
}

out_dirs() { # sets STAMP, RAW (raw outputs, created) and REPORT (the markdown) under bench/out
  STAMP=$(date -u +%Y%m%dT%H%M%SZ)
  OUTDIR="$HERE/out"
  RAW="$OUTDIR/$BENCH-$STAMP"
  REPORT="$OUTDIR/$BENCH-$STAMP.md"
  mkdir -p "$RAW"
}

log() { echo "[$BENCH] $*" >&2; }
perfops_git() { # the commit the perfops sources are at, "+dirty" if they differ from it
  printf '%s%s' "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')" \
    "$( [ -n "$(git -C "$ROOT" status --porcelain -- 'crates/*/src' Cargo.toml Cargo.lock 2>/dev/null)" ] && echo '+dirty')"
}
json_str() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))'; }  # stdin, trimmed
json_text() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))'; }         # stdin, as is
json_argv() { python3 -c 'import json,sys; print(json.dumps(sys.argv[1:]))' "$@"; }        # ARGV -> list

# ------------------------------------------------------------------ lock / noise helpers
LOCK_STATE=none
LOCK_STATE_LAST=none
lock_take() {
  LOCK_STATE=none
  [ -n "$LOCK" ] || return 0
  exec 9>>"$LOCK"
  if flock -w "$LOCK_WAIT_S" 9; then LOCK_STATE=held
  else LOCK_STATE=timeout; log "warning: $LOCK not free within ${LOCK_WAIT_S}s; running without it"; fi
}
lock_drop() { if [ -n "$LOCK" ]; then exec 9>&-; fi; LOCK_STATE_LAST=$LOCK_STATE; LOCK_STATE=none; }
busy_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8; exit}' /proc/stat; }
wait_quiet() { # waits (max QUIET_MAX_S s) until the whole machine uses < 5 ticks/s; prints seconds waited
  local w=0 a b
  while [ "$w" -lt "$QUIET_MAX_S" ]; do
    a=$(busy_ticks); sleep 1; b=$(busy_ticks)
    [ $((b - a)) -lt 5 ] && break
    w=$((w + 1))
  done
  echo "$w"
}
proc_ticks() { # pid -> utime+stime ticks of the whole process (0 if gone)
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}
now() { date +%s.%N; }
# run_child ARGV... : runs ARGV in the background and waits for it, so a signal sent
# to the script is handled at once (the EXIT trap then stops the child by its PID).
CHILD=""
run_child() {
  local rc=0
  "$@" &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

# ------------------------------------------------------------------ cleanup
TARGET_PID=""
TARGET_NGINX=0
TARGET_WORK=""
NGX_DIR=""
# shellcheck disable=SC2317,SC2329  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then   # a tool or build still running
    kill -TERM "$CHILD" 2>/dev/null || true                  # (timeout relays it to its group)
    wait "$CHILD" 2>/dev/null || true
  fi
  if [ -n "$TARGET_PID" ] && kill -0 "$TARGET_PID" 2>/dev/null; then
    # our target only, by PID: graceful QUIT for the nginx master, TERM for the demo
    kill "-$( [ "$TARGET_NGINX" = 1 ] && echo QUIT || echo TERM )" "$TARGET_PID" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$TARGET_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$TARGET_PID" 2>/dev/null; then kill -KILL "$TARGET_PID" 2>/dev/null || true; fi
  fi
  # an nginx worker survives only if its master was SIGKILLed; check it is still ours first
  if [ "$TARGET_NGINX" = 1 ] && [ -n "$TARGET_WORK" ] && grep -qa '^nginx: worker' "/proc/$TARGET_WORK/cmdline" 2>/dev/null \
     && [ "$(awk '{print $4}' "/proc/$TARGET_WORK/stat" 2>/dev/null)" != "$TARGET_PID" ]; then
    kill -KILL "$TARGET_WORK" 2>/dev/null || true
  fi
  if [ -n "$TARGET_PID" ]; then wait "$TARGET_PID" 2>/dev/null || true; fi
  if [ -n "$NGX_DIR" ]; then
    if [ -s "$NGX_DIR/error.log" ]; then cp "$NGX_DIR/error.log" "$RAW/nginx-error.log" 2>/dev/null || true; fi
    rm -rf "$NGX_DIR"
  fi
  exit "$rc"
}
cleanup_at_exit() {
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# ------------------------------------------------------------------ perfops build
# build_perfops WHY : cargo build --release -p perfops under the lock, bounded by
# BUILD_TIMEOUT_S, log in $RAW/build.log; sets BUILD_RC and, if it failed, BUILD_ERR.
build_perfops() {
  BUILD_RC=0
  BUILD_ERR=""
  log "perfops binary $1: cargo build --release -p perfops (log: $RAW/build.log)"
  lock_take
  run_child timeout -k 10 "$BUILD_TIMEOUT_S" cargo build --manifest-path "$ROOT/Cargo.toml" --release -p perfops \
      >"$RAW/build.log" 2>&1 9>&- </dev/null || BUILD_RC=$?
  lock_drop
  if [ "$BUILD_RC" -ne 0 ]; then
    BUILD_ERR=$(grep -m1 -E '^error' "$RAW/build.log" || tail -n1 "$RAW/build.log")
  fi
}

# ------------------------------------------------------------------ target
refuse_if_answering() { # URL SHOWN HINT: exit if something already answers on URL
  if curl -s -o /dev/null --max-time 1 "$1"; then
    log "something already answers on $2; refusing to measure it ($3)"; exit 1
  fi
}
nginx_test() { # CONF: nginx -t with the prefix NGX_DIR, or exit
  nginx -t -q -p "$NGX_DIR/" -e "$NGX_DIR/error.log" -c "$1" 2>"$RAW/nginx-t.log" \
    || { log "nginx -t failed: $(cat "$RAW/nginx-t.log")"; exit 1; }
}
wait_up() { # URL: polls (5 s at most) while TARGET_PID lives; status 0 once URL answers
  for _ in $(seq 1 100); do
    kill -0 "$TARGET_PID" 2>/dev/null || return 1
    if curl -s -o /dev/null --max-time 1 "$1"; then return 0; fi
    sleep 0.05
  done
  return 1
}
start_nginx() { # CONF URL: nginx with CONF in a new NGX_DIR, pinned to TARGET_CPU, answering on URL;
  # sets TARGET_PID (master), TARGET_NGINX and TARGET_WORK, or exits
  refuse_if_answering "$2" "$2" "stop it first"
  NGX_DIR=$(mktemp -d "/tmp/perfops-$BENCH.XXXXXX")
  mkdir -p "$NGX_DIR/tmp"
  nginx_test "$1"
  taskset -c "$TARGET_CPU" nginx -p "$NGX_DIR/" -e "$NGX_DIR/error.log" -c "$1" >"$NGX_DIR/nginx.out" 2>&1 </dev/null &
  TARGET_PID=$!
  TARGET_NGINX=1
  if ! wait_up "$2"; then
    log "nginx did not come up on $2: $(cat "$NGX_DIR/error.log" "$NGX_DIR/nginx.out" 2>/dev/null | tail -n 3)"; exit 1
  fi
  find_nginx_worker
  log "nginx master $TARGET_PID, worker $TARGET_WORK, CPU $TARGET_CPU, $2 (prefix $NGX_DIR)"
}
find_nginx_worker() { # sets TARGET_WORK to the worker of the nginx master TARGET_PID, or exits
  TARGET_WORK=$(pgrep -P "$TARGET_PID" | head -n1 || true)
  [ -n "$TARGET_WORK" ] || { log "cannot find the nginx worker (child of pid $TARGET_PID)"; exit 1; }
}
start_delay_server() { # the peers' 10 ms delay server on 127.0.0.1:PORT (/__stats, /__reset),
  # pinned to TARGET_CPU, built into bench/out/ (again when its source is newer); its log in
  # $RAW/server.log; sets TARGET_PID and TARGET_WORK, or exits
  local src="$HERE/../../shared/bench/peers/targets/delayserver.go" bin="$HERE/out/delayserver"
  local stats="http://127.0.0.1:$PORT/__stats"
  [ -f "$src" ] || die "$src is missing (../shared/bench/peers)"
  if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
    log "building the delay server (go build $src)"
    go build -o "$bin" "$src" || die "go build of the delay server failed"
  fi
  refuse_if_answering "$stats" "127.0.0.1:$PORT" "stop it first"
  taskset -c "$TARGET_CPU" "$bin" -addr "127.0.0.1:$PORT" -delay 10ms >"$RAW/server.log" 2>&1 </dev/null &
  TARGET_PID=$!
  TARGET_WORK=$TARGET_PID
  wait_up "$stats" || die "the delay server did not come up: $(tail -n 3 "$RAW/server.log")"
}

delay_server_probe() { # 0|1 BASE: a probe_target for the delay server: its record reset before
  # a run (0), read after it (1) into BASE.server.json
  if [ "$1" = 0 ]; then curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/__reset" || true
  else curl -s --max-time 5 "http://127.0.0.1:$PORT/__stats" >"$2.server.json" 2>/dev/null || true; fi
}

NGX_REQS=("" "")
nginx_server_probe() { # 0|1 BASE: a probe_target for nginx on 127.0.0.1:PORT: its stub_status
  # request count read before a run (0) and after it (1) into BASE.server.json, with the rate it
  # saw over DURATION; nginx keeps no handler time (p50_ms, p99_ms null). The second status
  # request counts itself.
  NGX_REQS[$1]=$(curl -s --max-time 2 "http://127.0.0.1:$PORT/__status" 2>/dev/null | awk 'NR==3{print $3}' || true)
  if [ "$1" = 1 ] && [ -n "${NGX_REQS[0]}" ] && [ -n "${NGX_REQS[1]}" ]; then
    awk -v n=$((NGX_REQS[1] - NGX_REQS[0] - 1)) -v d="$DURATION" \
      'BEGIN{printf "{\"requests\": %d, \"arrival_rate\": %.1f, \"p50_ms\": null, \"p99_ms\": null}\n", n, n / d}' >"$2.server.json"
  fi
}

# ------------------------------------------------------------------ runs
# warm_up LABEL TIMEOUT_S ARGV... : ARGV pinned to TOOL_CPU under the lock, not recorded
# (output in $RAW/warmup.LABEL.out), then a 1 s pause.
warm_up() {
  local label=$1 limit=$2; shift 2
  lock_take
  run_child timeout -k 5 "$limit" taskset -c "$TOOL_CPU" "$@" >"$RAW/warmup.$label.out" 2>&1 </dev/null 9>&- \
    || log "warm-up $label failed: $(tail -n 2 "$RAW/warmup.$label.out" | tr '\n' ' ')"
  lock_drop
  sleep 1
}

# measure_once NAME ARGV... : runs ARGV pinned to TOOL_CPU under /usr/bin/time, bounded by
# RUN_TIMEOUT_S, under the lock after waiting for a quiet machine, writing
# $RAW/NAME.{out,err,time,meta.json}; sets OTHER_CPU_S (CPU seconds used meanwhile by
# processes other than the tool and the target; "" if unknown).
OTHER_CPU_S=""
measure_once() {
  local name=$1; shift
  local base="$RAW/$name" rc=0 qw t0 t1 c0 c1 b0 b1 u s
  lock_take
  qw=$(wait_quiet)
  probe_target 0 "$base"
  c0=$(proc_ticks "$TARGET_WORK"); b0=$(busy_ticks); t0=$(now)
  run_child timeout -k 5 "$RUN_TIMEOUT_S" taskset -c "$TOOL_CPU" /usr/bin/time -f '%e %U %S %M' -o "$base.time" "$@" \
      >"$base.out" 2>"$base.err" </dev/null 9>&- || rc=$?
  t1=$(now); c1=$(proc_ticks "$TARGET_WORK"); b1=$(busy_ticks)
  probe_target 1 "$base"
  lock_drop
  OTHER_CPU_S=""
  if read -r _ u s _ < <(tail -n1 "$base.time" 2>/dev/null) && [[ $u =~ ^[0-9.]+$ && $s =~ ^[0-9.]+$ ]]; then
    OTHER_CPU_S=$(awk -v b=$((b1 - b0)) -v n=$((c1 - c0)) -v u="$u" -v s="$s" -v hz="$CLK_TCK" \
                  'BEGIN{printf "%.2f", (b - n) / hz - u - s}')
  fi
  printf '{"name": "%s", "rc": %d, "wall_s": %s, "%s": %d, "busy_ticks": %d, %s"waited_quiet_s": %d, "lock": "%s", "argv": %s}\n' \
    "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}')" "$TICKS_KEY" $((c1 - c0)) $((b1 - b0)) \
    "$(meta_fields)" "$qw" "$LOCK_STATE_LAST" "$(json_argv "$@")" >"$base.meta.json"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then log "  $name: killed after ${RUN_TIMEOUT_S}s (timeout)";
  elif [ "$rc" -ne 0 ]; then
    log "  $name: exit status $rc: $( (tail -n 2 "$base.err"; [ -s "$base.err" ] || tail -n 1 "$base.out") 2>/dev/null | tr '\n' ' ')"
  fi
  return 0
}

# measure NAME ARGV... : measure_once, redone (at most NOISE_RETRIES times) while other
# processes used more than NOISE_MAX_S CPU seconds during the run. Noisy attempts are kept
# as NAME.noisyN.*; if every attempt was noisy, the least noisy one becomes NAME.*.
measure() {
  local name=$1 try=0 x k best=0 best_other
  local -a others=()
  while :; do
    for x in $TOOL_EXTS; do rm -rf "${RAW:?}/$name.$x"; done
    measure_once "$@"
    if [ -z "$OTHER_CPU_S" ] || ! awk -v o="$OTHER_CPU_S" -v m="$NOISE_MAX_S" 'BEGIN{exit !(o > m)}'; then
      return 0
    fi
    [ "$try" -lt "$NOISE_RETRIES" ] || break
    try=$((try + 1))
    others[try]=$OTHER_CPU_S
    log "  $name: other processes used ${OTHER_CPU_S} CPU s during the run (> ${NOISE_MAX_S}): redoing it ($try/$NOISE_RETRIES)"
    for x in $RUN_EXTS; do
      if [ -e "$RAW/$name.$x" ]; then mv "$RAW/$name.$x" "$RAW/$name.noisy$try.$x"; fi
    done
    sleep 1
  done
  best_other=$OTHER_CPU_S
  for k in "${!others[@]}"; do
    if awk -v a="${others[k]}" -v b="$best_other" 'BEGIN{exit !(a < b)}'; then best=$k; best_other=${others[k]}; fi
  done
  if [ "$best" -gt 0 ]; then   # swap the least noisy attempt into place
    log "  $name: still noisy after $NOISE_RETRIES retries; keeping the least noisy attempt (noisy$best, ${best_other} s)"
    for x in $RUN_EXTS; do
      if [ -e "$RAW/$name.$x" ]; then mv "$RAW/$name.$x" "$RAW/$name.swap.$x"; fi
      if [ -e "$RAW/$name.noisy$best.$x" ]; then mv "$RAW/$name.noisy$best.$x" "$RAW/$name.$x"; fi
      if [ -e "$RAW/$name.swap.$x" ]; then mv "$RAW/$name.swap.$x" "$RAW/$name.noisy$best.$x"; fi
    done
  else
    log "  $name: still noisy after $NOISE_RETRIES retries; keeping the last attempt"
  fi
  return 0
}

# ------------------------------------------------------------------ report
report_and_exit() { # REPORTER: renders $RAW into $REPORT (and stdout); exits with its status
  local rc=0
  python3 "$1" "$RAW" "$REPORT" || rc=$?
  log "raw outputs: $RAW"
  log "report: $REPORT"
  exit "$rc"
}
