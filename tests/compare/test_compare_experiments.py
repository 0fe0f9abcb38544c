"""``compare`` on revision folders that hold an ``experiments/`` folder (a sweep's default point, a screen's exact
result): their own results are compared and a note says so; a folder of experiments only asks which (issue 31)."""

from __future__ import annotations

import json
import shutil

import pytest

from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.testing.tiny import write_tiny_beir


@pytest.fixture()
def revisions(tmp_path):
    """Two models, each run with its own settings and with --top-k 5 (an experiment beside them)."""
    data = str(write_tiny_beir(tmp_path / "data"))
    out = {}
    for model in ("bm25", "fts5"):
        for extra in ([], ["--top-k", "5"]):
            argv = ["run", "--model", model, "--tasks", data, "--output-folder", str(tmp_path / model), *extra]
            assert main([*argv, "--no-cache", "--no-progress"]) == 0
        (meta,) = [p for p in (tmp_path / model).rglob("model_meta.json") if "experiments" not in p.parts]
        out[model] = meta.parent
    return out


@pytest.mark.slow
def test_revision_folders_with_experiments_compare_their_own_results(revisions, capsys):
    a, b = revisions["bm25"], revisions["fts5"]
    assert (a / "experiments").is_dir() and (b / "experiments").is_dir()
    comparison = compare_folders([a, b], CompareOptions(rounds=50))
    stored = {m: json.loads((f / "data.json").read_text()) for m, f in revisions.items()}
    assert comparison.scores[comparison.models[0]]["data"] == stored["bm25"]["scores"]["test"][0]["main_score"]
    assert len(comparison.notes) == 2 and all("compared its own results" in n for n in comparison.notes)
    assert main(["compare", str(a), str(b), "--rounds", "50"]) == 0
    out = capsys.readouterr().out
    assert out.count("compared its own results") == 2
    # the model folders above them: the same results, the note names the revision folder chosen
    assert main(["compare", str(a.parent.parent), str(b.parent.parent), "--rounds", "50", "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert len(notes) == 2 and all("compared the results in" in n for n in notes)


@pytest.mark.slow
def test_a_folder_of_experiments_only_asks_which(revisions, tmp_path, capsys):
    a = revisions["bm25"]
    for name in ("x", "y"):
        shutil.copytree(next((a / "experiments").iterdir()), tmp_path / "only" / "experiments" / name)
    assert main(["compare", str(tmp_path / "only"), str(revisions["fts5"])]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds 2 experiments of one model" in err[0] and "give one experiment's folder" in err[0]
