"""The HTML report of real (fake-model) runs, opened in headless Chromium: no console errors, leaderboard
numbers equal the result JSON, sorting reorders rows, nothing is loaded from outside the file."""

from __future__ import annotations

import json
import warnings

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.compare.html import borda_points
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.testing.tiny import TINY_WORDS, tiny_tasks_of_every_type
from support.browser import headless_page

MODELS = ("fake/hash-encoder", "fake/keyword-encoder", "fake/hash-8")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("html")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for encoder in (HashEncoder(), KeywordEncoder(TINY_WORDS, similarity="cosine"), HashEncoder(8, "fake/hash-8")):
            tasks = [
                t
                for t in tiny_tasks_of_every_type()
                if t.type in ("Retrieval", "STS", "Classification", "PairClassification")
            ]
            embedscope.evaluate(encoder, tasks, output_folder=root / "res", cache=False, show_progress=False)
    path = root / "report.html"
    assert main(["report", str(root / "res"), "--html", str(path), "--rounds", "500"]) == 0
    return root, path


def _json_means(root):
    """Mean over tasks of each model's main score, straight from the result files (MTEB's get_score)."""
    means = {}
    for meta in (root / "res").rglob("model_meta.json"):
        scores = []
        for p in meta.parent.glob("*.json"):
            if p.name != "model_meta.json":
                entries = [e for es in json.loads(p.read_text())["scores"].values() for e in es]
                scores.append(sum(e["main_score"] for e in entries) / len(entries))
        means[json.loads(meta.read_text())["name"]] = sum(scores) / len(scores)
    return means


@pytest.mark.slow
def test_page_is_self_contained(report):
    _, path = report
    text = path.read_text()
    assert (
        "<script src" not in text
        and "<link" not in text
        and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
        and "https://" not in text
    )


@pytest.mark.slow
def test_in_headless_chromium(report):
    root, path = report
    expected = _json_means(root)
    with headless_page(path) as opened:
        page = opened.page

        def rows():
            return page.eval_on_selector_all(
                "#leaderboard tbody tr",
                "rs => rs.map(r => [r.cells[0].textContent, "
                "r.cells[2].getAttribute('data-value'), r.cells[2].textContent])",
            )

        shown = rows()
        assert {m for m, _, _ in shown} == set(MODELS)
        for model, value, text in shown:
            assert float(value) == pytest.approx(expected[model], abs=1e-12) and text == f"{expected[model]:.4f}"
        page.click("#leaderboard th:nth-child(3)")
        desc = [m for m, _, _ in rows()]
        assert desc == sorted(expected, key=lambda m: -expected[m])
        page.click("#leaderboard th:nth-child(3)")
        assert [m for m, _, _ in rows()] == desc[::-1]
        page.click("#leaderboard th:nth-child(1)")
        assert [m for m, _, _ in rows()] == sorted(MODELS, reverse=True)
        markers = page.eval_on_selector("figure[data-task='TinySTS']", "f => f.textContent")
        assert "▲" in markers  # the keyword model beats the baseline (first model) on STS
        assert page.locator("#metadata tbody tr").count() == 3
        shot = opened.screenshot("html_report.png")
        assert shot.stat().st_size > 1000
    assert opened.errors == [] and opened.requests == [path.as_uri()]


def test_borda_by_hand():
    scores = {"a": {"t": 0.9, "u": 0.1}, "b": {"t": 0.5, "u": 0.5}, "c": {"t": 0.5}}
    assert borda_points(scores, ["t", "u"]) == {"a": 2, "b": 1, "c": 0}


@pytest.mark.slow
def test_unknown_baseline_is_one_line(report, capsys):
    root, _ = report
    assert main(["report", str(root / "res"), "--html", str(root / "x.html"), "--baseline", "nope"]) == 2
    assert "--baseline 'nope' is none of the models" in capsys.readouterr().err
