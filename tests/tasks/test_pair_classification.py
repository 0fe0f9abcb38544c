"""Pair classification: thresholds against a brute-force scan, scores against sklearn, the protocol against mteb."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score
from sklearn.metrics.pairwise import paired_cosine_distances, paired_euclidean_distances, paired_manhattan_distances

from embedscope.errors import DataFormatError
from embedscope.metrics.pairs import best_accuracy_threshold, best_f1_threshold, pair_classification_scores, pair_scores
from embedscope.settings import RunSettings
from embedscope.tasks.pair_classification import PairClassificationTask, PairData, load_pair_file
from embedscope.testing.fakes import HashEncoder, KeywordEncoder


def _midpoints(scores: np.ndarray, higher_is_similar: bool) -> list[float]:
    """Every cut between distinct sorted scores, most similar side first."""
    values = np.unique(scores)[::-1] if higher_is_similar else np.unique(scores)
    return [(a + b) / 2 for a, b in zip(values[:-1], values[1:])]


def _brute_force(scores: np.ndarray, labels: np.ndarray, higher_is_similar: bool):
    """Best accuracy, and (f1, precision, recall) at the first best-F1 cut, by trying every midpoint."""
    best_acc, best_f1 = 0.0, (0.0, 0.0, 0.0)
    for t in _midpoints(scores, higher_is_similar):
        predicted = scores > t if higher_is_similar else scores < t
        best_acc = max(best_acc, accuracy_score(labels, predicted))
        f1 = f1_score(labels, predicted, zero_division=0)
        if f1 > best_f1[0]:
            best_f1 = (f1, precision_score(labels, predicted, zero_division=0), recall_score(labels, predicted))
    return best_acc, best_f1


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("higher_is_similar", [True, False])
def test_thresholds_match_a_brute_force_scan_with_ties(seed, higher_is_similar):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    scores = rng.integers(0, 8, n).astype(float) / 4  # many ties
    labels = rng.integers(0, 2, n)
    acc, (f1, precision, recall) = _brute_force(scores, labels, higher_is_similar)
    assert best_accuracy_threshold(scores, labels, higher_is_similar)[0] == pytest.approx(acc, abs=1e-12)
    assert best_f1_threshold(scores, labels, higher_is_similar)[:3] == pytest.approx((f1, precision, recall), abs=1e-12)


def test_tied_scores_are_never_split():
    # one tie group holding both labels: no cut separates them, so only the cut below it counts
    scores, labels = [0.9, 0.9, 0.1], [1, 0, 0]
    assert best_accuracy_threshold(scores, labels) == (2 / 3, 0.5)
    assert best_f1_threshold(scores, labels) == (pytest.approx(2 / 3), 0.5, 1.0, 0.5)
    assert best_accuracy_threshold([0.5, 0.5, 0.5], [1, 0, 1]) == (0.0, -1.0)


def test_pair_scores_and_ap_against_sklearn():
    rng = np.random.default_rng(3)
    e1 = rng.standard_normal((25, 6)).astype(np.float32)
    e2 = rng.standard_normal((25, 6)).astype(np.float32)
    labels = rng.integers(0, 2, 25)
    per = pair_scores(e1, e2, "dot")
    np.testing.assert_allclose(per["cosine"], 1 - paired_cosine_distances(e1, e2), atol=1e-6)
    np.testing.assert_allclose(per["manhattan"], paired_manhattan_distances(e1, e2), atol=1e-5)
    np.testing.assert_allclose(per["euclidean"], paired_euclidean_distances(e1, e2), atol=1e-6)
    np.testing.assert_allclose(per["dot"], (e1.astype(float) * e2).sum(1), atol=1e-5)
    np.testing.assert_allclose(per["similarity"], per["dot"], atol=1e-5)
    ours = pair_classification_scores(e1, e2, labels, "dot")
    assert ours["cosine_ap"] == pytest.approx(average_precision_score(labels, per["cosine"]), abs=1e-12)
    assert ours["euclidean_ap"] == pytest.approx(
        average_precision_score(labels, -np.array(per["euclidean"])), abs=1e-12
    )
    assert ours["max_ap"] == max(ours[f"{fn}_ap"] for fn in ("similarity", "cosine", "manhattan", "euclidean", "dot"))


def _pairs_with_duplicates_and_ties(n: int = 40) -> PairData:
    rng = np.random.default_rng(7)
    words = ["cat", "dog", "fish", "sun"]
    s1 = tuple(" ".join(rng.choice(words, 2)) for _ in range(n))  # 16 possible texts: many duplicates
    s2 = tuple(" ".join(rng.choice(words, 2)) for _ in range(n))
    return PairData(s1, s2, tuple(int(x) for x in rng.integers(0, 2, n)))


@pytest.mark.parametrize(
    "encoder",
    [HashEncoder(dim=12), KeywordEncoder(["cat", "dog", "fish"], similarity="dot")],
    ids=["hash-cosine", "keyword-dot"],
)
def test_same_scores_as_mteb(encoder):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_pair_classification_task, mteb_split_scores

    data = _pairs_with_duplicates_and_ties()
    ours = (
        PairClassificationTask("LocalPairClassification", lambda split: data)
        .evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
        .scores
    )
    theirs = mteb_split_scores(encoder, mteb_pair_classification_task(data))
    assert_same_scores(ours, theirs, "max_ap")
    assert list(ours) == [k for k in theirs if k in ours]  # same key order


def test_encodes_first_then_second_sentences_with_document_role():
    encoder = KeywordEncoder(["cat"])
    data = PairData(("cat a", "cat b"), ("x", "cat a"), (1, 0))
    PairClassificationTask("P", lambda split: data).evaluate_split(
        "test", encoder, RunSettings().search_options(show_progress=False)
    )
    assert encoder.calls == [("document", ["cat a", "cat b"]), ("document", ["x", "cat a"])]


def test_file_loader_maps_columns_and_explains_errors(tmp_path):
    (tmp_path / "p.csv").write_text("a,b,dup\nx,y,1\nz,w,0\nu,v,true\n")
    data = load_pair_file(tmp_path / "p.csv", {"sentence1": "a", "sentence2": "b", "label": "dup"})
    assert data == PairData(("x", "z", "u"), ("y", "w", "v"), (1, 0, 1))
    with pytest.raises(DataFormatError, match=r"p.csv, line 2: missing field 'label'.*columns=\{'label'"):
        load_pair_file(tmp_path / "p.csv", {"sentence1": "a", "sentence2": "b"})
    (tmp_path / "q.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "label": 2}\n')
    with pytest.raises(DataFormatError, match=r"q.jsonl, line 1: label 2 is not 0 or 1"):
        load_pair_file(tmp_path / "q.jsonl")


@pytest.mark.slow
@pytest.mark.long  # the real model on hundreds of real texts, mteb side by side: a minute
def test_minilm_on_lee_pairs_matches_mteb(minilm, mteb_minilm):
    pytest.importorskip("mteb")

    from embedscope.data.builtin import lee_similarity
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_pair_classification_task, mteb_split_scores

    lee = lee_similarity()
    n = 100  # keeps the test fast; label = "rated similar" (mean human rating above 0.5)
    data = PairData(lee.sentence1[:n], lee.sentence2[:n], tuple(int(s > 0.5) for s in lee.scores[:n]))
    ours = (
        PairClassificationTask("Lee", lambda split: data)
        .evaluate_split("test", minilm, RunSettings().search_options(show_progress=False))
        .scores
    )
    theirs = mteb_split_scores(mteb_minilm, mteb_pair_classification_task(data))
    assert_same_scores(ours, theirs, "max_ap")


def _pairs_sharing_texts(n: int = 60) -> PairData:
    """Second sentences that are mostly first sentences of other pairs (as in SICK-NL)."""
    rng = np.random.default_rng(11)
    s1 = tuple(f"sentence {i} " + "word " * int(rng.integers(0, 9)) for i in range(n))
    s2 = tuple(s1[int(j)] if rng.random() < 0.8 else f"other text {j}" for j in rng.permutation(n))
    return PairData(s1, s2, tuple(int(x) for x in rng.integers(0, 2, n)))


def test_a_cache_warm_from_the_first_column_gives_the_uncached_and_mteb_numbers(tmp_path):
    """Vectors depend on their batch (as padding makes them); the second column's shared texts must not
    be served from the first column's batches."""
    pytest.importorskip("mteb")
    from embedscope.models.cache import CachedEncoder, EmbeddingCache
    from embedscope.testing.fakes import PaddedHashEncoder
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_pair_classification_task, mteb_split_scores

    data = _pairs_sharing_texts()
    task = PairClassificationTask("LocalPairClassification", lambda split: data)
    uncached = task.evaluate_split(
        "test", PaddedHashEncoder(), RunSettings().search_options(show_progress=False)
    ).scores
    store = EmbeddingCache(tmp_path)
    CachedEncoder(PaddedHashEncoder(), store).encode(list(data.sentence1), role="document", batch_size=32)
    cached = CachedEncoder(PaddedHashEncoder(), store)
    warm = task.evaluate_split("test", cached, RunSettings().search_options(show_progress=False)).scores
    assert cached.stats.hits == len(data)  # the first column is served, the second encoded as its own call
    assert json.dumps(warm) == json.dumps(uncached)  # bit for bit
    assert_same_scores(
        warm, mteb_split_scores(PaddedHashEncoder(), mteb_pair_classification_task(data)), "max_ap", tol=0
    )


@pytest.mark.slow
@pytest.mark.long  # the real model on hundreds of real texts, mteb side by side: a minute
def test_minilm_with_a_cache_warm_from_the_first_column_is_exact(minilm, tmp_path):
    """The same with a real padded model: MiniLM on pairs of the Lee documents' first sentences (short texts
    of varied length, so padding differs from batch to batch), whose columns share texts."""
    from embedscope.data.builtin import lee_similarity
    from embedscope.models.cache import CachedEncoder, EmbeddingCache

    lee = lee_similarity()
    n = 120

    def first(doc: str) -> str:
        return doc.split(". ")[0]

    data = PairData(
        tuple(map(first, lee.sentence1[:n])),
        tuple(map(first, lee.sentence2[:n])),
        tuple(int(s > 0.5) for s in lee.scores[:n]),
    )
    task = PairClassificationTask("Lee", lambda split: data)
    encoder = minilm
    uncached = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
    store = EmbeddingCache(tmp_path)
    CachedEncoder(encoder, store).encode(sorted(set(data.sentence1)), role="document")  # another task's call
    warm = task.evaluate_split("test", CachedEncoder(encoder, store), RunSettings().search_options(show_progress=False))
    assert json.dumps(warm.scores) == json.dumps(uncached.scores)
    assert json.dumps(warm.per_item) == json.dumps(uncached.per_item)  # every pair's similarities, bit for bit
