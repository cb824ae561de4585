#!/usr/bin/env bash
# install.sh: installs the real OpenAI-compatible inference server that perfops' LLM step is
# tested against (perfops_testkit::llm), into a virtual environment in a cache folder:
#
#   llama-cpp-python[server]  llama.cpp's engine with its Python bindings and their
#                             OpenAI-compatible HTTP server (`python -m llama_cpp.server`):
#                             /v1/chat/completions with `stream: true`, `usage`, and a
#                             `timings` object of llama.cpp's own. Built from source with
#                             cmake: CPU only (no BLAS, no GPU backend, no curl or OpenSSL),
#                             without the multimodal library (LLAVA_BUILD=OFF), tuned for the
#                             machine that builds it (GGML_NATIVE, the default).
#   gguf                      llama.cpp's own writer of model files: the tests write a tiny
#                             llama model with random weights (bench/llm/tiny_model.py) since
#                             no weights can be downloaded, and tokens need not make sense
#                             to be timed.
#
# Idempotent: a venv already stamped with these versions and flags is only checked (the
# server's module imports); nothing is printed but its bin folder then.
#
#   bench/llm/install.sh           # builds what is missing; prints the venv's bin folder
#   FORCE=1 bench/llm/install.sh   # rebuilds
#
# Environment:
#   PERFOPS_LLM_HOME  cache folder (default ~/.cache/perfops-llm); the venv is its venv/
#   FORCE=1           rebuild even if the venv is there
#
# Needs python3 (3.9+; $PYTHON to choose another) with its venv module, a C/C++ compiler and
# cmake 3.21+; everything else comes from PyPI.
#
# What it costs, measured from nothing (an empty cache, pip's included) on this project's 2-core
# machine while five other builds shared it (load 8 to 13): 42 minutes of wall time, 9 minutes
# of CPU (user), so about 5 minutes on 2 idle cores; the venv is 180 MB. Afterwards a run only
# checks the stamp and the imports: 2 seconds.
set -euo pipefail

die() { echo "install.sh: error: $*" >&2; exit 1; }
log() { echo "install.sh: $*" >&2; }

LLAMA_CPP_PYTHON_VERSION="0.3.36"
GGUF_VERSION="0.19.0"
HOME_DIR="${PERFOPS_LLM_HOME:-${HOME:?HOME is not set}/.cache/perfops-llm}"
VENV="$HOME_DIR/venv"
FORCE="${FORCE:-0}"
# What is built, and so what the stamp must say for a venv to be reused.
CMAKE_FLAGS="-DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAVA_BUILD=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release"
STAMP="llama-cpp-python $LLAMA_CPP_PYTHON_VERSION gguf $GGUF_VERSION $CMAKE_FLAGS"

installed() {
  [[ "$FORCE" != 1 && -x "$VENV/bin/python" ]] || return 1
  [[ "$(cat "$VENV/.perfops-stamp" 2>/dev/null)" == "$STAMP" ]] || return 1
  "$VENV/bin/python" -c 'import llama_cpp, llama_cpp.server.app, gguf, numpy' >/dev/null 2>&1
}

if installed; then
  echo "$VENV/bin"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' is not on PATH"
command -v cmake >/dev/null 2>&1 || die "'cmake' is not on PATH (3.21 or newer is needed)"
command -v c++ >/dev/null 2>&1 || die "no C++ compiler ('c++') on PATH"

started=$(date +%s)
log "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION (llama.cpp, CPU only) into $VENV"
rm -rf "$VENV"
mkdir -p "$HOME_DIR"
"$PYTHON" -m venv "$VENV" || die "python3 -m venv failed (on Debian: apt-get install python3-venv)"
"$VENV/bin/pip" install -q --upgrade pip >&2
# The build is cmake's through scikit-build-core; two jobs, the machine's two cores.
CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  nice "$VENV/bin/pip" install -q --no-cache-dir \
  "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION" "gguf==$GGUF_VERSION" >&2 \
  || die "pip could not build llama-cpp-python"
echo "$STAMP" >"$VENV/.perfops-stamp"
installed || die "the venv was built but llama_cpp.server does not import"
log "built in $(( $(date +%s) - started )) s"
echo "$VENV/bin"
