"""Classification: the pure protocol pieces against sklearn/numpy/datasets, then mteb side by side."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, average_precision_score, f1_score, precision_score, recall_score

from embedscope.errors import DataFormatError
from embedscope.metrics.classification import average_experiments
from embedscope.settings import RunSettings
from embedscope.tasks.base import Task
from embedscope.tasks.classification import (
    ClassificationTask,
    LabelledTexts,
    bbc_news_classification_split,
    class_label_ids,
    classification_scores,
    labelled_file_splits,
    load_labelled_file,
    stratified_subsample_indices,
    undersample,
)
from embedscope.testing.fakes import HashEncoder

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning", "ignore::UserWarning")


# ---------------------------------------------------------------- pure functions


def test_undersample_hand_checked_example():
    """RandomState(42) permutes range(5) to [1, 4, 2, 0, 3] (numpy's documented stream); the second,
    cumulative shuffle applies the same permutation again: [4, 3, 2, 1, 0]. Labels a b a b a →
    one per label: experiment 1 keeps 1 (b), 4 (a); experiment 2 keeps 4 (a), 3 (b)."""
    assert np.random.RandomState(42).permutation(5).tolist() == [1, 4, 2, 0, 3]
    assert undersample(["a", "b", "a", "b", "a"], samples_per_label=1, n_experiments=2) == [[1, 4], [4, 3]]


def test_undersample_matches_composed_permutations():
    labels = [i % 3 for i in range(40)]
    perm = np.random.RandomState(42).permutation(40)
    order = list(range(40))
    for picks in undersample(labels, samples_per_label=4, n_experiments=5):
        order = [order[p] for p in perm]
        expected, seen = [], {0: 0, 1: 0, 2: 0}
        for i in order:
            if seen[labels[i]] < 4:
                expected.append(i)
                seen[labels[i]] += 1
        assert picks == expected


def _toy(n: int, n_labels: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    y = [int(i % n_labels) for i in range(n)]
    X = rng.standard_normal((n, 6)) + np.eye(n_labels, 6)[y] * 1.5
    return X, y


@pytest.mark.parametrize("n_labels", [2, 4])
def test_classification_scores_equal_sklearn(n_labels):
    X_train, y_train = _toy(40, n_labels, 0)
    X_test, y_test = _toy(30, n_labels, 1)
    pred = LogisticRegression(max_iter=100, random_state=42).fit(X_train, y_train).predict(X_test)
    ours = classification_scores(X_train, y_train, X_test, y_test, seed=42)
    assert ours["accuracy"] == accuracy_score(y_test, pred)
    assert ours["f1"] == f1_score(y_test, pred, average="macro")
    assert ours["f1_weighted"] == f1_score(y_test, pred, average="weighted")
    assert ours["precision"] == precision_score(y_test, pred, average="macro")
    assert ours["recall_weighted"] == recall_score(y_test, pred, average="weighted")
    if n_labels == 2:
        assert ours["ap"] == average_precision_score(y_test, pred)
    else:
        assert ours["ap"] is None and ours["ap_weighted"] is None


def test_average_experiments_gives_nan_for_missing_ap():
    avg = average_experiments([{"accuracy": 0.5, "ap": None}, {"accuracy": 1.0, "ap": None}])
    assert avg["accuracy"] == 0.75 and math.isnan(avg["ap"]) and len(avg["scores_per_experiment"]) == 2


@pytest.mark.slow
def test_stratified_subsample_equals_datasets_split():
    from datasets import ClassLabel, Dataset

    labels = [i % 4 if i % 5 else 0 for i in range(300)]
    ds = Dataset.from_dict({"label": labels}).cast_column("label", ClassLabel(names=["a", "b", "c", "d"]))
    expected = ds.train_test_split(test_size=100, seed=42, stratify_by_column="label")["test"]["label"]
    kept = stratified_subsample_indices(labels, 100, seed=42)
    assert [labels[i] for i in kept] == expected and len(set(kept)) == 100
    assert stratified_subsample_indices(labels, 300) == list(range(300))


def test_class_label_ids_sort_names_as_strings():
    assert class_label_ids([["b", "a"], ["c"]]) == ([1, 0], [2])


# ---------------------------------------------------------------- data


def test_load_labelled_file_csv_jsonl_parquet_and_columns(tmp_path):
    csv_path = tmp_path / "data.csv"
    csv_path.write_text("body,topic,part\nhello,greet,train\nbye,leave,test\nhi,greet,train\n")
    cols = {"text": "body", "label": "topic", "split": "part"}
    assert load_labelled_file(csv_path, "train", cols) == LabelledTexts(("hello", "hi"), ("greet", "greet"))
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "test.jsonl").write_text('{"text": "x", "title": "T", "label": 3}\n\n{"text": "y", "label": 1}\n')
    assert labelled_file_splits(folder)("test") == LabelledTexts(("T x", "y"), (3, 1))
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": ["p", "q"], "label": ["u", "v"]}), folder / "train.parquet")
    assert load_labelled_file(folder, "train").labels == ("u", "v")


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"text": "a", "label": 1}\n{"txt": "b", "label": 2}\n', "data.jsonl, line 2: missing field 'text'"),
        ('{"text": "a", "label": 1}\n{"text": "b", "label": "x"}\n', "data.jsonl, line 2: label 'x' is a str"),
        ('{"text": "a", "label": [1, 2]}\n', "one label per row"),
        ("{not json\n", "data.jsonl, line 1: malformed JSON"),
    ],
)
def test_load_labelled_file_errors_name_the_place_and_fix(tmp_path, content, needle):
    path = tmp_path / "data.jsonl"
    path.write_text(content)
    with pytest.raises(DataFormatError, match=None) as err:
        load_labelled_file(path)
    assert needle in str(err.value)


def test_split_column_without_the_split_is_an_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("text,label,split\na,1,train\n")
    with pytest.raises(DataFormatError, match="no rows with split='test'"):
        load_labelled_file(path, "test")


def test_bbc_split_is_deterministic_disjoint_and_stratified():
    train, test = bbc_news_classification_split("train"), bbc_news_classification_split("test")
    assert len(train) + len(test) == 2127 and not set(train.texts) & set(test.texts)
    assert bbc_news_classification_split("test") == test
    for label in set(train.labels):
        assert abs(train.labels.count(label) - test.labels.count(label)) <= 1


def test_task_satisfies_protocol():
    task = ClassificationTask("T", bbc_news_classification_split)
    assert isinstance(task, Task) and task.type == "Classification" and task.main_score == "accuracy"


# ---------------------------------------------------------------- mteb side by side


def _bbc(step_train: int, step_test: int) -> dict[str, LabelledTexts]:
    return {
        "train": bbc_news_classification_split("train").select(range(0, 1060, step_train)),
        "test": bbc_news_classification_split("test").select(range(0, 1060, step_test)),
    }


def _binary(data: LabelledTexts) -> LabelledTexts:
    keep = [i for i, label in enumerate(data.labels) if label in ("sports", "tech")]
    return LabelledTexts(tuple(data.texts[i] for i in keep), tuple(int(data.labels[i] == "tech") for i in keep))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "subsample", "spl"),
    [("multiclass", None, 8), ("multiclass-subsampled", 100, 8), ("binary-ints", None, 16), ("binary-sub", 60, 3)],
)
def test_matches_mteb_exactly(case, subsample, spl):
    """Every key mteb writes, scores_per_experiment included, with the same HashEncoder."""
    from support.mteb_reference_labels import assert_same_scores, mteb_classification_task, mteb_label_scores

    splits = _bbc(4, 6)
    if case.startswith("binary"):
        splits = {k: _binary(v) for k, v in splits.items()}
    encoder = HashEncoder(dim=24)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = mteb_label_scores(
            encoder, mteb_classification_task(splits, samples_per_label=spl, test_subsample_size=subsample)
        )["test"][0]
        task = ClassificationTask("T", splits.__getitem__, samples_per_label=spl, test_subsample_size=subsample)
        ours = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores
    assert_same_scores(ours, theirs, "accuracy")
    assert len(ours["scores_per_experiment"]) == 10
    assert math.isnan(ours["ap"]) != case.startswith("binary")


@pytest.mark.slow
def test_runner_writes_mteb_json(tmp_path):
    from embedscope.evaluation.runner import evaluate

    splits = _bbc(10, 20)
    task = ClassificationTask("BBCTiny", splits.__getitem__, n_experiments=2)
    report = evaluate(HashEncoder(dim=8), [task], output_folder=tmp_path, cache=False, show_progress=False)
    entry = report.outcomes[0].result.scores["test"][0]
    assert entry["main_score"] == entry["accuracy"] and len(entry["scores_per_experiment"]) == 2
    written = [json.loads(p.read_text()) for p in tmp_path.rglob("BBCTiny.json")]
    assert written and written[0]["scores"]["test"][0]["accuracy"] == entry["accuracy"]


@pytest.mark.slow
@pytest.mark.long  # the real model on hundreds of real texts, mteb side by side: a minute
def test_minilm_matches_mteb_sentence_transformers_wrapper(minilm, mteb_minilm):
    """The real all-MiniLM-L6-v2: mteb with its own ST wrapper vs embedscope's loader, 212 BBC texts."""

    from support.mteb_reference_labels import assert_same_scores, mteb_classification_task, mteb_label_scores

    splits = _bbc(10, 10)  # 106 + 106 texts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = mteb_minilm
        theirs = mteb_label_scores(model, mteb_classification_task(splits))["test"][0]
        ours = (
            ClassificationTask("T", splits.__getitem__)
            .evaluate_split("test", minilm, RunSettings().search_options(show_progress=False))
            .scores
        )
    assert_same_scores(ours, theirs, "accuracy")
    assert ours["accuracy"] > 0.8  # five news topics from 8 examples each
