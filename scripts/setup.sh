#!/usr/bin/env bash
# Create .venv with embedscope and its pinned dependencies (the versions CI uses).
#   bash scripts/setup.sh          # to run embedscope (with the chunking extra)
#   bash scripts/setup.sh --test   # also the test and benchmark dependencies (pytest, pytrec_eval, mteb, ranx)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch first: otherwise a dependency would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
extra="[chunking]"  # llama-index-core: token-window chunking of documents (embedscope chunk / fastbook)
[ "${1:-}" = "--test" ] && extra="[test]"
.venv/bin/python -m pip install -q -c constraints.txt -e ".${extra}"
echo "embedscope is set up in .venv ($(.venv/bin/python -c 'import embedscope; print(embedscope.__version__)'))"
