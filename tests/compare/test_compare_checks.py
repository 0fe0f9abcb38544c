"""``compare`` checks what it compares: per-item files against their results, finite values, pairing by id,
and the settings and data both results were computed with (issue 21)."""

from __future__ import annotations

import gzip
import json
import re
import shutil
import warnings

import numpy as np
import pytest
from scipy import stats

import embedscope
from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.compare.items import pair_statistic_type
from embedscope.data.builtin import bbc_news_retrieval
from embedscope.results.per_item import per_item_path
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.testing.tiny import TINY_WORDS, tiny_tasks_of_every_type

BBC = RetrievalTask("BBC40", lambda split: bbc_news_retrieval(40))
USED = ("TinySTS", "TinyPairClassification", "TinyRerankingV1")


def _tasks():
    return [*(t for t in tiny_tasks_of_every_type() if t.name in USED), BBC]


def _evaluate(encoder, tasks, out, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return embedscope.evaluate(encoder, tasks, output_folder=out, cache=False, show_progress=False, **kwargs)


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("checks")
    _evaluate(HashEncoder(dim=16), _tasks(), root / "a")
    _evaluate(KeywordEncoder(TINY_WORDS, similarity="cosine"), _tasks(), root / "b")
    _evaluate(HashEncoder(dim=64), [BBC], root / "full")
    _evaluate(HashEncoder(dim=64), [BBC], root / "lim", limits=5)
    return root


@pytest.fixture
def copies(stored, tmp_path):
    """Fresh copies of the two models' folders, to damage."""
    a, b = shutil.copytree(stored / "a", tmp_path / "a"), shutil.copytree(stored / "b", tmp_path / "b")
    return a, b


def _result(folder, task):
    return next(folder.rglob(f"{task}.json"))


def _rows(folder, task):
    with gzip.open(per_item_path(_result(folder, task)), "rt") as f:
        return [json.loads(line) for line in f]


def _write_rows(folder, task, rows):
    text = "".join(json.dumps(r, allow_nan=True) + "\n" for r in rows)
    per_item_path(_result(folder, task)).write_bytes(gzip.compress(text.encode(), mtime=0))


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.mark.slow
@pytest.mark.parametrize("task", ["BBC40", "TinySTS", "TinyPairClassification", "TinyRerankingV1"])
def test_a_per_item_file_of_other_results_is_refused(copies, capsys, task):
    """The issue's case: another model's per-item file beside a result gave a Δ whose own CI excluded it."""
    a, b = copies
    shutil.copyfile(per_item_path(_result(a, task)), per_item_path(_result(b, task)))
    err = _error(capsys, ["compare", str(a), str(b), "--tasks", task])
    assert f"{per_item_path(_result(b, task))} does not match {task}.json" in err


@pytest.mark.slow
def test_the_recomputed_score_is_numpy_mean_of_the_rows(copies, capsys):
    a, b = copies
    rows = _rows(b, "BBC40")
    rows[0]["ndcg_at_10"] = 1.0 - rows[0]["ndcg_at_10"]
    _write_rows(b, "BBC40", rows)
    err = _error(capsys, ["compare", str(a), str(b), "--tasks", "BBC40"])
    mean = np.mean([r["ndcg_at_10"] for r in rows])
    stored = json.loads(_result(b, "BBC40").read_text())["scores"]["test"][0]["main_score"]
    assert f"is {mean:.6f}, the stored score {stored:.6f}" in err


@pytest.mark.slow
@pytest.mark.parametrize("value", [float("nan"), float("inf"), None, "0.5"])
def test_a_non_finite_per_item_value_names_the_file_and_item(copies, capsys, value):
    """The issue's case: one NaN row gave p = 1/10,001 and a star."""
    a, b = copies
    rows = _rows(b, "BBC40")
    rows[3]["ndcg_at_10"] = value
    _write_rows(b, "BBC40", rows)
    err = _error(capsys, ["compare", str(a), str(b)])
    assert f"{per_item_path(_result(b, 'BBC40'))}: item test/default/{rows[3]['id']} has ndcg_at_10" in err


@pytest.mark.slow
def test_a_nan_pair_column_is_refused(copies, capsys):
    a, b = copies
    rows = _rows(b, "TinySTS")
    rows[0]["gold"] = float("nan")
    _write_rows(b, "TinySTS", rows)
    assert "item test/default/0 has gold = nan" in _error(capsys, ["compare", str(a), str(b)])


@pytest.mark.slow
def test_an_item_twice_is_refused(copies, capsys):
    a, b = copies
    rows = _rows(b, "BBC40")
    _write_rows(b, "BBC40", [*rows, rows[0]])
    assert f"item test/default/{rows[0]['id']} occurs twice" in _error(capsys, ["compare", str(a), str(b)])


def test_items_are_paired_by_id_and_the_unpaired_are_named(copies, capsys):
    a, b = copies
    rows = _rows(b, "BBC40")
    kept = rows[2:]  # b has two queries fewer; its stored score is made to agree with its rows
    _write_rows(b, "BBC40", kept[::-1])  # in another order: pairing is by id, not position
    result = json.loads(_result(b, "BBC40").read_text())
    result["scores"]["test"][0]["main_score"] = result["scores"]["test"][0]["ndcg_at_10"] = round(
        float(np.mean([r["ndcg_at_10"] for r in kept])), 5
    )
    _result(b, "BBC40").write_text(json.dumps(result))
    row = compare_folders([a, b], CompareOptions(test="t-test"), ["BBC40"]).rows[0]
    va = {r["id"]: r["ndcg_at_10"] for r in _rows(a, "BBC40")}
    x, y = np.array([va[r["id"]] for r in kept]), np.array([r["ndcg_at_10"] for r in kept])
    assert row.n == len(kept) and (row.only_a, row.only_b) == (2, 0)
    assert row.p_value == pytest.approx(stats.ttest_rel(y, x).pvalue, rel=1e-10)
    assert row.notes == [f"{len(kept)} items paired; 2 only in {per_item_path(_result(a, 'BBC40'))} (not tested)"]
    assert main(["compare", str(a), str(b), "--tasks", "BBC40"]) == 0
    assert "2 only in" in capsys.readouterr().out


def test_other_limits_are_refused_and_allowed_with_a_flag(stored, capsys):
    """The issue's case: a --limits 5 result against a full run gave Δ on n = 5 with no word."""
    full, limited = stored / "full", stored / "lim"
    err = _error(capsys, ["compare", str(full), str(limited), "--tasks", "BBC40"])
    assert "other settings or data (run_settings.limits: None → 5)" in err and "--allow-mismatch" in err
    assert main(["compare", str(full), str(limited), "--tasks", "BBC40", "--allow-mismatch", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["comparisons"][0]
    assert row["settings_difference"] == "run_settings.limits: None → 5"
    assert main(["compare", str(full), str(limited), "-t", "BBC40", "--allow-mismatch"]) == 0
    assert "settings differ: run_settings.limits: None → 5" in capsys.readouterr().out


@pytest.mark.slow
def test_the_model_may_differ_but_not_the_data_or_task_settings(copies, capsys):
    a, b = copies
    ra, rb = (json.loads(_result(f, "TinySTS").read_text()) for f in (a, b))
    assert ra["run_settings"]["model"] != rb["run_settings"]["model"]  # compared without a word
    assert main(["compare", str(a), str(b), "--tasks", "TinySTS"]) == 0
    capsys.readouterr()
    rb["data"]["fingerprint"] = "0123456789ab"
    _result(b, "TinySTS").write_text(json.dumps(rb))
    assert "data.fingerprint: " in _error(capsys, ["compare", str(a), str(b), "--tasks", "TinySTS"])
    rb["data"] = ra["data"]
    rb["task_settings"]["dataset_revision"] = "other"
    _result(b, "TinySTS").write_text(json.dumps(rb))
    assert "task_settings.dataset_revision: " in _error(capsys, ["compare", str(a), str(b), "--tasks", "TinySTS"])


def test_results_without_a_settings_record_are_noted(copies):
    a, b = copies
    rb = json.loads(_result(b, "TinySTS").read_text())
    for key in ("run_settings", "task_settings", "data"):
        del rb[key]
    _result(b, "TinySTS").write_text(json.dumps(rb))
    row = compare_folders([a, b], CompareOptions(rounds=50), ["TinySTS"]).rows[0]
    assert row.notes == [f"settings not recorded in {_result(b, 'TinySTS')}; not checked"]


@pytest.mark.parametrize(
    "argv",
    [["compare", "A", "B", "--digits", "-2"], ["report", "A", "--digits", "-1"], ["report", "A", "--digits", "11"]],
)
def test_digits_out_of_range_is_one_line(stored, capsys, argv):
    argv = [str(stored / "a") if x in ("A", "B") else x for x in argv]
    assert re.search(r"--digits: Input should be (greater|less) than or equal to (0|10)", _error(capsys, argv))


def test_pair_statistic_types():
    assert [t for t in ("Retrieval", "STS", "PairClassification", "Classification") if pair_statistic_type(t)] == [
        "STS",
        "PairClassification",
    ]
