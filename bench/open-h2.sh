#!/usr/bin/env bash
# HTTP/2 and gRPC in the open model beside HTTP/1.1, and beside the closed loop: CPU per request
# and what each request costs in syscalls and context switches, in one table.
#
#   bench/open-h2.sh [PERFOPS_BIN]                          # default: <repo>/target/release/perfops
#   BASE=path/to/perfops-before bench/open-h2.sh BIN         # the build before a change, alternated
#   ROUNDS=1 DURATION=2 COUNT_S=1 bench/open-h2.sh           # quick check
#
# Knobs (env): DURATION=5 (s per run)  RATE=10000 (open model, arrivals/s, one worker)
#              CONC=1 (the closed loop's users: HTTP/1.1 -c CONC, HTTP/2 and gRPC -c 1 -p CONC)
#              PROTOS="h1 h2c grpc"  MODELS="open closed"  ROUNDS=3
#              BASE=  (a second perfops binary, each of its runs right after the same run of
#                      PERFOPS_BIN: the two alternate in every round)
#              COUNT_S=2  (after the timed rounds, each run once more for COUNT_S s under
#                          `perf stat`, the server under `perf stat -p` for the same span:
#                          syscalls by kind and context switches per request; not timed, as
#                          counting tracepoints costs CPU. 0: skipped)
#              TARGET_CPU=0 (servers)  TOOL_CPU=1 (perfops)  and common.sh's LOCK, LOCK_WAIT_S,
#              QUIET_MAX_S, NOISE_MAX_S, NOISE_RETRIES, NO_BUILD, BUILD_TIMEOUT_S
#
# Targets, each pinned to TARGET_CPU and answering at once:
#   h1, h2c  nginx, 1 worker, `return 200 "Hello, world\n"`, keep-alive without a request limit, no
#            access log (../shared/bench/peers/targets/h2/nginx-h2.conf's h2c server, h2load's
#            target, beside the same location over HTTP/1.1): http://127.0.0.1:18191/ and
#            h2c://127.0.0.1:18192/; requests counted by stub_status (18193).
#   grpc     bench/grpcecho (grpc-go, bench.Echo/Say; built into bench/out/ with `go build`, as
#            grpc.sh's) on 127.0.0.1:18195, calls counted at http://127.0.0.1:18196/__stats.
# perfops, pinned to TOOL_CPU, one worker, under `/usr/bin/time -f '%e %U %S %M'`:
#   open    perfops quick -q --workers 1 -r RATE -d DURATION URL
#   closed  perfops quick -q --workers 1 -c CONC -d DURATION URL       (HTTP/2, gRPC: -c 1 -p CONC)
# CPU s per 100k = (user + sys) / responses * 1e5; the server's CPU s per 100k = its ticks over the
# requests it served. Counts per request (`perf stat -e raw_syscalls:sys_enter,context-switches,
# syscalls:sys_enter_*`): syscalls, context switches, writes (sendto, write, writev), reads
# (recvfrom, recvmsg, read), epoll_wait, clock_nanosleep; the server's context switches.
# Only 127.0.0.1 is ever contacted; each server is stopped by its PID.
#
# Output: markdown on stdout and bench/out/open-h2-<UTC stamp>.md; raw outputs in
# bench/out/open-h2-<stamp>/. Exit status: 0 every run worked, 3 some run failed, 1 setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=open-h2
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"

DURATION=${DURATION:-5}
RATE=${RATE:-10000}
CONC=${CONC:-1}
COUNT_S=${COUNT_S:-2}
PROTOS=${PROTOS:-h1 h2c grpc}
MODELS=${MODELS:-open closed}
BASE=${BASE:-}
need_ints DURATION RATE CONC COUNT_S ROUNDS TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S BUILD_TIMEOUT_S NOISE_RETRIES
need_positive DURATION ROUNDS RATE CONC
need_numbers NOISE_MAX_S
need_tools taskset timeout curl python3
for p in $PROTOS; do
  case "$p" in h1|h2c) need_tools nginx ;; grpc) need_tools go ;; *) die "PROTOS: h1, h2c or grpc, not $p" ;; esac
done
for m in $MODELS; do case "$m" in open|closed) ;; *) die "MODELS: open or closed, not $m" ;; esac; done
if [ "$COUNT_S" -gt 0 ]; then need_tools perf; fi

H1_PORT=18191
H2C_PORT=18192
STATUS_URL="http://127.0.0.1:18193/__status"
GRPC_ADDR=127.0.0.1:18195
GRPC_STATS="http://127.0.0.1:18196/__stats"
PROTO="$HERE/grpcecho/echo.proto"
MSG='{"text":"hello"}'
RUN_TIMEOUT_S=$((DURATION + COUNT_S + 30))

perfops_path "${1:-}"
out_dirs
cleanup_at_exit

if [ ! -x "$PERFOPS" ] && [ "$PERFOPS" = "$PERFOPS_DEFAULT" ] && [ "$NO_BUILD" != 1 ]; then
  build_perfops missing
  [ "$BUILD_RC" -eq 0 ] || die "cargo build --release -p perfops failed: $BUILD_ERR"
fi
[ -x "$PERFOPS" ] || die "no perfops binary at $PERFOPS"
if [ -n "$BASE" ]; then
  case "$BASE" in /*) ;; *) BASE="$PWD/$BASE" ;; esac
  [ -x "$BASE" ] || die "no perfops binary at BASE=$BASE"
fi
# The binaries by name: "perfops" (PERFOPS_BIN) and "base" (BASE).
declare -A BIN=([perfops]="$PERFOPS")
TOOLS=perfops
if [ -n "$BASE" ]; then BIN[base]="$BASE"; TOOLS="perfops base"; fi

{
  echo "{"
  echo "  \"stamp\": \"$STAMP\", \"duration\": $DURATION, \"rate\": $RATE, \"conc\": $CONC, \"rounds\": $ROUNDS,"
  echo "  \"count_s\": $COUNT_S, \"protos\": \"$PROTOS\", \"models\": \"$MODELS\", \"tools\": \"$TOOLS\","
  echo "  \"target_cpu\": $TARGET_CPU, \"tool_cpu\": $TOOL_CPU, \"clk_tck\": $CLK_TCK,"
  echo "  \"perfops_bin\": $(printf '%s' "$PERFOPS" | json_text), \"base_bin\": $(printf '%s' "$BASE" | json_text),"
  echo "  \"perfops_git\": \"$(perfops_git)\","
  echo "  \"nginx_version\": \"$( (nginx -v 2>&1 || true) | sed -n 's|.*nginx/||p')\","
  echo "  \"go_version\": $( (go version 2>/dev/null || true) | json_str),"
  echo "  \"cpu\": $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | json_str),"
  echo "  \"kernel\": \"$(uname -r)\""
  echo "}"
} >"$RAW/env.json"

RUN_EXTS="out err time meta.json json"
TOOL_EXTS="json"
TICKS_KEY=server_ticks
SERVED=("" "")
SERVER=""   # nginx or grpc: which server the runs go to now
probe_target() { # the server's own count of requests: before (0) and after (1) a run
  local v=""
  if [ "$SERVER" = nginx ]; then
    v=$(curl -s --max-time 2 "$STATUS_URL" 2>/dev/null | awk 'NR==3{print $3}' || true)
  else
    v=$(curl -s --max-time 2 "$GRPC_STATS" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["calls"])' 2>/dev/null || true)
  fi
  SERVED[$1]=$v
}
meta_fields() {
  # nginx's stub_status counts its own status request too
  local own=0
  [ "$SERVER" = nginx ] && own=1
  printf '"server_requests": %s, ' \
    "$( [ -n "${SERVED[0]}" ] && [ -n "${SERVED[1]}" ] && echo $((SERVED[1] - SERVED[0] - own)) || echo null)"
}

# ------------------------------------------------------------------ the servers
start_nginx_h1_h2c() {
  cat >"$RAW/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process on;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; use epoll; multi_accept on; }
http {
    access_log off;
    server_tokens off;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    http2_max_concurrent_streams 256;
    client_body_temp_path tmp/body; proxy_temp_path tmp/proxy; fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi; scgi_temp_path tmp/scgi;
    server {
        listen 127.0.0.1:$H1_PORT backlog=4096;
        default_type text/plain;
        location / { return 200 "Hello, world\n"; }
    }
    server {
        listen 127.0.0.1:$H2C_PORT http2 backlog=4096;
        default_type text/plain;
        location / { return 200 "Hello, world\n"; }
    }
    server {
        listen 127.0.0.1:18193;
        location = /__status { stub_status; }
    }
}
CONF
  start_nginx "$RAW/nginx.conf" "$STATUS_URL"
  SERVER=nginx
}
stop_target() { # the server started last, by its PID (nginx: QUIT to its master)
  [ -n "$TARGET_PID" ] || return 0
  kill "-$( [ "$TARGET_NGINX" = 1 ] && echo QUIT || echo TERM )" "$TARGET_PID" 2>/dev/null || true
  wait "$TARGET_PID" 2>/dev/null || true
  TARGET_PID=""; TARGET_WORK=""; TARGET_NGINX=0
}
start_grpcecho() {
  local src="$HERE/grpcecho" bin="$HERE/out/grpcecho-timed"
  if [ ! -x "$bin" ] || [ -n "$(find "$src" -newer "$bin" -type f)" ]; then
    (cd "$src" && go build -o "$bin" .) >"$RAW/go-build.log" 2>&1 \
      || die "go build of bench/grpcecho failed: $(tail -n 2 "$RAW/go-build.log")"
  fi
  refuse_if_answering "$GRPC_STATS" "$GRPC_STATS" "stop it first"
  taskset -c "$TARGET_CPU" "$bin" -listen "$GRPC_ADDR" -stats 127.0.0.1:18196 >"$RAW/grpcecho.log" 2>&1 </dev/null &
  TARGET_PID=$!
  TARGET_WORK=$TARGET_PID
  SERVER=grpc
  wait_up "$GRPC_STATS" || die "grpcecho did not come up: $(tail -n 2 "$RAW/grpcecho.log")"
  log "grpcecho $TARGET_PID on $GRPC_ADDR, CPU $TARGET_CPU"
}

url_of() { # PROTO -> the URL perfops loads
  case "$1" in
    h1) echo "http://127.0.0.1:$H1_PORT/" ;;
    h2c) echo "h2c://127.0.0.1:$H2C_PORT/" ;;
    grpc) echo "grpc://$GRPC_ADDR/bench.Echo/Say" ;;
  esac
}
args_of() { # PROTO MODEL SECONDS -> quick's flags (one per line)
  printf '%s\n' quick -q --workers 1 -d "${3}s"
  case "$2" in
    open) printf '%s\n' -r "$RATE" ;;
    closed) if [ "$1" = h1 ]; then printf '%s\n' -c "$CONC"; else printf '%s\n' -c 1 -p "$CONC"; fi ;;
  esac
  if [ "$1" = grpc ]; then printf '%s\n' --proto "$PROTO" -b "$MSG"; fi
}

# count_run NAME ARGV... : ARGV under `perf stat` (pinned to TOOL_CPU), the server under
# `perf stat -p` for the same span, under the lock; NAME.count.tool / NAME.count.server (perf's
# CSV) and NAME.count.meta.json (what the server served). Not timed: counting costs CPU.
COUNT_EVENTS="raw_syscalls:sys_enter,context-switches"
for sc in sendto write writev recvfrom recvmsg read epoll_wait epoll_pwait clock_nanosleep timerfd_settime; do
  COUNT_EVENTS="$COUNT_EVENTS,syscalls:sys_enter_$sc"
done
count_run() {
  local name=$1; shift
  local base="$RAW/$name.count" rc=0 pp
  lock_take
  wait_quiet >/dev/null
  probe_target 0 "$base"
  perf stat -x, -o "$base.server" -e "$COUNT_EVENTS" -p "$TARGET_WORK" 9>&- </dev/null &
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

phase() { # SERVER_KIND PROTOS...: the timed rounds, then the counts, against the server started
  local p m t i name
  local -a argv
  for i in $(seq 1 "$ROUNDS"); do
    for p in "$@"; do
      for m in $MODELS; do
        for t in $TOOLS; do
          name="$p.$m.$t.$i"
          mapfile -t argv < <(args_of "$p" "$m" "$DURATION")
          log "round $i/$ROUNDS: $t ${argv[*]} $(url_of "$p")"
          measure "$name" "${BIN[$t]}" "${argv[@]}" --json "$RAW/$name.json" "$(url_of "$p")"
          sleep 1
        done
      done
    done
  done
  [ "$COUNT_S" -gt 0 ] || return 0
  for p in "$@"; do
    for m in $MODELS; do
      for t in $TOOLS; do
        name="$p.$m.$t"
        mapfile -t argv < <(args_of "$p" "$m" "$COUNT_S")
        log "counting: $t ${argv[*]} $(url_of "$p") (perf stat)"
        count_run "$name" "${BIN[$t]}" "${argv[@]}" "$(url_of "$p")"
      done
    done
  done
}

NGINX_PROTOS=()
for p in $PROTOS; do case "$p" in h1|h2c) NGINX_PROTOS+=("$p") ;; esac; done
if [ "${#NGINX_PROTOS[@]}" -gt 0 ]; then
  start_nginx_h1_h2c
  log "warm-up: perfops quick -c 10 -d 2s (not recorded)"
  warm_up nginx 30 "$PERFOPS" quick -q --workers 1 -c 10 -d 2s "$(url_of "${NGINX_PROTOS[0]}")"
  phase "${NGINX_PROTOS[@]}"
  stop_target
fi
case " $PROTOS " in
  *" grpc "*)
    start_grpcecho
    warm_up grpc 30 "$PERFOPS" quick -q --workers 1 -c 1 -p 10 -d 2s --proto "$PROTO" -b "$MSG" "$(url_of grpc)"
    phase grpc
    stop_target
    ;;
esac

report_and_exit "$HERE/lib/open_h2_report.py"
