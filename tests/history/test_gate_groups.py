"""The gate per query group (issue 51, item 2): when both sides grouped a task's queries (``group_by``), each group's
Δ is the mean difference of its paired per-item rows (read here from the files themselves) and its p-value is the one
``compare`` gives that group on the same folders; a group that drops beyond the tolerance, significantly, warns and
names the group, while the task's own verdict keeps the exit status."""

from __future__ import annotations

import gzip
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.history.gate import gate
from support.made_up import retrieval_values, write_result

GROUPS = ["a"] * 100 + ["b"] * 100 + ["c"] * 100 + ["d"] * 2  # d: two queries, a test of two items
SHIFT = {"a": 0.06, "b": -0.12, "c": 0.06, "d": 0.0}  # b drops, a and c gain: the task as a whole holds


def _side(tmp_path: Path, name: str, shift: dict[str, float] | None, task: str = "T1") -> str:
    values = retrieval_values(len(GROUPS), 0.5, seed=7, spread=0.1)
    if shift is not None:
        noise = np.random.default_rng(3).normal(0, 0.02, len(GROUPS))
        values = np.clip(values + np.array([shift[g] for g in GROUPS]) + noise, 0.0, 1.0)
    write_result(tmp_path / name, f"org/{name}", task, values, groups=GROUPS)
    return str(tmp_path / name)


def _rows(folder: str, task: str = "T1") -> dict[str, dict]:
    """The per-item rows of one result, read with gzip and json alone, by id."""
    (path,) = Path(folder).rglob(f"{task}.per_item.jsonl.gz")
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    return {row["id"]: row for row in map(json.loads, lines)}


@pytest.mark.parametrize("test", ["t-test", pytest.param("permutation", marks=pytest.mark.slow)])
def test_each_groups_delta_is_its_paired_rows_and_its_p_is_compares(tmp_path, test) -> None:
    base, cand = _side(tmp_path, "base", None), _side(tmp_path, "cand", SHIFT)
    options = CompareOptions(test=test, rounds=500)
    result = gate(base, cand, options=options)
    (row,) = result.rows
    assert row.group_field == "topic" and [g.group for g in row.groups] == ["a", "b", "c", "d"]
    rows_a, rows_b = _rows(base), _rows(cand)
    for g in row.groups:
        ids = [q for q, r in rows_a.items() if r["group"] == g.group]
        diff = np.array([rows_b[q]["ndcg_at_10"] - rows_a[q]["ndcg_at_10"] for q in ids])
        assert g.n == len(ids) and g.delta == pytest.approx(diff.mean(), abs=1e-12)
    (compared,) = compare_folders([base, cand], options).rows
    assert [(g.group, g.delta, g.ci_low, g.ci_high, g.p_value, g.p_adjusted) for g in row.groups] == [
        (g.group, g.delta, g.ci_low, g.ci_high, g.p_value, g.p_adjusted) for g in compared.groups
    ]
    # the task's own test is untouched by its groups: compare's task row
    assert (row.delta, row.p_value, row.p_adjusted) == (compared.delta, compared.p_value, compared.p_adjusted)


def test_a_group_drop_warns_naming_the_group_and_the_task_still_passes(tmp_path) -> None:
    base, cand = _side(tmp_path, "base", None), _side(tmp_path, "cand", SHIFT)
    result = gate(base, cand, options=CompareOptions(rounds=500))
    (row,) = result.rows
    assert abs(row.delta) < 0.01  # the task as a whole: no drop beyond the tolerance
    assert row.verdict == "warn" and row.dropped_groups == ["b"] and result.exit_status == 0
    assert "query group topic=b dropped by" in row.reason and "topic=a" not in row.reason
    b = next(g for g in row.groups if g.group == "b")
    assert b.delta < -0.01 and b.p_adjusted < 0.05
    text = result.table()
    assert text.startswith("PASS:") and "query groups that drop significantly: T1 (topic=b)" in text.splitlines()[0]
    assert "warning: T1: " in text and "query group topic=b dropped by" in text
    assert "| task | group | n | baseline | candidate | Δ | 95% CI | p (adj.) |  |" in text
    assert f"| T1 | topic=b | 100 | {b.score_a:.4f} | {b.score_b:.4f} | {b.delta:+.4f} |" in text
    assert "| T1 | topic=d | 2 |" in text
    md = result.markdown()
    assert md.startswith("### ✅ embedscope gate: PASS") and "Query groups:" in md and "| drop |" in md
    assert "- warning: T1: " in md and "topic=b" in md
    data = result.to_dict()
    groups = data["tasks"][0]["groups"]
    assert data["exit_status"] == 0 and data["tasks"][0]["dropped_groups"] == ["b"]
    assert [g["group"] for g in groups] == ["a", "b", "c", "d"] and groups[1]["p_adjusted"] == b.p_adjusted
    json.dumps(data, allow_nan=False)  # strict JSON
    suite = ET.fromstring(result.junit().split("?>", 1)[1])
    assert suite.get("failures") == "0" and "topic=b" in (suite.find("testcase/system-out").text or "")


@pytest.mark.slow
def test_the_command_exits_0_on_a_group_drop_and_prints_the_warning(tmp_path, capsys) -> None:
    base, cand = _side(tmp_path, "base", None), _side(tmp_path, "cand", SHIFT)
    md = tmp_path / "gate.md"
    assert main(["gate", base, cand, "--rounds", "200", "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    assert "warning: T1: query group topic=b dropped by" in out and "| T1 | topic=b | 100 |" in out
    assert "| drop |" in md.read_text()


def test_a_task_that_fails_stays_a_failure_and_ungrouped_sides_show_no_groups(tmp_path) -> None:
    base = _side(tmp_path, "base", None)
    worse = _side(tmp_path, "worse", {"a": -0.1, "b": -0.1, "c": -0.1, "d": -0.1})
    failed = gate(base, worse, options=CompareOptions(rounds=300))
    assert failed.exit_status == 1 and failed.rows[0].verdict == "fail"
    assert set(failed.rows[0].dropped_groups) >= {"a", "b", "c"} and "query groups topic=a" in failed.rows[0].reason
    plain_a, plain_b = tmp_path / "pa", tmp_path / "pb"
    write_result(plain_a, "org/pa", "T1", retrieval_values(50, 0.6, seed=1))
    write_result(plain_b, "org/pb", "T1", retrieval_values(50, 0.6, seed=1) - 0.001)
    plain = gate(str(plain_a), str(plain_b), options=CompareOptions(rounds=200))
    assert plain.rows[0].groups == [] and plain.rows[0].group_field == ""
    assert "query groups" not in plain.table().lower() and "Query groups" not in plain.markdown()
    assert plain.to_dict()["tasks"][0]["groups"] == []
