"""Multilabel classification: pure pieces against sklearn/numpy, then mteb side by side."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.metrics import f1_score, label_ranking_average_precision_score
from sklearn.neighbors import KNeighborsClassifier

from embedscope.errors import DataFormatError
from embedscope.metrics.classification import hamming_score
from embedscope.settings import RunSettings
from embedscope.tasks.base import Task
from embedscope.tasks.classification import bbc_news_classification_split
from embedscope.tasks.multilabel import (
    MultilabelTask,
    MultilabelTexts,
    iterative_stratified_sample,
    load_multilabel_file,
    multilabel_bootstrap,
    multilabel_file_splits,
    multilabel_scores,
)
from embedscope.testing.fakes import HashEncoder

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::RuntimeWarning")


def test_bootstrap_hand_checked_example():
    """One default_rng(42), not reset: its first two permutations of 3 are [2, 1, 0] and [0, 2, 1].
    Rows {a}, {a}, {a, b}, one per label. Experiment 1 walks 2, 1, 0: row 2 is taken (a and b
    unseen), rows 1 and 0 add nothing. Experiment 2 walks 0, 2, 1: row 0 (a unseen), row 2 (b unseen)."""
    stream = np.random.default_rng(42)
    assert [stream.permutation(3).tolist() for _ in range(2)] == [[2, 1, 0], [0, 2, 1]]
    rng = np.random.default_rng(42)
    picks = multilabel_bootstrap([("a",), ("a",), ("a", "b")], samples_per_label=1, n_experiments=2, rng=rng)
    assert picks == [[2], [0, 2]]


def test_hamming_score_by_hand():
    y_true = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 0]])
    y_pred = np.array([[1, 1, 1], [0, 1, 0], [0, 0, 0]])
    assert hamming_score(y_true, y_pred) == pytest.approx((2 / 3 + 1 + 1) / 3, abs=1e-15)


def test_multilabel_scores_equal_sklearn():
    rng = np.random.default_rng(0)
    X_train, X_test = rng.standard_normal((30, 5)), rng.standard_normal((20, 5))
    Y_train, Y_test = rng.integers(0, 2, (30, 4)), rng.integers(0, 2, (20, 4))
    pred = KNeighborsClassifier(n_neighbors=5).fit(X_train, Y_train).predict(X_test)
    ours = multilabel_scores(X_train, Y_train, X_test, Y_test)
    assert ours["accuracy"] == np.mean(np.all(pred == Y_test, axis=1))
    assert ours["lrap"] == label_ranking_average_precision_score(Y_test, pred)
    assert ours["f1"] == f1_score(Y_test, pred, average="macro")


def test_iterative_stratification_equals_mteb_vendored_copy():
    from mteb.abstasks._stratification import _iterative_train_test_split
    from sklearn.preprocessing import MultiLabelBinarizer

    rng = np.random.default_rng(3)
    labels = [tuple(sorted({f"l{j}" for j in rng.integers(0, 6, rng.integers(0, 4))})) for _ in range(200)]
    y = MultiLabelBinarizer().fit_transform(labels)
    _, expected = _iterative_train_test_split(np.arange(200).reshape(-1, 1), y, test_size=70 / 200, random_state=42)
    assert iterative_stratified_sample(labels, 70, seed=42) == expected.tolist()


def test_load_multilabel_file_lists_and_delimited(tmp_path):
    (tmp_path / "d.csv").write_text('text,tags\nhello,"a;b"\nbye,\n')
    assert load_multilabel_file(
        str(tmp_path / "d.csv"), columns={"label": "tags"}, label_delimiter=";"
    ) == MultilabelTexts(("hello", "bye"), (("a", "b"), ()))
    (tmp_path / "train.jsonl").write_text('{"text": "x", "label": ["p", "q"]}\n')
    assert multilabel_file_splits(str(tmp_path))("train").labels == (("p", "q"),)
    (tmp_path / "bad.jsonl").write_text('{"text": "x", "label": {"p": 1}}\n')
    with pytest.raises(DataFormatError, match=r"bad.jsonl, line 1: field 'label' must be a list of labels"):
        load_multilabel_file(str(tmp_path / "bad.jsonl"))


def _multilabel(step: int, split: str) -> MultilabelTexts:
    data = bbc_news_classification_split(split).select(range(0, 1060, step))
    labels = []
    for text, topic in zip(data.texts, data.labels):
        extra = [tag for tag, word in (("year", "year"), ("gov", "government"), ("game", "game")) if word in text]
        labels.append((topic, *extra))
    return MultilabelTexts(data.texts, tuple(labels))


def test_task_satisfies_protocol():
    task = MultilabelTask("M", lambda split: _multilabel(50, split))
    assert isinstance(task, Task) and task.type == "MultilabelClassification"


@pytest.mark.slow
@pytest.mark.parametrize(("max_eval", "spl"), [(3000, 8), (70, 4)])
def test_matches_mteb_exactly_across_two_eval_splits(max_eval, spl):
    """Same HashEncoder; the second eval split checks the generator continuing like mteb's task rng."""
    from support.mteb_reference_labels import assert_same_scores, mteb_label_scores, mteb_multilabel_task

    splits = {"train": _multilabel(5, "train"), "validation": _multilabel(20, "test"), "test": _multilabel(7, "test")}
    evals = ("validation", "test")
    encoder = HashEncoder(dim=16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = mteb_label_scores(
            encoder, mteb_multilabel_task(splits, eval_splits=evals, max_eval_samples=max_eval, samples_per_label=spl)
        )
        task = MultilabelTask(
            "M", splits.__getitem__, eval_splits=evals, max_eval_samples=max_eval, samples_per_label=spl
        )
        for split in evals:
            ours = task.evaluate_split(split, encoder, RunSettings().search_options(show_progress=False)).scores
            assert_same_scores(ours, theirs[split][0], "accuracy")
