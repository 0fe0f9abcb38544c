"""Proxy tasks (tasks/proxy.py): seeded and reproducible, hard negatives equal to a direct bm25s top-k, strata
in proportion, and every task type's protocol run unchanged on the reduced data."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import numpy as np
import pytest

from embedscope.errors import ConfigError
from embedscope.models.base import batches, length_order
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.results.settings import task_settings
from embedscope.settings import RunSettings
from embedscope.tasks.proxy import (
    EncodedWithinCalls,
    FullCalls,
    ProxySpec,
    corpus_batches,
    kept_share,
    pair_score_quintiles,
    phase_shares,
    proxy_task,
    retrieval_proxy,
    rows_proxy,
    stratified_rows,
)
from embedscope.tasks.retrieval import RetrievalTask
from embedscope.tasks.sts import STSData, STSTask
from embedscope.testing.fakes import HashEncoder, KeywordEncoder
from embedscope.testing.tiny import TINY_WORDS, tiny_tasks_of_every_type
from embedscope.types import Corpus, EncodedWithin, Queries, RetrievalData

VOCAB = [f"w{i}" for i in range(150)]


def _retrieval_data(n_docs: int = 300, n_queries: int = 40, seed: int = 0) -> RetrievalData:
    rng = np.random.default_rng(seed)
    docs = [" ".join(rng.choice(VOCAB, size=int(rng.integers(5, 30)))) for _ in range(n_docs)]
    queries = [" ".join(rng.choice(VOCAB, size=3)) for _ in range(n_queries)]
    qrels = {f"q{i}": {f"d{j}": 1 for j in rng.choice(n_docs, size=2, replace=False)} for i in range(n_queries - 5)}
    qrels["q0"]["d1"] = 0  # a judged non-relevant document stays judged
    return RetrievalData(
        Corpus(tuple(f"d{i}" for i in range(n_docs)), tuple(docs)),
        Queries(tuple(f"q{i}" for i in range(n_queries)), tuple(queries)),
        qrels,
    )


def _bm25s_top_k(data: RetrievalData, queries: list[str], k: int) -> set[int]:
    """The top ``k`` of each query straight from bm25s (its own tokenize, the Lucene defaults)."""
    if k == 0:
        return set()
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    model = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    model.index(bm25s.tokenize(list(data.corpus.texts), stopwords="en", stemmer=stemmer, show_progress=False))
    tokens = bm25s.tokenize(queries, stopwords="en", stemmer=stemmer, show_progress=False)
    docs, scores = model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
    return {int(d) for d, s in zip(np.ravel(docs), np.ravel(scores)) if s > 0}


def test_hard_negatives_are_a_direct_bm25s_top_k() -> None:
    data = _retrieval_data()
    reduced, composition = retrieval_proxy(data, ProxySpec(size=10, seed=4, hard_negatives=7, random_documents=0))
    row = {d: i for i, d in enumerate(data.corpus.ids)}
    judged = {row[d] for docs in reduced.qrels.values() for d in docs}
    expected = _bm25s_top_k(data, list(reduced.queries.texts), 7) | judged
    assert {row[d] for d in composition["documents"]} == expected
    assert composition["hard_negatives"] == len(expected - judged) > 0


@pytest.mark.slow
def test_the_corpus_shrinks_as_the_queries_do_judged_then_hard_then_random_in_corpus_order() -> None:
    data = _retrieval_data()
    reduced, composition = retrieval_proxy(data, ProxySpec(size=0.25, seed=1, hard_negatives=5))
    judged_queries = [q for q in data.queries.ids if data.qrels.get(q)]
    assert len(reduced.queries) == round(0.25 * len(judged_queries)) == len(composition["queries"])
    assert set(reduced.queries.ids) <= set(judged_queries)
    assert list(reduced.queries.ids) == [q for q in data.queries.ids if q in set(reduced.queries.ids)]
    assert reduced.qrels == {q: dict(data.qrels[q]) for q in reduced.queries.ids}
    kept = set(reduced.corpus.ids)
    assert all(d in kept for docs in reduced.qrels.values() for d in docs)  # judged ones, the 0 too
    assert list(reduced.corpus.ids) == [d for d in data.corpus.ids if d in kept]  # corpus order
    share = round(len(reduced.queries) / len(judged_queries) * len(data.corpus))
    budget = max(share, 2 * composition["judged"])  # a distractor per judged document at least
    assert len(kept) == budget == composition["judged"] + composition["hard_negatives"] + composition["random"]
    assert composition["hard_negatives"] == (budget - composition["judged"]) // 2
    # the hard negatives are the first new documents of the BM25 rankings, rank 1 of every query first
    row = {d: i for i, d in enumerate(data.corpus.ids)}
    judged = {row[d] for docs in reduced.qrels.values() for d in docs}
    by_depth = [_bm25s_top_k(data, [q], depth) - _bm25s_top_k(data, [q], depth - 1) for depth in range(1, 6)
                for q in reduced.queries.texts]  # fmt: skip
    first: list[int] = []
    for docs in by_depth:
        first += sorted(d for d in docs if d not in judged and d not in first)
    hard = {row[d] for d in composition["documents"]} - judged
    assert set(first[: composition["hard_negatives"]]) <= hard


def test_the_same_seed_gives_the_same_proxy_and_another_seed_another() -> None:
    data = _retrieval_data()
    one, two, other = (retrieval_proxy(data, ProxySpec(size=12, seed=s))[1] for s in (5, 5, 6))
    assert one == two
    assert one["queries"] != other["queries"]
    sts = next(t for t in tiny_tasks_of_every_type() if t.type == "STS")
    rows = [proxy_task(sts, ProxySpec(size=10, seed=s)).task.load_split("test") for s in (2, 2, 3)]
    assert rows[0] == rows[1] != rows[2]


@pytest.mark.parametrize("k", [1, 3, 4, 7, 12, 30, 40])
def test_strata_get_their_proportional_share(k: int) -> None:
    labels = ["a"] * 20 + ["b"] * 12 + ["c"] * 5 + ["d"] * 3
    rows = stratified_rows(labels, k, np.random.default_rng(0))
    assert rows == sorted(set(rows)) and len(rows) == min(k, len(labels))
    counts = Counter(labels[i] for i in rows)
    sizes = Counter(labels)
    for label, size in sizes.items():
        if k >= len(sizes):  # one each, then the rest in proportion to what is left
            exact = 1 + (size - 1) * (k - len(sizes)) / (len(labels) - len(sizes))
        else:
            exact = size * k / len(labels)
        assert np.floor(exact) <= counts[label] <= np.ceil(exact), (label, counts)


def test_sts_strata_are_score_quintiles() -> None:
    scores = tuple(float(x) for x in np.random.default_rng(0).uniform(0, 5, 100))
    data = STSData(tuple(f"a{i}" for i in range(100)), tuple(f"b{i}" for i in range(100)), scores)
    task = STSTask("S", lambda split: data, min_score=0, max_score=5)
    proxy = proxy_task(task, ProxySpec(size=20, seed=0))
    kept = proxy.task.load_split("test").scores
    quintile = np.searchsorted(np.quantile(scores, [0.2, 0.4, 0.6, 0.8]), kept, side="right")
    assert Counter(quintile.tolist()) == {0: 4, 1: 4, 2: 4, 3: 4, 4: 4}


@pytest.mark.parametrize("task", tiny_tasks_of_every_type(), ids=lambda t: t.name)
def test_every_task_type_scores_its_proxy_as_the_same_task_on_the_kept_rows(task) -> None:
    options = RunSettings().search_options(show_progress=False)
    encoder = KeywordEncoder(TINY_WORDS)
    proxy = proxy_task(task, ProxySpec(size=0.5, seed=3, hard_negatives=2))
    split = task.eval_splits[0]
    outcome = proxy.task.evaluate_split(split, encoder, options)
    assert proxy.task.name == f"{task.name}.proxy-f0.5-s3-h2" and "+proxy-f0.5-s3-h2" in proxy.task.dataset_revision
    assert proxy.compositions  # recorded as the splits loaded
    by_hand = {s: proxy.task.load_split(s) for s in proxy.compositions}  # the kept rows, as plain data
    same = dataclasses.replace(task, load_split=by_hand.__getitem__)
    np.testing.assert_equal(outcome.scores, same.evaluate_split(split, encoder, options).scores)  # nan == nan
    full = task.load_split(split)
    if hasattr(full, "__len__") and not isinstance(full, list):
        assert len(proxy.task.load_split(split)) < len(full)


def test_kept_share_is_the_share_of_the_full_tasks_texts_the_proxy_holds() -> None:
    data = _retrieval_data()
    proxy = proxy_task(RetrievalTask("R", lambda split: data), ProxySpec(size=0.25, seed=1))
    kept = proxy.task.load_split("test")
    judged = sum(1 for q in data.queries.ids if data.qrels.get(q))
    texts = (len(kept.queries) + len(kept.corpus)) / (judged + len(data.corpus))
    assert kept_share(proxy.compositions) == pytest.approx(texts) and 0 < texts < 0.5
    sts = next(t for t in tiny_tasks_of_every_type() if t.type == "STS")
    rows = proxy_task(sts, ProxySpec(size=8, seed=1))
    assert kept_share(rows.compositions) is None  # nothing loaded yet
    assert kept_share(rows.compositions | {"x": {}}) is None
    rows.task.load_split("test")
    assert kept_share(rows.compositions) == pytest.approx(8 / len(sts.load_split("test")))


def test_a_proxy_with_a_fake_encoder_runs_through_evaluate_and_is_stored_apart(tmp_path) -> None:
    import embedscope

    task = RetrievalTask("R", lambda split: _retrieval_data(), k_values=(1, 10))
    proxy = proxy_task(task, ProxySpec(size=10, seed=0, hard_negatives=5))
    kwargs = {"output_folder": tmp_path, "cache": False, "show_progress": False}
    full = embedscope.evaluate(KeywordEncoder(VOCAB), [task], **kwargs)
    small = embedscope.evaluate(KeywordEncoder(VOCAB), [proxy.task], **kwargs)
    assert {o.task.name for o in full.outcomes} == {"R"} and {o.task.name for o in small.outcomes} == {proxy.task.name}
    assert full.outcomes[0].path != small.outcomes[0].path
    assert small.outcomes[0].result.main_score() != full.outcomes[0].result.main_score()


@pytest.mark.parametrize("size", [0, -3, 1.0, 0.0, 1.5, True, "10"])
def test_a_size_that_is_neither_a_count_nor_a_fraction_is_refused(size) -> None:
    with pytest.raises(ConfigError, match="proxy size"):
        ProxySpec(size=size)


def test_a_task_type_without_a_proxy_reducer_is_refused_in_one_line() -> None:
    from embedscope.tasks.types import TASK_TYPES, TaskType, register_task_type

    @dataclasses.dataclass(frozen=True)
    class NoProxyTask(STSTask):
        type = "NoProxy"  # type: ignore[misc]

    register_task_type(TaskType("NoProxy", NoProxyTask, main_score="cosine_spearman"))
    try:
        task = NoProxyTask("N", lambda split: STSData(("a",), ("b",), (1.0,)))
        with pytest.raises(ConfigError, match="N: NoProxy tasks have no proxy"):
            proxy_task(task, ProxySpec(size=1))
    finally:
        TASK_TYPES.unregister("NoProxy")


# -- a corpus drawn as whole batches of the full run's encode calls --------------------------------------------------


def _one_judged_each(n: int = 400, seed: int = 0) -> RetrievalData:
    """As BBCNewsRetrieval: every document the one judged document of its own query."""
    rng = np.random.default_rng(seed)
    docs = [" ".join(rng.choice(VOCAB, size=int(rng.integers(5, 60)))) for _ in range(n)]
    return RetrievalData(
        Corpus(tuple(f"d{i}" for i in range(n)), tuple(docs)),
        Queries(tuple(f"q{i}" for i in range(n)), tuple(" ".join(d.split()[:3]) for d in docs)),
        {f"q{i}": {f"d{i}": 1} for i in range(n)},
    )


def test_corpus_batches_are_the_default_batch_plan_per_chunk() -> None:
    texts = list(_one_judged_each(100).corpus.texts)
    plan = corpus_batches(texts, 8, 30)
    expected = []
    for start in range(0, 100, 30):
        chunk = texts[start : start + 30]
        expected += [[start + i for i in b] for b in KeywordEncoder(["x"]).batch_plan([len(t) for t in chunk], 8)]
    assert plan == expected


def _two_judged_each(n: int = 200) -> RetrievalData:
    """Each query judges two documents of one length (one the other's words reversed), mostly in one batch."""
    one = _one_judged_each(n)
    docs = [t for d in one.corpus.texts for t in (d, " ".join(reversed(d.split())))]
    return RetrievalData(
        Corpus(tuple(f"d{i}" for i in range(2 * n)), tuple(docs)),
        one.queries,
        {f"q{i}": {f"d{2 * i}": 1, f"d{2 * i + 1}": 1} for i in range(n)},
    )


def _some_unjudged() -> RetrievalData:
    """One judged document each, but every seventh query judged nothing (the search drops it)."""
    data = _one_judged_each()
    return dataclasses.replace(data, qrels={q: d for q, d in data.qrels.items() if int(q[1:]) % 7 != 3})


@pytest.mark.parametrize(
    "data", [_one_judged_each(), _two_judged_each(), _some_unjudged()], ids=["one-judged", "two-judged", "unjudged"]
)
def test_an_aligned_corpus_is_whole_batches_holding_every_sampled_querys_judged_documents(data) -> None:
    spec = ProxySpec(size=0.1, seed=3, hard_negatives=10, batch_size=16)
    reduced, composition = retrieval_proxy(data, spec)
    assert reduced.corpus.within is not None and composition["batch_size"] == 16
    rows = list(reduced.corpus.within.rows)
    assert [data.corpus.ids[r] for r in rows] == list(reduced.corpus.ids) == composition["documents"]
    assert rows == sorted(rows)  # corpus order
    plan = corpus_batches(data.corpus.texts, 16, spec.chunk_size)
    whole = [b for b in plan if set(b) <= set(rows)]
    assert sorted(r for b in whole for r in b) == rows and len(whole) == composition["batches"]  # whole batches
    judged_queries = [q for q in data.queries.ids if data.qrels.get(q)]
    assert len(reduced.queries) == round(0.1 * len(judged_queries))
    kept = set(reduced.corpus.ids)
    assert all(d in kept for docs in reduced.qrels.values() for d in docs)
    assert composition["judged"] + composition["hard_negatives"] + composition["random"] == len(rows)
    assert composition["judged"] * 2 <= len(rows)  # a distractor per judged document at least
    within = reduced.queries.within  # the queries are encoded within the full run's query call: the judged ones
    searched = data.with_positives_only().queries
    assert within is not None and within.texts == searched.texts
    assert [searched.ids[r] for r in within.rows] == list(reduced.queries.ids) == composition["queries"]
    assert reduced.with_positives_only().queries.within == within  # as the search gets them
    assert retrieval_proxy(data, spec)[1] == composition  # seeded
    assert retrieval_proxy(data, dataclasses.replace(spec, seed=4))[1]["queries"] != composition["queries"]


def test_the_hard_batches_hold_most_of_a_direct_bm25s_top_k() -> None:
    data = _one_judged_each(600, seed=2)
    spec = ProxySpec(size=0.05, seed=1, hard_negatives=10, batch_size=16)
    reduced, composition = retrieval_proxy(data, spec)
    assert composition["hard_negatives"] > 0
    plan = corpus_batches(data.corpus.texts, 16, spec.chunk_size)
    top = _bm25s_top_k(data, list(reduced.queries.texts), 10)
    hits = [len(top & set(b)) for b in plan]
    rows = set(reduced.corpus.within.rows)
    judged = {int(d[1:]) for docs in reduced.qrels.values() for d in docs}
    others = [n for n, b in enumerate(plan) if not set(b) & judged]  # batches not taken for a judged document
    ranked = sorted(others, key=lambda n: -hits[n])
    h = composition["hard_batches"]
    assert h > 0 and max(hits) > 0
    cut = hits[ranked[h - 1]]
    assert all(set(plan[n]) <= rows for n in ranked if hits[n] > cut)  # the most hits are in …
    assert sum(set(plan[n]) <= rows for n in ranked if hits[n] >= cut) >= h  # … and as many as it says


def test_an_aligned_corpus_is_whole_batches_of_sentence_transformers_own_plan_ties_included() -> None:
    """sentence-transformers visits a call's texts in ``np.argsort`` of their negated lengths (its ``encode``), which
    does not keep ties in order: the proxy's batches are drawn in that order, so that a model it batches encodes
    the proxy's batches and no others (drawn in a stable order, a tie split between two batches made it encode
    both: 11 batches for the 7 of BBCNewsRetrieval's proxy)."""
    from embedscope.models.sentence_transformers_backend import st_order

    data = _one_judged_each(600, seed=2)
    lengths = [len(t) for t in data.corpus.texts]
    sentence_transformers_order = np.argsort([-n for n in lengths]).tolist()  # as its encode sorts
    assert sorted(range(len(lengths)), key=lambda i: -lengths[i]) != sentence_transformers_order  # ties matter here
    spec = ProxySpec(size=0.05, seed=1, hard_negatives=10, batch_size=16)
    reduced, composition = retrieval_proxy(data, spec)
    rows = set(reduced.corpus.within.rows)

    class Model:  # no flattening
        pass

    for order in (sentence_transformers_order, st_order(Model(), lengths)):
        touched = [b for b in batches(order, 16) if rows & set(b)]
        assert sum(len(b) for b in touched) == len(rows) == len(composition["documents"])


def test_the_phase_shares_are_what_a_batching_encoder_encodes_of_the_full_calls(tmp_path) -> None:
    """``encode_queries``: the texts of the full query call's batches that hold a sampled query (counted by the
    cache, which encodes only those batches); only the sampled queries for an encoder per text; ``encode_corpus``:
    the documents kept; the rest: the share of all texts."""
    data = _one_judged_each(600, seed=2)
    spec = ProxySpec(size=0.05, seed=1, hard_negatives=10, batch_size=16)
    reduced, composition = retrieval_proxy(data, spec)
    within = reduced.queries.within
    cached = CachedEncoder(KeywordEncoder(VOCAB[:8]), EmbeddingCache(tmp_path / "cache"))
    cached.encode_rows(within.texts, within.rows, role="query", batch_size=16)
    assert cached.stats.encoded == composition["query_texts"] > len(within.rows)  # whole batches
    shares = phase_shares({"test": composition})
    judged = len(within.texts)
    assert shares == {
        "*": pytest.approx(kept_share({"test": composition})),
        "encode_queries": pytest.approx(cached.stats.encoded / judged),
        "encode_corpus": pytest.approx(len(reduced.corpus) / len(data.corpus)),
    }
    assert phase_shares({"test": composition}, per_text=True)["encode_queries"] == pytest.approx(
        len(within.rows) / judged
    )
    rows = {"test": {"rows": [1, 2], "of_rows": 8}}
    assert phase_shares(rows) == {"*": 0.25} and phase_shares({}) is None


def test_an_aligned_proxy_falls_back_to_documents_when_its_batches_would_cost_too_much() -> None:
    data = _retrieval_data(600, 80)  # two judged documents per query, anywhere in the corpus
    reduced, composition = retrieval_proxy(data, ProxySpec(size=0.1, seed=0, batch_size=64))
    assert reduced.corpus.within is None and "batches" not in composition


def test_the_tag_names_the_batches() -> None:
    assert ProxySpec(size=0.1, batch_size=32).tag == "proxy-f0.1-s0-b32"
    assert ProxySpec(size=5, batch_size=16, chunk_size=100).tag == "proxy-n5-s0-b16-c100"
    with pytest.raises(ConfigError, match="batch_size"):
        ProxySpec(size=5, batch_size=0)


@pytest.mark.parametrize("kind", [Corpus, Queries])
def test_texts_encoded_within_others_hold_those_rows_texts(kind) -> None:
    with pytest.raises(ValueError, match="those rows' texts"):
        kind(("a",), ("x",), within=EncodedWithin(("y", "x"), (0,)))
    assert kind(("a",), ("x",), within=EncodedWithin(("y", "x"), (1,))).select([0]).within is None


# -- rows drawn within the full run's calls ------------------------------------------------------------------------


class _CountingHash(HashEncoder):
    """A hash encoder that counts every text it encodes (by role)."""

    def __init__(self) -> None:
        super().__init__(dim=8, name="fake/counting-hash")
        self.encoded: Counter = Counter()

    def _encode(self, texts, role, batch_size, show_progress):
        self.encoded.update((role, t) for t in texts)
        return super()._encode(texts, role, batch_size, show_progress)


def _row_tasks(n: int = 160) -> list:
    return [t for t in tiny_tasks_of_every_type(n=n) if t.type in ROW_TYPES]


ROW_TYPES = ("STS", "PairClassification", "Classification", "MultilabelClassification", "Clustering")


@pytest.mark.parametrize("task", _row_tasks(), ids=lambda t: t.name)
def test_a_row_proxy_drawn_within_the_full_calls_leaves_the_full_run_nothing_to_encode_twice(task, tmp_path) -> None:
    """The proxy's rows are drawn as whole batches of the full run's calls and encoded within them: the proxy and
    then the full task, through one embedding cache, encode each text as often as the full task alone; the full
    scores equal an uncached run's to the bit."""
    options = RunSettings().search_options(show_progress=False, batch_size=8)
    spec = ProxySpec(size=0.2, seed=3, batch_size=8)
    proxy = proxy_task(task, spec)
    counting = _CountingHash()
    cached = CachedEncoder(counting, EmbeddingCache(tmp_path / "cache"))
    proxy_encoder = proxy.task.encoder_within(cached, options)
    assert "encoder_within" not in task_settings(proxy.task) and task_settings(task) == {
        k: v for k, v in task_settings(proxy.task).items() if k != "dataset_revision"
    } | {"dataset_revision": task.dataset_revision}  # the hook is never recorded
    proxy_scores = [proxy.task.evaluate_split(s, proxy_encoder, options).scores for s in task.eval_splits]
    compositions = [c for c in proxy.compositions.values() for c in c.get("sets", [c])]
    for composition in compositions:
        assert "batches" in composition  # drawn within, not the plain draw
        assert composition["rows"] and composition["texts"] <= composition["of_texts"]
    test = proxy.compositions["test"].get("sets", [proxy.compositions["test"]])
    assert sum(c["texts"] for c in test) < sum(c["of_texts"] for c in test)  # a fraction of what the split encodes
    full = [task.evaluate_split(s, cached, options).scores for s in task.eval_splits]
    alone = _CountingHash()
    uncached = [task.evaluate_split(s, alone, options).scores for s in task.eval_splits]
    assert json.dumps(full) == json.dumps(uncached)  # to the bit (NaN included)
    assert counting.encoded == alone.encoded  # nothing the proxy encoded is encoded again
    assert proxy_scores and all(proxy_scores)


def _sts_data(n: int = 300, seed: int = 0) -> STSData:
    rng = np.random.default_rng(seed)
    first = tuple(" ".join(rng.choice(VOCAB, size=int(rng.integers(2, 40)))) for _ in range(n))
    second = tuple(
        t + " " + " ".join(rng.choice(VOCAB, size=int(rng.integers(0, 6)))) for t in first
    )  # lengths go together
    return STSData(first, second, tuple(float(x) for x in rng.random(n) * 5))


def test_rows_drawn_within_are_whole_batches_of_the_calls_that_encode_their_columns_seeded_and_stratified() -> None:
    data = _sts_data()
    calls = FullCalls([("document", data.sentence1), ("document", data.sentence2)], batch_size=32)
    reduce = rows_proxy(pair_score_quintiles)
    spec = ProxySpec(size=0.1, seed=5, batch_size=32)
    reduced, composition = reduce.within(data, spec, calls)
    rows = composition["rows"]
    assert len(rows) == 30 and rows == sorted(rows) and reduced.sentence1 == tuple(data.sentence1[r] for r in rows)
    plans = [batches(length_order(texts), 32) for texts in (data.sentence1, data.sentence2)]  # a model's batches
    taken = {(c, n) for c, plan in enumerate(plans) for n, b in enumerate(plan) if set(b) & set(rows)}
    assert taken == calls.allowed and composition["batches"] == len(taken)
    assert composition["texts"] == sum(len(plans[c][n]) for c, n in taken) < composition["of_texts"] == 600
    strata = Counter(pair_score_quintiles(data)[r] for r in rows)
    assert set(strata) == set(range(5))  # every quintile holds rows
    again = reduce.within(data, spec, FullCalls(calls.calls, 32))
    other = reduce.within(data, dataclasses.replace(spec, seed=6), FullCalls(calls.calls, 32))
    assert again[1]["rows"] == rows and other[1]["rows"] != rows


def test_rows_no_call_encodes_are_never_drawn_and_a_split_no_call_encodes_is_drawn_plainly() -> None:
    data = _sts_data(n=100)
    union = tuple(data.sentence1[i] for i in range(0, 100, 3))  # a call of some rows only (a classifier's union)
    calls = FullCalls([("document", union)], batch_size=4)
    _, composition = rows_proxy(lambda d: None).within(data, ProxySpec(size=0.2, seed=0, batch_size=4), calls)
    assert composition["rows"] and all(r % 3 == 0 for r in composition["rows"])
    assert rows_proxy(lambda d: None).within(data, ProxySpec(size=0.2, batch_size=4), FullCalls([], 4)) is None


def test_a_sample_whose_batches_would_cost_too_much_is_drawn_plainly_and_says_why() -> None:
    data = _sts_data(n=400, seed=1)
    shuffled = tuple(np.random.default_rng(0).permutation(data.sentence2).tolist())  # second texts' lengths unrelated
    calls = FullCalls([("document", data.sentence1), ("document", shuffled)], batch_size=32)
    why = rows_proxy(lambda d: None).within(data, ProxySpec(size=0.1, seed=0, batch_size=32), calls)
    assert isinstance(why, str) and why.startswith("drawn plainly") and "encodes its rows again" in why
    assert not calls.allowed


def test_a_proxy_call_is_encoded_within_a_full_call_only_where_a_draw_took_its_batches() -> None:
    texts = tuple(f"text {'x' * i}" for i in range(12))
    calls = FullCalls([("document", texts)], batch_size=4)  # batches: rows 11-8, 7-4, 3-0
    calls.allow([(0, 1)])
    encoder = KeywordEncoder(["x", "text"])
    seen: list = []
    encoder.encode_rows = lambda full, rows, **kw: seen.append((tuple(full), list(rows))) or np.zeros((len(rows), 2))
    within = EncodedWithinCalls(encoder, calls)
    within.encode([texts[5], texts[4]], role="document")
    assert seen == [(texts, [5, 4])]  # the full call's rows
    direct = within.encode([texts[5], texts[0]], role="document")  # row 0's batch was not taken: its own call
    assert seen == [(texts, [5, 4])] and direct.shape == (2, 2) and encoder.calls[-1][1] == [texts[5], texts[0]]
    assert within.encode([texts[5]], role="query").shape == (1, 2) and len(seen) == 1  # another role: its own
    assert within.similarity == encoder.similarity  # everything else is the encoder's
