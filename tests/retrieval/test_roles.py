"""Model roles (issue 14): tasks ask for a searcher or a candidate scorer; adapters turn an encoder into one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from embedscope.data.builtin import bbc_news_retrieval
from embedscope.errors import ConfigError
from embedscope.retrieval.base import SearchOptions
from embedscope.retrieval.dense import dense_search
from embedscope.retrieval.pipeline import Pipeline, RerankStep
from embedscope.retrieval.roles import EncoderSearcher, Search, Searcher, as_searcher, scores_candidates
from embedscope.settings import RunSettings
from embedscope.tasks.reranking import RerankingData, RerankingTask
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.testing.fakes import KeywordEncoder, OverlapReranker
from embedscope.types import Corpus, Queries

KEYWORDS = ["england", "market", "film", "election", "music", "game"]


class FirstDocuments:
    """A searcher that is no pipeline: every query gets the first three documents."""

    name = "first-documents"

    def search_stages(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> Search:
        from embedscope.types import RankedRun

        run = RankedRun.from_dict({q: {d: 1.0 / (i + 1) for i, d in enumerate(corpus.ids[:3])} for q in queries.ids})
        return Search(run, {"search": 0.0})


def test_an_encoder_becomes_mtebs_dense_search():
    data = bbc_news_retrieval(40)
    encoder = KeywordEncoder(KEYWORDS)
    searcher = as_searcher(encoder)
    assert isinstance(searcher, EncoderSearcher) and searcher.name == encoder.name
    search = searcher.search_stages(
        data.queries, data.corpus, RunSettings(top_k=10).search_options(show_progress=False)
    )
    reference = dense_search(
        encoder, data.queries, data.corpus, RunSettings(top_k=10).search_options(show_progress=False)
    )
    assert np.array_equal(search.run.doc_index, reference.doc_index) and search.stages == ()
    assert np.array_equal(search.run.scores, reference.scores)


def test_a_retrieval_task_takes_any_searcher():
    data = bbc_news_retrieval(20)
    task = RetrievalTask("bbc", lambda split: data)
    assert isinstance(FirstDocuments(), Searcher) and as_searcher(FirstDocuments()).name == "first-documents"
    outcome = task.evaluate_split("test", FirstDocuments(), RunSettings(top_k=10).search_options(show_progress=False))
    assert outcome.stages == () and set(outcome.timings) == {"load_data", "search", "metrics"}
    assert 0 < outcome.scores["recall_at_3"] < 1  # the first three documents are relevant to three queries


def test_a_pipeline_is_a_searcher_and_a_candidate_scorer_without_a_similarity():
    pipeline = Pipeline([], rerankers=[RerankStep(OverlapReranker())])
    assert isinstance(pipeline, Searcher) and scores_candidates(pipeline)
    assert not scores_candidates(KeywordEncoder(KEYWORDS)) and not hasattr(pipeline, "similarity")
    corpus = Corpus(("d1", "d2"), ("cat food", "dog walk"))
    data = RerankingData(Queries(("q1",), ("cat",)), corpus, {"q1": {"d1": 1}}, {"q1": ("d2", "d1")})
    outcome = RerankingTask("rr", lambda split: data).evaluate_split(
        "test", pipeline, RunSettings().search_options(show_progress=False)
    )
    assert outcome.scores["map_at_1000"] == 1.0
    with pytest.raises(ConfigError, match="v1 reranking protocol scores embeddings only"):
        RerankingTask("rr", lambda split: data, protocol="v1").evaluate_split(
            "test", pipeline, RunSettings().search_options(show_progress=False)
        )


def test_no_task_module_asks_for_a_models_class():
    tasks = Path(__file__).parents[2] / "src" / "embedscope" / "tasks"
    for module in tasks.glob("*.py"):
        assert "Pipeline" not in module.read_text(), module.name


def test_roles_are_asked_of_the_class_so_a_lazy_encoder_stays_unloaded():
    class Forwarding:  # like LazyEncoder: any unknown attribute would load the model
        name = "lazy"

        def __getattr__(self, item: str):
            raise AssertionError(f"the model was loaded to look up {item!r}")

    assert isinstance(as_searcher(Forwarding()), EncoderSearcher) and not scores_candidates(Forwarding())
