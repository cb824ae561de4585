#!/usr/bin/env bash
# Idle connections (issue #12, point 2): how much memory perfops needs per open,
# mostly idle keep-alive connection, and how many it can hold. Not a CI test.
#
#   sudo bench/idle.sh [PERFOPS_BIN]          # default: <repo>/target/release/perfops
#   CONNECTIONS=5000 sudo bench/idle.sh       # fewer
#
# What runs, inside a network namespace this script creates (its own loopback, its
# own ephemeral port range 1024-65535, so more than 28,000 connections to one
# address fit, and nothing outside it is touched): nginx (1 worker, keep-alive
# 300 s) on 127.0.0.1:PORT, and `perfops run` of a closed model of CONNECTIONS
# users, each sending `GET /` and then thinking THINK (10 s): they ramp up over
# RAMP_S and hold HOLD_S, so nearly every connection is idle at any moment. VmRSS
# and the open fds of perfops are read each second; the summary gives the RSS per
# connection at the peak, and the same with the RSS at the first second (1,700 or
# so connections) subtracted (the cost of one more connection).
#
# CONNECTIONS defaults to 50,000, or to what the open-files hard limit allows
# (perfops raises its soft limit to the hard one; this script does not raise the
# hard one, which needs CAP_SYS_RESOURCE). Root is needed for `ip netns`.
# nginx and perfops are stopped by their PIDs; the namespace is deleted at exit.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PERFOPS=${1:-$ROOT/target/release/perfops}
PORT=${PORT:-18200}
THINK=${THINK:-10s}
RAMP_S=${RAMP_S:-10}
HOLD_S=${HOLD_S:-15}

die() { echo "idle: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (ip netns)"
[ -x "$PERFOPS" ] || die "perfops binary not found: $PERFOPS (cargo build --release -p perfops)"
command -v nginx >/dev/null || die "nginx is missing (apt-get install nginx)"
hard=$(ulimit -Hn)
if [ -z "${CONNECTIONS:-}" ]; then
  CONNECTIONS=50000
  if [ "$hard" != unlimited ] && [ "$hard" -lt $((CONNECTIONS + 200)) ]; then
    CONNECTIONS=$((hard - 200))
    echo "idle: the open-files hard limit is $hard: $CONNECTIONS connections (raising it needs CAP_SYS_RESOURCE)" >&2
  fi
fi
[[ $CONNECTIONS =~ ^[0-9]+$ ]] && [ "$CONNECTIONS" -ge 100 ] || die "CONNECTIONS must be >= 100"

NS=perfops-idle-$$
DIR=$(mktemp -d /tmp/perfops-idle.XXXXXX)
NGX_PID="" P_PID=""
cleanup() {
  [ -n "$P_PID" ] && kill "$P_PID" 2>/dev/null || true
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT

mkdir -p "$DIR/tmp"
slots=$((CONNECTIONS + CONNECTIONS / 8 + 64))
cat >"$DIR/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
worker_rlimit_nofile $((slots + 32));
pid nginx.pid;
error_log error.log warn;
events { worker_connections $slots; }
http {
    access_log off;
    keepalive_timeout 300s;
    keepalive_requests 100000000;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    server {
        listen 127.0.0.1:$PORT backlog=8192;
        default_type text/plain;
        location / { return 200 "ok\n"; }
    }
}
EOF
cat >"$DIR/idle.yaml" <<EOF
name: idle
target: http://127.0.0.1:$PORT
flows:
  idle:
    steps:
      - { request: GET / }
load:
  model: closed
  think: $THINK
  stages:
    - { users: 1, ramp_to: $CONNECTIONS, over: ${RAMP_S}s }
    - { users: $CONNECTIONS, hold: ${HOLD_S}s }
EOF

ip netns add "$NS"
in_ns() { ip netns exec "$NS" "$@"; }   # (backgrounded commands call ip netns exec directly, so that $! is their PID)
in_ns ip link set lo up
in_ns sysctl -qw net.ipv4.ip_local_port_range="1024 65535" net.core.somaxconn=8192
ip netns exec "$NS" nginx -p "$DIR/" -c nginx.conf -e error.log </dev/null >/dev/null 2>&1 &
NGX_PID=$!
for _ in $(seq 50); do in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null && break; sleep 0.1; done
ip netns exec "$NS" "$PERFOPS" run "$DIR/idle.yaml" --out "$DIR/runs" -q --workers 1 >"$DIR/run.out" 2>"$DIR/run.err" </dev/null &
P_PID=$!

echo "| t (s) | perfops VmRSS (MiB) | open fds |"
echo "|---:|---:|---:|"
first="" peak=0 peak_fds=0
for t in $(seq 1 $((RAMP_S + HOLD_S + 30))); do
  sleep 1
  kill -0 "$P_PID" 2>/dev/null || break
  rss=$(awk '/^VmRSS:/{print $2}' "/proc/$P_PID/status" 2>/dev/null || echo 0)
  fds=$(find "/proc/$P_PID/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  [ -n "$first" ] || first="$rss $fds"
  if [ "$fds" -ge "$peak_fds" ]; then peak_fds=$fds; fi
  if [ "$rss" -gt "$peak" ]; then peak=$rss; fi
  printf '| %s | %.1f | %s |\n' "$t" "$(awk -v k="$rss" 'BEGIN{print k/1024}')" "$fds"
done
rc=0; wait "$P_PID" || rc=$?; P_PID=""
read -r rss1 fds1 <<<"$first"
echo
awk -v n="$CONNECTIONS" -v peak="$peak" -v fds="$peak_fds" -v r1="$rss1" -v f1="$fds1" -v rc="$rc" 'BEGIN{
  printf "%d users, perfops exit %d: at most %d fds open, peak VmRSS %.1f MiB = %.1f KiB per connection;\n", n, rc, fds, peak/1024, peak/fds
  if (fds > f1) printf "from %d to %d connections the RSS grew %.1f MiB: %.1f KiB per added connection\n", f1, fds, (peak-r1)/1024, (peak-r1)/(fds-f1)
}'
tail -n 3 "$DIR/run.err" | sed 's/^/  perfops: /'
rm -rf "$DIR"
