"""The run option ``budget`` against the test service: a run stops before the cap with one line and exit 2, keeps
what was answered, and a rerun with a higher cap sends only the rest and scores as an unbudgeted run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from embedscope.cli.main import main
from embedscope.errors import SettingError
from embedscope.models.specs import load_encoder
from embedscope.settings.run import RunSettings
from embedscope.testing.tiny import TINY_CORPUS, TINY_QUERIES, write_tiny_beir
from support.api_server import ApiServer


def _run(server: ApiServer, tmp_path: Path, out: str, *extra: str, model: str = "openai:fake") -> int:
    task = write_tiny_beir(tmp_path / "tiny")
    api = ["--api-base", server.url, "--texts-per-request", "1", "--max-concurrency", "1"]
    return main(
        ["run", "--model", model, *(api if model.startswith("openai:") else []), "--tasks", str(task)]
        + ["--output-folder", str(tmp_path / out), "--cache-dir", str(tmp_path / f"{out}-cache"), "--no-progress"]
        + list(extra)
    )


def _score(tmp_path: Path, out: str) -> float:
    result = json.loads((tmp_path / out / "openai__fake" / "127.0.0.1" / "tiny.json").read_text())
    return result["scores"]["test"][0]["main_score"]


@pytest.mark.slow
def test_a_run_stops_at_the_budget_and_a_rerun_pays_only_for_the_rest(server, tmp_path, capsys):
    assert _run(server, tmp_path, "plain") == 0
    server.requests.clear()
    capsys.readouterr()
    # the queries (1 token each), then documents longest first (estimated 12, 8, 7, 6 tokens): 20 stops before d3
    assert _run(server, tmp_path, "out", "--budget", "20") == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "embedscope: error: --budget 20 tokens reached: 15 tokens paid in this run (5 requests); the cache keeps "
        "them, so a rerun with a higher --budget pays only for the rest"
    )
    first = server.requested
    assert len(first) == len(set(first)) == 5
    assert not list((tmp_path / "out").rglob("tiny.json"))  # the task did not finish: no result
    server.requests.clear()
    assert _run(server, tmp_path, "out", "--budget", "1000") == 0
    again = server.requested
    assert not set(first) & set(again)  # nothing paid twice
    assert sorted(first + again) == sorted([*TINY_CORPUS.values(), *TINY_QUERIES.values()])
    assert _score(tmp_path, "out") == _score(tmp_path, "plain")


def test_requests_in_flight_count_against_the_budget(server):
    texts = [f"w{i:02d}" for i in range(20)]  # one token each, estimated and billed
    enc = load_encoder("openai:fake", api_base=server.url, budget="7", texts_per_request=1, max_concurrency=4)
    with pytest.raises(SettingError, match=r"^budget 7 tokens reached: 7 tokens paid in this run \(7 requests\); "):
        enc.encode(texts, role="document")
    assert len(server.requested) == 7


def test_a_spend_budget_caps_at_the_price(server):
    enc = load_encoder("openai:fake", api_base=server.url, budget="$3", price_per_mtok=1e6, texts_per_request=1)
    with pytest.raises(SettingError, match=r"^budget \$3 reached: \$3\.0000 paid in this run \(3 tokens, 3 requests"):
        enc.encode(["a", "b", "c", "d"], role="document")
    assert len(server.requested) == 3


def test_a_spend_budget_without_a_price_is_refused(server):
    with pytest.raises(SettingError, match=r"budget \$0.5 is a spend: give model_options.price_per_mtok too"):
        load_encoder("openai:fake", api_base=server.url, budget="$0.50")
    assert server.requests == []


def test_a_budget_with_a_local_model_is_refused(server, tmp_path, capsys):
    assert _run(server, tmp_path, "out", "--budget", "100", model="minilm") == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "embedscope: error: budget: for models behind an API only (openai:NAME, cohere:NAME, voyage:NAME, or a model "
        "name with api_base), not minilm"
    )


@pytest.mark.parametrize("bad", ["0", -5, "nan", "inf", "$-1", "$inf", "$", "1.5", "lots", True])
def test_a_budget_that_is_not_positive_and_finite_is_refused(bad):
    with pytest.raises(ValidationError, match="budget"):
        RunSettings(budget=bad)


def test_budgets_in_tokens_and_dollars_are_taken():
    assert [RunSettings(budget=b).budget for b in (50000, "50,000", " $0.50 ")] == ["50000", "50,000", "$0.50"]
