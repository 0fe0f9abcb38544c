"""The runner end to end with deterministic encoders, and side by side with mteb on the same data."""

from __future__ import annotations

import json
import math

import pytest

from embedscope.data.builtin import bbc_news_retrieval
from embedscope.evaluation.runner import evaluate
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_task
from embedscope.types import Queries, RetrievalData


def _kw():
    return KeywordEncoder(["cat", "dog", "fish"])


def test_writes_mteb_layout_and_reuses_stored_results(tmp_path):
    report = evaluate(_kw(), [tiny_retrieval_task()], output_folder=tmp_path, cache=False, show_progress=False)
    (outcome,) = report.outcomes
    assert outcome.result.main_score() == 1.0 and not outcome.reused
    folder = tmp_path / "fake__keyword-encoder" / _kw().revision
    assert sorted(p.name for p in folder.iterdir()) == [
        "TinyRetrieval.json",
        "TinyRetrieval.per_item.jsonl.gz",
        "model_meta.json",
    ]
    data = json.loads((folder / "TinyRetrieval.json").read_text())
    entry = data["scores"]["test"][0]
    assert entry["main_score"] == entry["ndcg_at_10"] == 1.0 and entry["hf_subset"] == "default"
    assert json.loads((folder / "model_meta.json").read_text())["similarity_fn_name"] == "dot"

    again = evaluate(_kw(), [tiny_retrieval_task()], output_folder=tmp_path, cache=False)
    assert again.outcomes[0].reused and json.dumps(again.outcomes[0].result.scores) == json.dumps(outcome.result.scores)
    forced = evaluate(_kw(), [tiny_retrieval_task()], output_folder=tmp_path, cache=False, overwrite="always")
    assert not forced.outcomes[0].reused


def test_interrupted_run_resumes_with_the_missing_task(tmp_path):
    loads = []

    def broken(split):  # the memory guard reads every task's data before the run; the run's own read is interrupted
        loads.append(split)
        if len(loads) > 1:
            raise KeyboardInterrupt
        return tiny_retrieval_task("B").load_split(split)

    with pytest.raises(KeyboardInterrupt):
        evaluate(_kw(), [tiny_retrieval_task("A"), RetrievalTask("B", broken)], output_folder=tmp_path, cache=False)
    resumed = evaluate(_kw(), [tiny_retrieval_task("A"), tiny_retrieval_task("B")], output_folder=tmp_path, cache=False)
    assert [o.reused for o in resumed.outcomes] == [True, False]


def test_predictions_are_saved_in_mteb_format(tmp_path):
    report = evaluate(_kw(), [tiny_retrieval_task()], output_folder=tmp_path, cache=False, save_predictions=True)
    path = report.outcomes[0].path.parent / "predictions" / "TinyRetrieval_predictions.json"
    preds = json.loads(path.read_text())
    assert preds["default"]["test"]["q1"]["d1"] == 1.0 and set(preds["default"]["test"]) == {"q1", "q2", "q3"}


@pytest.mark.slow
def test_warm_cache_gives_exactly_the_cold_numbers(tmp_path):
    task = RetrievalTask("BBC300", lambda split: bbc_news_retrieval(300))
    cold = evaluate(HashEncoder(), [task], output_folder=tmp_path / "a", cache=tmp_path / "cache")
    warm = evaluate(HashEncoder(), [task], output_folder=tmp_path / "b", cache=tmp_path / "cache")
    assert cold.cache.encoded == 600 and warm.cache.encoded == 0 and warm.cache.hits == 600
    assert json.dumps(warm.outcomes[0].result.scores) == json.dumps(cold.outcomes[0].result.scores)  # NaN-aware


def test_limits_keep_judged_documents_only_and_warn(tmp_path, caplog):
    task = RetrievalTask("BBC300", lambda split: bbc_news_retrieval(300))
    report = evaluate(HashEncoder(), [task], output_folder=tmp_path, cache=False, limits=20)
    assert any("inflated" in r.getMessage() for r in caplog.records)
    full = evaluate(HashEncoder(), [task], output_folder=tmp_path / "full", cache=False)
    assert report.outcomes[0].result.main_score() > full.outcomes[0].result.main_score()


def _assert_same_scores(ours: dict, theirs: dict) -> None:
    bookkeeping = ("hf_subset", "languages", "mteb_version")  # we do not claim to be mteb
    theirs = {k: v for k, v in theirs.items() if k not in bookkeeping}
    ours = {k: v for k, v in ours.items() if k not in bookkeeping}
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(ours[key]), key
        else:
            assert ours[key] == pytest.approx(value, abs=1e-12, rel=0), key


@pytest.mark.slow
@pytest.mark.parametrize(
    "make_encoder",
    [HashEncoder, lambda: KeywordEncoder(["the", "of", "to", "and", "in"])],
    ids=["hash-cosine", "keyword-dot-many-ties"],
)
@pytest.mark.parametrize("ignore_identical_ids", [False, True])
def test_same_numbers_as_mteb_on_the_same_data(tmp_path, make_encoder, ignore_identical_ids):
    from support.mteb_reference import mteb_scores

    data = bbc_news_retrieval(150)
    if ignore_identical_ids:  # give each query the id of another article's document
        ids = data.corpus.ids
        rename = {q: ids[(i + 1) % len(ids)] for i, q in enumerate(data.queries.ids)}
        data = RetrievalData(
            data.corpus,
            Queries(tuple(rename[q] for q in data.queries.ids), data.queries.texts),
            {rename[q]: docs for q, docs in data.qrels.items()},
        )
    task = RetrievalTask("BBC150", lambda split: data, ignore_identical_ids=ignore_identical_ids)
    ours = evaluate(make_encoder(), [task], output_folder=tmp_path, cache=False).outcomes[0].result.scores["test"][0]
    theirs = mteb_scores(make_encoder(), data, ignore_identical_ids=ignore_identical_ids)
    _assert_same_scores(ours, theirs)
