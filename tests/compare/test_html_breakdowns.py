"""The HTML report's loss split and query groups (issue 51, items 1 and 2): the split's numbers are
:func:`~embedscope.metrics.failures.loss_split` of the per-item rows (read here with gzip and json alone) and add up
to the loss; a model without failure columns shows "—"; each group's cell is the entry its result stores; the page
stays self-contained, and opens in headless Chromium without an error or a request."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from embedscope.compare.core import CompareOptions
from embedscope.compare.html import build_html
from embedscope.metrics.failures import loss_split
from support.made_up import retrieval_values, write_result

GROUPS = ["en"] * 30 + ["de"] * 25 + ["fr"]


class Tables(HTMLParser):
    """Every ``<table>`` with a ``data-task``: its class, and per row the row's and each cell's attributes and text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._row: list[dict] | None = None
        self._cell: dict | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "table" and "data-task" in a:
            self.tables.append({"class": a.get("class"), "task": a["data-task"], "rows": []})
        elif tag == "tr" and self.tables:
            self._row = []
            self.tables[-1]["rows"].append({"attrs": a, "cells": self._row})
        elif tag in ("td", "th") and self._row is not None:
            self._cell = {"attrs": a, "text": ""}
            self._row.append(self._cell)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._cell = None
        elif tag == "table":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data


def tables_of(page: str, kind: str) -> dict[str, dict]:
    parser = Tables()
    parser.feed(page)
    return {t["task"]: t for t in parser.tables if t["class"] == kind}


def pipeline_rows(n: int, seed: int) -> tuple[np.ndarray, dict[str, list]]:
    """A reranking pipeline's made-up rows: each query's failure class, its ceiling and an nDCG@10 that agree."""
    rng = np.random.default_rng(seed)
    failure = rng.choice(["candidate_miss", "ranking", "none"], size=n, p=[0.3, 0.5, 0.2]).tolist()
    ceiling = np.where(np.array(failure) == "candidate_miss", 0.0, rng.uniform(0.3, 1.0, n))
    ndcg = np.where(np.array(failure) == "ranking", ceiling * rng.uniform(0.1, 0.9, n), ceiling)
    recall = np.where(np.array(failure) == "candidate_miss", 0.0, rng.uniform(0.3, 1.0, n))
    return ndcg, {"candidates_recall": recall.tolist(), "ceiling_ndcg_at_10": ceiling.tolist(), "failure": failure}


def stages() -> dict:
    """A two-stage pipeline's ``pipeline_stages`` record (what marks a result as a pipeline's)."""
    record = {"stage": "stage2", "name": "rr", "kind": "reranker", "main_score": 0.0}
    return {"test": [{"stage": "stage1", "name": "bm25", "kind": "retriever", "main_score": 0.0}, record]}


def per_item(folder: Path, task: str) -> list[dict]:
    (path,) = folder.rglob(f"{task}.per_item.jsonl.gz")
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def stored_groups(folder: Path, task: str) -> dict:
    (path,) = folder.rglob(f"{task}.json")
    return json.loads(path.read_text())["scores"]["test"][0]["groups"]["lang"]


@pytest.fixture
def made_up(tmp_path) -> Path:
    """Two models on T1 (grouped by lang): a reranking pipeline with failure columns, and a dense model without;
    and T2, where neither has failure columns or groups."""
    root = tmp_path / "res"
    ndcg, columns = pipeline_rows(len(GROUPS), seed=5)
    write_result(
        root, "org/rerank", "T1", ndcg, groups=GROUPS, group_by="lang", columns=columns, pipeline_stages=stages()
    )
    write_result(root, "org/dense", "T1", retrieval_values(len(GROUPS), 0.5, seed=2), groups=GROUPS, group_by="lang")
    for model in ("org/rerank", "org/dense"):
        write_result(root, model, "T2", retrieval_values(20, 0.5, seed=3))
    return root


def _check_split(row: dict, rows: list[dict]) -> None:
    """One loss-split row against the per-item rows it was computed from."""
    cells = {c["attrs"].get("class"): c for c in row["cells"]}
    ndcg = [r["ndcg_at_10"] for r in rows]
    ceiling = [r["ceiling_ndcg_at_10"] for r in rows]
    failure = [r["failure"] for r in rows]
    expected = loss_split(ndcg, ceiling, failure)

    def value(name: str) -> float:
        return float(cells[name]["attrs"]["data-value"])

    assert int(value("queries")) == expected.queries == len(rows)
    assert (value("loss"), value("loss-recall"), value("loss-ranking"), value("loss-partial")) == (
        expected.loss,
        expected.recall,
        expected.ranking,
        expected.partial,
    )
    assert value("loss-recall") + value("loss-ranking") + value("loss-partial") == pytest.approx(
        value("loss"), abs=1e-12
    )
    assert value("ndcg") == pytest.approx(np.mean(ndcg), abs=1e-12) and value("loss") == pytest.approx(
        1 - np.mean(ndcg), abs=1e-12
    )
    # the split by hand, from the module's formulas
    n = len(rows)
    by_hand = (
        sum(1 - v for v, f in zip(ndcg, failure) if f == "candidate_miss") / n,
        sum(c - v for v, c, f in zip(ndcg, ceiling, failure) if f == "ranking") / n,
        (
            sum(1 - c for c, f in zip(ceiling, failure) if f == "ranking")
            + sum(1 - v for v, f in zip(ndcg, failure) if f == "none")
        )
        / n,
    )
    assert (value("loss-recall"), value("loss-ranking"), value("loss-partial")) == pytest.approx(by_hand, abs=1e-12)
    shares = [float(cells[c]["attrs"]["data-share"]) for c in ("loss-recall", "loss-ranking", "loss-partial")]
    assert shares == pytest.approx([p / value("loss") for p in by_hand], abs=1e-12)
    assert sum(shares) == pytest.approx(1.0, abs=1e-12)
    assert f"({shares[0]:.0%})" in cells["loss-recall"]["text"]
    counts = Counter(failure)
    assert [int(value(c)) for c in ("candidate-miss", "ranking-failures", "no-failure")] == [
        counts["candidate_miss"],
        counts["ranking"],
        counts["none"],
    ]


def _check_groups(table: dict, folders: dict[str, Path], task: str) -> None:
    """Each cell of a groups table against the group entry its model's result stores."""
    body = [r for r in table["rows"] if r["cells"] and r["cells"][0]["attrs"].get("class") == "group"]
    shown = {}
    for row in body:
        for cell in row["cells"][2:]:
            if "data-model" in cell["attrs"]:
                shown[(row["cells"][0]["text"], cell["attrs"]["data-model"])] = cell
    expected = 0
    for model, folder in folders.items():
        for value, g in stored_groups(folder, task).items():
            cell = shown[(f"lang={value}", model)]
            a = cell["attrs"]
            assert float(a["data-value"]) == g["main_score"] and int(a["data-n"]) == g["n"]
            for key in ("ci_low", "ci_high"):
                attr = a["data-" + key.replace("_", "-")]
                assert (attr == "" and g[key] is None) or float(attr) == g[key]
            assert f"n={g['n']}" in cell["text"] and f"{g['main_score']:.4f}" in cell["text"]
            expected += 1
    assert len(shown) == expected == 6


def _self_contained(page: str) -> None:
    assert "<script src" not in page and "<link" not in page and "https://" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")


def test_the_loss_split_is_loss_split_of_the_rows_and_groups_are_the_stored_entries(made_up) -> None:
    page = build_html([made_up], options=CompareOptions(rounds=200))
    losses = tables_of(page, "loss-split")
    assert list(losses) == ["T1"]  # T2: no model's rows carry failure columns
    rows = {r["attrs"].get("data-model") or r["cells"][0]["text"]: r for r in losses["T1"]["rows"][1:]}
    assert set(rows) == {"org/rerank", "org/dense"}
    _check_split(rows["org/rerank"], per_item(made_up / "org__rerank", "T1"))
    dense = rows["org/dense"]
    assert dense["attrs"]["class"] == "not-reranked" and dense["cells"][1]["text"].startswith("—")
    assert "not a pipeline that reranks" in dense["cells"][1]["text"]
    groups = tables_of(page, "query-groups")
    assert list(groups) == ["T1"]
    _check_groups(groups["T1"], {"org/rerank": made_up / "org__rerank", "org/dense": made_up / "org__dense"}, "T1")
    assert page.index("<h2>Loss split</h2>") < page.index("<h2>Query groups</h2>") < page.index("<h2>Runs</h2>")
    _self_contained(page)


def test_a_report_without_pipelines_or_groups_has_neither_section(tmp_path) -> None:
    for model in ("org/a", "org/b"):
        write_result(tmp_path, model, "T1", retrieval_values(20, 0.5, seed=1))
    page = build_html([tmp_path], options=CompareOptions(rounds=100))
    assert "Loss split" not in page and "Query groups" not in page and not tables_of(page, "loss-split")


@pytest.fixture(scope="module")
def real_runs(tmp_path_factory) -> tuple[Path, Path]:
    """A dense model, a BM25 → reranker pipeline and a BM25 + FTS5 fusion on a BEIR folder of 40 queries grouped by
    lang, reported with ``embedscope report --html``."""
    import embedscope
    from embedscope.cli.main import main
    from embedscope.retrieval.pipeline import Pipeline, RerankStep
    from embedscope.testing.fakes import KeywordEncoder, OverlapReranker

    words = ["cat", "dog", "fish", "bird", "cow", "fox"]
    root = tmp_path_factory.mktemp("breakdowns")
    data = root / "data"
    (data / "qrels").mkdir(parents=True)
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(words, size=3)) for _ in range(60)]
    langs = ["en"] * 20 + ["de"] * 19 + ["fr"]
    queries, qrels = [], []
    for i, lang in enumerate(langs):
        queries.append({"_id": f"q{i}", "text": " ".join(rng.choice(words, size=2)), "metadata": {"lang": lang}})
        for d, grade in zip(rng.choice(len(docs), size=3, replace=False), (3, 2, 1)):
            qrels.append(f"q{i}\td{d}\t{grade}\n")
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(docs))
    )
    (data / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    bm25 = Pipeline.build("bm25").retrievers
    models = [
        KeywordEncoder(words, name="kw/dense"),
        Pipeline(bm25, rerankers=[RerankStep(OverlapReranker(), 5)], name="bm25-rerank"),
        Pipeline.build(["bm25", "fts5"], name="bm25-fts5"),
    ]
    for model in models:
        embedscope.evaluate(
            model, [str(data)], output_folder=root / "res", cache=False, group_by="lang", top_k=10, show_progress=False
        )
    path = root / "report.html"
    assert main(["report", str(root / "res"), "--html", str(path), "--rounds", "200"]) == 0
    return root, path


@pytest.mark.slow
def test_real_pipelines_in_headless_chromium(real_runs) -> None:
    from support.browser import headless_page

    root, path = real_runs
    page = path.read_text()
    _self_contained(page)
    losses = tables_of(page, "loss-split")["data"]
    rows = {r["attrs"].get("data-model") or r["cells"][0]["text"]: r for r in losses["rows"][1:]}
    assert set(rows) == {"bm25-rerank", "bm25-fts5", "kw/dense"}
    for name in ("bm25-rerank", "bm25-fts5"):
        found = (root / "res").rglob("data.per_item.jsonl.gz")
        (items,) = [p for p in found if name in str(p) and not p.parent.name.startswith("stage")]
        read = [json.loads(line) for line in gzip.decompress(items.read_bytes()).decode().splitlines()]
        _check_split(rows[name], read)
        # the run recorded the last stage's split with the same function: the report agrees with it
        result = items.with_name("data.json")
        recorded = json.loads(result.read_text())["pipeline_stages"]["test"][-1]["failures"]
        cells = {c["attrs"].get("class"): c for c in rows[name]["cells"]}
        assert math.isclose(float(cells["loss"]["attrs"]["data-value"]), recorded["loss"], abs_tol=1e-12)
    assert rows["kw/dense"]["attrs"]["class"] == "not-reranked"
    with headless_page(path) as opened:
        shown = opened.page.eval_on_selector_all(
            "table.loss-split tbody tr", "rs => rs.map(r => [r.cells[0].textContent, r.cells.length])"
        )
        assert sorted(shown) == [["bm25-fts5", 11], ["bm25-rerank", 11], ["kw/dense", 2]]
        groups = opened.page.eval_on_selector_all(
            "table.query-groups tbody tr", "rs => rs.map(r => r.cells[0].textContent)"
        )
        assert sorted(groups) == ["lang=de", "lang=en", "lang=fr"]
        assert opened.page.locator("table.query-groups").is_visible()
        assert opened.screenshot("html_report_breakdowns.png").stat().st_size > 1000
    assert opened.errors == [] and opened.requests == [path.as_uri()]


def _with_compute(folder: Path, threads: dict, model: str = "Xeon") -> None:
    """Every result in ``folder`` as if run with ``threads`` on a CPU named ``model``."""
    for path in folder.glob("*.json"):
        if path.name == "model_meta.json":
            continue
        data = json.loads(path.read_text())
        data["compute"] = {"threads": threads, "cpu": {"model": model, "isa": "avx2"}}
        path.write_text(json.dumps(data))


def test_the_report_says_when_models_ran_with_other_threads_and_not_when_alike(tmp_path) -> None:
    from embedscope.compare.html import metadata_html
    from embedscope.compare.items import load_model_results

    folders = {m: write_result(tmp_path, m, "T1", retrieval_values(20, 0.5, seed=1)) for m in ("org/a", "org/b")}
    _with_compute(folders["org/a"], {"torch": {"intra_op": 2, "inter_op": 2}})
    _with_compute(folders["org/b"], {"torch": {"intra_op": 2, "inter_op": 2}})
    models = [load_model_results(f) for f in folders.values()]
    alike = metadata_html(models, ["a", "b"])
    assert "compute-differs" not in alike and alike.count("compute: torch intra_op 2, inter_op 2; Xeon (avx2)") == 2
    _with_compute(folders["org/b"], {"onnxruntime": {"intra_op": 4, "inter_op": 1}})
    unlike = metadata_html([load_model_results(f) for f in folders.values()], ["a", "b"])
    assert (
        "the seconds compare unlike compute: threads differ (a: torch intra_op 2, inter_op 2; b: onnxruntime "
        "intra_op 4, inter_op 1)" in unlike
    )
    assert "CPUs differ" not in unlike
