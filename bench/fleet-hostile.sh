#!/usr/bin/env bash
# Issue #31: `perfops coordinator` under 1000 hostile connections, on 127.0.0.1 only.
#
#   bench/fleet-hostile.sh [BIN]          # BIN: target/release/perfops by default
#   MODE=plain bench/fleet-hostile.sh OLD # a perfops from before #31 (plain-text channel)
#
# While one real agent joins and runs a 3 s load against `perfops demo`, a
# client opens 1000 connections to the coordinator: 500 idle, 24 that send
# a frame one byte short of 16 MiB (after a TLS handshake when MODE=tls),
# 476 that send 4 KiB of garbage; it holds them for HOLD seconds (15). The
# coordinator's peak RSS (VmHWM) and thread count are sampled every 50 ms
# from /proc. Prints one line of figures; every process is bounded in time
# and stopped by its PID.
set -euo pipefail
BIN=${1:-target/release/perfops}
MODE=${MODE:-tls}
HOLD=${HOLD:-15}
TOKEN=9b1f3ac47e2d8065f1c3a9be47d20c58
OUT=$(mktemp -d /tmp/fleet-hostile.XXXXXX)
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

"$BIN" demo --listen 127.0.0.1:0 >"$OUT/demo.out" 2>/dev/null & pids+=($!)
for _ in $(seq 50); do [ -s "$OUT/demo.out" ] && break; sleep 0.1; done
URL=$(head -1 "$OUT/demo.out" | awk '{print $NF}')
cat >"$OUT/s.yaml" <<YAML
name: hostile
target: $URL
flows:
  r:
    steps:
      - { name: health, request: GET /health }
load:
  model: open
  stages:
    - { rate: 20, hold: 3s }
YAML
PORT=$(free_port)
# Not under timeout(1): its own PID is what /proc is read for. A watchdog bounds it instead.
"$BIN" coordinator "$OUT/s.yaml" --agents 1 --listen "127.0.0.1:$PORT" --token "$TOKEN" \
    --join-timeout 90s --workers 1 --out "$OUT/runs" -q >"$OUT/coord.out" 2>"$OUT/coord.err" & coord=$!
pids+=($coord)
(sleep 150; kill "$coord" 2>/dev/null) & pids+=($!)
python3 - "$coord" >"$OUT/samples" <<'PY' & pids+=($!)
import sys, time
pid = sys.argv[1]
hwm = threads = 0
while True:
    try:
        status = open(f"/proc/{pid}/status").read()
    except OSError:
        break
    for line in status.splitlines():
        if line.startswith("VmHWM:"): hwm = max(hwm, int(line.split()[1]))
        if line.startswith("Threads:"): threads = max(threads, int(line.split()[1]))
    if "State:\tZ" in status: break
    print(hwm, threads, flush=True)
    time.sleep(0.05)
PY
sleep 1
timeout 120 python3 - "$MODE" "$PORT" "$HOLD" >"$OUT/hostile.out" 2>&1 <<'PY' & pids+=($!)
import socket, ssl, sys, threading, time
mode, port, hold = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
held, failed = [], 0
near_full = (16 << 20).to_bytes(4, "big") + b"\x02" + b"\x5a" * ((16 << 20) - 2)
def big():
    global failed
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if mode == "tls": s = ctx.wrap_socket(s)
        s.settimeout(30)
        held.append(s); s.sendall(near_full)
    except OSError: failed += 1
threads = []
for i in range(1000):
    try:
        if i % 40 == 0 and len(threads) < 24:
            t = threading.Thread(target=big); t.start(); threads.append(t); continue
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        if i % 2 == 0: s.sendall(b"\xff" * 4096)
        held.append(s)
    except OSError: failed += 1
for t in threads: t.join(60)
print(f"opened {len(held)} held, {failed} failed at once", flush=True)
time.sleep(hold)
PY
sleep 0.5
JOIN="https://127.0.0.1:$PORT"; [ "$MODE" = plain ] && JOIN="http://127.0.0.1:$PORT"
PERFOPS_TOKEN=$TOKEN timeout 120 "$BIN" agent --join "$JOIN" --connect-timeout 60s --name real-agent \
    >"$OUT/agent.out" 2>"$OUT/agent.err" & agent=$!
pids+=($agent)
agent_rc=0; wait "$agent" || agent_rc=$?
coord_rc=0; wait "$coord" || coord_rc=$?
sleep 0.2
read -r hwm threads < <(tail -1 "$OUT/samples")
panics=$(grep -c panicked "$OUT/coord.err" || true)
echo "mode=$MODE peak_rss_mib=$((hwm / 1024)) peak_threads=$threads coordinator_exit=$coord_rc agent_exit=$agent_rc" \
     "panics=$panics stderr_lines=$(wc -l <"$OUT/coord.err") hostile: $(cat "$OUT/hostile.out")"
echo "files in $OUT"
