"""A sweep's manifest (``sweeps/<grid>.json``) and what reads it: ``report --html`` adds the sweep view for a folder
a sweep wrote, an interrupted sweep's manifest holds the points done so far, and the latency columns (p50/p95) are
numpy's percentiles of the samples each result recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.sweep.grid import SweepGrid, run_sweep
from embedscope.sweep.html import sweep_html
from embedscope.sweep.manifest import SweepManifest, find_manifests, read_manifest
from embedscope.sweep.report import sweep_report
from embedscope.testing.fakes import KeywordEncoder
from support.browser import headless_page

from .test_sweep import WORDS, base, write_beir


def _stored_score(path: Path) -> float:
    return json.loads(path.read_text())["scores"]["test"][0]["main_score"]


def _sweep_cli(beir: Path, out: Path, *extra: str) -> list[str]:
    args = ["sweep", "--tasks", str(beir), "--output-folder", str(out), "--set", "show_progress=false", "-q"]
    return [*args, "--axis", "model=bm25,fts5", "--axis", "top_k=3,50", *extra]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A finished CLI sweep and the report page over its folder."""
    tmp = tmp_path_factory.mktemp("sweep-report")
    beir, out = write_beir(tmp / "words"), tmp / "out"
    assert main(_sweep_cli(beir, out, "--json")) == 0
    page = tmp / "report.html"
    assert main(["report", str(out), "--html", str(page), "--rounds", "500"]) == 0
    return out, page


@pytest.mark.slow
def test_the_sweep_writes_a_manifest_of_every_point(swept):
    out, _ = swept
    (path,) = find_manifests(out)
    data = json.loads(path.read_text())
    assert data["complete"] is True and data["points_total"] == 4 and len(data["points"]) == 4
    assert [a["key"] for a in data["axes"]] == ["model", "top_k"]
    recorded = read_manifest(path)
    assert [o.point.values for o in recorded.outcomes] == [
        {"model": m, "top_k": k} for m in ("bm25", "fts5") for k in (3, 50)
    ]
    for outcome in recorded.outcomes:
        (result,) = outcome.paths.values()
        assert (
            result.is_file()
            and json.loads(result.read_text())["run_settings"]["top_k"] == outcome.point.values["top_k"]
        )


@pytest.mark.slow
def test_report_html_adds_the_sweep_view_with_the_stored_scores(swept):
    out, page_path = swept
    page = page_path.read_text()
    assert page.index("<h2>Leaderboard</h2>") < page.index("<h2>Sweeps</h2>") < page.index("<h2>Runs</h2>")
    sweep = page[page.index("<h2>Sweeps</h2>") : page.index("<h2>Runs</h2>")]
    recorded = read_manifest(find_manifests(out)[0])
    stored = {o.point.index: _stored_score(next(iter(o.paths.values()))) for o in recorded.outcomes}
    figure = re.search(r"<figure class='scatter'[^>]*data-cost='query_s'.*?</figure>", sweep, re.S)
    assert figure is not None
    circles = re.findall(r"<circle class='pt[^>]*data-point='(\d+)' data-score='([^']*)'", figure.group(0))
    assert {int(p): float(s) for p, s in circles} == stored
    assert sweep.count("<figure class='axis-chart'") == 1 and "data-axis='top_k'" in sweep
    assert "data-done='4' data-total='4'" in sweep and "Interrupted" not in sweep


@pytest.mark.slow
def test_the_same_grid_resumed_keeps_one_manifest_and_another_grid_gets_its_own(tmp_path):
    beir, out = write_beir(tmp_path / "words"), tmp_path / "out"
    assert main(_sweep_cli(beir, out)) == 0
    assert main(_sweep_cli(beir, out)) == 0
    assert len(find_manifests(out)) == 1
    assert main(_sweep_cli(beir, out)[:-2] + ["--axis", "top_k=5"]) == 0
    assert len(find_manifests(out)) == 2


@pytest.mark.slow
def test_an_interrupted_sweep_leaves_a_valid_manifest_of_the_points_done(tmp_path):
    beir = write_beir(tmp_path / "words")
    grid = SweepGrid([base(beir, tmp_path)], [("model", ["bm25", "fts5"]), ("top_k", [3, 50])])
    manifest = SweepManifest.for_grid(grid)
    manifest.write()
    assert read_manifest(manifest.path).outcomes == []  # valid before the first point

    def stop_after_two(outcome):
        manifest.add(outcome)
        if len(manifest.points) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(grid, log=None, on_point=stop_after_two)
    recorded = read_manifest(manifest.path)
    assert len(recorded.outcomes) == 2 and recorded.total == 4 and not recorded.complete
    assert json.loads(manifest.path.read_text())["complete"] is False
    page = tmp_path / "report.html"
    assert main(["report", str(tmp_path / "out"), "--html", str(page), "--rounds", "200"]) == 0
    assert "Interrupted or running: 2 of 4 points done." in page.read_text()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),  # the report's own reading of every JSON file says so first
        ('{"format": "other"}', "not a embedscope-sweep version 2 manifest"),
    ],
)
def test_a_broken_manifest_is_one_line(swept, tmp_path, capsys, text, message):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(swept[0], out)
    (out / "sweeps" / "broken.json").write_text(text)
    assert main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "broken.json" in err and message in err and err.count("\n") == 1


@pytest.mark.slow
def test_a_missing_result_is_named(swept, tmp_path, capsys):
    import shutil

    out = tmp_path / "out"
    shutil.copytree(swept[0], out)
    result = read_manifest(find_manifests(out)[0]).outcomes[1].paths
    next(iter(result.values())).unlink()
    assert main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert "fts5" not in err.split("point")[0] and "is missing" in err and err.count("\n") == 1


@pytest.mark.slow
def test_latency_columns_are_numpy_percentiles_of_the_recorded_samples(tmp_path):
    beir = write_beir(tmp_path / "words")
    encoder = KeywordEncoder(WORDS, name="fake/keywords", similarity="cosine")
    grid = SweepGrid([base(beir, tmp_path, model=encoder, latency_sample=10)], [("truncate_dim", [None, 4])])
    outcomes = run_sweep(grid, log=None)
    report = sweep_report(outcomes, ["truncate_dim"])
    for row in report.rows:
        samples = json.loads(Path(row.path).read_text())["query_latency"]["test"]["total_ms"]
        assert len(samples) == 10
        assert row.costs["p50_ms"] == np.percentile(samples, 50) and row.costs["p95_ms"] == np.percentile(samples, 95)
    assert "p50 ms" in report.markdown() and "p95 ms" in report.markdown()
    header = report.csv().splitlines()[0].split(",")
    assert "p50_ms" in header and "p95_ms" in header
    assert all("p50_ms" in r["costs"] for r in report.to_dict()["rows"])
    assert "data-cost='p95_ms'" in sweep_html(report)
    plain = run_sweep(SweepGrid([base(beir, tmp_path / "plain", model=encoder)], [("truncate_dim", [None, 4])]), None)
    for timed, untimed in zip(outcomes, plain):
        assert _stored_score(timed.paths["words"]) == _stored_score(untimed.paths["words"])


@pytest.mark.slow
def test_report_sweep_view_in_headless_chromium(swept):
    _, path = swept
    with headless_page(path) as opened:
        page = opened.page
        drawn = page.eval_on_selector_all(
            "div.sweep figure.scatter[data-cost='query_s'] circle.pt",
            "cs => cs.map(c => { const b = c.getBBox(); return [c.dataset.pareto, b.width]; })",
        )
        assert len(drawn) == 4 and all(w > 0 for _, w in drawn)
        frontier = page.eval_on_selector(
            "div.sweep figure.scatter[data-cost='query_s'] polyline.frontier", "l => l.points.numberOfItems"
        )
        assert frontier == sum(flag == "1" for flag, _ in drawn) >= 1
        bands = page.eval_on_selector_all(
            "div.sweep figure.axis-chart[data-axis='top_k'] polygon.band", "ps => ps.map(p => p.getBBox().width)"
        )
        assert len(bands) == 2 and all(w > 0 for w in bands)
        assert page.locator("table.leaderboard, table").count() >= 2  # the report's own tables stay
        opened.screenshot("report_with_sweep.png")
    assert opened.errors == [] and opened.requests == [path.as_uri()]
