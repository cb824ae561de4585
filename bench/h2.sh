#!/usr/bin/env bash
# perfops vs h2load (#14): HTTP/2 over TLS against nginx, side by side in one run.
#
#   bench/h2.sh [PERFOPS_BIN]               # default: <repo>/target/release/perfops
#   ROUNDS=1 DURATION=2 bench/h2.sh         # quick check
#
# Knobs (env): DURATION=10 (s per run)  CONNS=50  STREAMS=10  ROUNDS=3
#              TARGET_CPU=0 (nginx)  TOOL_CPU=1 (h2load / perfops)  and common.sh's
#              LOCK, LOCK_WAIT_S, QUIET_MAX_S, NOISE_MAX_S, NOISE_RETRIES, NO_BUILD, BUILD_TIMEOUT_S
#
# Method: nginx (1 worker, pinned to TARGET_CPU) serves `return 200 "Hello, world\n"` over
# TLS with ALPN h2 on 127.0.0.1:18443 (a fresh self-signed certificate, openssl), keep-alive
# without a request limit, no access log; stub_status on http://127.0.0.1:18091/. Each tool is
# pinned to TOOL_CPU (one core: h2load -t1, perfops --workers 1) and runs under
# `/usr/bin/time -f '%e %U %S %M'`, alternating per round:
#   h2load -t1 -c CONNS -m STREAMS -D DURATION https://127.0.0.1:18443/
#   perfops quick -k -c CONNS -p STREAMS --workers 1 -d DURATION https://127.0.0.1:18443/
# Both: CONNS connections x STREAMS streams each; flow-control windows large (h2load's defaults
# 2^30-1, perfops' too). rps = completed responses / the tool's own elapsed time;
# CPU s per 100k = (user + sys) / completed * 1e5; nginx CPU = its worker's ticks / wall.
# nginx CPU s per 100k = its worker's ticks / CLK_TCK / completed * 1e5: what each tool asked of the
# server per request (with nginx saturated, rps follows it; bench/README.md, "nginx's cost per request").
# Only 127.0.0.1 is ever contacted; nginx is stopped by its PID.
#
# Where each tool's CPU goes per request (callgrind: perfops ~9,000 user-space instructions
# on its own HTTP/2 client, ~27,900 on the h2 crate before; h2load ~19,300): bench/README.md,
# "Where an HTTP/2 request's CPU goes". At 50 x 10 streams nginx's one worker is the limit
# (98-99 % of its core) for both tools.
#
# Output: markdown on stdout and bench/out/h2-<UTC stamp>.md; raw outputs in bench/out/h2-<stamp>/.
# Exit status: 0 every run worked, 3 some run failed, 1 setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=h2
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"

CONNS=${CONNS:-50}
STREAMS=${STREAMS:-10}
need_ints DURATION CONNS STREAMS ROUNDS TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S BUILD_TIMEOUT_S NOISE_RETRIES
need_positive DURATION ROUNDS CONNS STREAMS
need_tools nginx h2load openssl taskset timeout curl python3
need_numbers NOISE_MAX_S

PORT=18443
STATUS_PORT=18091
URL="https://127.0.0.1:$PORT/"
STATUS_URL="http://127.0.0.1:$STATUS_PORT/__status"
RUN_TIMEOUT_S=$((DURATION + 30))

perfops_path "${1:-}"
out_dirs
cleanup_at_exit

if [ ! -x "$PERFOPS" ] && [ "$PERFOPS" = "$PERFOPS_DEFAULT" ] && [ "$NO_BUILD" != 1 ]; then
  build_perfops missing
  [ "$BUILD_RC" -eq 0 ] || die "cargo build --release -p perfops failed: $BUILD_ERR"
fi
[ -x "$PERFOPS" ] || die "no perfops binary at $PERFOPS"

# ------------------------------------------------------------------ nginx over TLS + h2
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
  -keyout "$RAW/key.pem" -out "$RAW/cert.pem" >"$RAW/openssl.log" 2>&1 || die "openssl failed: $(tail -n1 "$RAW/openssl.log")"
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
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {
        listen 127.0.0.1:$PORT ssl http2 backlog=4096;
        ssl_certificate $RAW/cert.pem;
        ssl_certificate_key $RAW/key.pem;
        default_type text/plain;
        location / { return 200 "Hello, world\n"; }
    }
    server {
        listen 127.0.0.1:$STATUS_PORT;
        location = /__status { stub_status; }
    }
}
CONF
start_nginx "$RAW/nginx.conf" "$STATUS_URL"

{
  echo "{"
  echo "  \"stamp\": \"$STAMP\", \"duration\": $DURATION, \"conns\": $CONNS, \"streams\": $STREAMS, \"rounds\": $ROUNDS,"
  echo "  \"target_cpu\": $TARGET_CPU, \"tool_cpu\": $TOOL_CPU, \"clk_tck\": $CLK_TCK, \"url\": \"$URL\","
  echo "  \"perfops_bin\": $(printf '%s' "$PERFOPS" | json_text),"
  echo "  \"h2load_version\": $( (h2load --version 2>/dev/null || true) | head -n1 | json_str),"
  echo "  \"nginx_version\": \"$(nginx -v 2>&1 | sed -n 's|.*nginx/||p')\","
  echo "  \"perfops_git\": \"$(perfops_git)\","
  echo "  \"cpu\": $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | json_str),"
  echo "  \"kernel\": \"$(uname -r)\""
  echo "}"
} >"$RAW/env.json"

RUN_EXTS="out err time meta.json json"
TOOL_EXTS="json"
TICKS_KEY=nginx_ticks
NGX_REQS=("" "")
probe_target() {
  NGX_REQS[$1]=$(curl -s --max-time 2 "$STATUS_URL" 2>/dev/null | awk 'NR==3{print $3}' || true)
}
meta_fields() {
  printf '"nginx_requests": %s, ' \
    "$( [ -n "${NGX_REQS[0]}" ] && [ -n "${NGX_REQS[1]}" ] && echo $((NGX_REQS[1] - NGX_REQS[0] - 1)) || echo null)"
}

log "warm-up: h2load -c$CONNS -m$STREAMS -D2 (not recorded)"
warm_up h2load 30 h2load -t1 -c"$CONNS" -m"$STREAMS" -D2 "$URL"

for i in $(seq 1 "$ROUNDS"); do
  log "round $i/$ROUNDS: h2load -t1 -c$CONNS -m$STREAMS -D$DURATION"
  measure "h2load.$i" h2load -t1 -c"$CONNS" -m"$STREAMS" -D"$DURATION" "$URL"
  sleep 1
  log "round $i/$ROUNDS: perfops quick -c $CONNS -p $STREAMS -d ${DURATION}s"
  measure "perfops.$i" "$PERFOPS" quick -q -k -c "$CONNS" -p "$STREAMS" --workers 1 -d "${DURATION}s" \
    --json "$RAW/perfops.$i.json" "$URL"
  sleep 1
done

report_and_exit "$HERE/lib/h2_report.py"
