"""The gate: its tests equal compare's and scipy's / numpy's on the same per-item rows; exit 0 / 1 / 3 on identical
runs, a real drop, a no-op change and each kind of mismatch; its markdown and JUnit reports; one-line errors."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
from scipy.stats import ttest_rel

from embedscope.cli.main import main
from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.errors import ConfigError
from embedscope.history.gate import gate
from embedscope.history.store import Store
from support.made_up import retrieval_values, write_result

TASKS = ("T1", "T2", "T3")


def side(tmp_path, name: str, shifts: dict[str, float] | None = None, **kwargs) -> str:
    """A model's results on TASKS (300 queries each), each task's values shifted by ``shifts``."""
    out = tmp_path / name
    for n, task in enumerate(TASKS):
        values = retrieval_values(300, 0.6, seed=n) + (shifts or {}).get(task, 0.0)
        noise = np.random.default_rng(100 + n + len(name)).normal(0, 0.01, 300) if shifts is not None else 0.0
        write_result(out, f"org/{name}", task, np.clip(values + noise, 0, 1), **kwargs)
    return str(out)


@pytest.mark.parametrize("test", ["t-test", "bootstrap", "permutation"])
def test_the_gates_p_values_and_intervals_are_compares_and_scipys(tmp_path, test) -> None:
    base, cand = side(tmp_path, "base"), side(tmp_path, "cand", {"T1": -0.05, "T2": 0.0, "T3": 0.004})
    options = CompareOptions(test=test, rounds=2000)
    result = gate(base, cand, options=options)
    comparison = compare_folders([base, cand], options)
    assert [r.task for r in result.rows] == [r.task for r in comparison.rows] == list(TASKS)
    for g, c in zip(result.rows, comparison.rows):
        assert (g.delta, g.ci_low, g.ci_high, g.p_value, g.p_adjusted) == (
            c.delta,
            c.ci_low,
            c.ci_high,
            c.p_value,
            c.p_adjusted,
        )
    from embedscope.compare.items import load_model_results

    a, b = load_model_results(base), load_model_results(cand)
    raw = []
    for row in result.rows:
        va, vb = a.tasks[row.task].values, b.tasks[row.task].values
        d = vb - va
        if test == "t-test":
            ref = ttest_rel(vb, va)
            ci = ref.confidence_interval(0.95)
            assert row.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
            assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-9)
        else:  # the percentile interval of numpy's bootstrap of the mean difference
            idx = np.random.default_rng(42).integers(0, len(d), size=(2000, len(d)))
            assert (row.ci_low, row.ci_high) == pytest.approx(
                tuple(np.quantile(d[idx].mean(axis=1), [0.025, 0.975])), rel=1e-12
            )
        raw.append(row.p_value)
    order = np.argsort(raw)  # Holm, step down, by hand
    holm = np.empty(3)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (3 - rank) * raw[i]))
        holm[i] = running
    assert [r.p_adjusted for r in result.rows] == pytest.approx(list(holm), rel=1e-12)


def test_identical_runs_pass_a_real_drop_fails_and_a_dip_warns(tmp_path) -> None:
    base = side(tmp_path, "base")
    same = gate(base, side(tmp_path, "same", {}), options=CompareOptions(rounds=1000))
    assert same.exit_status == 0 and {r.verdict for r in same.rows} <= {"pass", "warn", "improved"}
    identical = gate(base, base, options=CompareOptions(rounds=1000))
    assert identical.exit_status == 0 and [r.delta for r in identical.rows] == [0.0, 0.0, 0.0]
    dropped = gate(base, side(tmp_path, "drop", {"T2": -0.05, "T3": -0.004}), options=CompareOptions(rounds=1000))
    verdicts = {r.task: r.verdict for r in dropped.rows}
    assert dropped.exit_status == 1 and verdicts["T2"] == "fail" and verdicts["T3"] == "warn"
    assert "FAIL: 1 of 3 tasks drop by more than 0.01" in dropped.table()
    lenient = gate(base, side(tmp_path, "drop2", {"T2": -0.05}), tolerance=0.06, options=CompareOptions(rounds=1000))
    assert lenient.exit_status == 0 and {r.task: r.verdict for r in lenient.rows}["T2"] == "warn"


def test_a_change_of_the_system_passes_and_is_listed(tmp_path) -> None:
    base = side(tmp_path, "base")
    other = side(tmp_path, "other", None, fingerprint="fp-quantized", truncate_dim=128)
    result = gate(base, other, options=CompareOptions(rounds=500))
    assert result.exit_status == 0 and [r.delta for r in result.rows] == [0.0, 0.0, 0.0]
    joined = " ".join(result.system_differences)
    assert "model.fingerprint" in joined and "settings.truncate_dim: None → 128" in joined


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"data": "data-2"}, "data: 'data-1' → 'data-2'"),
        ({"dataset_revision": "d2"}, "dataset_revision: 'd1' → 'd2'"),
        ({"split": "dev"}, "splits"),
        ({"limits": 100}, "settings.limits: None → 100"),
        ({"top_k": 10}, "settings.top_k: 100 → 10"),
        ({"task_settings": {"k_values": [1, 5]}}, "task_settings.k_values"),
        ({"record": False}, "recorded no settings"),
    ],
)
def test_each_kind_of_mismatch_exits_3_naming_it(tmp_path, change, named) -> None:
    result = gate(side(tmp_path, "base"), side(tmp_path, "cand", None, **change), options=CompareOptions(rounds=200))
    assert result.exit_status == 3 and result.verdict == "not comparable"
    assert named in result.mismatches[0] and named in result.table()


def test_a_task_missing_from_the_candidate_is_not_comparable(tmp_path) -> None:
    base = side(tmp_path, "base")
    cand = tmp_path / "cand"
    write_result(cand, "org/cand", "T1", retrieval_values(300, 0.6, seed=0))
    result = gate(base, str(cand), options=CompareOptions(rounds=200))
    assert result.exit_status == 3 and "the candidate has no result for T2, T3" in result.mismatches[0]


def test_markdown_and_junit_reports(tmp_path) -> None:
    result = gate(side(tmp_path, "base"), side(tmp_path, "drop", {"T2": -0.05}), options=CompareOptions(rounds=500))
    md = result.markdown()
    assert md.startswith("### ❌ embedscope gate: FAIL") and "| T2 | ndcg_at_10 |" in md and "| fail |" in md
    suite = ET.fromstring(result.junit().split("?>", 1)[1])
    assert suite.get("tests") == "3" and suite.get("failures") == "1"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["T2"]


def test_the_command_exits_0_1_3_and_writes_its_reports(tmp_path, capsys) -> None:
    base, drop = side(tmp_path, "base"), side(tmp_path, "drop", {"T1": -0.1})
    assert main(["gate", base, base, "--rounds", "200"]) == 0
    md, xml = tmp_path / "gate.md", tmp_path / "gate.xml"
    assert main(["gate", base, drop, "--rounds", "200", "--markdown", str(md), "--junit", str(xml)]) == 1
    assert "FAIL" in md.read_text() and 'failures="1"' in xml.read_text()
    assert main(["gate", base, side(tmp_path, "lim", None, limits=5), "--rounds", "200"]) == 3
    assert "settings.limits: None → 5" in capsys.readouterr().out


def test_store_sides_give_the_folder_sides_numbers(tmp_path) -> None:
    url = f"sqlite:///{tmp_path}/h.db"
    store = Store(url)
    base, drop = side(tmp_path, "base"), side(tmp_path, "drop", {"T1": -0.1})
    ((base_id, _),) = store.import_folders([base], tags=["baseline"])
    store.import_folders([drop])
    from_store = gate("tag:baseline", drop, store=url, options=CompareOptions(rounds=300))
    from_folders = gate(base, drop, options=CompareOptions(rounds=300))
    assert [(r.delta, r.ci_low, r.p_adjusted, r.verdict) for r in from_store.rows] == [
        (r.delta, r.ci_low, r.p_adjusted, r.verdict) for r in from_folders.rows
    ]
    assert from_store.exit_status == 1 and base_id[:12] in from_store.baseline


def test_bad_input_is_one_line_exit_2(tmp_path, capsys) -> None:
    base = side(tmp_path, "base")
    two = tmp_path / "two"
    write_result(two, "org/a", "T1", [0.1, 0.2])
    write_result(two, "org/b", "T1", [0.1, 0.2])
    noitems = tmp_path / "noitems"
    write_result(noitems, "org/n", "T1", None)
    cases = [
        (["gate", str(two), base], "holds results of 2 models"),
        (["gate", "tag:nope", base, "--store", f"sqlite:///{tmp_path}/h.db"], "Unknown tag"),
        (["gate", "tag:nope", base, "--store", f"sqlite:///{tmp_path}/none.db"], "none.db: no such file"),
        (["gate", "tag:nope", base], "give the store (--store URL or $EMBEDSCOPE_STORE)"),
        (["gate", str(noitems), base], "T1 has no per-item rows"),
        (["gate", base, base, "--tolerance", "nan"], "tolerance: a finite number"),
        (["gate", base, base, "--store", "mysql://x@y/z"], "both sides are result folders"),
        (["gate", "tag:x", base, "--store", "mysql://x@y/z"], "unknown store scheme 'mysql'"),
        (["results", "list", "--store", "postgresql://u:topsecret@127.0.0.1:9/x"], "cannot be reached"),
        (["results", "list"], "name a results store with --store URL"),
    ]
    Store(f"sqlite:///{tmp_path}/h.db").dispose()  # an empty store, at this embedscope's schema
    for argv, expected in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err and "Traceback" not in err and "topsecret" not in err, (
            argv,
            err,
        )
    with pytest.raises(ConfigError, match="tolerance: a drop of at least 0"):
        gate(base, base, tolerance=-1)


def test_compare_and_report_read_runs_in_a_store_as_their_folders(tmp_path, capsys) -> None:
    import embedscope

    url = f"sqlite:///{tmp_path}/h.db"
    base, drop = side(tmp_path, "base"), side(tmp_path, "drop", {"T1": -0.1})
    store = Store(url)
    store.import_folders([base], tags=["baseline"])
    ((drop_id, _),) = store.import_folders([drop])
    options = CompareOptions(rounds=300)
    from_store = embedscope.compare(["tag:baseline", f"run:{drop_id[:8]}"], options=options, store=url)
    from_folders = compare_folders([base, drop], options)
    assert [(r.task, r.delta, r.ci_low, r.p_adjusted) for r in from_store.rows] == [
        (r.task, r.delta, r.ci_low, r.p_adjusted) for r in from_folders.rows
    ]
    assert embedscope.report(["tag:baseline", drop], store=url).per_task == embedscope.report([base, drop]).per_task
    assert main(["report", "tag:baseline", "--store", url]) == 0 and "| T1 |" in capsys.readouterr().out
    assert main(["report", base, "--store", url]) == 2
    assert "no store is read" in capsys.readouterr().err
    assert main(["report", "tag:baseline", "--store", url, "--html", str(tmp_path / "r.html")]) == 2
    assert "results export" in capsys.readouterr().err
