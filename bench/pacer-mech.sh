#!/usr/bin/env bash
# The kernel pacer's mechanisms side by side (docs/architecture.md, "The kernel pacer"): the
# timerfd pacer and the kernel pacer's variants, one worker, in alternation, against the
# 10 ms delay server and against nginx (bench/nginx.conf), counted in what load moves little.
#
#   bench/pacer-mech.sh BIN
#   RATES="10000 20000" ROUNDS=2 DURATION=5 VARIANTS="timerfd uring sends sqpoll sqpoll0" bench/pacer-mech.sh BIN
#
# Variants (environment of `perfops quick -r RATE -d DURATION --workers 1`):
#   timerfd  the default pacer (a wake-up per arrival or per arrivals gathered within 100 µs)
#   uring    PERFOPS_PACER=io_uring: sends queued behind linked timeouts, the thread waiting in
#            the ring to the end of each window (the kernel pacer as it is)
#   sends    the same, the wait ending once the window's sends completed (min_complete = the
#            sends pending; PERFOPS_URING_WAIT=sends), then epoll
#   sqpoll   the ring with IORING_SETUP_SQPOLL, sq_thread_idle 1 ms (PERFOPS_URING_SQPOLL=1): the
#            sends made by the kernel's SQ thread, which inherits the tool's CPU (TOOL_CPU)
#   sqpoll0  the same, the SQ thread pinned to TARGET_CPU (PERFOPS_URING_SQPOLL=1@TARGET_CPU):
#            beside the server, on the other core of a 2-core machine
# Per run: CPU s per 100k (user + system from wait4, /usr/bin/time: every thread of the tool,
# the SQ thread included), context switches and syscalls per request, connects (perf stat
# -e context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_connect, inherited by every
# thread), the rate the delay server saw (its own clock; nginx: perfops' count over the
# schedule) and perfops' latency p50 / p99.
# Only 127.0.0.1 is contacted; the servers are stopped by their PIDs. Needs perf, nginx, go.
#
# Knobs (env): RATES="10000 20000"  ROUNDS=2  DURATION=5  VARIANTS  TARGETS="delay nginx"
#              TARGET_CPU=0  TOOL_CPU=1  LOCK=/tmp/bench.lock  QUIET_MAX_S
# Output: the table on stdout; raw outputs in bench/out/pacer-mech-<UTC stamp>/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=pacer-mech
[ "$#" -eq 1 ] || { echo "usage: $0 PERFOPS_BIN" >&2; exit 2; }
DURATION=${DURATION:-5}
ROUNDS=${ROUNDS:-2}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"   # TARGET_CPU TOOL_CPU LOCK* QUIET_MAX_S helpers

RATES=${RATES:-"10000 20000"}
TARGET=${TARGET:-delay}
VARIANTS=${VARIANTS:-"timerfd uring sends sqpoll sqpoll0"}
case "$TARGET" in
  delay) PORT=${PORT:-18081} ;;
  nginx) PORT=18090 ;;
  *) die "TARGET: '$TARGET' is neither delay nor nginx" ;;
esac
need_ints DURATION ROUNDS PORT TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S
need_positive DURATION ROUNDS PORT
for r in $RATES; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "RATES: '$r' is not a positive integer"; done
for v in $VARIANTS; do
  case "$v" in timerfd|uring|sends|sqpoll|sqpoll0) ;; *) die "unknown variant '$v'" ;; esac
done
need_tools taskset timeout curl python3 perf
if [ "$TARGET" = delay ]; then need_tools go; else need_tools nginx; fi
export PATH="$PATH:/usr/local/go/bin"
perfops_path "$1"
[ -x "$PERFOPS" ] || die "$PERFOPS is not an executable"
URL="http://127.0.0.1:$PORT/"
RUN_TIMEOUT_S=$((DURATION + 30))
out_dirs
cleanup_at_exit

if [ "$TARGET" = delay ]; then
  start_delay_server
else
  start_nginx "$HERE/nginx.conf" "$URL"
fi
log "$TARGET on CPU $TARGET_CPU, $URL; perfops on CPU $TOOL_CPU: $PERFOPS ($(perfops_git))"

TICKS_KEY=server_ticks
probe_target() { # 0|1 BASE: the server's record of the run into BASE.server.json
  if [ "$TARGET" = delay ]; then delay_server_probe "$@"; else nginx_server_probe "$@"; fi
}
meta_fields() { :; }

env_for() { # VARIANT -> ENVS
  case "$1" in
    timerfd) ENVS=(PERFOPS_PACER=timerfd) ;;
    uring) ENVS=(PERFOPS_PACER=io_uring) ;;
    sends) ENVS=(PERFOPS_PACER=io_uring PERFOPS_URING_WAIT=sends) ;;
    sqpoll) ENVS=(PERFOPS_PACER=io_uring PERFOPS_URING_SQPOLL=1) ;;
    sqpoll0) ENVS=(PERFOPS_PACER=io_uring "PERFOPS_URING_SQPOLL=1@$TARGET_CPU") ;;
  esac
}

for rate in $RATES; do
  for round in $(seq 1 "$ROUNDS"); do
    for v in $VARIANTS; do
      name="r$rate-$round-$v"
      env_for "$v"
      measure_once "$name" perf stat -x, -o "$RAW/$name.perf" \
        -e context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_connect -- \
        env "${ENVS[@]}" "$PERFOPS" quick -r "$rate" -d "${DURATION}s" --workers 1 --json "$RAW/$name.json" "$URL"
      log "$name done"
    done
  done
done

python3 - "$RAW" "$TARGET" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1]); target = sys.argv[2]
print(f"target: {target}")
print("| rate | variant (round) | pacer ran | CPU s/100k | context switches / req | syscalls / req | connects | "
      "rate seen | latency p50 / p99 ms |")
print("|---:|---|---|---:|---:|---:|---:|---:|---|")
key = lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)]
for f in sorted(out.glob("r*.meta.json"), key=key):
    name = f.name[: -len(".meta.json")]
    rate, rnd, v = name[1:].split("-", 2)
    try:
        q = json.loads((out / f"{name}.json").read_text())
        user, sys_ = (out / f"{name}.time").read_text().split()[-3:-1]
    except (OSError, ValueError):
        print(f"| {rate} | {v} ({rnd}) | (no figures) | | | | | | |"); continue
    counts = {}
    for line in (out / f"{name}.perf").read_text().splitlines():
        parts = line.split(",")
        if len(parts) > 2 and parts[0].strip().isdigit():
            counts[parts[2]] = int(parts[0])
    n = max(q.get("completed", 0), 1)
    try:
        seen = json.loads((out / f"{name}.server.json").read_text()).get("arrival_rate", 0)
    except (OSError, ValueError):
        seen = 0
    lat = q.get("latency_ms", {})
    print(f"| {rate} | {v} ({rnd}) | {q.get('generator', {}).get('pacer', '?')} | "
          f"{(float(user) + float(sys_)) / n * 1e5:.2f} | {counts.get('context-switches', 0) / n:.2f} | "
          f"{counts.get('raw_syscalls:sys_enter', 0) / n:.2f} | {counts.get('syscalls:sys_enter_connect', 0)} | "
          f"{seen:,.0f} | {lat.get('p50', 0):.3f} / {lat.get('p99', 0):.3f} |")
PY
echo "raw outputs: $RAW" >&2
