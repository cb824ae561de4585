#!/usr/bin/env bash
# How close perfops' inter-event gaps are to the wire: the testkit's aiohttp-sse server sends
# N events every D ms per stream, `perfops run` reads RATE streams a second for HOLD seconds
# with `stream: true` (open model: events dated by the kernel's receive time), tcpdump captures
# the loopback, and stream-wire.py sets perfops' event_gap_ms against the gaps between the
# event-carrying segments on the wire. Needs tcpdump and the SSE venv that scripts/test makes.
#
#   bench/stream-wire.sh                   # N=50 D=20 RATE=20 HOLD=10
#   PERFOPS=target/release/perfops RATE=50 bench/stream-wire.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PERFOPS=${PERFOPS:-target/debug/perfops}
N=${N:-50} D=${D:-20} RATE=${RATE:-20} HOLD=${HOLD:-10}
venv="$HOME/.cache/perfops-testkit/sse-venv"
out=$(mktemp -d /tmp/stream-wire.XXXXXX)
"$venv/bin/python" crates/perfops-testkit/src/sse_app.py >"$out/port" &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$out/port" ] && break; sleep 0.1; done
port=$(head -1 "$out/port")
tcpdump -i lo -n -s 200 -B 262144 --time-stamp-precision=nano -w "$out/w.pcap" "tcp port $port" 2>"$out/tcpdump.err" &
td=$!
sleep 1
cat >"$out/sse.yaml" <<YAML
name: stream-wire
target: http://127.0.0.1:$port
defaults: { timeout: 30s }
flows: { feed: { steps: [ { name: feed, request: "GET /events?n=$N&every=$D", stream: true } ] } }
load: { stages: [ { rate: $RATE, hold: ${HOLD}s } ] }
YAML
"$PERFOPS" run "$out/sse.yaml" --out "$out/runs" -q --wait-in-flight || true
sleep 0.5
kill -INT $td; wait $td || true
grep -h "dropped by kernel" "$out/tcpdump.err" || true
python3 bench/stream-wire.py "$out/w.pcap" "$port" "$(ls -d "$out"/runs/*/ | head -1)summary.json"
