"""A sweep manifest records the whole expanded grid (issue 31): the shared axes, the sub-grids, every point's settings
and result paths; the grid id covers all of it; manifests are written inside the output folders the user named; and
``report`` follows only result paths inside the folder it was given."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from embedscope.cli.main import main
from embedscope.sweep.manifest import find_manifests, read_manifest

from .test_sweep import write_beir


def _grid_file(folder: Path, beir: Path, out: Path, grids: list, axes: dict | None = None) -> Path:
    data = {
        "base": {"tasks": [str(beir)], "output_folder": str(out), "show_progress": False, "cache": False},
        "axes": axes or {"top_k": [5, 20]},
        "grids": grids,
    }
    path = folder / f"grid-{len(list(folder.glob('grid-*.json')))}.json"
    path.write_text(json.dumps(data))
    return path


SUB_GRIDS = [{"axes": {"model": ["bm25"]}}, {"axes": {"model": ["fts5"], "limits": [5, 10]}}]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sub-grids")
    beir, out = write_beir(tmp / "words"), tmp / "out"
    assert main(["sweep", "--grid", str(_grid_file(tmp, beir, out, SUB_GRIDS)), "-q", "--rounds", "100"]) == 0
    page = tmp / "report.html"
    assert main(["report", str(out), "--html", str(page), "--rounds", "100"]) == 0
    return tmp, beir, out, page


@pytest.mark.slow
def test_the_manifest_records_sub_grids_and_every_points_settings(swept):
    _, _, out, _ = swept
    (path,) = find_manifests(out)
    data = json.loads(path.read_text())
    assert data["version"] == 2 and data["points_total"] == 6 and data["complete"] is True
    assert [a["key"] for a in data["axes"]] == ["top_k"]
    assert [[a["key"] for a in sub] for sub in data["grids"]] == [["model"], ["model", "limits"]]
    assert data["axis_keys"] == ["top_k", "model", "limits"]
    for point in data["points"]:
        assert point["done"] is True
        settings = point["settings"]
        assert settings["top_k"] == point["values"]["top_k"] and settings["model"] == point["values"]["model"]
        assert settings.get("limits") == point["values"].get("limits")
        (rel,) = point["paths"].values()
        stored = json.loads((out / rel).read_text())["run_settings"]
        assert stored["top_k"] == settings["top_k"] and stored.get("limits") == settings.get("limits")
    assert read_manifest(path).axes == ["top_k", "model", "limits"]


@pytest.mark.slow
def test_report_html_has_a_column_for_each_sub_grid_axis(swept):
    *_, page = swept
    text = page.read_text()
    sweep = text[text.index("<h2>Sweeps</h2>") : text.index("<h2>Runs</h2>")]
    for axis in ("top_k", "model", "limits"):
        assert f"<th>{axis}</th>" in sweep
    assert "<td>fts5</td><td>10</td>" in sweep.replace("\n", "")


@pytest.mark.slow
def test_two_sweeps_that_differ_only_in_their_grids_get_two_manifests(swept):
    tmp, beir, out, _ = swept
    other = [{"axes": {"model": ["bm25"]}}, {"axes": {"model": ["fts5"], "limits": [5]}}]
    assert main(["sweep", "--grid", str(_grid_file(tmp, beir, out, other)), "-q", "--rounds", "100"]) == 0
    manifests = find_manifests(out)
    assert len(manifests) == 2
    assert sorted(json.loads(p.read_text())["points_total"] for p in manifests) == [4, 6]


@pytest.mark.slow
def test_an_output_folder_axis_writes_each_manifest_inside_its_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    beir = write_beir(tmp_path / "words")
    outs = [str(tmp_path / "a"), str(tmp_path / "b")]
    grid = _grid_file(tmp_path, beir, tmp_path / "a", [{"axes": {"model": ["bm25", "fts5"]}}], {"output_folder": outs})
    assert main(["sweep", "--grid", str(grid), "-q", "--rounds", "100"]) == 0
    assert not (tmp_path / "results").exists()  # never a folder the user did not name
    for folder in outs:
        (path,) = find_manifests(folder)
        recorded = read_manifest(path)
        assert recorded.complete and recorded.total == 2
        assert all(str(p).startswith(folder) for o in recorded.outcomes for p in o.paths.values())
        assert main(["report", folder, "--html", str(tmp_path / "r.html"), "--rounds", "100"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("target", ["../../../../../../../etc/passwd", "/etc/passwd", "../outside.json"])
def test_report_refuses_a_manifest_path_leading_outside_its_folder(swept, tmp_path, capsys, target):
    out = tmp_path / "out"
    shutil.copytree(swept[2], out)
    (tmp_path / "outside.json").write_text("{}")
    (path,) = [p for p in find_manifests(out) if json.loads(p.read_text())["points_total"] == 6]
    data = json.loads(path.read_text())
    data["points"][1]["paths"] = {"words": target}
    path.write_text(json.dumps(data))
    assert main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and path.name in err and "Traceback" not in err
    assert "outside" in err or "not a path relative" in err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.slow
def test_report_refuses_a_result_linked_outside_its_folder(swept, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(swept[2], out)
    (path,) = [p for p in find_manifests(out) if json.loads(p.read_text())["points_total"] == 6]
    (rel,) = json.loads(path.read_text())["points"][0]["paths"].values()
    secret = tmp_path / "secret.json"
    shutil.copy(out / rel, secret)
    (out / rel).unlink()
    os.symlink(secret, out / rel)
    assert main(["report", str(out), "--html", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leads outside" in err


@pytest.mark.slow
def test_a_reused_point_without_its_per_item_rows_is_marked(swept, tmp_path, capsys):
    tmp, beir, _, _ = swept
    out = tmp_path / "out"
    grid = _grid_file(tmp_path, beir, out, [{"axes": {"model": ["bm25", "fts5"]}}], {"top_k": [10]})
    assert main(["sweep", "--grid", str(grid), "-q", "--rounds", "100"]) == 0
    (item_file,) = list((out / "fts5").rglob("*.per_item.jsonl.gz"))
    item_file.unlink()
    capsys.readouterr()
    assert main(["sweep", "--grid", str(grid), "-q", "--rounds", "100", "--csv", str(tmp_path / "t.csv")]) == 0
    text = capsys.readouterr().out
    assert "n/a: no per-item rows" in text and "model=fts5): no per-item rows beside" in text
    rows = (tmp_path / "t.csv").read_text().splitlines()
    assert rows[0].endswith(",note") and "no per-item rows" in rows[2] and "no per-item rows" not in rows[1]
