"""Three ways a sweep's report went silently wrong: a manifest of a version embedscope does not read was read as
its own; a version 1 manifest of a sweep with sub-grids lost the sub-grids' axes; and a point whose per-item file
was deleted lost its interval and paired test (and, when it was the best point, every other point's paired test)
without a word in the report page."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions
from embedscope.errors import DataFormatError
from embedscope.results.per_item import per_item_path
from embedscope.sweep.manifest import find_manifests, read_manifest
from embedscope.sweep.report import sweep_report
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_task

OPTIONS = CompareOptions(rounds=50)
V1_POINT_KEYS = ("index", "label", "values", "model", "reused", "seconds", "paths", "truncate_dim", "precision")


def _manifest(folder: Path, **data) -> Path:
    path = folder / "sweeps" / "grid.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "embedscope-sweep", "points_total": 0, "axes": [], "points": [], **data}))
    return path


def _v1(data: dict) -> dict:
    """A version 2 manifest as version 1 wrote it: shared axes only, the points done and their results."""
    points = [{k: p[k] for k in V1_POINT_KEYS} for p in data["points"] if p["done"]]
    keep = ("format", "grid", "complete", "points_total", "axes")
    return {**{k: data[k] for k in keep}, "version": 1, "points": points}


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A finished sweep with sub-grids: truncate_dim (shared) × (top_k | limits), 4 points, one results folder."""
    out = tmp_path_factory.mktemp("loose-ends") / "out"
    embedscope.sweep(
        {"truncate_dim": [1, 3]},
        grids=[{"top_k": [10]}, {"limits": [2]}],
        model=KeywordEncoder(["cat", "dog", "fish"], name="fake/keywords"),
        tasks=[tiny_retrieval_task()],
        output_folder=str(out),
        cache=False,
        show_progress=False,
        compare_options=OPTIONS,
    )
    return out


def _copy(swept: Path, tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "out"
    shutil.copytree(swept, out)
    (path,) = find_manifests(out)
    return out, path


def _sweep_part(page: Path) -> str:
    text = page.read_text()
    return text[text.index("<h2>Sweeps</h2>") : text.index("<h2>Runs</h2>")]


# -- 1. a manifest of a version embedscope does not read ----------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "found"),
    [(3, "version 3"), (True, "version true"), (2.0, "version 2.0"), ("2", 'version "2"'), (None, "no version")],
)
def test_a_manifest_of_another_version_is_refused_naming_both_versions(tmp_path, version, found):
    path = _manifest(tmp_path, **({} if version is None else {"version": version}))
    with pytest.raises(DataFormatError) as caught:
        read_manifest(path)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message
    assert f"a sweep manifest of {found};" in message and "reads versions 1 and 2" in message


@pytest.mark.slow
def test_report_html_refuses_a_newer_manifest_in_one_line_and_writes_no_page(swept, tmp_path, capsys):
    out, path = _copy(swept, tmp_path)
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "version": 3}))  # otherwise a manifest this embedscope could read
    page = tmp_path / "r.html"
    assert main(["report", str(out), "--html", str(page), "--rounds", "50"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and "version 3;" in err and "reads versions 1 and 2" in err
    assert not page.exists()


# -- 2. every axis a point varies, sub-grids included, from manifests old and new --------------------------------


def test_a_version_1_manifest_of_a_sweep_with_sub_grids_gives_back_every_axis(tmp_path):
    done = {"model": "m", "reused": False, "seconds": 0.1, "paths": {}, "truncate_dim": None, "precision": None}
    points = [  # as version 1 wrote them: no settings, no "done" (it listed only the points done)
        {"index": 0, "label": "a", "values": {"chunk": 1, "model": "bm25"}, **done},
        {"index": 1, "label": "b", "values": {"chunk": 1, "model": "minilm", "truncate_dim": 64}, **done},
    ]
    path = _manifest(tmp_path, version=1, points_total=2, axes=[{"key": "chunk", "values": [1]}], points=points)
    assert read_manifest(path).axes == ["chunk", "model", "truncate_dim"]


@pytest.mark.slow
def test_the_manifest_and_the_report_show_the_sub_grids_axes_old_manifests_too(swept, tmp_path):
    out, path = _copy(swept, tmp_path)
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["axis_keys"] == ["truncate_dim", "top_k", "limits"]
    assert read_manifest(path).axes == ["truncate_dim", "top_k", "limits"]
    path.write_text(json.dumps(_v1(data)))  # the same sweep as version 1 recorded it: shared axes only
    recorded = read_manifest(path)
    assert recorded.axes == ["truncate_dim", "top_k", "limits"] and recorded.complete and recorded.total == 4
    page = tmp_path / "r.html"
    assert main(["report", str(out), "--html", str(page), "--rounds", "50"]) == 0
    sweep = _sweep_part(page)
    for axis in ("truncate_dim", "top_k", "limits"):
        assert f"<th>{axis}</th>" in sweep
    assert "axes: truncate_dim, top_k, limits." in sweep


# -- 3. a per-item file deleted after the sweep ---------------------------------------------------------------------


def _drop_items(path: Path, best: bool) -> tuple[dict, Path]:
    """Delete the per-item file of the best point (best) or of the worst one; return its outcome's values and file."""
    recorded = read_manifest(path)
    report = sweep_report(recorded.outcomes, recorded.axes, OPTIONS)
    row = max(report.rows, key=lambda r: r.score) if best else min(report.rows, key=lambda r: r.score)
    item_file = per_item_path(row.path)
    item_file.unlink()
    return row.values, item_file


@pytest.mark.slow
@pytest.mark.parametrize("best", [False, True])
def test_a_deleted_per_item_file_is_named_in_the_report_page(swept, tmp_path, best):
    out, path = _copy(swept, tmp_path)
    _, item_file = _drop_items(path, best)
    page = tmp_path / "r.html"
    assert main(["report", str(out), "--html", str(page), "--rounds", "50"]) == 0
    sweep = _sweep_part(page)
    recorded = read_manifest(path)
    (row,) = [r for r in sweep_report(recorded.outcomes, recorded.axes, OPTIONS).rows if r.note]
    assert f"<ul class='notes'><li data-point='{row.point}'>point {row.point} ({row.label}): " in sweep
    assert f"file missing: {item_file.name}" in sweep and str(item_file.parent) in sweep
    assert sweep.count("n/a: no per-item rows") == (1 if best else 2)  # its CI (and p, unless it is the best)


@pytest.mark.slow
def test_when_the_best_points_per_item_file_is_gone_the_others_p_values_say_why(swept, tmp_path):
    _, path = _copy(swept, tmp_path)
    _drop_items(path, best=True)
    recorded = read_manifest(path)
    report = sweep_report(recorded.outcomes, recorded.axes, OPTIONS)
    (best,) = [r for r in report.rows if r.best]
    assert best.note and "nor a p-value for the other points" in best.note
    text = report.markdown()
    others = [r for r in report.rows if not r.best]
    assert len(others) == 3 and text.count("n/a: the best point has no per-item rows") == 3
    for r in others:
        assert not r.note and report.cells(r)[report.header().index("95% CI")].startswith("[")
