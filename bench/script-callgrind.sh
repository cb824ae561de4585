#!/usr/bin/env bash
# Instructions per request under callgrind: what a request hook costs a request, and that
# scenarios without scripts pay nothing for the hatch. Counts, not times: a busy machine
# changes them little (valgrind runs the program on one core, its own way). Not a CI test.
#
#   bench/script-callgrind.sh PERFOPS_BIN...        # e.g. a build before the hatch and one after
#   WHAT=hook bench/script-callgrind.sh BIN          # only the hook figures (hook | quick | both)
#
# Against nginx (bench/nginx.conf: 1 worker, `return 200`), on loopback, for each binary:
# - hook (binaries that read `scripts:`): `run --workers 1` of bench/script-cost/plain.yaml and
#   signed.yaml (the same templated POST; signed adds `before: sign`, examples/scripts/signed.js:
#   an HMAC-SHA256 over method, path, timestamp and body) at RATE arrivals/s for SHORT then LONG
#   seconds. Per request: (instructions of the long run - the short run's) / (requests sent in
#   the long - the short), which leaves out start-up (the runtime's build, the plan). signed -
#   plain is what the hook costs a request whole. Then where it goes: the inclusive cost of the
#   hook's parts per call in the long signed run (callgrind_annotate --inclusive=yes).
# - quick: `quick -q --workers 1 -c 50 -n 200000` and `quick -q --workers 1 -r 5000 -d 5s`: the
#   whole program's instructions per request, and the engine's own (the self cost of the
#   functions of perfops_engine, per request).
# Everything is stopped by PID. Output: one line per figure on stdout.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
WHAT=${WHAT:-both}
RATE=${RATE:-200}
SHORT=${SHORT:-3}
LONG=${LONG:-9}
NGINX_PORT=${NGINX_PORT:-18294}

NAME=script-callgrind
# shellcheck source-path=SCRIPTDIR source=lib/callgrind.sh
. "$HERE/lib/callgrind.sh"   # die, DIR, nginx on NGINX_PORT, cleanup at exit
cp "$HERE/script-cost/"* "$ROOT/examples/scripts/signed.js" "$DIR/"

# The instructions a callgrind file counted.
total() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
# The self cost of perfops_engine's functions in a callgrind file.
engine() {
  callgrind_annotate --inclusive=no --auto=no --threshold=100 "$1" 2>/dev/null |
    awk '/perfops_engine/ { gsub(",", "", $1); s += $1 } END { printf "%d\n", s }'
}
# The inclusive cost of the function whose name ends with $2, per $3 calls (the largest such line).
inclusive() {
  callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$1" 2>/dev/null |
    awk -v pat="$2 [" -v n="$3" 'index($0, pat) { gsub(",", "", $1); if ($1 + 0 > best) best = $1 } END { printf "%.0f\n", best / n }'
}
per() { python3 -c "import sys; a,b,c,d=map(float,sys.argv[1:]); print(f'{(b-a)/(d-c):.0f}')" "$@"; }

declare -A IR SENT
i=0
for BIN in "$@"; do
  i=$((i + 1))
  echo "== $BIN ($("$BIN" --version 2>/dev/null | head -1))"
  if [ "$WHAT" != quick ]; then
    for name in plain signed; do
      for secs in "$SHORT" "$LONG"; do
        out="$DIR/runs-$i-$name-$secs"
        valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.$i.$name.$secs" \
          "$BIN" run "$DIR/$name.yaml" --workers 1 -q --target "http://127.0.0.1:$NGINX_PORT" --out "$out" \
          --set "load.stages[0].rate=$RATE" --set "load.stages[0].hold=${secs}s" >/dev/null 2>"$DIR/err.$i.$name.$secs" || true
        sent=$(python3 -c "import glob,json,sys; print(json.load(open(glob.glob(sys.argv[1]+'/*/summary.json')[0]))['total']['sent'])" "$out" 2>/dev/null || echo 0)
        SENT[$name.$secs]=$sent
        IR[$name.$secs]=$(total "$DIR/cg.$i.$name.$secs")
      done
      echo "run $name.yaml: ${IR[$name.$SHORT]} and ${IR[$name.$LONG]} instructions for ${SENT[$name.$SHORT]} and ${SENT[$name.$LONG]} requests sent"
    done
    # The same rate and lengths for both: what a second costs (timers, the collector, the
    # histograms) is the same in both and cancels; start-up cancels in each's difference.
    python3 - "${IR[plain.$SHORT]}" "${IR[plain.$LONG]}" "${IR[signed.$SHORT]}" "${IR[signed.$LONG]}" \
      "${SENT[plain.$SHORT]}" "${SENT[plain.$LONG]}" "${SENT[signed.$SHORT]}" "${SENT[signed.$LONG]}" \
      "$RATE" "$SHORT" "$LONG" <<'PY'
import sys
p1, p2, s1, s2, np1, np2, ns1, ns2, rate, short, long_ = map(float, sys.argv[1:])
want = rate * (long_ - short)
if np2 - np1 != want or ns2 - ns1 != want:
    print(f"  the schedule was not kept under valgrind ({np2 - np1:.0f} and {ns2 - ns1:.0f} more requests, not {want:.0f}): lower RATE")
print(f"  the request hook adds {((s2 - s1) - (p2 - p1)) / want:.0f} instructions per request"
      f" (signed {(s2 - s1) / want:.0f}, plain {(p2 - p1) / want:.0f}, each with this rate's per-second costs)")
PY
    long="$DIR/cg.$i.signed.$LONG"
    n=${SENT[signed.$LONG]}
    if [ "$n" -gt 0 ]; then
      for f in 'Worker>::before_hook' 'perfops_engine::hook::parts' 'perfops_engine::hook::write' \
               'perfops_script::runtime::Runtime::before_request' 'perfops_script::stdlib::request_to_js' \
               'perfops_script::stdlib::request_from_js' 'quickjs.c:JS_Call'; do
        echo "  signed, inclusive per request: $f $(inclusive "$long" "$f" "$n")"
      done
    fi
  fi
  if [ "$WHAT" != hook ]; then
    for args in "-c 50 -n 200000" "-r 5000 -d 5s"; do
      tag=$(echo "$args" | tr -d ' -')
      valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.$i.quick.$tag" \
        "$BIN" quick -q --workers 1 $args --json "$DIR/quick.$i.$tag.json" "http://127.0.0.1:$NGINX_PORT/" \
        >/dev/null 2>"$DIR/err.$i.quick.$tag" || true
      sent=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sent'])" "$DIR/quick.$i.$tag.json" 2>/dev/null || echo 0)
      ir=$(total "$DIR/cg.$i.quick.$tag")
      own=$(engine "$DIR/cg.$i.quick.$tag")
      if [ "$sent" -gt 0 ]; then
        echo "quick $args: $((ir / sent)) instructions per request in all, $((own / sent)) the engine's own ($sent requests)"
      else
        echo "quick $args: no figure (see $DIR/err.$i.quick.$tag)"
      fi
    done
  fi
done
