"""Bitext mining: nearest neighbours against brute force, metrics against sklearn, the protocol against mteb."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.errors import DataFormatError
from embedscope.metrics.bitext import bitext_scores
from embedscope.settings import RunSettings
from embedscope.tasks.bitext_mining import (
    BitextData,
    BitextMiningTask,
    load_bitext_file,
    nearest_neighbours,
)
from embedscope.testing.fakes import HashEncoder, KeywordEncoder

WORDS = ["cat", "dog", "fish", "sun", "moon"]


def _bitext(n: int = 230, seed: int = 5) -> BitextData:
    """Translations that share some words with their source (and many ties between rows)."""
    rng = np.random.default_rng(seed)
    s1 = tuple(" ".join(rng.choice(WORDS, 3)) + f" {i}" for i in range(n))
    s2 = tuple(" ".join(w for w in s.split()[:-1] if rng.random() < 0.7) + " x" for s in s1)
    return BitextData(s1, s2)


def test_nearest_neighbours_match_a_brute_force_argmax():
    rng = np.random.default_rng(0)
    q, c = rng.standard_normal((250, 8)).astype(np.float32), rng.standard_normal((40, 8)).astype(np.float32)
    found = [j for j, _ in nearest_neighbours(q, c, "cosine")]
    qn, cn = q / np.linalg.norm(q, axis=1, keepdims=True), c / np.linalg.norm(c, axis=1, keepdims=True)
    assert found == np.argmax(qn @ cn.T, axis=1).tolist()


def test_metrics_are_sklearn_weighted_scores():
    from sklearn.metrics import f1_score

    neighbours = [(0, 1.0), (0, 1.0), (2, 1.0), (1, 1.0)]
    scores = bitext_scores(neighbours, [(i, i) for i in range(4)])
    assert scores["accuracy"] == 0.5
    assert scores["f1"] == pytest.approx(f1_score([0, 1, 2, 3], [0, 0, 2, 1], average="weighted", zero_division=0))
    assert list(scores) == ["precision", "recall", "f1", "accuracy"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "encoder", [HashEncoder(dim=12), KeywordEncoder(WORDS, similarity="dot")], ids=["hash-cosine", "keyword-dot-ties"]
)
def test_same_scores_as_mteb(encoder):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_bitext_task

    data = _bitext()
    ours = BitextMiningTask("LocalBitextMining", lambda split: data).evaluate_split(
        "test", encoder, RunSettings().search_options(show_progress=False)
    )
    theirs = mteb_split_scores(encoder, mteb_bitext_task(data))
    assert_same_scores(ours.scores, theirs, "f1", tol=0)
    assert list(ours.scores) == [k for k in theirs if k in ours.scores]


def test_parallel_subsets_score_each_language_pair_as_mteb():
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores, mteb_label_scores
    from support.mteb_reference_tasks import mteb_parallel_bitext_task

    data = _bitext(60)
    columns = {
        "eng_Latn": data.sentence1,
        "fra_Latn": data.sentence2,
        "deu_Latn": tuple(s.replace("x", "y z") for s in data.sentence2),
    }
    pairs = {"eng_Latn-fra_Latn": ["eng-Latn", "fra-Latn"], "deu_Latn-eng_Latn": ["deu-Latn", "eng-Latn"]}
    encoder = KeywordEncoder([*WORDS, "x", "y"], similarity="cosine")
    theirs = {e["hf_subset"]: e for e in mteb_label_scores(encoder, mteb_parallel_bitext_task(columns, pairs))["test"]}
    assert set(theirs) == set(pairs)
    for pair in pairs:
        a, b = pair.split("-")
        task = BitextMiningTask("P", lambda split, a=a, b=b: BitextData(columns[a], columns[b]), hf_subset=pair)
        assert_same_scores(
            task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores,
            theirs[pair],
            "f1",
            tol=0,
        )


def test_gold_pairs_and_limits():
    data = BitextData(("a", "b"), ("b", "x", "a"), gold=((0, 2), (1, 0)))
    out = BitextMiningTask("G", lambda split: data).evaluate_split(
        "test", KeywordEncoder(["a", "b"]), RunSettings().search_options(show_progress=False)
    )
    assert out.scores["accuracy"] == 1.0 and out.per_item["predicted"] == [2, 0]
    assert len(_bitext(10).head(4)) == 4


def test_file_loader_maps_columns_and_explains_errors(tmp_path):
    (tmp_path / "b.csv").write_text("en,fr\nhello,bonjour\ncat,chat\n")
    assert load_bitext_file(tmp_path / "b.csv", {"sentence1": "en", "sentence2": "fr"}) == BitextData(
        ("hello", "cat"), ("bonjour", "chat")
    )
    with pytest.raises(DataFormatError, match=r"b.csv, line 2: missing field 'sentence1'"):
        load_bitext_file(tmp_path / "b.csv")


@pytest.mark.slow
def test_minilm_through_mteb_wrapper_matches(minilm, mteb_minilm):
    pytest.importorskip("mteb")

    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_bitext_task

    data = _bitext(120)
    ours = BitextMiningTask("B", lambda split: data).evaluate_split(
        "test", minilm, RunSettings().search_options(show_progress=False)
    )
    theirs = mteb_split_scores(mteb_minilm, mteb_bitext_task(data))
    assert_same_scores(ours.scores, theirs, "f1", tol=0)
    assert 1 / 120 < ours.scores["f1"] < 1.0  # better than chance, not trivial
