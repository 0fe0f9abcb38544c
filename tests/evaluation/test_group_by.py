"""--group-by FIELD (issue 51, item 2): each query group's main score with its bootstrap CI and count in the result,
each per-item row's group, paired tests per group with Holm across groups in compare, groups in run's and report's
tables, and one-line refusals."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from mteb import TaskResult as MtebTaskResult

import embedscope
from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions, compare_folders, paired_test
from embedscope.compare.items import TaskItems
from embedscope.errors import ConfigError
from embedscope.results.per_item import per_item_path, read_per_item
from embedscope.testing.fakes import KeywordEncoder

WORDS = ["cat", "dog", "fish", "bird", "cow", "fox"]
FULL = KeywordEncoder(WORDS, name="kw/full")
HALF = KeywordEncoder(WORDS[:3], name="kw/half")


def _folder(root: Path, topics: list[str | None] | None = None, field: str = "topic") -> Path:
    """A BEIR folder of 40 queries with ``metadata`` on each (``topics``: each query's value, None: no value);
    documents mix words, and each query has three graded relevant documents, so the keyword encoders' per-query
    nDCG@10 takes many values."""
    rng = np.random.default_rng(0)
    topics = topics if topics is not None else ["a"] * 16 + ["b"] * 14 + ["c"] * 9 + ["d"]
    (root / "qrels").mkdir(parents=True)
    docs = [" ".join(rng.choice(WORDS, size=3)) for _ in range(60)]
    corpus = [{"_id": f"d{i}", "text": t} for i, t in enumerate(docs)]
    queries, qrels = [], []
    for i, topic in enumerate(topics):
        row = {"_id": f"q{i}", "text": " ".join(rng.choice(WORDS, size=2)), "metadata": {}}
        if topic is not None:
            row["metadata"][field] = topic
        queries.append(row)
        for d, grade in zip(rng.choice(len(docs), size=3, replace=False), (3, 2, 1)):
            qrels.append(f"q{i}\td{d}\t{grade}\n")
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(qrels))
    return root


def _run(encoder: KeywordEncoder, data: Path, out: Path, **settings) -> embedscope.EvaluationReport:
    return embedscope.evaluate(encoder, [str(data)], output_folder=out, cache=False, group_by="topic", **settings)


def _bootstrap_ci(values: np.ndarray, rounds: int = 10_000, seed: int = 42) -> tuple[float, float]:
    """Percentile bootstrap of the mean, written independently: ``rounds`` resamples of the items with replacement
    from ``numpy.random.default_rng(seed)``, the 2.5% and 97.5% quantiles of their means."""
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(rounds, len(values)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def _holm(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def test_group_scores_are_the_means_of_their_rows_with_the_bootstrap_ci(tmp_path):
    outcome = _run(FULL, _folder(tmp_path / "data"), tmp_path / "out").outcomes[0]
    entry = outcome.result.scores["test"][0]
    groups = entry["groups"]["topic"]
    rows = read_per_item(per_item_path(outcome.path))
    assert [r["group"] for r in rows] == ["a"] * 16 + ["b"] * 14 + ["c"] * 9 + ["d"]
    by_group: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        by_group[r["group"]].append(r["ndcg_at_10"])
    assert sorted(groups) == sorted(by_group) == ["a", "b", "c", "d"]
    spread = False
    for name, values in by_group.items():
        g, column = groups[name], np.array(values)
        assert g["n"] == len(values)
        assert g["main_score"] == pytest.approx(column.mean(), abs=1e-12)
        if len(values) < 2:
            assert g["ci_low"] is None and g["ci_high"] is None
            continue
        assert (g["ci_low"], g["ci_high"]) == pytest.approx(_bootstrap_ci(column), abs=1e-12)
        spread = spread or g["ci_low"] < g["ci_high"]
    assert spread  # the data give some group a CI of some width: the bootstrap is exercised
    assert 0 < entry["main_score"] < 1
    # the file stays mteb's: its reader takes the groups beside the scores
    assert MtebTaskResult.from_disk(outcome.path).scores["test"][0]["groups"]["topic"]["d"]["n"] == 1
    # recorded and part of the experiment's identity, as filter_field
    assert outcome.result.extra["run_settings"]["group_by"] == "topic"
    assert "experiments" in str(outcome.path)


def test_compare_tests_each_group_on_its_paired_items_with_holm_across_groups(tmp_path):
    data = _folder(tmp_path / "data")
    a, b = _run(FULL, data, tmp_path / "a").outcomes[0], _run(HALF, data, tmp_path / "b").outcomes[0]
    options = CompareOptions(rounds=1000)
    comparison = compare_folders([tmp_path / "a", tmp_path / "b"], options)
    (row,) = comparison.rows
    assert row.group_field == "topic" and [g.group for g in row.groups] == ["a", "b", "c", "d"]
    rows_a, rows_b = read_per_item(per_item_path(a.path)), read_per_item(per_item_path(b.path))

    def items(rows: list[dict], group: str) -> TaskItems:
        mine = [r for r in rows if r["group"] == group]
        keys = tuple((r["split"], r["hf_subset"], r["id"]) for r in mine)
        values = np.array([r["ndcg_at_10"] for r in mine])
        return TaskItems("t", "Retrieval", "ndcg_at_10", float(values.mean()), "mean", keys, values)

    p_values = []
    for g in row.groups:
        expected = paired_test(items(rows_a, g.group), items(rows_b, g.group), options)
        if g.group == "d":  # one query: no test, the means still shown
            assert expected is None and np.isnan(g.p_value) and g.n == 1
            continue
        assert expected is not None
        assert (g.delta, g.ci_low, g.ci_high, g.p_value, g.n) == (
            expected.delta,
            expected.ci_low,
            expected.ci_high,
            expected.p_value,
            expected.n,
        )
        p_values.append(g.p_value)
    tested = [g for g in row.groups if g.group != "d"]
    assert [g.p_adjusted for g in tested] == pytest.approx(_holm(p_values))
    assert any(g.delta != 0 for g in tested)
    text = comparison.table()
    assert "Query groups: " in text and "holm across 4 groups" in text and "| topic=d | 1 |" in text
    assert comparison.to_dict()["comparisons"][0]["groups"][0]["group"] == "a"


def test_run_prints_the_groups_and_report_shows_them_side_by_side(tmp_path):
    data = _folder(tmp_path / "data")
    report = _run(FULL, data, tmp_path / "o")
    out = report.table()
    assert out.index("query groups:") > out.index("| data | Retrieval | test |")  # after the summary
    assert "| group | n | main score | 95% CI |" in out
    assert "| data | test | topic=d | 1 |" in out and "none: fewer than 2 queries" in out
    _run(HALF, data, tmp_path / "o")
    tables = embedscope.report([tmp_path / "o"])
    header, *rows = tables.per_group
    assert header == ["task", "split", "group", "n", "kw/full", "kw/half"]
    assert [r[2] for r in rows] == ["topic=a", "topic=b", "topic=c", "topic=d"]
    assert "(n < 2: no CI)" in rows[-1][4] and "## Per query group" in tables.table()
    a = report.outcomes[0].result.scores["test"][0]["groups"]["topic"]["a"]
    assert rows[0][4] == f"{a['main_score']:.3f} [{a['ci_low']:.3f}, {a['ci_high']:.3f}]"


@pytest.mark.slow
def test_the_flag_prints_the_group_table_from_the_command_line(tmp_path, capsys):
    data = _folder(tmp_path / "data")
    argv = ["run", "--model", "bm25", "--tasks", str(data), "--group-by", "topic", "--no-cache"]
    assert main([*argv, "--output-folder", str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "query groups:" in out and "| data | test | topic=d | 1 |" in out


def test_refusals_name_the_problem_in_one_line(tmp_path, capsys):
    partly = _folder(tmp_path / "partly", ["a"] * 38 + [None, None])
    with pytest.raises(ConfigError, match=r"group_by 'topic': 2 of 40 queries have no value \(first: 'q38'\)"):
        _run(FULL, partly, tmp_path / "o")
    other = _folder(tmp_path / "other", field="lang")
    with pytest.raises(ConfigError, match=r"no query has that metadata field \(the queries have: lang\)"):
        _run(FULL, other, tmp_path / "o")
    argv = ["run", "--model", "bm25", "--tasks", str(other), "--output-folder", str(tmp_path / "c"), "--no-cache"]
    assert main([*argv, "--group-by", "topic"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("embedscope: error: --group-by 'topic': no query has")
    assert main(["run", "--tasks", "LeeDocumentSimilarity", "--group-by", "topic"]) == 2
    assert "--group-by has no effect" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="group_by: an empty field name"):
        embedscope.evaluate(FULL, [str(other)], group_by=" ", cache=False)
