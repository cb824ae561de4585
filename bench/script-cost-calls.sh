#!/usr/bin/env bash
# Instructions per call of perfops-script's request hooks under callgrind: counts, not times,
# so a busy machine moves them little. What the crate's `sign_bench` times (a signing hook:
# HMAC-SHA256 over method, path, timestamp and a ~150-byte body, 3 saved values; and an empty
# hook: the crossing alone), as instructions. Not a CI test.
#
#   bench/script-cost-calls.sh [SIGN_BENCH...]    # default: target/release/examples/sign_bench
#   (cargo build --release -p perfops-script --example sign_bench first)
#
# For each binary and hook: `sign_bench HOOK N` under callgrind for N = SHORT and LONG calls;
# per call = (instructions of the long run - the short's) / (LONG - SHORT), which leaves out
# the runtime's build and the scripts' compilation. Then, for the signing hook, where a call
# goes: inclusive instructions per call of its parts in the long run (callgrind_annotate).
# The HMAC's SHA-256 runs in software under valgrind (its CPU has no SHA extensions): about
# 20,000 of a signing call here, a fraction of that on a CPU that has them.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
SHORT=${SHORT:-2000}
LONG=${LONG:-12000}
[ $# -ge 1 ] || set -- "$ROOT/target/release/examples/sign_bench"
for t in valgrind callgrind_annotate python3; do command -v "$t" >/dev/null || { echo "$t is missing" >&2; exit 1; }; done
for b in "$@"; do [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 1; }; done

DIR=$(mktemp -d /tmp/perfops-script-calls.XXXXXX)
cleanup() { if [ -n "${KEEP:-}" ]; then echo "kept: $DIR" >&2; else rm -rf "$DIR"; fi; }
trap cleanup EXIT

total() { grep -E '^(summary|totals):' "$1" | head -1 | awk '{print $2}'; }
# The inclusive instructions of function $2 (its exact name) per $3 calls: the sum of its
# entries, one per source file that was inlined into it (each holds the calls made from its lines).
# (Run from $DIR: from a directory above the sources, callgrind_annotate splits a function's
# entries between absolute and relative paths.)
inclusive() {
  (cd "$DIR" && callgrind_annotate --inclusive=yes --auto=no --threshold=100 "$1" 2>/dev/null) |
    awk -v fn="$2" -v n="$3" '{ gsub(",", "", $1); line = $0; sub(/ \[[^]]*\]$/, "", line) }
      substr(line, length(line) - length(fn)) == ":" fn { s += $1 } END { printf "%.0f\n", s / n }'
}

i=0
for BIN in "$@"; do
  i=$((i + 1))
  echo "== $BIN"
  for hook in sign nothing; do
    for n in "$SHORT" "$LONG"; do
      valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.$i.$hook.$n" "$BIN" "$hook" "$n" >/dev/null 2>"$DIR/err.$i.$hook.$n"
    done
    a=$(total "$DIR/cg.$i.$hook.$SHORT")
    b=$(total "$DIR/cg.$i.$hook.$LONG")
    echo "$hook: $(( (b - a) / (LONG - SHORT) )) instructions per call"
  done
  long="$DIR/cg.$i.sign.$LONG"
  for f in perfops_script::runtime::Runtime::before_request perfops_script::stdlib::request_to_js \
           perfops_script::stdlib::request_from_js perfops_script::stdlib::vars_to_js \
           perfops_script::stdlib::vars_unchanged JS_Call sha2::sha256::compress256 arena_new JS_NewAtomLen \
           add_property malloc free; do
    echo "  sign, inclusive per call: $f $(inclusive "$long" "$f" "$LONG")"
  done
done
