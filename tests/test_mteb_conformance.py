"""embedscope and mteb side by side with real models on real data (BBC News, offline)."""

from __future__ import annotations

import json
import math

import pytest

from embedscope.data.builtin import bbc_news_lead_retrieval, bbc_news_retrieval
from embedscope.evaluation.runner import evaluate
from embedscope.tasks.retrieval import RetrievalTask

pytestmark = pytest.mark.slow


def _compare(ours: dict, theirs: dict) -> None:
    keys = [k for k, v in theirs.items() if isinstance(v, float)]
    assert len(keys) >= 149  # 35 trec metrics + accuracy + 7 MRR + 105 nAUC + main_score
    for k in keys:
        if math.isnan(theirs[k]):
            assert math.isnan(ours[k]), k
        else:
            assert ours[k] == pytest.approx(theirs[k], abs=1e-12, rel=0), k


def test_minilm_matches_mteb_with_its_own_sentence_transformers_wrapper(mteb_minilm, tmp_path):
    """The default model through mteb's own wrapper: every score key identical."""

    from support.mteb_reference import mteb_scores

    data = bbc_news_lead_retrieval(200)
    task = RetrievalTask("BBCLead200", lambda split: data)
    report = evaluate("minilm", [task], output_folder=tmp_path, cache=tmp_path / "cache", show_progress=False)
    ours = report.outcomes[0].result.scores["test"][0]
    theirs = mteb_scores(mteb_minilm, data)
    _compare(ours, theirs)
    warm = evaluate("minilm", [task], output_folder=tmp_path / "warm", cache=tmp_path / "cache", show_progress=False)
    assert warm.cache.encoded == 0
    assert json.dumps(warm.outcomes[0].result.scores["test"][0]) == json.dumps(ours)  # NaN-aware, exact


@pytest.mark.parametrize("alias", ["minilm-int8", "paraphrase-minilm-l3", "static-64"])
def test_each_builtin_model_follows_mteb_protocol(tmp_path, alias):
    """The same encoder inside mteb and inside embedscope gives the same numbers."""
    from embedscope.models.specs import load_encoder
    from support.mteb_reference import mteb_scores

    data = bbc_news_retrieval(120)
    encoder = load_encoder(alias)
    task = RetrievalTask("BBC120", lambda split: data)
    ours = evaluate(encoder, [task], output_folder=tmp_path, cache=False, show_progress=False).outcomes[0]
    _compare(ours.result.scores["test"][0], mteb_scores(encoder, data))
    assert ours.result.main_score() > 0.3  # titles find their own articles (chance is about 0.03)


@pytest.mark.long
def test_splade_tiny_matches_mteb_sparse_encoder_wrapper_cold_and_warm(tmp_path):
    """The built-in learned-sparse model through mteb's SparseEncoderWrapper: every score key identical, and a
    warm run (its sparse rows served by the embedding cache) gives the same bits."""
    from mteb.models import SparseEncoderWrapper

    from embedscope.models.specs import load_encoder
    from support.mteb_reference import mteb_scores

    data = bbc_news_retrieval(300)
    task = RetrievalTask("BBC300", lambda split: data)
    report = evaluate("splade-tiny", [task], output_folder=tmp_path, cache=tmp_path / "cache", show_progress=False)
    ours = report.outcomes[0].result.scores["test"][0]
    _compare(ours, mteb_scores(SparseEncoderWrapper(load_encoder("splade-tiny", device="cpu").model), data))
    assert (
        ours["main_score"] > 0.8
        and 10 < ours["sparse_active_dims_query_mean"] < ours["sparse_active_dims_document_mean"]
    )
    warm = evaluate(
        "splade-tiny", [task], output_folder=tmp_path / "warm", cache=tmp_path / "cache", show_progress=False
    )
    assert warm.cache.encoded == 0
    assert json.dumps(warm.outcomes[0].result.scores["test"][0]) == json.dumps(ours)
