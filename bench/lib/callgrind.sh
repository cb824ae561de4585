# Shared by the callgrind benches (closed-callgrind.sh, script-callgrind.sh): sourced after
# NAME and NGINX_PORT are set, with the perfops binaries as "$@". Checks the binaries and the
# tools, makes DIR (removed at exit unless KEEP is set) and starts nginx (bench/nginx.conf: 1
# worker, `return 200`) on 127.0.0.1:NGINX_PORT in it, stopped by its PID at exit.
# shellcheck shell=bash

die() { echo "$NAME: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: $0 PERFOPS_BIN..."
for b in "$@"; do [ -x "$b" ] || die "not an executable: $b"; done
for t in nginx valgrind callgrind_annotate curl python3; do command -v "$t" >/dev/null || die "$t is missing"; done

DIR=$(mktemp -d "/tmp/perfops-$NAME.XXXXXX")
NGX_PID=""
cleanup() {
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "kept: $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

mkdir -p "$DIR/tmp"
sed "s/127.0.0.1:18090/127.0.0.1:$NGINX_PORT/" "$HERE/nginx.conf" >"$DIR/nginx.conf"
nginx -p "$DIR/" -c "$DIR/nginx.conf" -e "$DIR/error.log" &
NGX_PID=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$NGINX_PORT/" >/dev/null 2>&1 && break; sleep 0.2; done
