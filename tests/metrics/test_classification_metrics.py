"""Classification metrics of hard predictions against scikit-learn on the same labels, numbers or strings."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from embedscope.metrics.classification import prediction_scores


@pytest.mark.parametrize(
    ("labels", "positive"),
    [(("neg", "pos"), "pos"), (("b", "a"), "b"), ((0, 1), 1), ((-1, 1), 1), ((1, 2), 1), ((0, 2), 2)],
)
def test_binary_ap_is_sklearns_with_the_stated_positive_class(labels, positive):
    rng = np.random.default_rng(0)
    gold = [labels[i] for i in rng.integers(0, 2, 40)]
    predicted = [labels[i] for i in rng.integers(0, 2, 40)]
    ours = prediction_scores(gold, predicted)
    truth = [int(g == positive) for g in gold]
    if isinstance(labels[0], str):  # scored 1[predicted = positive]
        expected = average_precision_score(truth, [float(p == positive) for p in predicted])
    else:  # the predicted labels themselves are the scores, as mteb passes them
        expected = average_precision_score(gold, predicted, pos_label=positive)
    assert ours["ap"] == pytest.approx(expected, abs=1e-15)
    assert ours["accuracy"] == np.mean(np.asarray(gold) == np.asarray(predicted))


def test_string_binary_labels_equal_the_same_labels_as_0_and_1():
    gold, predicted = ["neg", "pos", "pos", "neg", "pos"], ["neg", "pos", "neg", "pos", "pos"]
    as_numbers = prediction_scores([int(g == "pos") for g in gold], [int(p == "pos") for p in predicted])
    assert prediction_scores(gold, predicted) == as_numbers


def test_more_than_two_classes_have_no_ap():
    scores = prediction_scores(["a", "b", "c"], ["a", "c", "c"])
    assert scores["ap"] is None and scores["ap_weighted"] is None


def test_a_class_never_predicted_counts_zero_as_sklearns_default_does_and_warns_nothing():
    import warnings

    from sklearn.metrics import f1_score, precision_score, recall_score

    y_test, y_pred = [0, 1, 2, 2, 1], [0, 1, 1, 1, 1]  # class 2 never predicted; 0 and 1 predicted
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = prediction_scores(y_test, y_pred)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's default: "warn", which counts the class 0
        expected = {
            "precision": precision_score(y_test, y_pred, average="macro"),
            "precision_weighted": precision_score(y_test, y_pred, average="weighted"),
            "recall": recall_score(y_test, y_pred, average="macro"),
            "f1": f1_score(y_test, y_pred, average="macro"),
            "f1_weighted": f1_score(y_test, y_pred, average="weighted"),
        }
    assert {k: scores[k] for k in expected} == expected  # the same bits
    assert scores["precision"] == (1 + 2 / 4 + 0) / 3
