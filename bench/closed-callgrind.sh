#!/usr/bin/env bash
# The closed loop's user-space instructions per request, per binary, under callgrind: the
# worker thread alone (--separate-threads=yes), so that what the collector does once a second
# (merging, clearing histograms: its share per request grows with how slowly valgrind ran,
# which a busy machine changes) stays out of the figure. Counts, not times. Not a CI test.
#
#   bench/closed-callgrind.sh PERFOPS_BIN...     # e.g. a build before a change and one after
#
# Against nginx (bench/nginx.conf: 1 worker, `return 200`) on loopback, for each binary:
# `quick -q --workers 1 -c CONNS -n REQUESTS` (CONNS=50, REQUESTS=200000), then
# `quick -q --workers 1 -r RATE -d SECS` (RATE=5000, SECS=5; OPEN=0 skips it, CLOSED=0 the other). Prints per run:
# the worker thread's instructions per request, the whole process's, and the inclusive cost per
# request of what the closed loop's request pays for its measurement (the histograms' records,
# the clock reads, the timeout's timer). Everything is stopped by PID; only 127.0.0.1.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CONNS=${CONNS:-50}
REQUESTS=${REQUESTS:-200000}
RATE=${RATE:-5000}
SECS=${SECS:-5}
OPEN=${OPEN:-1}
CLOSED=${CLOSED:-1}
NGINX_PORT=${NGINX_PORT:-18295}

NAME=closed-callgrind
# shellcheck source-path=SCRIPTDIR source=lib/callgrind.sh
. "$HERE/lib/callgrind.sh"   # die, DIR, nginx on NGINX_PORT, cleanup at exit

total() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
# The inclusive cost of the functions whose names contain $2, summed over their largest lines
# (one per symbol), in callgrind file $1.
inclusive() {
  callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$1" 2>/dev/null |
    awk -v pat="$2" 'index($0, pat) { gsub(",", "", $1); n = $1 + 0; k = $NF; if (n > best[k]) best[k] = n }
                     END { s = 0; for (k in best) s += best[k]; printf "%d\n", s }'
}
per() { python3 -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.0f}')" "$@"; }

i=0
for BIN in "$@"; do
  i=$((i + 1))
  echo "== $BIN ($("$BIN" --version 2>/dev/null | head -1))"
  runs=()
  [ "$CLOSED" = 0 ] || runs+=("closed|-c $CONNS -n $REQUESTS")
  [ "$OPEN" = 0 ] || runs+=("open|-r $RATE -d ${SECS}s")
  for run in "${runs[@]}"; do
    tag=${run%%|*}
    args=${run#*|}
    out="$DIR/cg.$i.$tag"
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out" \
      "$BIN" quick -q --workers 1 $args --json "$DIR/quick.$i.$tag.json" "http://127.0.0.1:$NGINX_PORT/" \
      >/dev/null 2>"$DIR/err.$i.$tag" || true
    sent=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['sent'])" "$DIR/quick.$i.$tag.json" 2>/dev/null || echo 0)
    [ "$sent" -gt 0 ] || { echo "$tag ($args): no figure (see $DIR/err.$i.$tag)"; continue; }
    # The worker: the thread that ran the most instructions.
    worker="" best=0 all=0
    for f in "$out"-*; do
      n=$(total "$f"); all=$((all + n))
      if [ "$n" -gt "$best" ]; then best=$n; worker=$f; fi
    done
    echo "$tag ($args, $sent requests): worker thread $(per "$best" "$sent") instructions per request, process $(per "$all" "$sent")"
    echo "  in the worker, inclusive per request: histogram records $(per "$(inclusive "$worker" 'Histogram<T>::record_n_inner [')" "$sent")," \
      "clock reads $(per "$(inclusive "$worker" 'clock_gettime@@')" "$sent")," \
      "timer moves (Sleep::reset) $(per "$(inclusive "$worker" 'Sleep::reset [')" "$sent")"
  done
done
