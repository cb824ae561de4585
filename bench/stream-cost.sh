#!/usr/bin/env bash
# What reading streamed answers (`stream:`) costs the requests that do not stream: user-space
# instructions per request (valgrind's callgrind, the whole perfops process) of `perfops quick`
# against a one-worker nginx on 127.0.0.1, for each perfops binary given (say main's build and a
# branch's), over HTTP/1.1 and over HTTP/2 in clear text:
#
#   h1 closed   quick -q -c 50 -n N                        (N0 and 3 x N0 requests)
#   h1 open     quick -q -r 5000 -d S                      (S0 and 3 x S0 seconds)
#   h2c closed  quick -q -c 50 -p 10 --workers 1 -n N      (N0 and 3 x N0 requests)
#
# Per request: (instructions of the larger run - of the smaller) / (requests completed in the
# larger - in the smaller): start-up, the first connections and each run's fixed costs cancel.
# Two figures each: the whole process (the kernel's wake-ups, hence the runtime's epoll and
# scheduling, move it with the machine's load: on a busy machine +-15 % from run to run), and
# the engine's own code (the self cost of the functions in crates/perfops-engine/src, what is inlined
# into them included:
# what a change to the engine moves, and what load moves little).
#
# Usage: bench/stream-cost.sh PERFOPS... (e.g. /tmp/perfops-main target/debug/perfops)
# Knobs: N0 (default 20000), S0 (default 2). Needs valgrind and nginx. Only 127.0.0.1 is ever
# contacted; the nginx it starts is stopped by its PID. Prints a markdown table on stdout.
set -euo pipefail

N0=${N0:-20000}
S0=${S0:-2}
[ "$#" -ge 1 ] || { echo "usage: $0 PERFOPS..." >&2; exit 1; }
command -v valgrind >/dev/null || { echo "$0: valgrind is missing" >&2; exit 1; }
command -v nginx >/dev/null || { echo "$0: nginx is missing" >&2; exit 1; }

WORK=$(mktemp -d /tmp/stream-cost.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# nginx PORT LISTEN_EXTRA: one worker, keep-alive, no access log, 13-byte answers.
start_nginx() {
  local port=$1 extra=$2 dir="$WORK/nginx-$1"
  mkdir -p "$dir/tmp"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process off;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_timeout 65s;
    keepalive_requests 100000000;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {
        listen 127.0.0.1:$port$extra backlog=4096;
        default_type text/plain;
        location / { return 200 "Hello, world\n"; }
    }
}
EOF
  nginx -p "$dir/" -c nginx.conf -e error.log &
  PIDS+=("$!")
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "$0: nginx did not start on $port" >&2
  exit 1
}

H1=$(free_port); start_nginx "$H1" ""
H2=$(free_port); start_nginx "$H2" " http2"

# total_ir OUT: the instructions callgrind counted for the whole process.
total_ir() { awk '/^summary:/ { print $2 }' "$1"; }
# engine_ir OUT: the self cost of the engine's functions.
engine_ir() {
  callgrind_annotate --inclusive=no --threshold=100 --auto=no "$1" 2>/dev/null |
    awk '/perfops-engine\/src\// { gsub(",", "", $1); s += $1 } END { print s + 0 }'
}
# completed JSON: requests completed, from quick --json.
completed() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["completed"])' "$1"; }

# run BIN TAG ARGS...: callgrind of `BIN quick --json FILE ARGS`; prints "IR COMPLETED".
run() {
  local bin=$1 tag=$2; shift 2
  valgrind --tool=callgrind --callgrind-out-file="$WORK/$tag.cg" "$bin" quick -q --json "$WORK/$tag.json" "$@" \
    >"$WORK/$tag.out" 2>"$WORK/$tag.err" || true
  echo "$(total_ir "$WORK/$tag.cg") $(engine_ir "$WORK/$tag.cg") $(completed "$WORK/$tag.json")"
}

# per_request BIN MODE: instructions per request of MODE with BIN.
per_request() {
  local bin=$1 mode=$2 small large
  case $mode in
    h1-closed)
      small=$(run "$bin" a -c 50 -n "$N0" "http://127.0.0.1:$H1/")
      large=$(run "$bin" b -c 50 -n $((3 * N0)) "http://127.0.0.1:$H1/") ;;
    h1-open)
      small=$(run "$bin" a -r 5000 -d "${S0}s" "http://127.0.0.1:$H1/")
      large=$(run "$bin" b -r 5000 -d "$((3 * S0))s" "http://127.0.0.1:$H1/") ;;
    h2c-closed)
      small=$(run "$bin" a -c 50 -p 10 --workers 1 -n "$N0" "h2c://127.0.0.1:$H2/")
      large=$(run "$bin" b -c 50 -p 10 --workers 1 -n $((3 * N0)) "h2c://127.0.0.1:$H2/") ;;
  esac
  # shellcheck disable=SC2086
  set -- $small $large
  python3 -c 'import sys; a,e,n,b,f,m=map(int,sys.argv[1:]); d=m-n; print(f"{(b-a)/d:,.0f} / {(f-e)/d:,.0f} ({d:,} requests)")' "$@"
}

echo "instructions per request: whole process / the engine's own functions"
echo
echo "| binary | h1 closed \`-c 50 -n\` | h1 open \`-r 5000 -d\` | h2c closed \`-c 50 -p 10\` |"
echo "|---|---:|---:|---:|"
for bin in "$@"; do
  row="| \`$bin\`"
  for mode in h1-closed h1-open h2c-closed; do
    row="$row | $(per_request "$bin" "$mode")"
  done
  echo "$row |"
done
