#!/usr/bin/env bash
# What pushing every second to Prometheus remote-write (or over OTLP) costs the generator.
# Not a CI test.
#
#   bench/push-cost.sh [PERFOPS_BIN]       # default: <repo>/target/release/perfops
#   RATE=20000 DURATION=20 ROUNDS=3 bench/push-cost.sh
#   OUTPUT=otlp bench/push-cost.sh         # OTLP/HTTP to Prometheus' OTLP receiver
#   OUTPUT=otlp-grpc bench/push-cost.sh    # OTLP/gRPC to a Collector (bench/receivers/install.sh's)
#                                          # that exports to that Prometheus
#
# nginx (bench/nginx.conf, 1 worker) and a current Prometheus (bench/receivers/install.sh's,
# remote-write and OTLP receivers on; the Collector too for otlp-grpc) run on CPU 1; `perfops
# quick -r RATE -d DURATION` runs on CPU 0,
# in turn without and with `--output OUTPUT=URL`, ROUNDS times. For each run: the
# generator's CPU time (user + system, from wait4), the rate it achieved (quick --json), and
# the CPU time of the push's own thread ("output OUTPUT", its schedstat read from
# /proc every 0.2 s until the process ends), and that of the collector (the main thread),
# where the copy of each second handed to the push's thread is made. On a shared 2-core
# machine the whole process's CPU moves by more than the push costs from one run to the
# next; the two threads' figures are what the push itself costs. Everything is stopped by PID.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PERFOPS=${1:-$ROOT/target/release/perfops}
RATE=${RATE:-20000}
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
PROMETHEUS=${PROMETHEUS:-${PERFOPS_RECEIVERS_HOME:-$HOME/.cache/perfops-receivers}/bin/prometheus}
COLLECTOR=${COLLECTOR:-$(dirname "$PROMETHEUS")/perfops-otelcol}
NGINX_PORT=${NGINX_PORT:-18290}
PROM_PORT=${PROM_PORT:-18291}
GRPC_PORT=${GRPC_PORT:-18292}
OUTPUT=${OUTPUT:-prometheus-rw}

die() { echo "push-cost: $*" >&2; exit 1; }
[ -x "$PERFOPS" ] || die "perfops binary not found: $PERFOPS (cargo build --release -p perfops)"
[ -x "$PROMETHEUS" ] || die "prometheus not found: $PROMETHEUS (bench/receivers/install.sh)"
command -v nginx >/dev/null || die "nginx is missing (apt-get install nginx)"

DIR=$(mktemp -d /tmp/perfops-push-cost.XXXXXX)
NGX_PID="" PROM_PID="" COL_PID=""
cleanup() {
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null || true
  [ -n "$COL_PID" ] && kill "$COL_PID" 2>/dev/null || true
  [ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

mkdir -p "$DIR/tmp" "$DIR/prom"
sed "s/127.0.0.1:18090/127.0.0.1:$NGINX_PORT/" "$HERE/nginx.conf" >"$DIR/nginx.conf"
taskset -c 1 nginx -p "$DIR/" -c "$DIR/nginx.conf" -e "$DIR/error.log" &
NGX_PID=$!
printf 'global:\n  evaluation_interval: 1s\n' >"$DIR/prom/prometheus.yml"
taskset -c 1 "$PROMETHEUS" --config.file="$DIR/prom/prometheus.yml" --storage.tsdb.path="$DIR/prom/data" \
  --web.listen-address="127.0.0.1:$PROM_PORT" --web.enable-remote-write-receiver \
  --web.enable-otlp-receiver --enable-feature=otlp-deltatocumulative --log.level=warn \
  2>"$DIR/prom/log" &
PROM_PID=$!
for _ in $(seq 100); do
  curl -fs "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null 2>&1 && curl -fs "http://127.0.0.1:$NGINX_PORT/" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "http://127.0.0.1:$PROM_PORT/-/ready" >/dev/null || die "prometheus did not start: $(cat "$DIR/prom/log")"

case "$OUTPUT" in
  prometheus-rw) SPEC="prometheus-rw=http://127.0.0.1:$PROM_PORT/api/v1/write" ;;
  otlp) SPEC="otlp=http://127.0.0.1:$PROM_PORT/api/v1/otlp/v1/metrics" ;;
  otlp-grpc)
    [ -x "$COLLECTOR" ] || die "the Collector not found: $COLLECTOR (bench/receivers/install.sh)"
    printf 'receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:%s\nexporters:\n  otlp_http:\n    metrics_endpoint: http://127.0.0.1:%s/api/v1/otlp/v1/metrics\nservice:\n  telemetry:\n    logs:\n      level: warn\n    metrics:\n      level: none\n  pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [otlp_http]\n' \
      "$GRPC_PORT" "$PROM_PORT" >"$DIR/collector.yaml"
    taskset -c 1 "$COLLECTOR" --config "$DIR/collector.yaml" 2>"$DIR/collector.log" &
    COL_PID=$!
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$GRPC_PORT") 2>/dev/null && break; sleep 0.2; done
    SPEC="otlp-grpc=http://127.0.0.1:$GRPC_PORT" ;;
  *) die "OUTPUT is prometheus-rw, otlp or otlp-grpc, not $OUTPUT" ;;
esac

python3 - "$PERFOPS" "$RATE" "$DURATION" "$ROUNDS" "http://127.0.0.1:$NGINX_PORT/" \
  "$SPEC" "$DIR" <<'EOF'
import json, os, subprocess, sys, time

perfops, rate, duration, rounds, url, spec, tmp = sys.argv[1:8]
name = spec.split("=")[0]
# A thread's name is at most 15 bytes: "output otlp-grp", "output promethe".
thread_name = f"output {name}"[:15]

def thread_cpu(pid, match):
    """CPU seconds of the threads of pid whose name `match` accepts."""
    total = 0.0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    if not match(f.read().strip()):
                        continue
                # schedstat: nanoseconds on the CPU (stat's ticks are 10 ms: too coarse here).
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0]) / 1e9
            except OSError:
                pass
    except OSError:
        pass
    return total

def one(push):
    out = os.path.join(tmp, "quick.json")
    cmd = ["taskset", "-c", "0", perfops, "quick", "-r", rate, "-d", f"{duration}s", "-q", "--json", out, url]
    if push:
        cmd[5:5] = ["--output", spec]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    output_thread = collector = 0.0
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        # taskset execs perfops: the same PID.
        output_thread = max(output_thread, thread_cpu(p.pid, lambda n: n == thread_name))
        # The collector is the main thread (the name the program has).
        collector = max(collector, thread_cpu(p.pid, lambda n: n == "perfops"))
        time.sleep(0.2)
    err = p.stderr.read().decode()
    with open(out) as f:
        summary = json.load(f)
    return usage.ru_utime + usage.ru_stime, output_thread, collector, summary.get("requests_per_s", 0.0), err

print(f"--output {spec}: rate {rate}/s for {duration} s, {rounds} rounds; CPU s of the generator (user+system)")
print("round  mode   cpu_s  rps       collector_ms_per_s  output_thread_ms_per_s")
rows = {"plain": [], "push": []}
coll = {"plain": [], "push": []}
for r in range(int(rounds)):
    for mode in ("plain", "push"):
        cpu, thread, collector, rps, err = one(mode == "push")
        rows[mode].append(cpu)
        per = thread * 1000 / float(duration)
        cper = collector * 1000 / float(duration)
        coll[mode].append(cper)
        print(f"{r:<6} {mode:<6} {cpu:6.2f} {rps:9.1f} {cper:19.2f} {per:22.2f}")
        if f"output {name}:" in err:
            print("   ", [l for l in err.splitlines() if f"output {name}:" in l])
for mode, cpus in rows.items():
    cpus.sort()
    print(f"{mode}: median {cpus[len(cpus) // 2]:.2f} CPU s over {duration} s")
diff = sorted(rows["push"])[len(rows["push"]) // 2] - sorted(rows["plain"])[len(rows["plain"]) // 2]
print(f"push - plain (medians): {diff:+.2f} CPU s = {diff * 100 / float(duration):+.2f} % of a core")
cdiff = sorted(coll["push"])[len(coll["push"]) // 2] - sorted(coll["plain"])[len(coll["plain"]) // 2]
print(f"collector thread, push - plain (medians): {cdiff:+.2f} ms per second")
EOF
