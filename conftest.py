"""Test-wide settings: never reach a model hub; keep the embedding cache inside the test's tmp dirs."""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("EMBEDSCOPE_CACHE", str(tmp_path_factory.mktemp("embedscope-cache")))

# Alembic's migration scripts run only inside Alembic (their module-level code needs its context): not collected.
collect_ignore_glob = ["src/embedscope/history/migrations/*.py", "src/embedscope/history/migrations/versions/*.py"]
