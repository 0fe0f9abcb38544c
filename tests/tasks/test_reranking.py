"""Reranking: v2 side by side with mteb 2.26, legacy v1 against sklearn and brute-force references."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from embedscope.errors import DataFormatError
from embedscope.metrics.nauc import legacy_nauc
from embedscope.metrics.reranking import reranking_v1_scores
from embedscope.settings import RunSettings
from embedscope.tasks.reranking import RerankingData, RerankingTask, load_reranking_file, reranking_data_from_rows
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.types import Corpus, Queries

WORDS = ["cat", "dog", "fish", "sun"]
ENCODERS = [HashEncoder(dim=12), KeywordEncoder(WORDS, similarity="dot")]
ENCODER_IDS = ["hash-cosine", "keyword-dot"]


def _rows(n: int = 14, seed: int = 5) -> list[dict]:
    """Old-format rows with duplicate texts, tied keyword scores, and rows lacking positives or negatives."""
    rng = np.random.default_rng(seed)

    def text(k: int) -> str:
        return " ".join(rng.choice(WORDS, k))

    rows = [
        {
            "query": text(2),
            "positive": [text(3) for _ in range(rng.integers(0, 3))],
            "negative": [text(3) for _ in range(rng.integers(0, 5))],
        }
        for _ in range(n)
    ]
    rows.append({"query": "cat", "positive": ["  cat dog ", "cat"], "negative": ["cat", "sun sun"]})  # dup + spaces
    return rows


def test_rows_convert_as_mteb_converts_them():
    pytest.importorskip("mteb")
    from support.mteb_reference_pairs import mteb_reranking_task_from_rows

    rows = _rows()
    ours = reranking_data_from_rows(rows)
    task = mteb_reranking_task_from_rows(rows)
    task.load_data()
    split = task.dataset["default"]["test"]
    assert list(ours.queries.ids) == split["queries"]["id"]
    assert list(ours.queries.texts) == split["queries"]["text"]
    assert list(ours.corpus.ids) == split["corpus"]["id"]
    assert list(ours.corpus.texts) == split["corpus"]["text"]
    assert {q: dict(d) for q, d in ours.qrels.items()} == {q: dict(d) for q, d in split["relevant_docs"].items()}
    assert {q: list(c) for q, c in ours.candidates.items()} == {q: list(c) for q, c in split["top_ranked"].items()}


@pytest.mark.slow
@pytest.mark.parametrize("encoder", ENCODERS, ids=ENCODER_IDS)
def test_v2_same_scores_as_mteb_old_format_path(encoder):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_reranking_task_from_rows, mteb_split_scores

    rows = _rows()
    data = reranking_data_from_rows(rows)
    outcome = RerankingTask("LocalRerankingRows", lambda split: data).evaluate_split(
        "test", encoder, RunSettings().search_options(show_progress=False)
    )
    theirs = mteb_split_scores(encoder, mteb_reranking_task_from_rows(rows))
    assert_same_scores(outcome.scores, theirs, "map_at_1000")
    assert outcome.run is not None and outcome.run.query_ids == data.queries.ids


def _general_data() -> RerankingData:
    """A corpus larger than the candidates, a query without candidates, one without qrels, 4 k-values."""
    rng = np.random.default_rng(11)
    docs = tuple(" ".join(rng.choice(WORDS, 3)) for _ in range(30))
    corpus = Corpus(tuple(f"d{i}" for i in range(30)), docs)
    queries = Queries(tuple(f"q{i}" for i in range(8)), tuple(" ".join(rng.choice(WORDS, 2)) for _ in range(8)))
    candidates = {f"q{i}": tuple(f"d{j}" for j in rng.choice(30, 9, replace=False)) for i in range(7)}  # q7: none
    qrels = {q: {d: int(rng.integers(0, 3)) for d in c[:5]} for q, c in candidates.items() if q != "q6"}
    qrels["q7"] = {"d0": 1}
    return RerankingData(queries, corpus, qrels, candidates)


@pytest.mark.slow
@pytest.mark.parametrize("encoder", ENCODERS, ids=ENCODER_IDS)
def test_v2_same_scores_as_mteb_top_ranked_path(encoder):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_reranking_task, mteb_split_scores

    data = _general_data()
    k_values = (1, 3, 5, 7)  # top_k = 7 < 9 candidates: the cut matters
    ours = RerankingTask("LocalReranking", lambda split: data, k_values=k_values, main_score="map_at_7")
    theirs = mteb_split_scores(encoder, mteb_reranking_task(data, k_values=k_values, main_score="map_at_7"))
    assert_same_scores(
        ours.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores,
        theirs,
        "map_at_7",
    )


def _cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a)
    return (b / np.linalg.norm(b, axis=1, keepdims=True)) @ a


def test_v1_map_and_mrr_against_sklearn_and_brute_force():
    rows = _rows(n=25, seed=2)
    data = reranking_data_from_rows(rows)
    encoder = HashEncoder(dim=8)
    task = RerankingTask("R", lambda split: data, protocol="v1")
    scores = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores
    aps, rrs = [], []
    for row in rows:
        if not row["positive"] or not row["negative"]:
            continue
        docs = row["positive"] + row["negative"]
        relevant = [True] * len(row["positive"]) + [False] * len(row["negative"])
        sims = _cosine(
            encoder.encode([row["query"]], role="query")[0].astype(float),
            encoder.encode(docs, role="document").astype(float),
        )
        aps.append(average_precision_score(relevant, sims))
        ranked = sorted(range(len(docs)), key=lambda i: -sims[i])[:10]
        rrs.append(next((1 / (r + 1) for r, i in enumerate(ranked) if relevant[i]), 0.0))
    assert scores["map"] == pytest.approx(np.mean(aps), abs=1e-6)
    assert scores["mrr"] == pytest.approx(np.mean(rrs), abs=1e-12)
    assert list(scores)[:2] == ["map", "mrr"]
    assert {k for k in scores if k.startswith("nAUC")} == {
        f"nAUC_{m}_{f}" for m in ("map", "mrr") for f in ("max", "std", "diff1")
    }


def test_v1_mrr_counts_only_the_first_ten():
    relevant = [False] * 11 + [True]
    scores = [1.0 - i / 100 for i in range(12)]  # the relevant candidate is ranked 12th
    assert reranking_v1_scores([scores], [relevant])["mrr"] == 0
    assert reranking_v1_scores([scores], [relevant], mrr_k=12)["mrr"] == pytest.approx(1 / 12)


def test_v1_encodes_each_distinct_document_once_and_skips_one_sided_queries():
    encoder = KeywordEncoder(WORDS)
    rows = [
        {"query": "cat", "positive": ["cat dog", "sun"], "negative": ["sun", "fish"]},
        {"query": "dog", "positive": ["dog"], "negative": []},  # skipped: no negative
        {"query": "fish", "positive": ["fish"], "negative": ["cat dog"]},
    ]
    RerankingTask("R", lambda split: reranking_data_from_rows(rows), protocol="v1").evaluate_split(
        "test", encoder, RunSettings().search_options(show_progress=False)
    )
    assert encoder.calls == [("query", ["cat", "fish"]), ("document", ["cat dog", "sun", "fish"])]


def test_v2_encodes_queries_then_the_stripped_corpus():
    encoder = KeywordEncoder(WORDS)
    rows = [{"query": " cat ", "positive": [" cat dog"], "negative": ["sun "]}]
    RerankingTask("R", lambda split: reranking_data_from_rows(rows)).evaluate_split(
        "test", encoder, RunSettings().search_options(show_progress=False)
    )
    assert encoder.calls == [("query", [" cat "]), ("document", ["cat dog", "sun"])]


def _reference_nauc(conf: np.ndarray, metric: np.ndarray) -> float:
    """arXiv:2402.12997 with 10 abstention rates, drop the least confident first (stable), trapezoid AUC."""
    rates = [i / 10 for i in range(10)]

    def curve(c):
        order = sorted(range(len(c)), key=lambda i: c[i])
        return [np.mean([metric[i] for i in order[min(round(r * len(c)), len(c) - 1) :]]) for r in rates]

    def area(ys):
        return sum((ys[i] + ys[i + 1]) / 2 * 0.1 for i in range(len(ys) - 1))

    raw, oracle = area(curve(conf)), area(curve(metric))
    flat = curve(metric)[0] * 0.9
    return (raw - flat) / (oracle - flat)


def test_legacy_nauc_against_the_paper_definition():
    rng = np.random.default_rng(4)
    for _ in range(5):
        conf, metric = rng.random(23), rng.random(23)
        assert legacy_nauc(conf, metric) == pytest.approx(_reference_nauc(conf, metric), abs=1e-12)
    assert np.isnan(legacy_nauc(rng.random(5), np.ones(5)))


def test_task_defaults_follow_the_protocol():
    assert RerankingTask("R", lambda s: None).main_score == "map_at_1000"
    assert RerankingTask("R", lambda s: None, protocol="v1").main_score == "map"
    with pytest.raises(ValueError, match="protocol"):
        RerankingTask("R", lambda s: None, protocol="v3")  # type: ignore[arg-type]


def test_file_loader_reads_lists_and_explains_errors(tmp_path):
    (tmp_path / "r.jsonl").write_text(
        '{"q": "cat", "pos": ["a cat"], "neg": ["a dog", "sun"]}\n{"q": "dog", "pos": [], "neg": ["x"]}\n'
    )
    data = load_reranking_file(tmp_path / "r.jsonl", {"query": "q", "positive": "pos", "negative": "neg"})
    assert data.queries.ids == ("test_query0",) and data.corpus.texts == ("a cat", "a dog", "sun")
    assert data.qrels["test_query0"] == {
        "apositive_test_query0_00000": 1,
        "negative_test_query0_00000": 0,
        "negative_test_query0_00001": 0,
    }
    (tmp_path / "r.csv").write_text('query,positive,negative\ncat,"[""a cat""]","[""sun""]"\n')
    assert load_reranking_file(tmp_path / "r.csv").corpus.texts == ("a cat", "sun")
    (tmp_path / "bad.csv").write_text("query,positive,negative\ncat,a cat,sun\n")
    with pytest.raises(DataFormatError, match=r"bad.csv, line 2: 'positive' must be a list of texts"):
        load_reranking_file(tmp_path / "bad.csv")
    with pytest.raises(DataFormatError, match=r"r.jsonl, line 1: missing field 'query'.*columns=\{'query'"):
        load_reranking_file(tmp_path / "r.jsonl")


@pytest.mark.slow
def test_minilm_v2_on_lee_documents_matches_mteb(minilm, mteb_minilm):
    pytest.importorskip("mteb")

    from embedscope.data.builtin import lee_similarity
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_reranking_task_from_rows, mteb_split_scores

    lee = lee_similarity()
    rows = []  # query = Lee document i (first 200 characters); candidates = 8 other documents by human rating
    for doc in list(dict.fromkeys(lee.sentence1))[:6]:
        pairs = [(s, b) for a, b, s in zip(lee.sentence1, lee.sentence2, lee.scores) if a == doc][:8]
        rows.append(
            {
                "query": doc[:200],
                "positive": [b for s, b in pairs if s > 0.4],
                "negative": [b for s, b in pairs if s <= 0.4],
            }
        )
    data = reranking_data_from_rows(rows)
    ours = RerankingTask("Lee", lambda split: data).evaluate_split(
        "test", minilm, RunSettings().search_options(show_progress=False)
    )
    theirs = mteb_split_scores(mteb_minilm, mteb_reranking_task_from_rows(rows))
    assert_same_scores(ours.scores, theirs, "map_at_1000")
