#!/usr/bin/env bash
# Many generators (issue #13, part 4): the two figures of `perfops coordinator` / `perfops agent`.
# A benchmark, not a test: run it on a quiet machine.
#
#   bench/fleet.sh [PERFOPS_BIN]     # default: <repo>/target/release/perfops
#
# 1. Start spread. A coordinator and SPREAD_AGENTS agents (separate processes, --workers 1) run
#    an open load of SPREAD_RATE arrivals/s for 1 s against a small Python server on
#    127.0.0.1 that logs the wall-clock arrival of each request head `GET /r/${seq}`.
#    Arrival k is agent (k mod N)'s, due at k/SPREAD_RATE after the common start, so the
#    first arrival of agent i is arrival i; its lateness is (seen_i - seen_0) - i/SPREAD_RATE.
#    Spread = max - min of the lateness of arrivals 0..N-1 (all agents on one machine: the
#    start mechanics, without clock offsets; across machines add their measured offsets,
#    written per agent in agents.jsonl). Bound: <= 5 ms. Repeated SPREAD_ROUNDS times.
# 2. Coordinator scale, by simulation. One real agent records its seconds (--record-seconds,
#    wire frames) while it runs REC_RATE/s for REC_SECONDS s against `perfops demo --model
#    async`; then SIM_AGENTS agents replay them (--replay-seconds: no requests, the recorded
#    seconds re-sent one per second) into one coordinator for SIM_SECONDS s. Measured on the
#    coordinator: CPU (utime+stime from /proc/PID/stat over the load's SIM_SECONDS, as a share
#    of one core), peak RSS (VmHWM), and that every second was merged: series.jsonl has
#    SIM_SECONDS lines, each with SIM_AGENTS x the recorded second's count, and agents.jsonl
#    SIM_SECONDS x SIM_AGENTS second lines and no lost agent. Bounds: <= 10 % of one core,
#    <= 200 MiB.
#
# Only 127.0.0.1 is contacted; every process started here is stopped by its PID.
# Knobs (env): SPREAD_AGENTS=4 SPREAD_RATE=200 SPREAD_ROUNDS=3 REC_RATE=2000 REC_SECONDS=10
#              SIM_AGENTS=200 SIM_SECONDS=60 PORT=17170 LOCK=/tmp/bench.lock (LOCK= disables)
# Output: markdown on stdout; raw outputs in bench/out/fleet-<UTC stamp>/.
# Exit status: 0 both bounds held; 3 a bound failed or a run did not complete; 1 setup error.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/target/release/perfops}
SPREAD_AGENTS=${SPREAD_AGENTS:-4}
SPREAD_RATE=${SPREAD_RATE:-200}
SPREAD_ROUNDS=${SPREAD_ROUNDS:-3}
REC_RATE=${REC_RATE:-2000}
REC_SECONDS=${REC_SECONDS:-10}
SIM_AGENTS=${SIM_AGENTS:-200}
SIM_SECONDS=${SIM_SECONDS:-60}
PORT=${PORT:-17170}
LOCK=${LOCK-/tmp/bench.lock}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$ROOT/bench/out/fleet-$STAMP
mkdir -p "$OUT"
[ -x "$BIN" ] || { echo "no perfops binary at $BIN (cargo build --release)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is needed for the arrival logger" >&2; exit 1; }
if [ -n "$LOCK" ]; then
    exec 9>"$LOCK"
    flock -w 600 9 || { echo "could not take $LOCK" >&2; exit 1; }
fi
# 128 bits at least: a weaker token is refused (#31).
export PERFOPS_TOKEN=$(python3 -c "import secrets; print(secrets.token_hex(16))")
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
status=0

# ---------------------------------------------------------------- 1. start spread
# One thread, one selector, no per-connection thread to start. A request head is stamped with
# the kernel's receive time of its bytes (SO_TIMESTAMPNS, the wall clock all processes here
# share), not when this script got round to reading it: a logger woken a few ms late by the
# scheduler (2 cores, 4 agents and a coordinator waking at the same instant) must not be
# taken for a late agent. Without the kernel's stamp (no cmsg), time.time() at the read.
cat >"$OUT/arrivals.py" <<'PY'
import selectors, socket, struct, sys, time
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
sel = selectors.DefaultSelector()
log = open(sys.argv[2], "a", buffering=1)
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(sys.argv[1]))); srv.listen(1024); srv.setblocking(False)
sel.register(srv, selectors.EVENT_READ, None)
bufs = {}
while True:
    for key, _ in sel.select():
        if key.data is None:
            c, _ = srv.accept(); c.setblocking(False)
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            sel.register(c, selectors.EVENT_READ, True); bufs[c] = b""
            continue
        c = key.fileobj
        try:
            data, anc, _, _ = c.recvmsg(65536, socket.CMSG_SPACE(16))
        except OSError:
            data, anc = b"", []
        t = time.time()
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                sec, nsec = struct.unpack("qq", raw[:16]); t = sec + nsec / 1e9
        if not data:
            sel.unregister(c); c.close(); bufs.pop(c, None); continue
        bufs[c] += data
        while b"\r\n\r\n" in bufs[c]:
            head, bufs[c] = bufs[c].split(b"\r\n\r\n", 1)
            path = head.split(b" ", 2)[1].decode()
            log.write(f"{t:.6f} {path}\n")
            try:
                c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            except OSError:
                pass
PY
APORT=$((PORT + 1))
python3 "$OUT/arrivals.py" "$APORT" "$OUT/arrivals.log" 2>"$OUT/arrivals.err" & PIDS+=($!)
sleep 0.5
cat >"$OUT/spread.yaml" <<EOF
name: fleet-spread
target: http://127.0.0.1:$APORT
flows:
  r:
    steps:
      - { name: r, request: "GET /r/\${seq}" }
load:
  model: open
  stages:
    - { rate: $SPREAD_RATE, hold: 1s }
EOF
SPREADS=()
for round in $(seq 1 "$SPREAD_ROUNDS"); do
    : >"$OUT/arrivals.log"
    "$BIN" coordinator "$OUT/spread.yaml" --agents "$SPREAD_AGENTS" --listen "127.0.0.1:$PORT" \
        --out "$OUT/runs" --workers 1 -q >"$OUT/spread-$round.out" 2>"$OUT/spread-$round.err" & coord=$!
    PIDS+=($coord)
    agents=()
    for i in $(seq 0 $((SPREAD_AGENTS - 1))); do
        "$BIN" agent --join "https://127.0.0.1:$PORT" --index "$i" 2>"$OUT/spread-$round-agent$i.err" & agents+=($!)
        PIDS+=($!)
    done
    # Its verdict is not the point (the logger is slow); the arrivals it logged are.
    wait "$coord" || true
    for a in "${agents[@]}"; do wait "$a" || true; done
    s=$(python3 - "$OUT/arrivals.log" "$SPREAD_AGENTS" "$SPREAD_RATE" <<'PY'
import sys
n, rate = int(sys.argv[2]), float(sys.argv[3])
seen = {}
for line in open(sys.argv[1]):
    t, path = line.split()
    seq = int(path.rsplit("/", 1)[1])
    seen.setdefault(seq, float(t))
late = [(seen[k] - seen[0]) - k / rate for k in range(n) if k in seen]
print(f"{(max(late) - min(late)) * 1000:.2f}" if len(late) == n else "nan")
PY
)
    SPREADS+=("$s")
done

# ---------------------------------------------------------------- 2. coordinator scale
DPORT=$((PORT + 2))
"$BIN" demo --model async --listen "127.0.0.1:$DPORT" --io-wait 10ms --cpu-work 50us >/dev/null 2>&1 & PIDS+=($!)
sleep 0.5
# health_scenario NAME SECONDS: REC_RATE/s of GET /health against the demo for SECONDS.
health_scenario() {
    cat >"$OUT/$1.yaml" <<EOF
name: fleet-$1
target: http://127.0.0.1:$DPORT
flows:
  health:
    steps:
      - { name: health, request: GET /health }
load:
  model: open
  stages:
    - { rate: $REC_RATE, hold: ${2}s }
EOF
}
health_scenario record "$REC_SECONDS"
"$BIN" coordinator "$OUT/record.yaml" --agents 1 --listen "127.0.0.1:$PORT" --out "$OUT/runs" -q \
    >"$OUT/record.out" 2>"$OUT/record.err" & coord=$!
PIDS+=($coord)
"$BIN" agent --join "https://127.0.0.1:$PORT" --record-seconds "$OUT/seconds.bin" 2>"$OUT/record-agent.err" || true
wait "$coord" || true
health_scenario sim "$SIM_SECONDS"
"$BIN" coordinator "$OUT/sim.yaml" --agents "$SIM_AGENTS" --listen "127.0.0.1:$PORT" --out "$OUT/sim" -q \
    --join-timeout 300s >"$OUT/sim.out" 2>"$OUT/sim.err" & coord=$!
PIDS+=($coord)
for i in $(seq 1 "$SIM_AGENTS"); do
    "$BIN" agent --join "https://127.0.0.1:$PORT" --replay-seconds "$OUT/seconds.bin" --name "sim-$i" \
        2>>"$OUT/sim-agents.err" & PIDS+=($!)
done
# CPU over the load only: from the results directory's first second to the coordinator's exit.
ticks() { awk '{print $14 + $15}' "/proc/$coord/stat" 2>/dev/null || echo 0; }
until ls "$OUT"/sim/*/series.jsonl >/dev/null 2>&1 || ! kill -0 "$coord" 2>/dev/null; do sleep 0.2; done
t0=$(date +%s.%N); c0=$(ticks); hwm=0; c1=$c0; t1=$t0
while kill -0 "$coord" 2>/dev/null; do
    h=$(awk '/VmHWM/ {print $2}' "/proc/$coord/status" 2>/dev/null || echo 0)
    [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
    c=$(ticks); [ "$c" -gt 0 ] && { c1=$c; t1=$(date +%s.%N); }
    sleep 0.5
done
wait "$coord" || { echo "the simulated run did not pass (see $OUT/sim.err)" >&2; status=3; }
HZ=$(getconf CLK_TCK)
python3 - "$OUT" "$SIM_AGENTS" "$SIM_SECONDS" "$c0" "$c1" "$t0" "$t1" "$HZ" "$hwm" "${SPREADS[*]}" <<'PY' || status=3
import glob, json, sys
out, agents, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
c0, c1, t0, t1, hz, hwm_kib = int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), int(sys.argv[8]), int(sys.argv[9])
spreads = [float(s) for s in sys.argv[10].split()]
rec = [l for l in (json.loads(x) for x in open(glob.glob(f"{out}/runs/*fleet-record*/series.jsonl")[0])) if l["length_s"] == 1.0]
d = glob.glob(f"{out}/sim/*/")[0]
series = [json.loads(x) for x in open(d + "series.jsonl")]
lines = [json.loads(x) for x in open(d + "agents.jsonl")]
whole = [l for l in series if l["length_s"] == 1.0]
agent_seconds = sum(1 for l in lines if l["event"] == "second")
lost = [l for l in lines if l["event"] in ("lost", "missed")]
cpu = (c1 - c0) / hz / max(t1 - t0, 1e-9)
ok_merge = len(whole) >= seconds and agent_seconds == agents * seconds and not lost
ok_cpu, ok_mem = cpu <= 0.10, hwm_kib / 1024 <= 200
ok_spread = bool(spreads) and max(spreads) <= 5.0
print(f"## fleet ({out.rsplit('/', 1)[1]})\n")
print("| figure | measured | bound | |\n|---|---|---|---|")
print(f"| start spread, first arrivals of the agents (per round) | {', '.join(f'{s:.2f} ms' for s in spreads)} | <= 5 ms | {'pass' if ok_spread else 'FAIL'} |")
print(f"| coordinator CPU, {agents} simulated agents, {seconds} s | {cpu * 100:.1f} % of one core | <= 10 % | {'pass' if ok_cpu else 'FAIL'} |")
print(f"| coordinator peak RSS (VmHWM) | {hwm_kib / 1024:.1f} MiB | <= 200 MiB | {'pass' if ok_mem else 'FAIL'} |")
print(f"| seconds merged | {len(whole)} whole seconds, {agent_seconds} agent-seconds of {agents * seconds}, {len(lost)} lost/missed | all | {'pass' if ok_merge else 'FAIL'} |")
print(f"\nrecorded seconds: {len(rec)} at ~{sum(l['sent'] for l in rec) / max(len(rec), 1):.0f} requests each; merged second count: {series[len(series) // 2]['latency_ms']['count']} (x{agents})")
sys.exit(0 if ok_merge and ok_cpu and ok_mem and ok_spread else 3)
PY
exit $status
