"""``sweep --html``: the page of a real (fake-model) sweep. Every drawn point carries the stored score and cost, the
frontier joins exactly the points no other point dominates (recomputed here by brute force), each numeric axis has
one line per combination of the other axes with its CI band; in headless Chromium (slow tier) the page draws them,
logs no error and loads nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.sweep.grid import SweepGrid, run_sweep
from embedscope.sweep.html import numeric_axes, sweep_html
from embedscope.sweep.report import sweep_report
from embedscope.testing.fakes import KeywordEncoder
from support.browser import headless_page

from .test_sweep import WORDS, base, write_beir

AXES = ["truncate_dim", "precision"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep-html")
    beir = write_beir(tmp / "words")
    encoder = KeywordEncoder(WORDS, name="fake/keywords", similarity="cosine")
    grid = SweepGrid(
        [base(beir, tmp, model=encoder)],
        [("truncate_dim", [None, 4]), ("precision", ["fp32", "int8", "binary"])],
    )
    outcomes = run_sweep(grid, log=None)
    report = sweep_report(outcomes, AXES)
    page = sweep_html(report)
    path = tmp / "sweep.html"
    path.write_text(page, encoding="utf-8")
    return outcomes, report, page, path


def _attrs(tag: str) -> dict[str, str]:
    return dict(re.findall(r"([\w-]+)='([^']*)'", tag))


def _figure(page: str, kind: str, key: str, value: str) -> str:
    match = re.search(rf"<figure class='{kind}'[^>]*{key}='{value}'.*?</figure>", page, re.S)
    assert match, f"no {kind} figure with {key}={value}"
    return match.group(0)


def _stored_score(path: Path) -> float:
    return json.loads(path.read_text())["scores"]["test"][0]["main_score"]


def dominated(i: int, points: list[tuple[float, float]], lower: bool) -> bool:
    """Brute force: another point scores at least as well at no greater cost, and is better on one."""
    s, c = points[i]
    sign = 1 if lower else -1
    return any(
        t >= s and sign * d <= sign * c and (t > s or sign * d < sign * c) for j, (t, d) in enumerate(points) if j != i
    )


@pytest.mark.slow
def test_page_is_self_contained(swept):
    page = swept[2]
    assert "<script src" not in page and "<link" not in page and "https://" not in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")


@pytest.mark.slow
def test_scatter_points_carry_the_stored_scores_and_the_frontier_is_the_undominated(swept):
    outcomes, report, page, _ = swept
    stored = {o.point.index: _stored_score(o.paths["words"]) for o in outcomes}
    figure = _figure(page, "scatter", "data-cost", "bytes_per_vector")
    circles = [_attrs(t) for t in re.findall(r"<circle class='pt[^>]*>", figure)]
    assert len(circles) == 6
    points = [(float(c["data-score"]), float(c["data-cost"])) for c in circles]
    assert {int(c["data-point"]): float(c["data-score"]) for c in circles} == stored
    # bytes per vector: 10 dimensions (4 truncated) × 32 / 8 / 1 bits, rounded up to whole bytes
    costs = {int(c["data-point"]): float(c["data-cost"]) for c in circles}
    assert costs == {0: 40, 1: 10, 2: 2, 3: 16, 4: 4, 5: 1}
    on = {int(c["data-point"]) for c, p in zip(circles, points) if not dominated(circles.index(c), points, True)}
    assert {int(c["data-point"]) for c in circles if c["data-pareto"] == "1"} == on
    (line,) = re.findall(r"<polyline class='frontier'[^>]*>", figure)
    frontier = _attrs(line)
    assert [int(p) for p in frontier["data-points"].split()] == sorted(on, key=lambda p: costs[p])
    # the polyline passes through the frontier circles, in cost order
    xy = {int(c["data-point"]): f"{c['cx']},{c['cy']}" for c in circles}
    assert frontier["points"].split() == [xy[p] for p in sorted(on, key=lambda p: costs[p])]


@pytest.mark.slow
def test_one_scatter_per_cost_two_points_have(swept):
    _, report, page, _ = swept
    drawn = re.findall(r"<figure class='scatter'[^>]*data-cost='(\w+)'", page)
    expected = [n for n in ("encode_s", "query_s", "ms_per_query", "qps", "peak_mb", "bytes_per_vector")]
    expected = [n for n in expected if sum(r.costs.get(n) is not None for r in report.rows) >= 2]
    assert drawn == expected and "peak_mb" not in drawn  # a plain encoder records no stage memory
    for cost in drawn:  # qps: higher is better; the others lower
        figure = _figure(page, "scatter", "data-cost", cost)
        circles = [_attrs(t) for t in re.findall(r"<circle class='pt[^>]*>", figure)]
        points = [(float(c["data-score"]), float(c["data-cost"])) for c in circles]
        marked = [c["data-pareto"] == "1" for c in circles]
        assert marked == [not dominated(i, points, cost != "qps") for i in range(len(points))]


@pytest.mark.slow
def test_a_line_and_a_ci_band_per_combination_of_the_other_axes(swept):
    outcomes, report, page, _ = swept
    assert numeric_axes(report.rows, AXES) == ["truncate_dim"]
    figure = _figure(page, "axis-chart", "data-axis", "truncate_dim")
    series = re.findall(r"<g class='series' data-series='([^']*)'>(.*?)</g>", figure, re.S)
    assert [name for name, _ in series] == ["precision=fp32", "precision=int8", "precision=binary"]
    rows = {r.point: r for r in report.rows}
    for _, body in series:
        assert body.count("<polygon class='band'") == 1 and body.count("<polyline class='line'") == 1
        circles = [_attrs(t) for t in re.findall(r"<circle class='axis-pt[^>]*>", body)]
        assert [c["data-value"] for c in circles] == ["4.0", ""]  # 4 left of "default" (the full dimension)
        for c in circles:
            row = rows[int(c["data-point"])]
            assert float(c["data-score"]) == _stored_score(outcomes[row.point].paths["words"])
            assert float(c["data-ci-low"]) == row.ci_low <= row.score <= row.ci_high == float(c["data-ci-high"])
    assert "<figure class='axis-chart'" not in page.replace(figure, "")  # precision is not numeric


def test_numeric_axes():
    from embedscope.sweep.report import SweepRow

    def row(**values):
        return SweepRow(0, "", values, "m", "t", "ndcg", 0.5, 0.4, 0.6, 10)

    rows = [row(top_k=10, model="a", flag=True), row(top_k=100, model="b", flag=False)]
    assert numeric_axes(rows, ["top_k", "model", "flag"]) == ["top_k"]
    assert numeric_axes([row(d=None), row(d=None)], ["d"]) == []


@pytest.mark.slow
def test_cli_writes_the_page(tmp_path, capsys):
    beir = write_beir(tmp_path / "words")
    out = tmp_path / "sweep.html"
    args = ["sweep", "--tasks", str(beir), "--output-folder", str(tmp_path / "out"), "--set", "show_progress=false"]
    assert main([*args, "--axis", "model=bm25,fts5", "--axis", "top_k=3,50", "--html", str(out), "-q"]) == 0
    page = out.read_text()
    assert page.count("<figure class='axis-chart'") == 1 and "data-axis='top_k'" in page
    assert f"wrote {out}" in capsys.readouterr().err


@pytest.mark.slow
def test_in_headless_chromium(swept):
    _, report, _, path = swept
    with headless_page(path) as opened:
        page = opened.page
        scatter = "figure.scatter[data-cost='bytes_per_vector']"
        drawn = page.eval_on_selector_all(
            f"{scatter} circle.pt",
            "cs => cs.map(c => { const b = c.getBBox(); return [c.dataset.point, c.dataset.pareto, b.width]; })",
        )
        assert len(drawn) == 6 and all(w > 0 for _, _, w in drawn)
        on = {str(r.point) for r in report.rows if "bytes_per_vector" in r.pareto}
        assert {p for p, flag, _ in drawn if flag == "1"} == on
        frontier = page.eval_on_selector(
            f"{scatter} polyline.frontier", "l => [l.points.numberOfItems, l.getBBox().width]"
        )
        assert frontier[0] == len(on) and frontier[1] > 0
        bands = page.eval_on_selector_all(
            "figure.axis-chart[data-axis='truncate_dim'] polygon.band", "ps => ps.map(p => p.getBBox().height)"
        )
        assert len(bands) == 3 and all(h > 0 for h in bands)
        assert page.locator("figure.axis-chart circle.axis-pt").count() == 6
        opened.screenshot("sweep_report.png")
    assert opened.errors == [] and opened.requests == [path.as_uri()]
