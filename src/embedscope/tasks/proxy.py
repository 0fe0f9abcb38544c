"""Proxy tasks: a seeded, recorded reduction of a task that keeps it meaningful (a screen's cheap rounds).

* **Retrieval** (the NanoBEIR recipe, built for any retrieval task): a seeded sample of the queries that have a
  judgment; the corpus, shrunk by the same fraction, is every document judged for them, hard negatives from a
  cheap first-stage retriever (:class:`~embedscope.retrieval.bm25.BM25Retriever`'s defaults over the whole corpus,
  by rank) for half of the rest and random documents for the other half, kept in corpus order (see
  :class:`ProxySpec`).
* **Every other task type**: a stratified sample of its rows in each split it loads: by label (classification,
  clustering, pair classification; multilabel by its first label), by score quintile (STS), plain otherwise;
  reranking samples queries with their candidates. Strata get their proportional share (largest remainder),
  at least one row each when the sample has room; rows keep their order.

A screen (``ProxySpec.batch_size`` set) draws a row proxy as whole batches of the full run's own encode calls, as it
does a retrieval proxy's corpus: the calls are learned by running the full task's protocol on a
:class:`~embedscope.models.recorder.CallRecorder` (:func:`~embedscope.tasks.base.recorded_protocol`), the rows are
drawn among those whose texts lie in the batches taken (:meth:`RowsReducer.within`), and the proxy's protocol is
given an encoder that encodes each of its calls within the full call that holds its texts
(:class:`EncodedWithinCalls`, the task's ``encoder_within``), so a full run of the same model is served those vectors
by the embedding cache.

Each task type declares its reduction in its registry record (``TaskType.proxy``, built from the reducers here);
a type without one has no proxy. The proxy of a task is the task with another ``load_split`` (so every task type's protocol runs unchanged on
the reduced data), a name that says so (``SciFact.proxy-q50-s0``) and a ``dataset_revision`` that records the
recipe, so its results are stored apart from the full task's and reused only for the same recipe and data. Each
split's composition (the ids or row numbers kept) is recorded in :attr:`Proxy.compositions` as the task loads.

Examples:
    >>> from embedscope.testing.tiny import tiny_tasks_of_every_type
    >>> sts = next(t for t in tiny_tasks_of_every_type() if t.type == "STS")
    >>> proxy = proxy_task(sts, ProxySpec(size=8, seed=1))
    >>> proxy.task.name, len(proxy.task.load_split("test")), proxy.compositions["test"]["rows"][:3]
    ('TinySTS.proxy-n8-s1', 8, [0, 5, 9])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import BATCH_ORDER, Encoder, batches, encode_rows, length_order
from embedscope.retrieval.base import SearchOptions
from embedscope.tasks.base import recorded_protocol
from embedscope.types import EncodedWithin, RetrievalData, Role

Reducer = Callable[[Any, "ProxySpec"], tuple[Any, dict[str, Any]]]
"""A task type's reduction of one split's data (its ``TaskType.proxy``)."""
DEFAULT_HARD_NEGATIVES = 50  # BM25 top-k per sampled query, as NanoBEIR's corpora hold each query's top candidates
STS_STRATA = 5  # score quintiles
MIN_DISTRACTORS = 1  # a retrieval proxy's corpus holds at least this many unjudged documents per judged one
DEFAULT_CHUNK_SIZE = 50_000  # documents a retrieval run encodes per call (``corpus_chunk_size``'s default)
ALIGNED_OVERRUN = 2  # an aligned corpus may hold at most this many times the plain recipe's documents


@dataclass(frozen=True)
class ProxySpec:
    """How to reduce a task: ``size`` rows (queries for retrieval and reranking) as a count (an int ≥ 1) or a
    fraction (a float in (0, 1)), drawn with ``seed``. A retrieval corpus keeps the same fraction of the documents
    as of the queries, and at least ``MIN_DISTRACTORS`` unjudged documents per judged one (a task with one judged
    document per query would otherwise keep only those): the judged documents, then BM25 hard negatives (every sampled
    query's rank 1, then rank 2 …, to rank ``hard_negatives``) for half of the rest and random documents for the
    other half. With ``random_documents`` set, it keeps every sampled query's whole BM25 top ``hard_negatives``
    and that many random documents instead (NanoBEIR's fixed recipe)."""

    size: int | float
    seed: int = 0
    hard_negatives: int = DEFAULT_HARD_NEGATIVES
    random_documents: int | None = None
    batch_size: int | None = None
    """Set: a retrieval corpus is drawn as whole batches of the full corpus' own encode call (longest first, this
    many texts a batch, per ``chunk_size`` chunk) and encoded within it, and the queries within the full query call
    (:func:`aligned_retrieval_proxy`)."""
    chunk_size: int = DEFAULT_CHUNK_SIZE

    def __post_init__(self) -> None:
        size = self.size
        if isinstance(size, bool) or not isinstance(size, (int, float)):
            raise ConfigError(f"proxy size {size!r}: give a count (an integer ≥ 1) or a fraction in (0, 1)")
        if isinstance(size, int) and size < 1 or isinstance(size, float) and not 0 < size < 1:
            raise ConfigError(f"proxy size {size!r}: give a count (an integer ≥ 1) or a fraction in (0, 1)")
        if self.hard_negatives < 0 or (self.random_documents is not None and self.random_documents < 0):
            raise ConfigError("proxy hard_negatives and random_documents: give numbers ≥ 0")
        if self.batch_size is not None and (self.batch_size < 1 or self.chunk_size < 1):
            raise ConfigError("proxy batch_size and chunk_size: give numbers ≥ 1")

    def count(self, n: int) -> int:
        """The rows kept of ``n``: the count (at most ``n``), or the fraction rounded, at least 1."""
        if isinstance(self.size, float):
            return min(n, max(1, round(self.size * n)))
        return min(n, self.size)

    @property
    def tag(self) -> str:
        """The recipe in a name: ``proxy-n50-s0`` (a count) or ``proxy-f0.1-s0`` (a fraction), with the retrieval
        corpus' parameters when they differ from the defaults."""
        size = f"f{self.size:g}" if isinstance(self.size, float) else f"n{self.size}"
        extra = "" if self.hard_negatives == DEFAULT_HARD_NEGATIVES else f"-h{self.hard_negatives}"
        extra += "" if self.random_documents is None else f"-r{self.random_documents}"
        extra += "" if self.batch_size is None else f"-b{self.batch_size}"
        extra += "" if self.batch_size is None or self.chunk_size == DEFAULT_CHUNK_SIZE else f"-c{self.chunk_size}"
        return f"proxy-{size}-s{self.seed}{extra}"


@dataclass
class Proxy:
    """A proxy task and, per split it has loaded, what it kept (``{"rows": [...]}`` or, for retrieval and
    reranking, ``{"queries": [...], "documents": [...]}``, with the full split's sizes)."""

    task: Any
    spec: ProxySpec
    compositions: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: FullCalls | None = None
    """The full task's encode calls (row proxies of a screen), recorded when the proxy is first evaluated."""


def kept_share(compositions: Mapping[str, Mapping[str, Any]]) -> float | None:
    """The share of the full task's texts (queries and documents, or rows) a proxy kept over the splits it loaded,
    from its compositions; None when none was recorded.

    >>> kept_share({"test": {"queries": ["q1"], "documents": ["d1", "d2"], "of_queries": 10, "of_documents": 20}})
    0.1
    >>> kept_share({"test": {"rows": [3], "of_rows": 10, "texts": 64, "of_texts": 320}})  # drawn within calls
    0.2
    """
    kept = full = 0
    for composition in compositions.values():
        parts = composition.get("sets", [composition])
        for part in parts:
            if "texts" in part:  # a row proxy drawn within the full run's calls: the texts it encodes
                kept, full = kept + int(part["texts"]), full + int(part["of_texts"])
            elif "rows" in part:
                kept, full = kept + len(part["rows"]), full + int(part["of_rows"])
            elif "queries" in part:
                kept += len(part["queries"]) + len(part["documents"])
                full += int(part["of_queries"]) + int(part["of_documents"])
    return kept / full if full else None


def phase_shares(compositions: Mapping[str, Mapping[str, Any]], *, per_text: bool = False) -> dict[str, float] | None:
    """The share of the full task's work each phase of a proxy's run does, by the phase names a task records, over
    the splits it loaded; None when none was recorded.

    A retrieval proxy's ``encode_queries`` encodes the batches of the full query call that hold a sampled query
    (``query_texts`` of its texts, :func:`aligned_retrieval_proxy`), or only the sampled queries for an encoder
    whose vectors do not depend on their batch (``per_text``: a model behind an API) or a proxy not drawn within
    the full calls; its ``encode_corpus`` the documents kept. Every other phase (``"*"``) does the share of all the
    texts (:func:`kept_share`).

    >>> c = {"test": {"queries": ["q1"], "query_texts": 8, "documents": ["d1", "d2"], "of_queries": 10, "of_documents": 20}}
    >>> phase_shares(c)
    {'*': 0.1, 'encode_queries': 0.8, 'encode_corpus': 0.1}
    >>> phase_shares(c, per_text=True)["encode_queries"]
    0.1
    """
    overall = kept_share(compositions)
    if overall is None:
        return None
    parts = [p for c in compositions.values() for p in c.get("sets", [c])]
    if not parts or not all("queries" in p for p in parts):
        return {"*": overall}
    queries = sum(len(p["queries"]) if per_text else int(p.get("query_texts", len(p["queries"]))) for p in parts)
    documents = sum(len(p["documents"]) for p in parts)
    of_queries, of_documents = (sum(int(p[k]) for p in parts) for k in ("of_queries", "of_documents"))
    shares = {"*": overall}
    if of_queries:
        shares["encode_queries"] = queries / of_queries
    if of_documents:
        shares["encode_corpus"] = documents / of_documents
    return shares


def proxy_task(task: Any, spec: ProxySpec) -> Proxy:
    """The proxy of ``task`` (any task type whose data comes from a ``load_split`` field)."""
    if not _loads_splits(task):
        raise ConfigError(f"{getattr(task, 'name', task)!r}: a proxy needs a task whose data comes from load_split")
    from embedscope.tasks.types import get_task_type

    reduce = get_task_type(task.type).proxy
    if reduce is None:
        raise ConfigError(f"{task.name}: {task.type} tasks have no proxy; screen them on their full data")
    proxy = Proxy(task, spec)
    name, revision, load = task.name, task.dataset_revision, task.load_split
    cached: dict[str, Any] = {}
    within = getattr(reduce, "within", None)
    aligned = within is not None and spec.batch_size is not None and _has_field(task, "encoder_within")

    def load_proxy(split: str) -> Any:
        if split not in cached:
            data = load(split)
            drawn = within(data, spec, proxy.calls) if within and aligned and proxy.calls is not None else None
            if drawn is None or isinstance(drawn, str):
                reduced, composition = reduce(data, spec)
                drawn = reduced, {**composition, "plainly": drawn} if drawn else composition
            cached[split], proxy.compositions[split] = drawn
        return cached[split]

    def encoder_within(encoder: Encoder, options: SearchOptions) -> EncodedWithinCalls:
        if proxy.calls is None:  # before any split is drawn: the draw needs the calls
            proxy.calls = FullCalls(recorded_calls(task, options), spec.batch_size or 1)
        return EncodedWithinCalls(encoder, proxy.calls)

    changes: dict[str, Any] = {"name": f"{name}.{spec.tag}", "load_split": load_proxy}
    changes["dataset_revision"] = (
        f"{revision}+{spec.tag}" + ("+calls" if aligned else "") + (f"+plan-{BATCH_ORDER}" if spec.batch_size else "")
    )
    if aligned:
        changes["encoder_within"] = encoder_within
    proxy.task = dataclasses.replace(task, **changes)
    return proxy


def _loads_splits(task: Any) -> bool:
    return _has_field(task, "load_split")


def _has_field(task: Any, name: str) -> bool:
    return dataclasses.is_dataclass(task) and name in {f.name for f in dataclasses.fields(task)}


# -- retrieval ----------------------------------------------------------------------------------------------------


def retrieval_proxy(data: RetrievalData, spec: ProxySpec) -> tuple[RetrievalData, dict[str, Any]]:
    """The NanoBEIR recipe: sampled judged queries; their judged documents, BM25 hard negatives and random ones
    (:class:`ProxySpec` says how many)."""
    from embedscope.retrieval.bm25 import BM25Retriever

    if data.contexts is not None or data.documents is not None:
        raise ConfigError(
            f"{data.name}: a proxy of QA data judged by context strings is not supported; screen it whole"
        )
    if spec.batch_size is not None and data.corpus.within is None and data.queries.within is None:
        aligned = aligned_retrieval_proxy(data, spec)
        if aligned is not None:
            return aligned
    rng = np.random.default_rng(spec.seed)
    judged = judged_queries(data)
    kept = sorted(rng.choice(judged, size=spec.count(len(judged)), replace=False).tolist()) if judged else []
    queries = data.queries.select(kept)
    qrels = {q: dict(data.qrels[q]) for q in queries.ids}
    row = {doc: i for i, doc in enumerate(data.corpus.ids)}
    relevant = {row[d] for docs in qrels.values() for d in docs if d in row}
    ranked = bm25_ranks(data, queries.texts, spec.hard_negatives, BM25Retriever())
    if spec.random_documents is None:  # the corpus shrinks as the queries do: half hard negatives, half random
        budget = corpus_budget(data, len(kept), len(judged), len(relevant))
        hard = _first_new(ranked, relevant, (budget - len(relevant)) // 2)
        n_random = budget - len(relevant) - len(hard)
    else:  # every sampled query's top hard_negatives, and random_documents more
        hard = {int(i) for i in ranked.T.ravel() if i >= 0} - relevant
        n_random = spec.random_documents
    rest = np.setdiff1d(np.arange(len(data.corpus)), np.fromiter(relevant | hard, dtype=np.int64))
    random_rows = set(rng.choice(rest, size=min(n_random, len(rest)), replace=False).tolist()) if len(rest) else set()
    documents = sorted(relevant | hard | random_rows)
    reduced = dataclasses.replace(data, queries=queries, corpus=data.corpus.select(documents), qrels=qrels)
    composition = {
        "queries": list(queries.ids),
        "documents": [data.corpus.ids[i] for i in documents],
        "judged": len(relevant),
        "hard_negatives": len(hard),
        "random": len(random_rows),
        "of_queries": len(judged),
        "of_documents": len(data.corpus),
    }
    return reduced, composition


def judged_queries(data: RetrievalData) -> list[int]:
    """The rows of the queries that have a judgment."""
    return [i for i, q in enumerate(data.queries.ids) if len(data.qrels.get(q, {})) > 0]


def corpus_budget(data: RetrievalData, kept: int, judged: int, relevant: int) -> int:
    """A proxy corpus' size: the corpus shrunk by the queries' share (``kept`` of ``judged``), and at least
    ``MIN_DISTRACTORS`` unjudged documents per judged one (``relevant``), at most the whole corpus."""
    share = round(kept / max(1, judged) * len(data.corpus))
    return min(len(data.corpus), max(share, (1 + MIN_DISTRACTORS) * relevant))


def corpus_batches(texts: Sequence[str], batch_size: int, chunk_size: int) -> list[list[int]]:
    """The batches (corpus rows) a retrieval run's encode calls form: per ``chunk_size`` chunk in corpus order,
    longest first, ties in corpus order, ``batch_size`` a batch (:meth:`~embedscope.models.base.BaseEncoder.batch_plan`'s
    default; a backend that orders ties otherwise forms the same batches up to ties at their edges).

    >>> corpus_batches(["a", "ccc", "bb", "dddd"], 2, 3)
    [[1, 2], [0], [3]]
    """
    from embedscope.models.base import batches, length_order

    out: list[list[int]] = []
    for start in range(0, len(texts), chunk_size):
        chunk = texts[start : start + chunk_size]
        out += [[start + i for i in b] for b in batches(length_order(chunk), batch_size)]
    return out


def spread_order(m: int, rng: np.random.Generator) -> list[int]:
    """``range(m)`` in an order whose every prefix is spread over the range: cells of the golden-ratio sequence from
    a seeded start (a low-discrepancy sample). Batches of a length-sorted plan taken so hold long and short documents
    alike, as a simple random sample of documents would.

    >>> order = spread_order(10, np.random.default_rng(0))
    >>> sorted(order) == list(range(10)), sorted(order[:3])
    (True, [2, 6, 8])
    """
    return spread_from(m, float(rng.random()))


def spread_from(m: int, start: float) -> list[int]:
    """:func:`spread_order` from the start ``start`` in [0, 1): calls of different sizes spread from one start take
    the same places of their length orders first.

    >>> spread_from(4, 0.5), spread_from(8, 0.5)[:2]
    ([2, 0, 1, 3], [4, 0])
    """
    step = (5**0.5 - 1) / 2
    order: dict[int, None] = {}
    for j in range(20 * m + 20):
        order.setdefault(int((start + j * step) % 1.0 * m), None)
        if len(order) == m:
            break
    return list(order) + [n for n in range(m) if n not in order]


def aligned_retrieval_proxy(data: RetrievalData, spec: ProxySpec) -> tuple[RetrievalData, dict[str, Any]] | None:
    """The retrieval proxy drawn as whole batches of the full run's corpus calls (:func:`corpus_batches`), so that
    its documents are encoded in those batches and a full run of the same model is served them by the cache. Its
    queries are encoded within the full query call likewise (only the batches of that call that hold one).

    Batches are taken in a seeded order spread over the lengths (:func:`spread_order`) until the judged queries
    whose judged documents they all hold number the sample's size; the sample is drawn among those. Then, while the
    corpus holds fewer documents than the plain recipe's budget (:func:`retrieval_proxy`), the batches holding most
    of the sampled queries' BM25 top ``hard_negatives`` fill half of what is left, and further random batches the
    rest. None (the plain recipe applies) when no query is judged, or when covering the sample needs more than
    ``ALIGNED_OVERRUN`` times that budget (queries whose judged documents lie in many batches)."""
    from embedscope.retrieval.bm25 import BM25Retriever

    assert spec.batch_size is not None
    rng = np.random.default_rng(spec.seed)
    row = {doc: i for i, doc in enumerate(data.corpus.ids)}
    judged = judged_queries(data)
    if not judged:
        return None
    plan = corpus_batches(data.corpus.texts, spec.batch_size, spec.chunk_size)
    batch_of = {r: n for n, b in enumerate(plan) for r in b}
    needs = {q: {batch_of[row[d]] for d in data.qrels[data.queries.ids[q]] if d in row} for q in judged}
    k = spec.count(len(judged))
    order = spread_order(len(plan), rng)
    steps, covered = covered_by(([n] for n in order), needs, k)
    chosen, order = order[:steps], order[steps:]
    kept = sorted(rng.choice(sorted(covered), size=k, replace=False).tolist())
    searched = {q: n for n, q in enumerate(judged)}  # the full run's query call: its judged queries, in order
    within = EncodedWithin(tuple(data.queries.texts[q] for q in judged), tuple(searched[q] for q in kept))
    queries = dataclasses.replace(data.queries.select(kept), within=within)
    qrels = {q: dict(data.qrels[q]) for q in queries.ids}
    relevant = {row[d] for docs in qrels.values() for d in docs if d in row}
    budget = corpus_budget(data, k, len(judged), len(relevant))
    used = sum(len(plan[n]) for n in chosen)
    if used > ALIGNED_OVERRUN * budget:
        return None
    random_batches = list(chosen)
    hard_batches: list[int] = []
    if used < budget:
        ranked = bm25_ranks(data, queries.texts, spec.hard_negatives, BM25Retriever())
        hits = np.bincount([batch_of[int(i)] for i in ranked.ravel() if i >= 0], minlength=len(plan))
        half = used + (budget - used) // 2
        for n in sorted(order, key=lambda n: -hits[n]):  # ties in the seeded order
            if used >= half or hits[n] == 0:
                break
            hard_batches.append(n)
            used += len(plan[n])
        taken = set(hard_batches)
        for n in (n for n in order if n not in taken):
            if used >= budget:
                break
            random_batches.append(n)
            used += len(plan[n])
    documents = sorted(r for n in random_batches + hard_batches for r in plan[n])
    corpus = dataclasses.replace(
        data.corpus.select(documents), within=EncodedWithin(data.corpus.texts, tuple(documents))
    )
    reduced = dataclasses.replace(data, queries=queries, corpus=corpus, qrels=qrels)
    hard = {r for n in hard_batches for r in plan[n]} - relevant
    composition = {
        "queries": list(queries.ids),
        "documents": [data.corpus.ids[i] for i in documents],
        "judged": len(relevant),
        "hard_negatives": len(hard),
        "random": len(documents) - len(relevant) - len(hard),
        "batches": len(random_batches) + len(hard_batches),
        "hard_batches": len(hard_batches),
        "batch_size": spec.batch_size,
        "query_texts": texts_in_batches(within, spec.batch_size),
        "of_queries": len(judged),
        "of_documents": len(data.corpus),
    }
    return reduced, composition


def texts_in_batches(within: EncodedWithin, batch_size: int) -> int:
    """How many texts of the full call ``within.texts`` lie in the batches (longest first, ``batch_size`` a batch)
    that hold one of ``within.rows``: what encoding those rows within that call encodes.

    >>> texts_in_batches(EncodedWithin(("aaa", "b", "cc", "d"), (3,)), 2)
    2
    """
    wanted = set(within.rows)
    return sum(len(b) for b in batches(length_order(within.texts), batch_size) if wanted.intersection(b))


def covered_by(
    steps: Iterable[Sequence[Hashable]], needs: Mapping[Any, Collection[Hashable]], k: int
) -> tuple[int, list]:
    """Take ``steps`` (each some batches) in order until at least ``k`` items have every batch they need taken: the
    steps taken, and the items covered in the order they were (those that need none first).

    >>> covered_by([["a"], ["b"], ["c"]], {"x": {"a", "b"}, "y": {"c"}, "z": set()}, 2)
    (2, ['z', 'x'])
    """
    waiting: dict[Hashable, list[Any]] = {}
    for item, need in needs.items():
        for batch in need:
            waiting.setdefault(batch, []).append(item)
    left = {item: len(need) for item, need in needs.items()}
    covered = [item for item, n in left.items() if n == 0]
    taken = 0
    for step in steps:
        if len(covered) >= k:
            break
        taken += 1
        for batch in step:
            for item in waiting.get(batch, []):
                left[item] -= 1
                if left[item] == 0:
                    covered.append(item)
    return taken, covered


def bm25_ranks(data: RetrievalData, texts: Sequence[str], k: int, retriever: Any) -> np.ndarray:
    """The corpus rows of each text's BM25 top ``k`` over the whole corpus, ``[len(texts), k]`` (−1: no match)."""
    if k == 0 or not texts:
        return np.empty((len(texts), 0), dtype=np.int64)
    doc_index, _ = retriever.index(data.corpus, n_queries=len(texts)).search(list(texts), k)
    return doc_index


def _first_new(ranked: np.ndarray, taken: set[int], n: int) -> set[int]:
    """Up to ``n`` rows of ``ranked`` not in ``taken``, by depth: every query's first, then every query's second …"""
    found: dict[int, None] = {}
    for i in ranked.T.ravel().tolist():
        if len(found) >= n:
            break
        if i >= 0 and i not in taken:
            found[i] = None
    return set(found)


# -- rows ---------------------------------------------------------------------------------------------------------


def stratified_rows(strata: Sequence[Any], k: int, rng: np.random.Generator) -> list[int]:
    """``k`` of ``len(strata)`` rows, each stratum (rows with equal values) its proportional share by largest
    remainder, at least one each while ``k`` allows; rows drawn without replacement, returned in order."""
    n = len(strata)
    if k >= n:
        return list(range(n))
    groups: dict[Any, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    order = sorted(groups, key=repr)
    sizes = np.array([len(groups[g]) for g in order])
    if k >= len(order):  # room for every stratum: one each, the rest in proportion to what each has left
        shares = 1 + _largest_remainder(sizes - 1, k - len(order))
    else:
        shares = _largest_remainder(sizes, k)
    kept: list[int] = []
    for g, share in zip(order, shares.tolist()):
        if share:
            kept += rng.choice(groups[g], size=share, replace=False).tolist()
    return sorted(kept)


def _largest_remainder(sizes: np.ndarray, k: int) -> np.ndarray:
    """``k`` split in proportion to ``sizes`` (Hamilton's method): floors, then one more to the largest remainders;
    no share exceeds its size."""
    if k == 0 or sizes.sum() == 0:
        return np.zeros(len(sizes), dtype=int)
    exact = sizes * k / sizes.sum()
    shares = np.floor(exact).astype(int)
    for i in np.argsort(-(exact - shares), kind="stable")[: k - shares.sum()]:
        shares[i] += 1
    return shares


def take_rows(data: Any, rows: Sequence[int]) -> Any:
    """``data`` (a row dataclass: tuples of one value per row) with only ``rows``; its own ``select`` if it has one."""
    select = getattr(data, "select", None)
    if select is not None:
        return select(rows)
    n = len(data)
    values = {
        f.name: tuple(getattr(data, f.name)[i] for i in rows)
        if isinstance(getattr(data, f.name), tuple) and len(getattr(data, f.name)) == n
        else getattr(data, f.name)
        for f in dataclasses.fields(data)
    }
    return type(data)(**values)


class RowsReducer:
    """A reducer that keeps a stratified sample of rows, the stratum of each row given by ``strata`` (None: one);
    in a screen, drawn within the full run's encode calls (:meth:`within`)."""

    def __init__(self, strata: Callable[[Any], Sequence[Any] | None]) -> None:
        self.strata = strata

    def keys(self, data: Any) -> Sequence[Any]:
        keys = self.strata(data)
        return keys if keys is not None else [0] * len(data)

    def __call__(self, data: Any, spec: ProxySpec) -> tuple[Any, dict[str, Any]]:
        n = len(data)
        rows = stratified_rows(self.keys(data), spec.count(n), np.random.default_rng(spec.seed))
        return take_rows(data, rows), {"rows": rows, "of_rows": n}

    def within(self, data: Any, spec: ProxySpec, calls: FullCalls) -> tuple[Any, dict[str, Any]] | str | None:
        """The sample drawn as whole batches of the full run's calls that encode this split's text columns; None
        when no call encodes them (the split is not encoded: the plain draw costs nothing), or why the plain draw
        applies: covering the sample takes more than ``ALIGNED_OVERRUN`` times the plain draw's texts (or than that
        many batches, for a sample under a batch), and its rows are then encoded again by a full run.

        The eligible rows are those whose every text lies in the calls that encode its column. Batches are taken in
        a seeded order spread over the lengths, one from each such call at a time from one start
        (:func:`spread_from`: the same places of each call's length order, where a pair's two texts tend to lie),
        skipping those no eligible row needs, until the rows whose texts all lie in the batches taken number the
        sample's size (``spec.count`` of the split, at most the eligible rows); the sample is drawn among those,
        stratified. Its composition records the batches its rows lie in and the texts they hold (``texts`` of
        ``of_texts``: what the proxy encodes)."""
        n = len(data)
        matched = [(c, column) for column in _text_columns(data) for c in calls.encoding(column)]
        if not matched or n == 0:
            return None
        needs: dict[int, frozenset[tuple[int, int]]] = {}
        for r in range(n):
            places = [calls.batch_of(c, column[r]) for c, column in matched]
            if all(b is not None for b in places):
                needs[r] = frozenset((c, b) for (c, _), b in zip(matched, places) if b is not None)
        if not needs:
            return None
        k = min(spec.count(n), len(needs))
        rng = np.random.default_rng(spec.seed)
        start = float(rng.random())
        useful = {cb for need in needs.values() for cb in need}
        used_calls = sorted({c for c, _ in matched})
        orders = {c: [b for b in spread_from(len(calls.plans[c]), start) if (c, b) in useful] for c in used_calls}
        steps = (  # the same place of each call at a time: a pair's texts tend to have like lengths
            [(c, orders[c][j]) for c in used_calls if j < len(orders[c])]
            for j in range(max(len(o) for o in orders.values()))
        )
        covered = sorted(covered_by(steps, needs, k)[1])
        keys = self.keys(data)
        rows = [covered[i] for i in stratified_rows([keys[r] for r in covered], k, rng)]
        used = sorted({cb for r in rows for cb in needs[r]})
        texts = sum(len(calls.plans[c][b]) for c, b in used)
        plain = max(k, spec.batch_size or 1) * len(matched)  # at least a batch a call
        if texts > ALIGNED_OVERRUN * plain:
            return (
                f"drawn plainly: covering {k} rows within the full run's batches would encode {texts} texts, more "
                f"than {ALIGNED_OVERRUN}× the plain draw's {k * len(matched)}; a full run encodes its rows again"
            )
        calls.allow(used)
        composition = {
            "rows": rows,
            "of_rows": n,
            "batches": len(used),
            "batch_size": spec.batch_size,
            "texts": texts,
            "of_texts": sum(len(calls.calls[c][1]) for c in used_calls),
        }
        return take_rows(data, rows), composition


def rows_proxy(strata: Callable[[Any], Sequence[Any] | None]) -> RowsReducer:
    """A reducer that keeps a stratified sample of rows, the stratum of each row given by ``strata`` (None: one)."""
    return RowsReducer(strata)


def _text_columns(data: Any) -> list[tuple[str, ...]]:
    """The data's text columns: its fields that hold one string per row."""
    n = len(data)
    if not dataclasses.is_dataclass(data):
        return []
    values = [getattr(data, f.name) for f in dataclasses.fields(data)]
    return [v for v in values if isinstance(v, tuple) and len(v) == n and all(isinstance(t, str) for t in v)]


Call = tuple[Role, tuple[str, ...]]


def recorded_calls(task: Any, options: SearchOptions) -> list[Call]:
    """The encode calls (role, texts in order) the task's protocol makes on its eval splits
    (:func:`~embedscope.tasks.base.recorded_protocol`)."""
    return [(role, texts) for role, texts, _ in recorded_protocol(task, options).calls]


class FullCalls:
    """A full task's encode calls, each planned as a model batches it (longest first, ``batch_size`` a batch), and
    the batches a proxy's draws took (:meth:`allow`): the only ones its calls are encoded within."""

    def __init__(self, calls: Sequence[Call], batch_size: int) -> None:
        self.calls = list(calls)
        self.plans = [batches(length_order(texts), batch_size) for _, texts in self.calls]
        self.first = [_first_positions(texts) for _, texts in self.calls]
        self.batch_at = [{i: n for n, b in enumerate(plan) for i in b} for plan in self.plans]
        self.allowed: set[tuple[int, int]] = set()

    def encoding(self, column: Sequence[str]) -> list[int]:
        """The calls whose texts all come from ``column`` (a call that encodes it whole is preferred alone)."""
        whole = [c for c, (_, texts) in enumerate(self.calls) if texts == tuple(column)]
        if whole:
            return whole[:1]
        values = set(column)
        return [c for c, (_, texts) in enumerate(self.calls) if texts and values.issuperset(texts)]

    def batch_of(self, c: int, text: str) -> int | None:
        """The batch of call ``c`` that holds ``text`` at its first place in the call (None: not in it)."""
        i = self.first[c].get(text)
        return None if i is None else self.batch_at[c][i]

    def allow(self, batches_taken: Sequence[tuple[int, int]]) -> None:
        self.allowed.update(batches_taken)

    def rows_within(self, role: Role, texts: Sequence[str], start: int) -> tuple[int, list[int]] | None:
        """The first call of ``role`` from ``start`` on (then from the beginning) whose allowed batches hold every
        one of ``texts`` (at its first place), and those places; None when no call does."""
        for c in [*range(start, len(self.calls)), *range(min(start, len(self.calls)))]:
            if self.calls[c][0] != role:
                continue
            rows = [self.first[c].get(t) for t in texts]
            if all(i is not None and (c, self.batch_at[c][i]) in self.allowed for i in rows):
                return c, [i for i in rows if i is not None]
        return None


def _first_positions(texts: Sequence[str]) -> dict[str, int]:
    first: dict[str, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(t, i)
    return first


class EncodedWithinCalls:
    """The encoder a row proxy's protocol is given: a call whose texts all lie in batches a draw took of one of the
    full task's calls is that call's rows (:func:`~embedscope.models.base.encode_rows`: only the batches holding
    them are encoded, under that call's keys, so the full run is served them by the cache); any other call is the
    encoder's own. Everything else is the encoder's."""

    def __init__(self, encoder: Encoder, calls: FullCalls) -> None:
        self.encoder = encoder
        self.full = calls
        self._next = 0

    def __getattr__(self, item: str) -> Any:
        return getattr(self.encoder, item)

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        own_rows = getattr(self.encoder, "encode_rows", None) is not None  # else encode_rows would encode whole calls
        found = self.full.rows_within(role, texts, self._next) if texts and own_rows else None
        if found is None:
            return self.encoder.encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)
        c, rows = found
        self._next = c + 1  # the proxy's calls come in the full run's order
        full_texts = self.full.calls[c][1]
        return encode_rows(
            self.encoder, full_texts, rows, role=role, batch_size=batch_size, show_progress=show_progress
        )


def score_quintiles(scores: Sequence[float]) -> list[int]:
    edges = np.quantile(np.asarray(scores, dtype=float), np.linspace(0, 1, STS_STRATA + 1)[1:-1])
    return np.searchsorted(edges, np.asarray(scores, dtype=float), side="right").tolist()


def reranking_proxy(data: Any, spec: ProxySpec) -> tuple[Any, dict[str, Any]]:
    """Sampled queries with their judgments and candidates; the corpus is their candidates."""
    rng = np.random.default_rng(spec.seed)
    kept = stratified_rows([0] * len(data.queries), spec.count(len(data.queries)), rng)
    queries = data.queries.select(kept)
    keep = set(queries.ids)
    candidates = {q: c for q, c in data.candidates.items() if q in keep}
    wanted = {d for c in candidates.values() for d in c} | {d for q in keep for d in data.qrels.get(q, {})}
    documents = [i for i, d in enumerate(data.corpus.ids) if d in wanted]
    reduced = type(data)(
        queries, data.corpus.select(documents), {q: d for q, d in data.qrels.items() if q in keep}, candidates
    )
    composition = {
        "queries": list(queries.ids),
        "documents": [data.corpus.ids[i] for i in documents],
        "of_queries": len(data.queries),
        "of_documents": len(data.corpus),
    }
    return reduced, composition


def bitext_proxy(data: Any, spec: ProxySpec) -> tuple[Any, dict[str, Any]]:
    """Sampled pairs (data whose gold pairs are the rows' own: explicit gold pairs are refused)."""
    if data.gold is not None:
        raise ConfigError("a proxy of bitext data with explicit gold pairs is not supported; screen it whole")
    return rows_proxy(lambda d: None)(data, spec)


class SetsReducer:
    """``reduce`` applied to each set of a list of sets (legacy clustering), set ``i`` with seed ``seed + i``; plain
    data is reduced as it is (and drawn within the full run's calls as ``reduce`` draws it)."""

    def __init__(self, reduce: RowsReducer) -> None:
        self.reduce = reduce

    def __call__(self, data: Any, spec: ProxySpec) -> tuple[Any, dict[str, Any]]:
        if not isinstance(data, (list, tuple)):
            return self.reduce(data, spec)
        parts = [self.reduce(d, dataclasses.replace(spec, seed=spec.seed + i)) for i, d in enumerate(data)]
        return [p[0] for p in parts], {"sets": [p[1] for p in parts]}

    def within(self, data: Any, spec: ProxySpec, calls: FullCalls) -> tuple[Any, dict[str, Any]] | str | None:
        """Each set drawn within the call that encodes it (a set no call encodes, plainly), or why one that is
        encoded cannot be (:meth:`RowsReducer.within`)."""
        if not isinstance(data, (list, tuple)):
            return self.reduce.within(data, spec, calls)
        parts = []
        for i, d in enumerate(data):
            one = dataclasses.replace(spec, seed=spec.seed + i)
            drawn = self.reduce.within(d, one, calls)
            if isinstance(drawn, str):
                return f"set {i + 1}: {drawn}"
            parts.append(drawn if drawn is not None else self.reduce(d, one))
        return [p[0] for p in parts], {"sets": [p[1] for p in parts]}


def sets_proxy(reduce: RowsReducer) -> SetsReducer:
    """``reduce`` for each set of a list of sets (:class:`SetsReducer`)."""
    return SetsReducer(reduce)


def first_labels_of_rows(data: Any) -> list[Any]:
    """Each row's first label (multilabel rows' stratum)."""
    return [labels[0] if labels else None for labels in data.labels]


def row_labels(data: Any) -> Sequence[Any]:
    """Each row's label."""
    return data.labels


def pair_score_quintiles(data: Any) -> list[int]:
    """Each pair's score quintile."""
    return score_quintiles(data.scores)
