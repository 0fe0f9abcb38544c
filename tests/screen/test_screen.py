"""``screen``: fast pass, ranking with intervals, the confirm set, the exact pass, and what it reports.

Tiny sentence-transformers models built here (2-layer, 32-wide BERT, different seeds) run the real torch bf16 fast
path; the tasks are the tiny in-memory ones. Every figure is checked against an independent computation: scipy's
Kendall tau and bootstrap, compare run on the stored result files, numpy cosines of vectors encoded afresh.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau, rankdata

from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.compare.items import TaskItems
from embedscope.errors import ConfigError, EmbedscopeError
from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder
from embedscope.screen import run as screen_module
from embedscope.screen.run import (
    DTYPE_FAST_PATHS,
    MeanScore,
    confirm_set,
    default_fast_path,
    fast_path_overrides,
    mean_score,
    screen,
)
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_task, tiny_tasks_of_every_type

OPTIONS = CompareOptions(rounds=2000)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    from support.tiny_models import build_tiny_sentence_transformer

    root = tmp_path_factory.mktemp("screen-models")
    return [str(build_tiny_sentence_transformer(root / f"m{seed}", seed=seed)) for seed in range(3)]


@pytest.fixture(scope="module")
def screened(tiny_models, tmp_path_factory):
    """One screen of the three tiny models, every one confirmed, with fidelity (shared by the tests that read it),
    its folder, and how many texts it encoded (counted at the encoder)."""
    folder = tmp_path_factory.mktemp("screened")
    encoded: list[int] = []
    original = SentenceTransformerEncoder._encode

    def counting(self, texts, role, batch_size, show_progress):
        encoded.append(len(texts))
        return original(self, texts, role, batch_size, show_progress)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SentenceTransformerEncoder, "_encode", counting)
        report = _screen(tiny_models, folder, confirm=3)
    return report, folder, sum(encoded)


def _tasks() -> list:
    sts = next(t for t in tiny_tasks_of_every_type() if t.type == "STS")
    return [tiny_retrieval_task(), sts]


def _screen(models: list[str], folder: Path, **kwargs):
    return screen(
        models,
        _tasks(),
        fast="bf16",
        compare_options=OPTIONS,
        output_folder=str(folder / "out"),
        cache_dir=str(folder / "cache"),
        show_progress=False,
        **kwargs,
    )


# -- pure parts -------------------------------------------------------------------------------------------------


def _score(mean: float, low: float, high: float) -> MeanScore:
    return MeanScore(mean, low, high, {})


def test_confirm_set_takes_the_top_and_every_model_whose_interval_overlaps_theirs() -> None:
    scores = {
        "a": _score(0.80, 0.75, 0.85),
        "b": _score(0.70, 0.65, 0.76),  # overlaps a
        "c": _score(0.60, 0.55, 0.66),  # overlaps b only
        "d": _score(0.30, 0.20, 0.40),  # overlaps no one
    }
    assert confirm_set(scores, 1) == ["a", "b"]
    assert confirm_set(scores, 2) == ["a", "b", "c"]
    assert confirm_set(scores, 4) == ["a", "b", "c", "d"]
    assert confirm_set(scores, 9) == ["a", "b", "c", "d"]


def _mean_items(values: np.ndarray, name: str = "T") -> TaskItems:
    keys = tuple(("test", "default", str(i)) for i in range(len(values)))
    return TaskItems(name, "Retrieval", "ndcg_at_10", float(values.mean()), "mean", keys, values)


def test_mean_score_interval_of_one_task_agrees_with_scipy_bootstrap() -> None:
    from scipy.stats import bootstrap

    values = np.random.default_rng(3).random(60)
    got = mean_score({"T": _mean_items(values)}, CompareOptions(rounds=20_000))
    ref = bootstrap((values,), np.mean, n_resamples=20_000, method="percentile", random_state=1).confidence_interval
    assert got.mean == pytest.approx(values.mean())
    assert got.ci_low == pytest.approx(ref.low, abs=0.01)
    assert got.ci_high == pytest.approx(ref.high, abs=0.01)


def test_mean_score_over_tasks_averages_independent_resamples() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.random(20), rng.random(30)
    options = CompareOptions(rounds=500, seed=7)
    got = mean_score({"A": _mean_items(a, "A"), "B": _mean_items(b, "B")}, options)
    # by hand: task i resampled with numpy's default_rng(seed + i) in sorted task order
    ra = a[np.random.default_rng(7).integers(0, 20, size=(500, 20))].mean(axis=1)
    rb = b[np.random.default_rng(8).integers(0, 30, size=(500, 30))].mean(axis=1)
    low, high = np.quantile((ra + rb) / 2, [0.025, 0.975])
    assert got.mean == pytest.approx((a.mean() + b.mean()) / 2)
    assert (got.ci_low, got.ci_high) == pytest.approx((low, high))
    assert got.tasks == {"A": pytest.approx(a.mean()), "B": pytest.approx(b.mean())}


def test_fast_paths_are_model_option_overrides() -> None:
    assert fast_path_overrides("bf16") == {"dtype": "bf16"}
    assert default_fast_path() in screen_module.preference()
    with pytest.raises(EmbedscopeError, match="fast path"):
        fast_path_overrides("bf17")


def test_a_fast_path_whose_backend_this_embedscope_does_not_know_is_one_line(monkeypatch) -> None:
    monkeypatch.setitem(DTYPE_FAST_PATHS, "future", ({"backend": "no-such-backend"}, 9, "torch", "torch"))
    with pytest.raises(ConfigError, match="^fast future: this embedscope cannot run it") as e:
        fast_path_overrides("future")
    assert "\n" not in str(e.value)


# -- whole screens ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_screen_runs_fast_then_confirms_the_top_and_overlapping_models(tiny_models, tmp_path) -> None:
    report = _screen(tiny_models, tmp_path, confirm=1)
    fast = {m.model: m.fast for m in report.models}
    assert [m.model for m in report.models] == sorted(fast, key=lambda k: -fast[k].mean)  # fast ranking order
    top = report.models[0]
    expected = {top.model} | {m.model for m in report.models[1:] if m.fast.overlaps(top.fast)}
    assert set(report.confirmed) == expected
    for m in report.models:
        assert (m.exact is not None) == (m.model in expected)
        assert m.fast_applied and m.fast_folder != m.exact_folder
        assert m.fast_folder.parent.name == "experiments"  # the fast results are stored apart
        for path in m.fast_folder.glob("Tiny*.json"):
            assert json.loads(path.read_text())["dtype"] == "bf16"
        if m.exact_folder is not None:
            for path in m.exact_folder.glob("Tiny*.json"):
                assert json.loads(path.read_text())["dtype"] == "fp32"
    exact = [report.model(k).exact.mean for k in report.confirmed]
    assert exact == sorted(exact, reverse=True)


@pytest.mark.slow
def test_a_second_screen_encodes_nothing_and_reuses_every_result(tiny_models, screened, monkeypatch) -> None:
    first, folder, first_encoded = screened
    assert first_encoded > 0
    encoded: list[int] = []
    original = SentenceTransformerEncoder._encode

    def counting(self, texts, role, batch_size, show_progress):
        encoded.append(len(texts))
        return original(self, texts, role, batch_size, show_progress)

    monkeypatch.setattr(SentenceTransformerEncoder, "_encode", counting)
    second = _screen(tiny_models, folder, confirm=3)
    assert encoded == []
    assert second.to_dict()["models"] == [
        {**m, "fast_seconds": n["fast_seconds"], "exact_seconds": n["exact_seconds"]}
        for m, n in zip(first.to_dict()["models"], second.to_dict()["models"])
    ]


@pytest.mark.slow
def test_kendall_tau_is_scipys_on_the_two_rankings(screened) -> None:
    report = screened[0]
    assert len(report.confirmed) == 3
    fast_order = [m.model for m in report.models]
    fast_rank = [fast_order.index(k) for k in report.confirmed]
    exact_rank = rankdata([-report.model(k).exact.mean for k in report.confirmed])
    fast_means = [report.model(k).fast.mean for k in report.confirmed]
    if len(set(fast_means)) == len(fast_means):  # no ties: the rank orders are the rankings
        assert report.kendall_tau == pytest.approx(kendalltau(fast_rank, exact_rank).statistic)
    assert report.kendall_tau == pytest.approx(
        kendalltau(fast_means, [report.model(k).exact.mean for k in report.confirmed]).statistic
    )
    assert -1.0 <= report.kendall_tau <= 1.0


def _copy_results(folder: Path, target: Path) -> Path:
    """One model's result files (not its experiments subfolders), as compare reads a folder."""
    target.mkdir(parents=True)
    for path in folder.iterdir():
        if path.is_file():
            shutil.copy(path, target / path.name)
    return target


@pytest.mark.slow
def test_the_significance_line_agrees_with_compare_on_the_same_results(screened, tmp_path) -> None:
    report = screened[0]
    winner, runner_up = (report.model(k) for k in report.confirmed[:2])
    folders = [_copy_results(m.exact_folder, tmp_path / "copy" / str(i)) for i, m in enumerate((winner, runner_up))]
    reference = compare_folders(folders, OPTIONS)
    got = report.winner_vs_runner_up
    assert got is not None
    assert [(r.task, r.delta, r.p_adjusted, r.significant) for r in got.rows] == [
        (r.task, r.delta, r.p_adjusted, r.significant) for r in reference.rows
    ]
    better = sum(r.significant and r.delta < 0 for r in reference.rows)
    assert f"better on {better} of {len(reference.rows)} tasks" in report.significance_line()
    assert (better > 0 and not any(r.significant and r.delta > 0 for r in reference.rows)) == (
        "is significantly better than" in report.significance_line()
    )


@pytest.mark.slow
def test_fidelity_is_compare_fidelity_and_cosines_of_fresh_vectors(tiny_models, screened, tmp_path) -> None:
    from embedscope.models.specs import load_encoder

    report = screened[0]
    m = report.model(tiny_models[0])
    fast_copy = _copy_results(m.fast_folder, tmp_path / "copy" / "fast")
    exact_copy = _copy_results(m.exact_folder, tmp_path / "copy" / "exact")
    reference = compare_folders([fast_copy, exact_copy], OPTIONS, fidelity=True)
    by_task = {f["task"]: f for f in m.fidelity}
    for r in reference.rows:
        row = by_task[r.task]
        assert (row["shift"], row["ci_low"], row["ci_high"]) == (r.delta, r.ci_low, r.ci_high)
        for key, value in r.extra.items():
            assert row[key] == value
    assert by_task["TinyRetrieval"]["top10_jaccard"] <= 1.0
    # per-text cosines: the retrieval task's queries and documents, encoded afresh in fp32 and bf16
    from embedscope.testing.tiny import TINY_CORPUS, TINY_QUERIES

    exact_enc, fast_enc = (
        load_encoder(tiny_models[0], device="cpu"),
        load_encoder(tiny_models[0], device="cpu", dtype="bf16"),
    )
    vectors = []
    for enc in (exact_enc, fast_enc):
        q = enc.encode(list(TINY_QUERIES.values()), role="query", batch_size=32)
        d = enc.encode(list(TINY_CORPUS.values()), role="document", batch_size=32)
        vectors.append(np.vstack([q, d]).astype(np.float64))
    a, b = vectors
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    row = by_task["TinyRetrieval"]
    assert row["texts"] == len(cos)
    assert row["embedding_cosine_mean"] == pytest.approx(cos.mean(), abs=1e-6)
    assert row["embedding_cosine_min"] == pytest.approx(cos.min(), abs=1e-6)
    assert row["embedding_cosine_p05"] == pytest.approx(np.quantile(cos, 0.05), abs=1e-6)
    assert cos.min() < 1.0  # bf16 did change the vectors: the measure can fail


@pytest.mark.slow
def test_a_model_the_fast_path_cannot_act_on_is_screened_exact_and_said_so(tiny_models, tmp_path, monkeypatch) -> None:
    overrides = {"dtype": "bf16", "tokenizer": str(tmp_path / "no-such-tokenizer")}
    monkeypatch.setitem(DTYPE_FAST_PATHS, "bf16", (overrides, 3, "torch", "torch"))
    report = _screen(tiny_models[:2], tmp_path, confirm=1, fidelity=False)
    for m in report.models:
        assert not m.fast_applied and "screened exact" in m.note
        assert m.fast_folder == (m.exact_folder or m.fast_folder)  # the exact results, reused
    assert "screened exact" in report.text()
    assert math.isfinite(report.models[0].fast.mean)


@pytest.mark.slow
def test_by_default_a_model_the_first_fast_path_refuses_takes_the_next(tiny_models, tmp_path, monkeypatch) -> None:
    refusing = {"dtype": "bf16", "tokenizer": str(tmp_path / "no-such-tokenizer")}  # every model refuses it
    monkeypatch.setitem(DTYPE_FAST_PATHS, "refusing", (refusing, 0, "torch", "torch"))
    monkeypatch.setattr(screen_module, "preference", lambda: ("refusing", "bf16"))
    report = screen(
        tiny_models[:2],
        _tasks(),
        confirm=1,
        fidelity=False,
        compare_options=OPTIONS,
        output_folder=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
        show_progress=False,
    )
    assert report.fast_path == "refusing"
    for m in report.models:
        assert m.fast_applied and m.fast_path == "bf16" and m.fast_overrides == {"dtype": "bf16"}
        assert m.note.startswith("on fast path bf16; refusing: ") and "tokenizer applies to" in m.note
        assert json.loads((m.fast_folder / "model_meta.json").read_text())["dtype"] in ("bf16", "bfloat16")
    assert "(on bf16)" in report.text() and report.to_dict()["models"][0]["fast_path"] == "bf16"


@pytest.mark.slow
def test_bm25_beside_a_model_is_screened_exact_and_only_the_model_gets_per_text_cosines(tiny_models, tmp_path) -> None:
    report = screen(
        [tiny_models[0], "bm25"],
        [tiny_retrieval_task()],
        fast="bf16",
        confirm=2,
        compare_options=OPTIONS,
        output_folder=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
        show_progress=False,
    )
    model, bm25 = report.model(tiny_models[0]), report.model("bm25")
    assert model.fast_applied and "embedding_cosine_mean" in model.fidelity[0]
    assert not bm25.fast_applied and "runs no embedding model" in bm25.note and not bm25.fidelity
    assert bm25.fast_folder == bm25.exact_folder  # one bm25 result: the dtype of a fast path is not stored on it


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confirm": 0}, "^confirm: Input should be greater than or equal to 1"),
        ({"models": ["one"]}, "at least two models"),
        ({"fast": "nope"}, "fast path"),
        ({"models": [KeywordEncoder(["cat"]), KeywordEncoder(["dog"], name="fake/dog")]}, "not a model name or path"),
        ({"models": ["a", "a"]}, "given twice"),
        ({"dtype": "bf16"}, "fp32"),
    ],
)
def test_what_a_screen_cannot_do_is_one_line(kwargs, message, tmp_path) -> None:
    values = {"models": ["m1", "m2"], "fast": "bf16", **kwargs}
    with pytest.raises(EmbedscopeError, match=message) as e:
        screen(values.pop("models"), [tiny_retrieval_task()], output_folder=str(tmp_path), **values)
    assert "\n" not in str(e.value)
    assert not any(tmp_path.iterdir())  # refused before anything ran


@pytest.mark.long
@pytest.mark.slow
def test_screen_of_shipped_models_on_a_builtin_task(tmp_path) -> None:
    from embedscope.evaluation.runner import evaluate

    models = ["minilm", "paraphrase-minilm-l3", "static-64"]
    report = screen(
        models,
        ["LeeDocumentSimilarity"],
        fast="bf16",
        confirm=3,
        output_folder=str(tmp_path / "out"),
        cache_dir=str(tmp_path / "cache"),
        show_progress=False,
    )
    assert report.model("minilm").fast_applied
    for name in ("paraphrase-minilm-l3", "static-64"):  # ONNX and static models compute in fp32 only
        assert not report.model(name).fast_applied and "cannot apply" in report.model(name).note
    assert sorted(report.confirmed) == sorted(models)
    for name in models:  # the exact pass is the exact path: the numbers of a plain evaluate
        plain = evaluate(name, ["LeeDocumentSimilarity"], output_folder=str(tmp_path / "plain"), cache=False)
        assert report.model(name).exact.tasks["LeeDocumentSimilarity"] == plain.outcomes[0].result.main_score()
    shift = report.model("minilm").fidelity[0]
    assert abs(shift["shift"]) < 0.01 and shift["embedding_cosine_mean"] > 0.99


@pytest.mark.slow
def test_fidelity_encodes_nothing_and_reads_the_vectors_both_passes_cached(tiny_models, tmp_path, monkeypatch) -> None:
    phase, encoded = ["passes"], []
    original, agreement = SentenceTransformerEncoder._encode, screen_module._embedding_agreement

    def counting(self, texts, role, batch_size, show_progress):
        encoded.append((phase[0], len(texts)))
        return original(self, texts, role, batch_size, show_progress)

    def measuring(*args, **kwargs):
        phase[0] = "fidelity"
        return agreement(*args, **kwargs)

    monkeypatch.setattr(SentenceTransformerEncoder, "_encode", counting)
    monkeypatch.setattr(screen_module, "_embedding_agreement", measuring)
    report = _screen(tiny_models[:2], tmp_path, confirm=2)
    assert phase == ["fidelity"] and [n for p, n in encoded if p == "passes"]
    assert [n for p, n in encoded if p == "fidelity"] == []  # every vector served from the cache
    rows = [f for m in report.models for f in m.fidelity]
    assert len(rows) == 4 and all(0.5 < f["embedding_cosine_mean"] <= 1.0 + 1e-6 for f in rows)


@pytest.mark.slow
def test_without_the_cache_fidelity_says_no_pass_kept_its_vectors(tiny_models, tmp_path) -> None:
    report = screen(
        tiny_models[:2], [tiny_retrieval_task()], fast="bf16", confirm=2, compare_options=OPTIONS,
        output_folder=str(tmp_path / "out"), cache=False, show_progress=False,
    )  # fmt: skip
    notes = [line for line in report.text().splitlines() if "per-text cosines" in line]
    assert len(notes) == 2 and all("not measured: the cache is off" in line for line in notes)
    assert all("embedding_cosine_mean" not in f and "shift" in f for m in report.models for f in m.fidelity)
