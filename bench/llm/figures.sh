#!/usr/bin/env bash
# figures.sh: the LLM step's closing figures against a real OpenAI-compatible server:
# llama-cpp-python's (llama.cpp's engine, CPU only, one thread) serving the tiny random llama
# of tiny_model.py (4 layers, 384 wide; greedy decoding never ends early, so every answer has
# max_tokens tokens). Two measures, ROUNDS times each, on a fresh server per round:
#
#   accuracy  `perfops run` of 16-token streamed answers at RATE/s for HOLD s, against the
#             server's own timings (llama.cpp's llama_perf_context_print per answer):
#             perfops' TPOT and ITL p50 vs llama.cpp's eval ms per token, perfops' TTFT from the
#             send p50 vs llama.cpp's prompt evaluation
#   goodput   `perfops limit` under `ttft p95 < 300ms, itl p99 < 60ms, errors < 1%`: the highest
#             request rate that holds them (and its output tokens/s), and where it broke
#
#   bench/llm/figures.sh [PERFOPS]      # default target/release/perfops, else target/debug/perfops
#
# Environment: ROUNDS (3), RATE (2), HOLD (10), LIMIT_HOLD (5), PIN (a CPU list for the server,
# e.g. 1: taskset -c), PERFOPS_PIN (the same for perfops, e.g. 0).
# Needs bench/llm/install.sh's venv (built if missing), python3 and curl.
set -euo pipefail
cd "$(dirname "$0")/../.."

PERFOPS="${1:-}"
if [[ -z "$PERFOPS" ]]; then
  PERFOPS=target/release/perfops
  [[ -x "$PERFOPS" ]] || PERFOPS=target/debug/perfops
fi
[[ -x "$PERFOPS" ]] || { echo "figures.sh: no perfops binary at $PERFOPS (cargo build --release)" >&2; exit 2; }
ROUNDS="${ROUNDS:-3}"
RATE="${RATE:-2}"
HOLD="${HOLD:-10}"
LIMIT_HOLD="${LIMIT_HOLD:-5}"
BIN="$(bench/llm/install.sh)"
pin() { if [[ -n "${1:-}" ]]; then echo taskset -c "$1"; fi; }

work="$(mktemp -d)"
server=""
cleanup() {
  [[ -n "$server" ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$BIN/python" bench/llm/tiny_model.py "$work/tiny.gguf" --layers 4 --embd 384 --ff 1024 >/dev/null

start_server() {
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  : >"$work/server.log"
  PYTHONUNBUFFERED=1 $(pin "${PIN:-}") "$BIN/python" -m llama_cpp.server --model "$work/tiny.gguf" \
    --model_alias tiny --host 127.0.0.1 --port "$port" --n_ctx 1024 --n_threads 1 --n_threads_batch 1 \
    --verbose true --interrupt_requests false >"$work/server.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do
    curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; exit 3; }
    sleep 0.2
  done
  echo "figures.sh: the server did not listen within a minute" >&2
  exit 3
}

stop_server() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
}

step='{ name: ask, openai: chat, model: tiny, messages: [ { role: user, content: "hello ${seq}" } ], max_tokens: 16, params: { temperature: 0 } }'

scenario() { # URL RATE HOLD SLO
  cat <<YAML
name: llm-figures
target: $1
defaults: { timeout: 20s }
flows:
  chat:
    steps:
      - $step
load:
  stages: [ { rate: $2, hold: ${3}s } ]
slo: $4
YAML
}

echo "perfops: $PERFOPS ($("$PERFOPS" --version 2>/dev/null || echo '?')); server: llama-cpp-python, tiny random llama, 1 thread"
echo
echo "| round | answers | perfops TPOT p50 | perfops ITL p50 | llama.cpp eval per token | perfops TTFT (send) p50 | llama.cpp prompt eval | goodput req/s | output tokens/s | broke at |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  start_server
  url="http://127.0.0.1:$port"
  scenario "$url" "$RATE" "$HOLD" '[ "errors < 1%" ]' >"$work/run.yaml"
  $(pin "${PERFOPS_PIN:-}") "$PERFOPS" run "$work/run.yaml" --wait-in-flight -q --out "$work/runs-$round" >/dev/null 2>"$work/run.err" || true
  cp "$work/server.log" "$work/server-run-$round.log"
  scenario "$url" 4 "$LIMIT_HOLD" '[ "ttft p95 < 300ms", "itl p99 < 60ms", "errors < 1%" ]' >"$work/limit.yaml"
  $(pin "${PERFOPS_PIN:-}") "$PERFOPS" limit "$work/limit.yaml" --from 4 --hold "${LIMIT_HOLD}s" --cooldown 2s \
    --attempts 6 --max 64 --wait-in-flight -q --out "$work/limits-$round" >/dev/null 2>"$work/limit.err" || true
  stop_server
  python3 - "$work/runs-$round" "$work/server-run-$round.log" "$work/limits-$round" "$round" <<'PY'
import glob, json, statistics, sys
runs, log, limits, round_ = sys.argv[1:5]
def summary(d):
    files = sorted(glob.glob(d + "/*/summary.json"))
    return json.load(open(files[-1])) if files else {}
s = summary(runs)
ask = next((st for st in s.get("steps", []) if st.get("name") == "ask"), {})
fig = lambda k, q="p50": ask.get(k, {}).get(q, float("nan"))
# llama.cpp's perf print per answer: prompt eval, then eval (15 runs for 16 tokens).
own, prompt = [], None
for line in open(log, errors="replace"):
    if "llama_perf_context_print:" not in line:
        continue
    what = line.split(":", 1)[1].strip()
    try:
        ms = float(line.split("=", 1)[1].split("ms", 1)[0])
        n = int(line.split("/", 1)[1].split()[0])
    except (IndexError, ValueError):
        continue
    if what.startswith("prompt eval time"):
        prompt = ms
    elif what.startswith("eval time") and n == 15:
        own.append((ms / n, prompt if prompt is not None else float("nan")))
        prompt = None
med = lambda xs: statistics.median(xs) if xs else float("nan")
per_token = med([o[0] for o in own])
prompt_ms = med([o[1] for o in own])
l = summary(limits).get("verdict", {})
cap = l.get("capacity_rps")
brk = l.get("breaks_at_rps")
print(f"| {round_} | {ask.get('completed', 0)} | {fig('tpot_ms'):.2f} ms | {fig('itl_ms'):.2f} ms | {per_token:.2f} ms "
      f"| {fig('ttft_sent_ms'):.2f} ms | {prompt_ms:.2f} ms | {cap if cap is not None else '-'} "
      f"| {cap * 16 if cap is not None else '-'} | {brk if brk is not None else '-'} |")
PY
done
