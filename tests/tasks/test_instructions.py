"""Instruction retrieval and reranking: p-MRR by hand, the FollowIR / IFIR / InstructIR protocols against mteb."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.metrics.instructions import p_mrr, rank_score
from embedscope.settings import RunSettings
from embedscope.tasks.instructions import (
    InstructionData,
    InstructionRerankingTask,
    InstructionRetrievalTask,
    with_instructions,
)
from embedscope.tasks.reranking import RerankingData
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.types import Corpus, Queries, RetrievalData

WORDS = ["flood", "court", "election", "virus", "market", "storm"]


def _corpus(n: int = 30, seed: int = 1) -> Corpus:
    rng = np.random.default_rng(seed)
    return Corpus(tuple(f"d{i}" for i in range(n)), tuple(" ".join(rng.choice(WORDS, 4)) for _ in range(n)))


def _followir(seed: int = 2) -> InstructionData:
    """Pairs of queries ``{q}-og`` / ``{q}-changed``; the changed instruction makes two relevant docs irrelevant."""
    rng = np.random.default_rng(seed)
    corpus = _corpus()
    ids, texts, instructions, qrels, candidates, diff = [], [], {}, {}, {}, {}
    for q in range(6):
        topic = str(rng.choice(WORDS))
        relevant = [str(d) for d in rng.choice(corpus.ids, 5, replace=False)]
        for kind in ("og", "changed"):
            qid = f"q{q}-{kind}"
            ids.append(qid)
            texts.append(f"news about {topic}")
            instructions[qid] = f"relevant: {' '.join(rng.choice(WORDS, 2))}" if kind == "og" else f"only {topic}"
            judged = relevant if kind == "og" else relevant[2:]
            qrels[qid] = {d: 1 for d in judged}
            candidates[qid] = tuple(str(d) for d in rng.choice(corpus.ids, 20, replace=False)) + tuple(
                d for d in relevant if d not in candidates.get(qid, ())
            )
        diff[f"q{q}"] = relevant[:2]
    data = RerankingData(
        Queries(tuple(ids), tuple(texts)), corpus, qrels, {q: tuple(dict.fromkeys(c)) for q, c in candidates.items()}
    )
    return InstructionData(data, instructions, diff)


def _retrieval(ids: list[str], seed: int = 4) -> InstructionData:
    rng = np.random.default_rng(seed)
    corpus = _corpus(40, seed)
    qrels = {q: {str(d): 1 for d in rng.choice(corpus.ids, 3, replace=False)} for q in ids}
    queries = Queries(tuple(ids), tuple(" ".join(rng.choice(WORDS, 2)) for _ in ids))
    instructions = {q: (" ".join(rng.choice(WORDS, 3)) if i % 3 else "") for i, q in enumerate(ids)}
    return InstructionData(RetrievalData(corpus, queries, qrels), instructions)


def test_instruction_follows_the_query_text():
    q = with_instructions(Queries(("a", "b"), ("x", "y")), {"a": "instr", "b": None})
    assert q.texts == ("x instr", "y")


def test_p_mrr_by_hand():
    # a document the changed instruction made non-relevant should fall: rank 1 → 4 scores 0.75, 4 → 1 scores -0.75
    assert rank_score(1, 4) == 0.75 and rank_score(4, 1) == -0.75 and rank_score(2, 2) == 0.0
    og = {"a-og": {"d1": 0.9, "d2": 0.5, "d3": 0.1}}
    new = {"a-changed": {"d1": 0.2, "d2": 0.5, "d3": 0.1}}  # d1 falls from rank 1 to rank 2
    assert p_mrr(og, new, {"a": ["d1"]}) == pytest.approx(1 - (1 / 2) / (1 / 1))


@pytest.mark.slow
@pytest.mark.parametrize(
    "encoder", [KeywordEncoder(WORDS, similarity="cosine"), HashEncoder(dim=8)], ids=["keyword-ties", "hash"]
)
def test_followir_reranking_same_scores_as_mteb(encoder):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_followir_task

    given = _followir()
    ours = (
        InstructionRerankingTask("Core17InstructionRetrieval", lambda split: given)
        .evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
        .scores
    )
    theirs = mteb_split_scores(encoder, mteb_followir_task(given))
    assert_same_scores(ours, theirs, "p-MRR", tol=0)
    assert list(ours) == [k for k in theirs if k in ours]
    assert set(ours["og"]) == set(theirs["og"]) and ours["p-MRR"] != 0


@pytest.mark.slow
def test_ifir_level_scores_same_as_mteb():
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_ifir_task

    given = _retrieval([f"q{i}_v{1 + i % 3}" for i in range(12)])
    encoder = KeywordEncoder(WORDS, similarity="cosine")
    ours = (
        InstructionRetrievalTask("IFIRAila", lambda split: given)
        .evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
        .scores
    )
    assert_same_scores(ours, mteb_split_scores(encoder, mteb_ifir_task(given)), "ndcg_at_20", tol=0)


@pytest.mark.slow
def test_instruct_ir_robustness_same_as_mteb():
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_instruct_ir_task

    given = _retrieval([f"g{i // 3}_{i % 3}" for i in range(12)])
    encoder = HashEncoder(dim=8)
    task = InstructionRetrievalTask(
        "InstructIR", lambda split: given, main_score="robustness_at_10", task_scores="robustness_at_10"
    )
    ours = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores
    assert_same_scores(ours, mteb_split_scores(encoder, mteb_instruct_ir_task(given)), "robustness_at_10", tol=0)


@pytest.mark.slow
def test_minilm_followir_through_mteb_wrapper_matches(minilm, mteb_minilm):
    pytest.importorskip("mteb")

    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores
    from support.mteb_reference_tasks import mteb_followir_task

    given = _followir()
    ours = (
        InstructionRerankingTask("F", lambda split: given)
        .evaluate_split("test", minilm, RunSettings().search_options(show_progress=False))
        .scores
    )
    theirs = mteb_split_scores(mteb_minilm, mteb_followir_task(given))
    assert_same_scores(ours, theirs, "p-MRR", tol=0)
