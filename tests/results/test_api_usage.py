"""API usage in the answer (results/usage.py): each result records its task's requests, tokens, spend and latency;
the summary table, compare (text and HTML), sweep (table, CSV, HTML, Pareto) and screen show them. The model is a
fake encoder that reports its use (support/metered.py)."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

import embedscope
from embedscope.compare.core import compare_folders
from embedscope.compare.html import build_html
from embedscope.compare.render import comparison_text
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.models.lazy import LazyEncoder
from embedscope.results.usage import api_usage, file_usage, total_usage, usage_since
from embedscope.retrieval.dense import DenseRetriever
from embedscope.retrieval.pipeline import Pipeline
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_task
from support.metered import MeteredEncoder

KEYWORDS = ["cat", "dog", "fish"]


def _run(model, folder, name="TinyRetrieval", **kwargs):
    kwargs.setdefault("cache", False)
    return embedscope.evaluate(
        model, [tiny_retrieval_task(name)], output_folder=str(folder), show_progress=False, **kwargs
    )


def test_usage_is_found_through_wrappers_without_loading_a_lazy_model(tmp_path):
    enc = MeteredEncoder(KEYWORDS)
    enc.encode(["a cat", "a dog"], role="document", batch_size=1)
    assert api_usage(enc)["requests"] == 2
    assert api_usage(CachedEncoder(enc, EmbeddingCache(tmp_path / "c")))["requests"] == 2
    assert api_usage(Pipeline([DenseRetriever(enc)]))["tokens"] == 4

    def load():
        raise AssertionError("the lazy encoder was made to load its model")

    lazy = LazyEncoder({"name": "x", "revision": "r", "fingerprint": "f", "similarity": "cosine"}, load)
    assert api_usage(lazy) is None  # nothing loaded: no request was made, and none is made to answer
    assert api_usage(KeywordEncoder(KEYWORDS)) is None


def test_usage_since_and_totals():
    enc = MeteredEncoder(KEYWORDS, price_per_mtok=1000.0)
    enc.encode(["a cat"], role="query")
    before = api_usage(enc)
    enc.encode(["a dog barks", "fish"], role="query", batch_size=1)
    since = usage_since(enc, before)
    assert (since["requests"], since["tokens"]) == (2, 4)
    assert since["cost"] == pytest.approx(4 * 1000.0 / 1e6)
    assert since["latency_p95_ms"] == pytest.approx(np.percentile(enc.latencies, 95))  # as they stand now
    both = total_usage([since, {**since, "cost": None, "latency_p50_ms": 99.0}, None])
    assert (both["requests"], both["cost"], both["latency_p50_ms"]) == (4, None, 99.0)  # spend unknown for one
    assert total_usage([None]) is None


def test_each_result_records_its_tasks_usage_and_the_summary_shows_it(tmp_path):
    enc = MeteredEncoder(KEYWORDS, price_per_mtok=20.0)
    report = embedscope.evaluate(
        enc,
        [tiny_retrieval_task("TaskA"), tiny_retrieval_task("TaskB")],
        output_folder=str(tmp_path / "out"),
        cache=False,
        show_progress=False,
        batch_size=2,
    )
    usages = [o.result.extra["api_usage"] for o in report.outcomes]
    assert sum(u["requests"] for u in usages) == enc.requests > 0  # per task: its own requests, none twice
    assert sum(u["tokens"] for u in usages) == enc.tokens
    assert usages[0]["requests"] == usages[1]["requests"]  # the same data: the same use
    assert sum(u["cost"] for u in usages) == pytest.approx(enc.tokens * 20.0 / 1e6)
    stored = json.loads(report.outcomes[0].path.read_text())
    assert stored["api_usage"] == usages[0]  # in the result file
    table = report.table()
    header = next(line for line in table.splitlines() if line.startswith("| task"))
    for column in ("requests", "tokens", "cost", "p50 ms", "p95 ms"):
        assert f"| {column} " in header
    assert f"API: {enc.requests} requests, {enc.tokens} tokens, cost {enc.tokens * 20.0 / 1e6:.4f}" in table
    assert "tokens" not in _run(KeywordEncoder(KEYWORDS), tmp_path / "local").table()  # a local model: no columns


def test_a_cached_second_run_makes_no_request(tmp_path):
    enc = MeteredEncoder(KEYWORDS)
    first = _run(enc, tmp_path / "out", cache=str(tmp_path / "cache"))
    sent = enc.requests
    assert first.outcomes[0].result.extra["api_usage"]["requests"] == sent > 0
    again = _run(enc, tmp_path / "out", cache=str(tmp_path / "cache"), overwrite="always")
    assert enc.requests == sent
    assert again.outcomes[0].result.extra["api_usage"]["requests"] == 0
    assert "API: 0 requests" in again.table()


def _two_models(tmp_path):
    local = _run(KeywordEncoder(KEYWORDS, name="local/keywords"), tmp_path / "local")
    api = _run(MeteredEncoder(KEYWORDS, price_per_mtok=50.0), tmp_path / "api")
    return local, api


def test_compare_shows_cost_columns_for_the_api_model(tmp_path):
    local, api = _two_models(tmp_path)
    comparison = compare_folders([tmp_path / "local", tmp_path / "api"])
    usage = api.outcomes[0].result.extra["api_usage"]
    assert list(comparison.usage.values()) == [None, usage]
    text = comparison_text(comparison)
    board = text.split("\n\n")[0].splitlines()
    assert "| cost " in board[0] and "| tokens " in board[0]
    api_row = next(line for line in board if "metered" in line)
    assert f"| {usage['tokens']} " in api_row and f"| {usage['cost']:.4f} " in api_row
    assert json.loads(json.dumps(comparison.to_dict()))["api_usage"]
    page = build_html([tmp_path / "local", tmp_path / "api"])
    assert "<th>cost</th>" in page and f">{usage['cost']:.4f}</td>" in page


def test_compare_without_api_models_has_no_cost_columns(tmp_path):
    _run(KeywordEncoder(KEYWORDS, name="a/one"), tmp_path / "a")
    _run(KeywordEncoder(KEYWORDS, name="b/two"), tmp_path / "b")
    comparison = compare_folders([tmp_path / "a", tmp_path / "b"])
    assert "cost" not in comparison_text(comparison)
    assert "<th>cost</th>" not in build_html([tmp_path / "a", tmp_path / "b"])


def test_sweep_report_puts_a_free_local_model_against_a_paid_service(tmp_path):
    from embedscope.sweep.grid import PointOutcome, SweepPoint
    from embedscope.sweep.html import sweep_html
    from embedscope.sweep.report import sweep_report

    local, api = _two_models(tmp_path)
    outcomes = [
        PointOutcome(SweepPoint(i, {"model": name}, None), {"TinyRetrieval": r.outcomes[0].path}, False, 0.0, name)  # type: ignore[arg-type]
        for i, (name, r) in enumerate([("local", local), ("api", api)])
    ]
    report = sweep_report(outcomes, ["model"])
    usage = api.outcomes[0].result.extra["api_usage"]
    by_model = {r.model: r for r in report.rows}
    api_row, local_row = by_model["api"], by_model["local"]
    assert api_row.costs["api_cost"] == pytest.approx(usage["cost"]) and api_row.costs["api_tokens"] == usage["tokens"]
    assert (local_row.costs["api_cost"], local_row.costs["api_tokens"]) == (0.0, 0.0)  # local: spends nothing
    # equal scores (the same keyword vectors): the free point dominates the paid one on cost
    assert "api_cost" in local_row.pareto and "api_cost" not in api_row.pareto
    assert "API cost" in report.header() and "API cost" in report.markdown()
    rows = list(csv.DictReader(io.StringIO(report.csv())))
    assert {r["model"]: r["api_cost"] for r in rows} == {"local": "0.0", "api": repr(float(usage["cost"]))}
    page = sweep_html(report)
    assert "data-cost='api_cost'" in page and "API cost" in page


def test_sweep_report_without_api_points_keeps_its_columns(tmp_path):
    from embedscope.sweep.grid import PointOutcome, SweepPoint
    from embedscope.sweep.report import sweep_report

    local = _run(KeywordEncoder(KEYWORDS), tmp_path / "local")
    point = PointOutcome(SweepPoint(0, {}, None), {"TinyRetrieval": local.outcomes[0].path}, False, 0.0, "x")  # type: ignore[arg-type]
    report = sweep_report([point], [])
    assert "API cost" not in report.header() and "api_cost" not in report.csv()


def test_screen_tables_show_each_models_api_use(tmp_path):
    from embedscope.compare.core import CompareOptions
    from embedscope.screen.report import rankings_table, screen_csv
    from embedscope.screen.run import ScreenedModel, ScreenReport

    local, api = _two_models(tmp_path)
    models = [
        ScreenedModel("local", "local", fast_folder=local.outcomes[0].path.parent),
        ScreenedModel("api", "api", fast_folder=api.outcomes[0].path.parent, exact_folder=api.outcomes[0].path.parent),
    ]
    report = ScreenReport("x", ["TinyRetrieval"], models, [], float("nan"), None, 0.0, 0.0, 0.0, CompareOptions())
    usage = file_usage(api.outcomes[0].path)
    table = rankings_table(report)
    api_line = next(line for line in table.splitlines() if line.startswith("| 2 "))
    assert "| cost " in table and f"| {usage['tokens']} " in api_line  # the folder counted once
    rows = {r["model"]: r for r in csv.DictReader(io.StringIO(screen_csv(report)))}
    assert rows["api"]["api_tokens"] == str(usage["tokens"]) and rows["local"]["api_tokens"] == ""
