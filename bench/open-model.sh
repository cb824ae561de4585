#!/usr/bin/env bash
# The open model against its peers (issue #18): perfops, oha and vegeta at fixed
# arrival rates against a server that answers after 10 ms and measures itself.
#
#   bench/open-model.sh [PERFOPS_BIN]                 # default: <repo>/target/release/perfops
#   RATES="2000 10000 20000" ROUNDS=3 DURATION=8 bench/open-model.sh
#   ROUNDS=1 DURATION=2 RATES=1000 bench/open-model.sh   # rehearsal, a few seconds a run
#   TOOLS="perfops oha" bench/open-model.sh              # a subset
#   BASE=/path/to/perfops-before bench/open-model.sh     # a second perfops ("base") too
#   TARGET=nginx bench/open-model.sh                     # against nginx instead
#
# The target (TARGET=delay, the default) is ../shared/bench/peers/targets/delayserver.go
# (built here with go into bench/out/ when missing): it answers every request after 10 ms
# and records its own handler time and the arrivals it saw (/__stats, /__reset). TARGET=nginx
# is bench/nginx.conf (1 worker, `return 200`, answers at once) on 127.0.0.1:18090: the rate
# it saw is its stub_status count over the run's DURATION, and p50/p99 are the tool's own
# (nginx's handler time is a few µs). For each rate, ROUNDS rounds,
# the tools alternating within a round (perfops, oha, vegeta), each pinned to TOOL_CPU
# under `/usr/bin/time -f '%e %U %S %M'` with the server on TARGET_CPU:
#   perfops  `perfops quick -r RATE -d DURATION --json FILE URL` (and `base`, the same with
#            the BASE binary: a build before a change, measured in the same run): the
#            default timerfd pacer, a wake-up per arrival (or per arrivals due within 100 µs)
#   uring    the same with PERFOPS_PACER=io_uring: the kernel pacer (requests queued in
#            io_uring behind a timeout at their due times); its summary's generator.pacer
#            says which pacer ran (timerfd where io_uring is refused)
#   gatherN  the timerfd pacer with arrivals gathered within N µs instead of 100
#            (PERFOPS_GATHER_US=N; gather0: a wake-up per arrival): what a wider window would
#            save, for the record; the contract is 100 µs (README, docs/architecture.md)
#   closed   `perfops quick -c RATE/100 -d DURATION`: the closed loop at about the same rate
#            against the 10 ms server, the per-request price the open model is held to
#   oha      `oha -q RATE --latency-correction -z DURATION -c C --no-tui --output-format json URL`
#            (C = max(100, RATE / 50): twice the 10 ms server's requests in flight, so
#            the connection cap never sets the rate)
#   vegeta   `vegeta attack -rate=RATE/1s -duration=DURATION`, its results file read by
#            `vegeta report -type=json` afterwards (not timed)
#   k6       only with TOOLS naming it (its constant-arrival-rate executor does not keep up
#            at 10k/s on this machine's one core): ../shared/bench/peers/lib/k6-open.js
# Printed per rate and tool (medians of the rounds, and each round's):
#   CPU s per 100k answered requests, peak RSS, the rate the *server* saw (its arrivals'
#   span), and each tool's p50 / p99 minus the server's own in the same run (what the
#   tool adds: loopback, its pacer, its clock; from the intended start for perfops and
#   oha --latency-correction, from the send for vegeta, which sends on time or says so).
# Only 127.0.0.1 is contacted; the server is stopped by its PID.
#
# Knobs (env): RATES="2000 10000 20000"  ROUNDS=3  DURATION=8  TOOLS="perfops oha vegeta"
#              TARGET=delay|nginx  PORT=18081 (18090 with nginx)  TARGET_CPU=0  TOOL_CPU=1  OHA=<path>  VEGETA=<path>  K6=<path>
#              LOCK=/tmp/bench.lock (held for each measured run; do not wrap this script
#              in `flock $LOCK`)  LOCK_WAIT_S  QUIET_MAX_S  NOISE_MAX_S  NOISE_RETRIES
# The peers: ../shared/bench/peers/install.sh installs oha (cargo) and vegeta (go).
#
# Output: markdown on stdout, also bench/out/open-model-<UTC stamp>.md; raw outputs in
# bench/out/open-model-<stamp>/. Exit status: 0 every run fine, 3 some run failed (the
# table is printed anyway), 1 setup error.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
BENCH=open-model
DURATION=${DURATION:-8}
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
. "$HERE/lib/common.sh"   # ROUNDS TARGET_CPU TOOL_CPU LOCK* QUIET_MAX_S NOISE_* helpers

RATES=${RATES:-"2000 10000 20000"}
BASE=${BASE:-}
TOOLS=${TOOLS:-"perfops uring closed${BASE:+ base} oha vegeta"}
TARGET=${TARGET:-delay}
case "$TARGET" in
  delay) PORT=${PORT:-18081} ;;
  nginx) PORT=${PORT:-18090} ;;
  *) die "TARGET: '$TARGET' is neither delay nor nginx" ;;
esac
need_ints DURATION ROUNDS PORT TARGET_CPU TOOL_CPU LOCK_WAIT_S QUIET_MAX_S NOISE_RETRIES
need_positive DURATION ROUNDS PORT
need_numbers NOISE_MAX_S
for r in $RATES; do [[ $r =~ ^[1-9][0-9]*$ ]] || die "RATES: '$r' is not a positive integer"; done
need_tools taskset timeout curl python3
if [ "$TARGET" = delay ]; then need_tools go; else need_tools nginx; fi

export PATH="$PATH:$HOME/go/bin:$HOME/.cargo/bin:/usr/local/go/bin"
OHA=${OHA:-$(command -v oha || echo "$HOME/.cargo/bin/oha")}
VEGETA=${VEGETA:-$(command -v vegeta || echo "$HOME/go/bin/vegeta")}
K6=${K6:-$(command -v k6 || echo "$HOME/go/bin/k6")}
PEERS="$HERE/../../shared/bench/peers"
URL="http://127.0.0.1:$PORT/"
RUN_TIMEOUT_S=$((DURATION + 30))

perfops_path "${1:-}"
out_dirs
cleanup_at_exit

avail=""
for t in $TOOLS; do
  case "$t" in
    perfops|uring|closed|gather[0-9]*) [[ $t != gather* || $t =~ ^gather[0-9]+$ ]] || die "'$t': gather takes whole µs (gather200)"
      [ -x "$PERFOPS" ] || { log "perfops not found: $PERFOPS (cargo build --release -p perfops)"; continue; } ;;
    base) [ -n "$BASE" ] && [ -x "$BASE" ] || { log "BASE not set or not executable ('$BASE'); skipped"; continue; } ;;
    oha) [ -x "$OHA" ] || { log "oha not found ($OHA): $PEERS/install.sh installs it; skipped"; continue; } ;;
    vegeta) [ -x "$VEGETA" ] || { log "vegeta not found ($VEGETA): $PEERS/install.sh installs it; skipped"; continue; } ;;
    k6) [ -x "$K6" ] || { log "k6 not found ($K6); skipped"; continue; } ;;
    *) die "unknown tool '$t' (perfops, uring, gatherN, closed, base, oha, vegeta, k6)" ;;
  esac
  avail="$avail $t"
done
[ -n "$avail" ] || die "none of the tools ($TOOLS) is available"

# ------------------------------------------------------------------ the target
if [ "$TARGET" = delay ]; then
  start_delay_server
  log "delay server $TARGET_PID on CPU $TARGET_CPU, $URL; tools on CPU $TOOL_CPU:$avail"
else
  [ "$PORT" = 18090 ] || die "TARGET=nginx listens where bench/nginx.conf says: 127.0.0.1:18090 (PORT=$PORT)"
  start_nginx "$HERE/nginx.conf" "$URL"
fi
printf 'GET %s\n' "$URL" >"$RAW/vegeta.targets"

{
  echo "{"
  echo "  \"stamp\": \"$STAMP\", \"target\": \"$TARGET\", \"duration\": $DURATION, \"rounds\": $ROUNDS, \"rates\": \"$RATES\", \"tools\": \"${avail# }\","
  echo "  \"target_cpu\": $TARGET_CPU, \"tool_cpu\": $TOOL_CPU, \"clk_tck\": $CLK_TCK, \"url\": \"$URL\", \"noise_max_s\": $NOISE_MAX_S,"
  echo "  \"perfops_bin\": $(printf '%s' "$PERFOPS" | json_text),"
  echo "  \"perfops_version\": $( (timeout 5 "$PERFOPS" --version 2>/dev/null </dev/null || true) | head -n1 | json_str),"
  echo "  \"perfops_git\": \"$(perfops_git)\","
  echo "  \"base_bin\": $(printf '%s' "$BASE" | json_text),"
  echo "  \"oha_version\": $( (timeout 5 "$OHA" --version 2>/dev/null </dev/null || true) | head -n1 | json_str),"
  echo "  \"vegeta_version\": $( (timeout 5 "$VEGETA" -version 2>/dev/null </dev/null || true) | head -n1 | json_str),"
  echo "  \"cpu\": $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | json_str),"
  echo "  \"kernel\": \"$(uname -r)\""
  echo "}"
} >"$RAW/env.json"

RUN_EXTS="out err time meta.json json server.json bin"
TOOL_EXTS="json bin"
TICKS_KEY=server_ticks
probe_target() { # 0|1 BASE: the server's record of the run into BASE.server.json
  if [ "$TARGET" = delay ]; then delay_server_probe "$@"; else nginx_server_probe "$@"; fi
}
meta_fields() { :; }

argv_for() { # TOOL RATE NAME -> ARGV
  local conns=$(( $2 / 50 > 100 ? $2 / 50 : 100 ))
  case "$1" in
    perfops) ARGV=("$PERFOPS" quick -r "$2" -d "${DURATION}s" --json "$RAW/$3.json" "$URL") ;;
    uring) ARGV=(env PERFOPS_PACER=io_uring "$PERFOPS" quick -r "$2" -d "${DURATION}s" --json "$RAW/$3.json" "$URL") ;;
    gather*) ARGV=(env PERFOPS_GATHER_US="${1#gather}" "$PERFOPS" quick -r "$2" -d "${DURATION}s" --json "$RAW/$3.json" "$URL") ;;
    closed) ARGV=("$PERFOPS" quick -c $(( $2 / 100 > 1 ? $2 / 100 : 1 )) -d "${DURATION}s" --json "$RAW/$3.json" "$URL") ;;
    base) ARGV=("$BASE" quick -r "$2" -d "${DURATION}s" --json "$RAW/$3.json" "$URL") ;;
    oha) ARGV=("$OHA" -q "$2" --latency-correction -z "${DURATION}s" -c "$conns" --no-tui --output-format json "$URL") ;;
    vegeta) ARGV=("$VEGETA" attack -targets="$RAW/vegeta.targets" -rate="$2/1s" -duration="${DURATION}s" -output="$RAW/$3.bin") ;;
    k6) ARGV=(env URL="$URL" SUMMARY="$RAW/$3.json" RATE="$2" DURATION="${DURATION}s"
              "$K6" run --quiet --no-color --no-usage-report "$PEERS/lib/k6-open.js") ;;
  esac
}

log "warm-up: perfops 2 s at 1,000/s (not recorded)"
warm_up perfops 30 "$PERFOPS" quick -q -r 1000 -d 2s "$URL"

for rate in $RATES; do
  for i in $(seq 1 "$ROUNDS"); do
    for t in $avail; do
      name="r$rate.$t.$i"
      log "$rate/s round $i/$ROUNDS: $t"
      argv_for "$t" "$rate" "$name"
      measure "$name" "${ARGV[@]}"
      if [ "$t" = vegeta ] && [ -s "$RAW/$name.bin" ]; then
        "$VEGETA" report -type=json "$RAW/$name.bin" >"$RAW/$name.json" 2>>"$RAW/$name.err" || true
        rm -f "$RAW/$name.bin"
      fi
      sleep 1
    done
  done
done

report_and_exit "$HERE/lib/open_model_report.py"
