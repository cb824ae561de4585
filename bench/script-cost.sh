#!/usr/bin/env bash
# What a request hook that signs each request costs the generator, per request. Not a CI test.
#
#   bench/script-cost.sh [PERFOPS_BIN]      # default: <repo>/target/release/perfops
#   RATE=10000 DURATION=10 ROUNDS=3 bench/script-cost.sh
#
# nginx (bench/nginx.conf, 1 worker, `return 200` whatever the method) runs on CPU 1;
# `perfops run --workers 1` on CPU 0, in turn with the scenario bench/script-cost/signed.yaml
# (`before: sign`: HMAC-SHA256 over method, path, timestamp and body, as
# examples/scripts/signed.js) and bench/script-cost/plain.yaml (the same templated request,
# no hook), ROUNDS times, at RATE arrivals/s for DURATION s. For each run: the generator's
# CPU time (user + system, from wait4) per 100k requests sent, and the time its workers
# spent in the hook (summary.json's script_ns) per request. The difference of the first
# between the two scenarios is what the hook costs a request whole (the rendering of the
# request as the hook's object and back included); the second is the JavaScript alone.
# AWAKES="0 1" runs each round twice, the second time with a spinner at idle priority
# (SCHED_IDLE, a `pause` loop built with cc into bench/out/spin) on the generator's CPU: it
# takes only the time perfops leaves, and keeps that CPU from going idle between arrivals,
# so the two rows tell the work a request costs from what waking an idle CPU adds to it.
# Everything is stopped by PID.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PERFOPS=${1:-$ROOT/target/release/perfops}
RATE=${RATE:-10000}
DURATION=${DURATION:-10}
ROUNDS=${ROUNDS:-3}
NGINX_PORT=${NGINX_PORT:-18293}
AWAKES=${AWAKES:-0}

die() { echo "script-cost: $*" >&2; exit 1; }
for a in $AWAKES; do [[ $a =~ ^[01]$ ]] || die "AWAKES: '$a' is neither 0 nor 1"; done
[ -x "$PERFOPS" ] || die "perfops binary not found: $PERFOPS (cargo build --release -p perfops)"
command -v nginx >/dev/null || die "nginx is missing (apt-get install nginx)"

DIR=$(mktemp -d /tmp/perfops-script-cost.XXXXXX)
NGX_PID=""
cleanup() {
  [ -n "$NGX_PID" ] && kill "$NGX_PID" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT

mkdir -p "$DIR/tmp"
sed "s/127.0.0.1:18090/127.0.0.1:$NGINX_PORT/" "$HERE/nginx.conf" >"$DIR/nginx.conf"
taskset -c 1 nginx -p "$DIR/" -c "$DIR/nginx.conf" -e "$DIR/error.log" &
NGX_PID=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$NGINX_PORT/" >/dev/null 2>&1 && break; sleep 0.2; done
cp "$HERE/script-cost/"* "$ROOT/examples/scripts/signed.js" "$DIR/"
SPIN=""
if [[ " $AWAKES " == *" 1 "* ]]; then
  command -v cc >/dev/null || die "cc is missing (apt-get install gcc), which AWAKES=1 needs"
  mkdir -p "$HERE/out"
  SPIN="$HERE/out/spin"
  printf 'int main(void) { for (;;) __asm__ volatile("pause"); }\n' | cc -O2 -o "$SPIN" -x c -
fi

python3 - "$PERFOPS" "$DIR" "$NGINX_PORT" "$RATE" "$DURATION" "$ROUNDS" "$AWAKES" "$SPIN" <<'PY'
import glob, json, os, subprocess, sys
perfops, d, port, rate, duration, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
awakes, spin = [a == "1" for a in sys.argv[7].split()], sys.argv[8]
rows = {}
for r in range(rounds):
  for awake in awakes:
    # `timeout` passes a TERM on to the spinner, and ends it by itself past the round's time.
    spinner = subprocess.Popen(["chrt", "--idle", "0", "taskset", "-c", "0", "timeout", str(4 * int(duration) + 60),
                                spin], stdout=subprocess.DEVNULL) if awake else None
    for name in ("plain", "signed"):
        tag = f"{name}{' awake' if awake else ''}"
        out = os.path.join(d, f"runs-{name}-{r}-{int(awake)}")
        args = ["taskset", "-c", "0", perfops, "run", os.path.join(d, f"{name}.yaml"), "--workers", "1", "-q",
                "--target", f"http://127.0.0.1:{port}", "--out", out,
                "--set", f"load.stages[0].rate={rate}", "--set", f"load.stages[0].hold={duration}s"]
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        cpu = ru.ru_utime + ru.ru_stime
        s = json.load(open(glob.glob(os.path.join(out, "*", "summary.json"))[0]))
        t = s["total"]
        sent, script_ns = t["sent"], t.get("script_ns", 0)
        row = (cpu / sent * 1e5, script_ns / sent / 1e3, t["achieved_rate"], t["failed"])
        rows.setdefault(tag, []).append(row)
        print(f"round {r} {tag:13}: {row[0]:.3f} CPU s per 100k, {row[1]:.2f} us in scripts per request, "
              f"{row[2]:.0f}/s achieved, {row[3]} failed, exit {os.waitstatus_to_exitcode(status)}", flush=True)
    if spinner:
        spinner.terminate()
        spinner.wait()
med = lambda xs: sorted(xs)[len(xs) // 2]
for awake in awakes:
    suffix = " awake" if awake else ""
    plain = med([x[0] for x in rows["plain" + suffix]])
    signed = med([x[0] for x in rows["signed" + suffix]])
    js = med([x[1] for x in rows["signed" + suffix]])
    print(f"median{suffix or ' idle'}: plain {plain:.3f}, signed {signed:.3f} CPU s per 100k: the hook adds "
          f"{signed - plain:.3f} ({(signed - plain) * 10:.2f} us per request), of which {js:.2f} us in JavaScript")
PY
