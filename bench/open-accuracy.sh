#!/usr/bin/env bash
# Open-model accuracy: perfops' latency against a server that measures itself.
#
#   bench/open-accuracy.sh BIN [BIN...]        # e.g. a build before and after a change
#   RATES="2000 10000" ROUNDS=3 DURATION=8 bench/open-accuracy.sh target/release/perfops
#
# The target is ../shared/bench/peers/targets/delayserver.go (built here with go into
# bench/out/): it answers every request after 10 ms and records its own handler time.
# It runs pinned to TARGET_CPU (0), each perfops to TOOL_CPU (1), alternating the
# binaries within a round. For each run: `perfops quick -r RATE -d DURATION --json`
# against http://127.0.0.1:18081/, then the server's /__stats. The figure that matters
# is perfops' p50 and p99 minus the server's own (the part perfops adds: loopback, its
# pacer and its clock), and the CPU perfops used per 100k requests (/usr/bin/time).
# Only 127.0.0.1 is contacted; the server is stopped by its PID.
#
# Knobs (env): RATES="2000 10000"  ROUNDS=3  DURATION=8  PORT=18081  TARGET_CPU=0  TOOL_CPU=1
#              LOCK=/tmp/bench.lock (held for each measured run)  LOCK_WAIT_S  QUIET_MAX_S
#              NOISE_MAX_S  NOISE_RETRIES (a run during which other processes used the CPU
#              is redone, as lib/common.sh's `measure` does for every script)
# Output: the table on stdout; raw outputs in bench/out/open-accuracy-<UTC stamp>/.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=open-accuracy
[ "$#" -ge 1 ] || { echo "usage: $0 PERFOPS_BIN [PERFOPS_BIN...]" >&2; exit 2; }
DURATION=${DURATION:-8}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"   # ROUNDS TARGET_CPU TOOL_CPU LOCK* QUIET_MAX_S NOISE_* helpers

RATES=${RATES:-"2000 10000"}
PORT=${PORT:-18081}
need_ints DURATION ROUNDS PORT TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S NOISE_RETRIES
need_positive DURATION ROUNDS PORT
need_numbers NOISE_MAX_S
for r in $RATES; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "RATES: '$r' is not a positive integer"; done
need_tools taskset timeout curl python3 go
for b in "$@"; do [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }; done
URL="http://127.0.0.1:$PORT/"
RUN_TIMEOUT_S=$((DURATION + 30))

out_dirs
cleanup_at_exit

start_delay_server

RUN_EXTS="out err time meta.json json server.json"
TOOL_EXTS="json"
TICKS_KEY=server_ticks
probe_target() { delay_server_probe "$@"; }
meta_fields() { :; }

for rate in $RATES; do
  for round in $(seq 1 "$ROUNDS"); do
    i=0
    for bin in "$@"; do
      i=$((i + 1))
      name="r$rate-$round-bin$i"
      measure "$name" "$bin" quick -r "$rate" -d "${DURATION}s" --json "$RAW/$name.json" "$URL"
      log "$name done"
    done
  done
done

python3 - "$RAW" "$@" <<'PY'
import json, sys, pathlib, statistics
out = pathlib.Path(sys.argv[1]); bins = sys.argv[2:]
rows = {}
for f in sorted(out.glob("*.server.json")):
    name = f.name[: -len(".server.json")]
    if ".noisy" in name:  # an attempt redone because the machine was busy (lib/common.sh)
        continue
    rate, rnd, b = name[1:].split("-")
    srv = json.loads(f.read_text())
    mine = json.loads((out / f"{name}.json").read_text())
    wall, user, sys_, rss = (out / f"{name}.time").read_text().split()[-4:]
    lat = mine["latency_ms"] if "latency_ms" in mine else mine["total"]["latency_ms"]
    done = mine.get("completed") or mine["total"]["completed"]
    cpu = (float(user) + float(sys_)) / max(done, 1) * 1e5
    rows.setdefault((int(rate), int(b[3:])), []).append(
        (lat["p50"] - srv["p50_ms"], lat["p99"] - srv["p99_ms"], cpu, srv.get("arrival_rate", 0), done))
print(f"| rate | binary | p50 - server's (ms) | p99 - server's (ms) | CPU s/100k | server-seen rate | answered |")
print("|---:|---|---|---|---|---|---:|")
for (rate, b), rs in sorted(rows.items()):
    fmt = lambda xs, d=2: " / ".join(f"{x:+.{d}f}" if d == 2 else f"{x:.{d}f}" for x in xs)
    print(f"| {rate} | {bins[b-1]} | {fmt([r[0] for r in rs])} | {fmt([r[1] for r in rs])} | "
          f"{' / '.join(f'{r[2]:.2f}' for r in rs)} | {' / '.join(f'{r[3]:.0f}' for r in rs)} | "
          f"{' / '.join(str(r[4]) for r in rs)} |")
PY
echo "raw outputs: $RAW" >&2
