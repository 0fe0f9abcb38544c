"""Summarization: correlations against scipy by hand, the protocol (both evaluators) against mteb."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.errors import DataFormatError
from embedscope.settings import RunSettings
from embedscope.tasks.summarization import SummarizationData, SummarizationTask, load_summarization_file
from embedscope.testing.fakes import HashEncoder, KeywordEncoder

WORDS = ["storm", "city", "power", "rain", "mayor", "vote"]


def _summaries(n: int = 12, seed: int = 3) -> SummarizationData:
    rng = np.random.default_rng(seed)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS, k))

    human = tuple(tuple(text(5) for _ in range(int(rng.integers(1, 4)))) for _ in range(n))
    machine = tuple(tuple(text(4) for _ in range(int(rng.integers(3, 7)))) for _ in range(n))
    relevance = tuple(tuple(float(rng.integers(1, 6)) for _ in m) for m in machine)
    relevance = (tuple(3.0 for _ in machine[0]),) + relevance[1:]  # one row of equal gold: skipped
    return SummarizationData(tuple(f"source {i}" for i in range(n)), human, machine, relevance)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["v2", "v1"])
@pytest.mark.parametrize(
    "encoder", [HashEncoder(dim=12), KeywordEncoder(WORDS, similarity="dot")], ids=["hash-cosine", "keyword-dot"]
)
def test_same_scores_as_mteb(encoder, protocol):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_summarization_task

    data = _summaries()
    task = SummarizationTask("LocalSummarization", lambda split: data, protocol=protocol)
    ours = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
    theirs = mteb_split_scores(encoder, mteb_summarization_task(data, deprecated=protocol == "v1"))
    assert_same_scores(ours.scores, theirs, "cosine_spearman", tol=0)
    assert list(ours.scores) == [k for k in theirs if k in ours.scores]
    assert "0" not in ours.per_item["id"]  # the row of equal gold scores is skipped


def test_cosine_spearman_is_the_mean_per_row_correlation_of_the_best_cosine():
    from scipy.stats import spearmanr

    data = _summaries()
    encoder = HashEncoder(dim=8)
    ours = SummarizationTask("S", lambda split: data).evaluate_split(
        "test", encoder, RunSettings().search_options(show_progress=False)
    )
    per_row = []
    for i in range(1, len(data)):
        h = encoder.encode(list(data.human_summaries[i]), role="document")
        m = encoder.encode(list(data.machine_summaries[i]), role="document")
        best = (m @ h.T).max(axis=1)  # unit vectors: dot = cosine
        per_row.append(spearmanr(np.array(data.relevance[i]) / 5, best).statistic)
    assert ours.scores["cosine_spearman"] == pytest.approx(np.mean(per_row), abs=1e-6)


def test_file_loader_reads_lists_and_explains_errors(tmp_path):
    (tmp_path / "s.jsonl").write_text(
        '{"text": "t", "human_summaries": ["h"], "machine_summaries": ["a", "b"], "relevance": [1, 4.5]}\n'
    )
    data = load_summarization_file(tmp_path / "s.jsonl")
    assert data.relevance == ((1.0, 4.5),) and data.machine_summaries == (("a", "b"),)
    (tmp_path / "bad.jsonl").write_text(
        '{"text": "t", "human_summaries": ["h"], "machine_summaries": ["a"], "relevance": [1, 2]}\n'
    )
    with pytest.raises(DataFormatError, match=r"bad.jsonl, line 1: 1 machine summaries but 2 relevance"):
        load_summarization_file(tmp_path / "bad.jsonl")


@pytest.mark.slow
def test_minilm_through_mteb_wrapper_matches(minilm, mteb_minilm):
    """The default model through mteb's own sentence-transformers wrapper (its own similarity function)."""
    pytest.importorskip("mteb")

    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_summarization_task

    data = _summaries(8)
    ours = SummarizationTask("S", lambda split: data).evaluate_split(
        "test", minilm, RunSettings().search_options(show_progress=False)
    )
    theirs = mteb_split_scores(mteb_minilm, mteb_summarization_task(data))
    assert_same_scores(ours.scores, theirs, "cosine_spearman", tol=0)
