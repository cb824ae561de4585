#!/usr/bin/env bash
# Where an open-model request's CPU goes (#18), perfops beside oha: per tool and rate,
# against the 10 ms delay server (../shared/bench/peers/targets/delayserver.go):
#   1. `perf stat` of the tool: CPU, context switches and the syscalls it makes, per request
#      (the server's count), and of the server meanwhile: its context switches (wake-ups)
#      and CPU per request;
#   2. `perf record -g` of the tool (kernel samples included): its top entries by self time
#      and the syscalls by children, written as perf report text.
#
#   bench/open-profile.sh BIN [BIN...]            # perfops binaries (before, after), and oha
#   RATES="10000 20000" DURATION=4 TOOLS="oha" bench/open-profile.sh BIN
#
# Each run is pinned (server on TARGET_CPU, tool and perf on TOOL_CPU), holds LOCK
# (/tmp/bench.lock) after waiting for a quiet machine, and is bounded by `timeout`. Only
# 127.0.0.1 is contacted; the server is stopped by its PID. Needs Debian's linux-perf.
# Output: bench/out/open-profile-<stamp>/ (NAME.stat, NAME.server.stat, NAME.report,
# NAME.syscalls) and a summary table on stdout and in bench/out/open-profile-<stamp>.md.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=open-profile
DURATION=${DURATION:-4}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"
RATES=${RATES:-"10000 20000"}
TOOLS=${TOOLS:-oha}
PORT=${PORT:-18085}
FREQ=${FREQ:-4999}
need_ints DURATION PORT TARGET_CPU TOOL_CPU FREQ
need_tools taskset timeout curl python3 go perf
[ "$#" -ge 1 ] || die "usage: $0 PERFOPS_BIN [PERFOPS_BIN...]"
for b in "$@"; do [ -x "$b" ] || die "$b is not an executable"; done
export PATH="$PATH:$HOME/go/bin:$HOME/.cargo/bin"
OHA=${OHA:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}
URL="http://127.0.0.1:$PORT/"
STATS_URL="http://127.0.0.1:$PORT/__stats"
RUN_TIMEOUT_S=$((DURATION + 30))
out_dirs
cleanup_at_exit
start_delay_server

# The syscalls an open-model client may make per request (either tool).
SYSCALLS="sendto write writev recvfrom recvmsg read readv epoll_wait epoll_pwait epoll_pwait2 clock_nanosleep nanosleep timerfd_settime futex sched_yield io_uring_enter"
EVENTS="task-clock,context-switches,cpu-migrations,raw_syscalls:sys_enter"
for s in $SYSCALLS; do EVENTS="$EVENTS,syscalls:sys_enter_$s"; done

argv_for() { # TOOL RATE -> ARGV
  local conns=$(( $2 / 50 > 100 ? $2 / 50 : 100 ))
  case "$1" in
    oha) ARGV=("$OHA" -q "$2" --latency-correction -z "${DURATION}s" -c "$conns" --no-tui --output-format json "$URL") ;;
    *) ARGV=("$1" quick -r "$2" -d "${DURATION}s" --json "$RAW/$NAME.json" "$URL") ;;
  esac
}

SPERF=""
run_one() { # KIND(stat|record) NAME ARGV...
  local kind=$1 name=$2; shift 2
  lock_take
  wait_quiet >/dev/null
  curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/__reset" || true
  if [ "$kind" = stat ]; then
    perf stat -x, -e task-clock,context-switches -p "$TARGET_PID" -o "$RAW/$name.server.stat" 9>&- &
    SPERF=$!
    sleep 0.2
    run_child timeout -k 5 "$RUN_TIMEOUT_S" taskset -c "$TOOL_CPU" perf stat -x, -e "$EVENTS" -o "$RAW/$name.stat" \
      "$@" >"$RAW/$name.out" 2>"$RAW/$name.err" </dev/null 9>&- || log "$name: exit $?"
    kill -INT "$SPERF" 2>/dev/null || true; wait "$SPERF" 2>/dev/null || true; SPERF=""
  else
    run_child timeout -k 5 "$RUN_TIMEOUT_S" taskset -c "$TOOL_CPU" perf record -q -g -F "$FREQ" -o "$RAW/$name.data" \
      "$@" >"$RAW/$name.out" 2>"$RAW/$name.err" </dev/null 9>&- || log "$name: exit $?"
  fi
  curl -s --max-time 5 "$STATS_URL" >"$RAW/$name.$kind.server.json" 2>/dev/null || true
  lock_drop
  sleep 1
}

tools=("$@")
for t in $TOOLS; do tools+=("$t"); done
for rate in $RATES; do
  i=0
  for t in "${tools[@]}"; do
    i=$((i + 1))
    label=$([ "$t" = oha ] && echo oha || echo "bin$i")
    NAME="r$rate.$label"
    argv_for "$t" "$rate"
    log "$rate/s $label: perf stat"
    run_one stat "$NAME" "${ARGV[@]}"
    log "$rate/s $label: perf record"
    NAME="r$rate.$label.rec"
    argv_for "$t" "$rate"
    run_one record "$NAME" "${ARGV[@]}"
    nice -n 19 perf report -i "$RAW/$NAME.data" --no-children --sort sym --stdio -g none --percent-limit 1 \
      >"$RAW/$NAME.report" 2>/dev/null || true
    nice -n 19 perf report -i "$RAW/$NAME.data" --children --sort sym --stdio -g none --percent-limit 2 \
      2>/dev/null | grep -E '__x64_sys_|do_syscall_64|\[k\] (__sys_|__do_sys)' >"$RAW/$NAME.syscalls" || true
    rm -f "$RAW/$NAME.data.old"
  done
done
printf '%s\n' "${tools[@]}" >"$RAW/tools.txt"
python3 - "$RAW" "$REPORT" <<'EOF'
import json, os, re, sys
raw, report = sys.argv[1], sys.argv[2]
tools = open(os.path.join(raw, "tools.txt")).read().split("\n")
rows = []
names = sorted({f.split(".stat")[0] for f in os.listdir(raw) if f.endswith(".stat") and ".server" not in f})
def stat(path):
    out = {}
    for line in open(path):
        parts = line.strip().split(",")
        if len(parts) < 3 or line.startswith("#"):
            continue
        try:
            v = float(parts[0])
        except ValueError:
            continue
        out[parts[2]] = v
    return out
lines = ["| run | requests | CPU µs/req | ctx sw/req | syscalls/req | of which | server ctx sw/req | server CPU µs/req |",
         "|---|---:|---:|---:|---:|---|---:|---:|"]
for n in names:
    try:
        s = stat(os.path.join(raw, n + ".stat"))
        sv = stat(os.path.join(raw, n + ".server.stat"))
        count = json.load(open(os.path.join(raw, n + ".stat.server.json"))).get("requests") or 0
    except (OSError, ValueError):
        continue
    if not count:
        continue
    per = lambda v: v / count
    sc = {k.split("sys_enter_")[1]: per(v) for k, v in s.items() if "sys_enter_" in k and per(v) >= 0.01}
    of = ", ".join(f"{k} {v:.2f}" for k, v in sorted(sc.items(), key=lambda kv: -kv[1]))
    lines.append(f"| {n} | {count} | {per(s.get('task-clock', 0)) * 1e3:.1f} | {per(s.get('context-switches', 0)):.2f} | "
                 f"{per(s.get('raw_syscalls:sys_enter', 0)):.2f} | {of} | {per(sv.get('context-switches', 0)):.2f} | "
                 f"{per(sv.get('task-clock', 0)) * 1e3:.1f} |")
text = "\n".join(lines) + "\n"
for n in sorted(f for f in os.listdir(raw) if f.endswith(".report")):
    top = [l.rstrip() for l in open(os.path.join(raw, n)) if re.match(r"\s+\d+\.\d+%", l)][:12]
    text += f"\n{n} (self):\n" + "\n".join(top) + "\n"
open(report, "w").write(text)
print(text)
EOF
log "raw outputs: $RAW"
