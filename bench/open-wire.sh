#!/usr/bin/env bash
# The open model judged against the wire (#18): perfops' service time and its latency from
# the intended start, against each exchange's duration read off a loopback capture.
#
#   bench/open-wire.sh BIN [BIN...]                 # e.g. a build before and after a change
#   RATES="10000 20000" ROUNDS=2 DURATION=6 bench/open-wire.sh target/release/perfops
#   PACERS="timerfd io_uring" RATES="10000 20000" bench/open-wire.sh target/release/perfops
#
# For each rate and round, each binary and pacer in turn (alternating; PACERS sets
# PERFOPS_PACER: timerfd, the default, or io_uring, the kernel pacer): the 10 ms delay server
# (../shared/bench/peers/targets/delayserver.go, built into bench/out/) and tcpdump on
# TARGET_CPU, `perfops quick -r RATE -d DURATION --json` on TOOL_CPU; then
# ../shared/bench/wire/wiretruth.py reads every exchange's duration from the capture (first
# request byte to last response byte, as the loopback interface saw them). Printed: the
# wire's p50/p99, perfops' service-time p50/p99 minus the wire's (what its clock adds to an
# exchange) and its latency-from-the-intended-start p50 and p99 minus the wire's (that, plus
# its pacer's lateness), whether that meets the wire-accuracy budget (latency - wire within
# +0.05 ms at p50 and +0.5 ms at p99), the pacer that ran (the summary's generator.pacer:
# timerfd where io_uring is refused), the packets tcpdump dropped (want 0) and the
# server-seen rate. Then, from the same capture (lib/wire_lateness.py), where the latency from
# the intended start goes beyond the wire's exchange: each arrival's lateness (its SYN, or its
# request on a kept connection, against start + k/rate) and, for one that opened a connection,
# its connect.
# Each run holds LOCK (/tmp/bench.lock) from the capture's start to its end. Only 127.0.0.1
# is contacted; the server and tcpdump are stopped by their PIDs. Needs tcpdump (apt-get
# install tcpdump).
#
# Knobs (env): RATES="2000 10000 20000"  ROUNDS=2  DURATION=6  PACERS=timerfd  PORT=18084  TARGET_CPU=0
#              TOOL_CPU=1  LOCK=/tmp/bench.lock  LOCK_WAIT_S  QUIET_MAX_S
#              KEEP_PCAP=1 (keep each run's capture, RAW/NAME.pcap: ~50 MB a run at 20,000/s for 6 s)
# Each run is measured once (lib/common.sh's `measure_once`): tcpdump's own CPU during the
# run would make every run look noisy to `measure`, which would redo it.
# Output: the table on stdout; raw outputs in bench/out/open-wire-<UTC stamp>/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=open-wire
[ "$#" -ge 1 ] || { echo "usage: $0 PERFOPS_BIN [PERFOPS_BIN...]" >&2; exit 2; }
DURATION=${DURATION:-6}
ROUNDS=${ROUNDS:-2}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"   # TARGET_CPU TOOL_CPU LOCK* QUIET_MAX_S helpers

RATES=${RATES:-"2000 10000 20000"}
PACERS=${PACERS:-timerfd}
PORT=${PORT:-18084}
need_ints DURATION ROUNDS PORT TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S
need_positive DURATION ROUNDS PORT
for r in $RATES; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "RATES: '$r' is not a positive integer"; done
for p in $PACERS; do [[ $p =~ ^(timerfd|io_uring)$ ]] || die "PACERS: '$p' is neither timerfd nor io_uring"; done
need_tools taskset timeout curl python3 go
WIRE="$HERE/../../shared/bench/wire/wiretruth.py"
URL="http://127.0.0.1:$PORT/"
STATS_URL="http://127.0.0.1:$PORT/__stats"
RUN_TIMEOUT_S=$((DURATION + 30))
for b in "$@"; do [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }; done
[ -f "$WIRE" ] || die "$WIRE is missing (../shared/bench)"
command -v tcpdump >/dev/null || die "tcpdump not found (apt-get install tcpdump)"

out_dirs
cleanup_at_exit
TD=""
stop_capture() { # the capture we started, by PID
  if [ -n "$TD" ]; then kill -INT "$TD" 2>/dev/null || true; wait "$TD" 2>/dev/null || true; TD=""; fi
}
# The capture first, then lib/common.sh's cleanup (the server, by PID) with the script's status.
trap 'rc=$?; stop_capture; (exit "$rc"); cleanup' EXIT

start_delay_server

TICKS_KEY=server_ticks
probe_target() { # 0|1 BASE, under the lock: reset the server and start the capture before;
  # after, let the last segments reach it, stop it and read the server's record
  if [ "$1" = 0 ]; then
    curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/__reset" || true
    taskset -c "$TARGET_CPU" tcpdump -i lo -n -s 96 -B 262144 --time-stamp-precision=nano \
      -w "$2.pcap" "tcp port $PORT" 2>"$2.tcpdump" 9>&- &
    TD=$!
    sleep 1
  else
    sleep 0.5
    stop_capture
    curl -s --max-time 5 "$STATS_URL" >"$2.server.json" 2>/dev/null || true
  fi
}
meta_fields() { :; }

for rate in $RATES; do
  for round in $(seq 1 "$ROUNDS"); do
    i=0
    for bin in "$@"; do
      i=$((i + 1))
      for pacer in $PACERS; do
        name="r$rate-$round-bin$i-$pacer"
        measure_once "$name" env PERFOPS_PACER="$pacer" "$bin" quick -r "$rate" -d "${DURATION}s" \
          --json "$RAW/$name.json" "$URL"
        python3 "$WIRE" "$RAW/$name.pcap" "$PORT" >"$RAW/$name.wire.json" || true
        python3 "$HERE/lib/wire_lateness.py" "$RAW/$name.pcap" "$PORT" "$rate" >"$RAW/$name.late.json" || true
        [ -n "${KEEP_PCAP:-}" ] || rm -f "$RAW/$name.pcap"
        log "$name done"
      done
    done
  done
done

python3 - "$RAW" "$@" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1]); bins = sys.argv[2:]
def runs(ext):
    """Each run's file of this kind, in natural order: (file, name, rate, round, binary, pacer)."""
    key = lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.name)]
    for f in sorted(out.glob(f"*{ext}"), key=key):
        name = f.name[: -len(ext)]
        rate, rnd, b, pacer = name[1:].split("-")
        yield f, name, rate, rnd, bins[int(b[3:]) - 1], pacer
print("| rate | binary | pacer ran | wire p50 / p99 ms | service - wire p50 / p99 ms | latency - wire p50 / p99 ms | "
      "within +0.05 / +0.5 ms | CPU s/100k | dropped by tcpdump | server-seen rate |")
print("|---:|---|---|---|---|---|---|---:|---:|---:|")
for f, name, rate, rnd, binary, pacer in runs(".wire.json"):
    label = f"{binary} {pacer}"
    try:
        w = json.loads(f.read_text()); q = json.loads((out / f"{name}.json").read_text())
        srv = json.loads((out / f"{name}.server.json").read_text())
    except (OSError, ValueError):
        print(f"| {rate} | {label} | | (no figures) | | | | | | |"); continue
    user, sys_ = (out / f"{name}.time").read_text().split()[-3:-1]
    cpu = (float(user) + float(sys_)) / max(q["completed"], 1) * 1e5
    drop = re.search(r"(\d+) packets? dropped by kernel", (out / f"{name}.tcpdump").read_text())
    lat, svc = q["latency_ms"], q["service_ms"]
    d50, d99 = lat["p50"] - w["p50_ms"], lat["p99"] - w["p99_ms"]
    ran = q.get("generator", {}).get("pacer", "?")
    print(f"| {rate} | {label} (round {rnd}) | {ran} | {w['p50_ms']:.3f} / {w['p99_ms']:.3f} | "
          f"{svc['p50'] - w['p50_ms']:+.3f} / {svc['p99'] - w['p99_ms']:+.3f} | "
          f"{d50:+.3f} / {d99:+.3f} | {'yes' if d50 <= 0.05 else 'no'} / {'yes' if d99 <= 0.5 else 'no'} | "
          f"{cpu:.2f} | {drop.group(1) if drop else '?'} | {srv.get('arrival_rate', 0):,.1f} |")
print()
print("Where latency from the intended start goes (lib/wire_lateness.py, from the capture): each arrival's")
print("lateness (its SYN or request left vs. start + k/rate), the connect of those that opened a connection,")
print("and the two added (what latency adds to the wire's exchange), for all and for kept connections alone;")
print("then the arrivals late past 0.5 ms, grouped in episodes (less than 2 ms apart), the latest of them,")
print("and the share of them in an episode that opened 10 connections or more (a connection storm).")
print()
print("| rate | binary | late p50 / p99 ms | connected | connect p50 / p99 ms | added p99 ms, all / kept | "
      "of the added tail, connected | late > 0.5 ms: arrivals, episodes, latest ms | of them, in storms |")
print("|---:|---|---|---:|---|---|---:|---|---:|")
for f, name, rate, rnd, binary, pacer in runs(".late.json"):
    try:
        w = json.loads(f.read_text())
    except ValueError:
        continue
    c = w["connect"] or {"p50_ms": 0, "p99_ms": 0}
    print(f"| {rate} | {binary} {pacer} (round {rnd}) | {w['late']['p50_ms']:.3f} / {w['late']['p99_ms']:.3f} | "
          f"{w['connected']:,} of {w['arrivals']:,} | {c['p50_ms']:.3f} / {c['p99_ms']:.3f} | "
          f"{w['ahead']['p99_ms']:.3f} / {w['ahead_kept']['p99_ms']:.3f} | {w['tail_connected_share']:.0%} | "
          f"{w['late_over_budget']:,}, {w['episodes']}, {w['episode_late_max_ms']:.2f} | "
          f"{w['over_budget_in_storms_share'] or 0:.0%} |")
PY
echo "raw outputs: $RAW" >&2
