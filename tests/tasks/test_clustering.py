"""Clustering (v2 "fast" and legacy): pure pieces against random/sklearn, then mteb side by side."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics.cluster import v_measure_score

from embedscope.errors import ConfigError, DataFormatError
from embedscope.settings import RunSettings
from embedscope.tasks.base import Task
from embedscope.tasks.classification import LabelledTexts, bbc_news_classification_split
from embedscope.tasks.clustering import (
    ClusteringTask,
    as_levels,
    bbc_news_clustering_split,
    clustering_v2_scores,
    documents_to_embed,
    group_sets,
    legacy_set_v_measure,
    load_clustering_file,
)
from embedscope.testing.fakes import HashEncoder

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")


def test_documents_to_embed_uses_random_sample():
    assert documents_to_embed(100, random.Random(42), 0.04) == random.Random(42).sample(range(100), k=4)
    assert documents_to_embed(10, random.Random(42), None, 50) == random.Random(42).sample(range(10), k=10)
    assert documents_to_embed(7, random.Random(42), None, None) == list(range(7))
    with pytest.raises(ConfigError):
        documents_to_embed(7, random.Random(42), 0.5, 3)


@pytest.mark.slow
def test_v2_scores_equal_direct_sklearn_on_one_level():
    rng = np.random.default_rng(0)
    labels = [i % 3 for i in range(60)]
    X = (rng.standard_normal((60, 4)) + np.eye(3, 4)[labels] * 3).astype(np.float32)
    ours = clustering_v2_scores(X, as_levels(labels), random.Random(7), n_clusters=2, cluster_size=50)
    draw = random.Random(7)
    expected = []
    for _ in range(2):
        idx = draw.choices(range(60), k=50)
        km = MiniBatchKMeans(n_clusters=3, batch_size=512, n_init=1, random_state=42)
        expected.append(v_measure_score(np.array(labels)[idx], km.fit_predict(X[idx])))
    assert ours["v_measures"]["Level 0"] == pytest.approx(expected, abs=1e-12)
    assert ours["v_measure"] == pytest.approx(np.mean(expected), abs=1e-12)
    assert ours["v_measure_std"] == pytest.approx(np.std(expected), abs=1e-12)
    assert set(ours) == {"v_measures", "v_measure", "v_measure_std", "ami_scores", "ami", "ami_std"}


def test_legacy_set_equals_direct_sklearn():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 5)).astype(np.float32)
    labels = [i % 4 for i in range(40)]
    km = MiniBatchKMeans(n_clusters=4, batch_size=500, n_init="auto", random_state=42).fit(X)
    assert legacy_set_v_measure(X, labels) == v_measure_score(labels, km.labels_)


def test_load_clustering_file_levels_and_sets(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"text": "a", "label": ["x", "y"], "set": 1}\n{"text": "b", "label": "z"}\n')
    data = load_clustering_file(str(tmp_path / "c.jsonl"))
    assert data == LabelledTexts(("a", "b"), (("x", "y"), "z"))
    (tmp_path / "c.csv").write_text("text,label\na,x/y\nb,z\n")
    assert load_clustering_file(str(tmp_path / "c.csv"), level_delimiter="/").labels == (("x", "y"), ("z",))
    assert [s.texts for s in group_sets(data, [2, 1])] == [("a",), ("b",)]
    (tmp_path / "bad.csv").write_text("text,label\na,\n")
    with pytest.raises(DataFormatError, match=r"bad.csv, line 2: field 'label' \(the label\) is empty"):
        load_clustering_file(str(tmp_path / "bad.csv"))


def test_task_protocol_and_builtin_split():
    task = ClusteringTask("C", bbc_news_clustering_split)
    assert isinstance(task, Task) and task.type == "Clustering" and task.main_score == "v_measure"
    assert len(bbc_news_clustering_split("test")) == 2225
    with pytest.raises(ConfigError):
        ClusteringTask("C", bbc_news_clustering_split, protocol="fast")  # type: ignore[arg-type]


def _bbc(step: int, offset: int = 0) -> LabelledTexts:
    return bbc_news_classification_split("test").select(range(offset, 1060, step))


def _hierarchical(data: LabelledTexts) -> LabelledTexts:
    """Topic, then (for two rows in three) a second level; rows without it exercise mteb's ``-1`` path."""
    labels = tuple(
        (topic, "long" if len(text) > 2000 else "short") if i % 3 else (topic,)
        for i, (text, topic) in enumerate(zip(data.texts, data.labels))
    )
    return LabelledTexts(data.texts, labels)


def _int_hierarchical(data: LabelledTexts) -> LabelledTexts:
    names = sorted(set(data.labels))
    labels = tuple((names.index(t), i % 2) if i % 4 else (names.index(t),) for i, t in enumerate(data.labels))
    return LabelledTexts(data.texts, labels)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["flat-fraction", "string-levels", "int-levels-max-docs"])
def test_v2_matches_mteb_exactly_across_two_eval_splits(case):
    """Same HashEncoder; the second eval split checks that the Random continues as in mteb's task."""
    from support.mteb_reference_labels import assert_same_scores, mteb_clustering_task, mteb_label_scores

    dev, test = _bbc(9, 1), _bbc(3)
    params = {"max_fraction_of_documents_to_embed": 0.5, "max_documents_per_cluster": 400, "n_clusters": 4}
    if case == "string-levels":
        dev, test = _hierarchical(dev), _hierarchical(test)
    elif case == "int-levels-max-docs":
        dev, test = _int_hierarchical(dev), _int_hierarchical(test)
        params.update(max_fraction_of_documents_to_embed=None, max_document_to_embed=150, max_depth=2)
    splits = {"dev": dev, "test": test}
    encoder = HashEncoder(dim=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = mteb_label_scores(encoder, mteb_clustering_task(splits, eval_splits=("dev", "test"), **params))
        task = ClusteringTask("C", splits.__getitem__, eval_splits=("dev", "test"), **params)
        for split in ("dev", "test"):
            ours = task.evaluate_split(split, encoder, RunSettings().search_options(show_progress=False)).scores
            assert_same_scores(ours, theirs[split][0], "v_measure")


@pytest.mark.slow
def test_legacy_matches_mteb_exactly():
    """Sets of 40 and 30 BBC texts plus a one-label set (1.0, not encoded)."""
    from support.mteb_reference_labels import (
        assert_same_scores,
        mteb_label_scores,
        mteb_legacy_clustering_task,
    )

    data = _bbc(2)
    sets = [data.select(range(i, len(data), 13)) for i in range(4)]
    sets.append(LabelledTexts(("only one", "label here"), ("x", "x")))
    encoder = HashEncoder(dim=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = mteb_label_scores(encoder, mteb_legacy_clustering_task({"test": sets}))["test"][0]
        ours = (
            ClusteringTask("L", {"test": sets}.__getitem__, protocol="legacy")
            .evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
            .scores
        )
    assert_same_scores(ours, theirs, "v_measure")
    assert ours["v_measures"][-1] == 1.0


@pytest.mark.slow
@pytest.mark.long  # the real model on hundreds of real texts, mteb side by side: a minute
def test_minilm_v2_matches_mteb_sentence_transformers_wrapper(minilm, mteb_minilm):
    """The real all-MiniLM-L6-v2 on 212 BBC texts: mteb's ST wrapper vs embedscope's loader."""

    from support.mteb_reference_labels import assert_same_scores, mteb_clustering_task, mteb_label_scores

    splits = {"test": _bbc(5)}
    params = {"max_fraction_of_documents_to_embed": None, "max_documents_per_cluster": 512}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mteb_minilm
        theirs = mteb_label_scores(model, mteb_clustering_task(splits, **params))["test"][0]
        task = ClusteringTask("C", splits.__getitem__, **params)
        ours = task.evaluate_split("test", minilm, RunSettings().search_options(show_progress=False)).scores
    assert_same_scores(ours, theirs, "v_measure")
    assert ours["v_measure"] > 0.5  # topics are recoverable from MiniLM vectors
