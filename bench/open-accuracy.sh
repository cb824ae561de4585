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
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ "$#" -ge 1 ] || { echo "usage: $0 PERFOPS_BIN [PERFOPS_BIN...]" >&2; exit 2; }
RATES=${RATES:-"2000 10000"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-8}
TARGET_CPU=${TARGET_CPU:-0}
TOOL_CPU=${TOOL_CPU:-1}
SRC="$HERE/../../shared/bench/peers/targets/delayserver.go"
OUT="$HERE/out/open-accuracy-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$OUT"
for b in "$@"; do [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }; done
[ -f "$SRC" ] || { echo "$0: $SRC is missing (../shared/bench/peers)" >&2; exit 1; }
[ -x "$HERE/out/delayserver" ] || go build -o "$HERE/out/delayserver" "$SRC"
if curl -s -o /dev/null http://127.0.0.1:18081/__stats; then
  echo "$0: something already answers on 127.0.0.1:18081" >&2; exit 1
fi
taskset -c "$TARGET_CPU" "$HERE/out/delayserver" -addr 127.0.0.1:18081 -delay 10ms 2>"$OUT/server.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -s -o /dev/null http://127.0.0.1:18081/__stats && break; sleep 0.05; done

for rate in $RATES; do
  for round in $(seq 1 "$ROUNDS"); do
    i=0
    for bin in "$@"; do
      i=$((i + 1))
      name="r$rate-$round-bin$i"
      curl -s -o /dev/null http://127.0.0.1:18081/__reset
      /usr/bin/time -f '%e %U %S %M' -o "$OUT/$name.time" \
        taskset -c "$TOOL_CPU" "$bin" quick -r "$rate" -d "${DURATION}s" --json "$OUT/$name.json" \
        http://127.0.0.1:18081/ >/dev/null 2>"$OUT/$name.err" || true
      curl -s http://127.0.0.1:18081/__stats >"$OUT/$name.server.json"
      echo "[open-accuracy] $name done" >&2
    done
  done
done

python3 - "$OUT" "$@" <<'PY'
import json, sys, pathlib, statistics
out = pathlib.Path(sys.argv[1]); bins = sys.argv[2:]
rows = {}
for f in sorted(out.glob("*.server.json")):
    name = f.name[: -len(".server.json")]
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
echo "raw outputs: $OUT" >&2
