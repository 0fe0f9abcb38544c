#!/usr/bin/env bash
# Create .venv with embedscope and its pinned dependencies (the versions CI uses).
#   bash scripts/setup.sh          # to run embedscope (with the chunking extra)
#   bash scripts/setup.sh --test   # also the test and benchmark dependencies (pytest, pytrec_eval, mteb, ranx, ray,
#                                  # playwright; faiss from the bench extra; mkdocs from the docs extra) and Debian's chromium for the HTML report test (as root)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The CPU build of torch first: otherwise a dependency would pull a multi-GB CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
extra="[chunking]"  # llama-index-core: token-window chunking of documents (embedscope chunk / fastbook)
[ "${1:-}" = "--test" ] && extra="[test,bench,onnx-export,openvino,api,docs,store,serve,sparse]"  # api: the openai client (models/api/); docs: mkdocs; store/serve: the results store and its web app; sparse: the splade-tiny checkpoint
.venv/bin/python -m pip install -q -c constraints.txt -e ".${extra}"
# The HTML report's browser test drives Debian's chromium (playwright never downloads a browser here).
if [ "${1:-}" = "--test" ] && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
      || echo "could not install chromium: the HTML report's browser test will skip" >&2
  else
    echo "chromium is not installed (needs root and apt-get): the HTML report's browser test will skip" >&2
  fi
fi
echo "embedscope is set up in .venv ($(.venv/bin/python -c 'import embedscope; print(embedscope.__version__)'))"
