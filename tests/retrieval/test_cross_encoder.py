"""Cross-encoder reranking with a tiny randomly initialised checkpoint built here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from embedscope.errors import ConfigError
from embedscope.retrieval.base import rerank
from embedscope.retrieval.cross_encoder import CrossEncoderReranker, is_cross_encoder_checkpoint
from embedscope.settings import RunSettings
from embedscope.types import Corpus, Queries, RankedRun
from support.tiny_models import build_tiny_cross_encoder, build_tiny_pylate_colbert


@pytest.fixture(scope="module")
def tiny_ce(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("ce"))


def _manual_scores(folder, pairs):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForSequenceClassification.from_pretrained(str(folder)).eval()
    batch = tok([q for q, _ in pairs], [d for _, d in pairs], padding=True, truncation=True, return_tensors="pt")
    with torch.inference_mode():
        return torch.sigmoid(model(**batch).logits[:, 0]).numpy()


@pytest.mark.slow
def test_scores_equal_a_manual_forward_pass(tiny_ce):
    pairs = [("a cat", "The cat sat on the mat."), ("dogs", "A dog barked at the postman, loudly."), ("x", "y")]
    got = CrossEncoderReranker(tiny_ce).score_pairs(pairs, batch_size=2)
    np.testing.assert_allclose(got, _manual_scores(tiny_ce, pairs), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_rerank_reorders_candidates_by_pair_scores(tiny_ce):
    reranker = CrossEncoderReranker(tiny_ce)
    corpus = Corpus(("d1", "d2", "d3"), ("cats", "dogs barking", "fish in the sea"))
    queries = Queries(("q1", "q2"), ("cat", "sea"))
    candidates = RankedRun(queries.ids, corpus.ids, np.array([[0, 1, 2], [2, 0, -1]]), np.zeros((2, 3)))
    run = rerank(reranker, queries, corpus, candidates, RunSettings(top_k=3).search_options(show_progress=False))
    for i, q in enumerate(queries.texts):
        idx = [d for d in candidates.doc_index[i] if d >= 0]
        expected = reranker.score_pairs([(q, corpus.texts[d]) for d in idx])
        assert run.doc_index[i][: len(idx)].tolist() == [idx[j] for j in np.argsort(-expected, kind="stable")]
    assert run.doc_index[1, 2] == -1  # an empty candidate slot stays empty


@pytest.mark.slow
def test_checkpoint_detection(tiny_ce, tmp_path):
    from embedscope.models.specs import alias_path

    assert is_cross_encoder_checkpoint(tiny_ce)
    assert not is_cross_encoder_checkpoint(alias_path("minilm"))
    assert not is_cross_encoder_checkpoint(build_tiny_pylate_colbert(tmp_path / "colbert"))


def test_missing_model_offline_is_a_clear_error():
    with pytest.raises(ConfigError, match="offline"):
        CrossEncoderReranker("some-org/some-reranker")
