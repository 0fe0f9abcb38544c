"""Composable retrieval pipelines: one or more first-stage retrievers, optional fusion, rerankers.

A stage is written as a spec string or a mapping::

    bm25                                   # bm25s, lucene, k1=1.5, b=0.75, English stemming + stopwords
    bm25:method=robertson,k1=1.2,b=0.75,stemmer=none
    fts5                                   # SQLite FTS5, query words joined with OR
    fts5:tokenize=porter unicode61,match=all
    minilm   /   dense:./my-model          # single-vector (any embedding model spec)
    colbert:minilm   /   colbert:./colbert-checkpoint,query_length=32
    cross-encoder:./my-reranker            # rerankers only
    api-rerank:MODEL@https://host/v1       # rerankers only: a service's /rerank route (retrieval/api_reranker.py)
    {type: api-rerank, model: M, api_base: URL, api_key_env: VAR, price_per_mtok: 0.05}
    {type: bm25, k1: 1.2}   {type: dense, model: minilm, pooling: mean}

As a reranker, a bare folder is detected: a cross-encoder checkpoint, a ColBERT checkpoint, or an
embedding model (bi-encoder). Every stage's time and peak memory are recorded
(:class:`StageRun`); :meth:`Pipeline.stage_runs` returns the runs after each numbered stage
(``stage1`` = first stage, fused if several retrievers; ``stage2`` = after the first reranker …).

>>> from embedscope.settings import RunSettings
>>> from embedscope.types import Corpus, Queries
>>> p = Pipeline.build(["bm25", "fts5"], fusion={"method": "rrf"})
>>> p.name
'bm25-lucene+fts5_rrf-k60'
>>> corpus = Corpus(("d1", "d2"), ("cats purr", "dogs bark"))
>>> run = p.retrieve(Queries(("q",), ("dogs",)), corpus, RunSettings(top_k=10).search_options())
>>> corpus.ids[run.doc_index[0, 0]]
'd2'
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedscope.errors import ConfigError, UnknownNameError
from embedscope.models.fingerprint import hash_dict, short
from embedscope.profiling import StageStats, measure
from embedscope.retrieval.base import (
    Reranker,
    Retriever,
    SearchOptions,
    rerank,
    sort_and_cut,
)
from embedscope.retrieval.fusion import Fusion
from embedscope.retrieval.roles import Search
from embedscope.types import Corpus, Queries, RankedRun

if TYPE_CHECKING:
    from embedscope.models.base import Encoder

logger = logging.getLogger(__name__)

RETRIEVER_KINDS = ("bm25", "fts5", "dense", "colbert")
RERANKER_KINDS = ("cross-encoder", "dense", "colbert", "api-rerank")
_KIND_ALIASES = {
    "cross_encoder": "cross-encoder",
    "crossencoder": "cross-encoder",
    "ce": "cross-encoder",
    "late-interaction": "colbert",
    "maxsim": "colbert",
    "bi-encoder": "dense",
    "sqlite": "fts5",
    "api_rerank": "api-rerank",
    "rerank-api": "api-rerank",
}


# ---------------------------------------------------------------------------------------------
# Parsing stage specs


def _value(text: str) -> Any:
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_stage(spec: str | Mapping[str, Any]) -> dict[str, Any]:
    """A stage spec as a mapping with a ``type`` (``None`` = decide from the model).

    >>> parse_stage("bm25:k1=1.2,b=0.5")
    {'type': 'bm25', 'k1': 1.2, 'b': 0.5}
    >>> parse_stage("colbert:minilm,query_length=32")
    {'type': 'colbert', 'model': 'minilm', 'query_length': 32}
    >>> parse_stage("./my-model")
    {'type': None, 'model': './my-model'}
    """
    out: dict[str, Any]
    if isinstance(spec, Mapping):
        out = dict(spec)
        kind = out.get("type")
        out["type"] = _KIND_ALIASES.get(str(kind).lower(), str(kind).lower()) if kind is not None else None
        return out
    head, sep, rest = str(spec).partition(":")
    kind = _KIND_ALIASES.get(head.strip().lower(), head.strip().lower())
    if kind not in RETRIEVER_KINDS + RERANKER_KINDS:
        return {"type": None, "model": str(spec)}
    out = {"type": kind}
    for part in (p.strip() for p in rest.split(",")) if sep else ():
        if not part:
            continue
        key, eq, value = part.partition("=")
        if eq and key.strip() in out:  # the last would win silently
            raise ConfigError(f"stage {spec!r}: {key.strip()} is given twice: give it once")
        if eq:
            out[key.strip()] = _value(value.strip())
        elif "model" not in out:
            out["model"] = part
        else:
            raise ConfigError(f"stage {spec!r}: {part!r} is not key=value (options are comma-separated key=value)")
    return out


_NUMBER = ("a finite number", float)
_COUNT = ("a positive integer", int)
_FLAG = ("true or false", bool)
_TEXT = ("text", str)
# what each stage option must be (the same name means the same thing in every kind of stage)
_OPTION_TYPES: dict[str, tuple[str, type]] = {
    "k1": _NUMBER,
    "b": _NUMBER,
    "delta": _NUMBER,
    "budget_mb": _NUMBER,
    "n_threads": ("an integer", int),
    "max_seq_length": _COUNT,
    "query_length": _COUNT,
    "document_length": _COUNT,
    "doc_chunk_size": _COUNT,
    "max_documents": _COUNT,
    "max_length": _COUNT,
    "top_k": _COUNT,
    "texts_per_request": _COUNT,
    "max_concurrency": _COUNT,
    "max_retries": ("a non-negative integer", int),
    "request_timeout": _NUMBER,
    "price_per_mtok": _NUMBER,
    "tls_verify": _FLAG,
    "api_base": _TEXT,
    "api_key_env": _TEXT,
    "api_key_file": _TEXT,
    "lower": _FLAG,
    "normalize": _FLAG,
    **dict.fromkeys(("method", "stemmer", "backend", "tokenize", "match", "name", "model", "revision"), _TEXT),
    **dict.fromkeys(("pooling", "query_prompt", "tokenizer", "output_name", "device", "dtype"), _TEXT),
}


def _typed(key: str, value: Any, kind: str) -> Any:
    """``value`` checked (and converted) as option ``key`` of a ``kind`` stage; a one-line error otherwise. A number
    is finite whatever the option (``stopwords=nan`` too)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{kind} stage option {key}={value!r}: expected a finite number")
    if key not in _OPTION_TYPES:
        return value
    what, expected = _OPTION_TYPES[key]
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    if expected is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if ok and expected is float and not math.isfinite(value):
        ok = False
    if ok and expected is int and value < (0 if key == "max_retries" else 1) and key != "n_threads":
        ok = False
    if not ok:
        raise ConfigError(f"{kind} stage option {key}={value!r}: expected {what}")
    return value


def _take(options: dict[str, Any], allowed: Sequence[str], kind: str) -> dict[str, Any]:
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigError(f"{kind} stage: unknown option(s) {unknown}. Valid options: {', '.join(allowed)}")
    return {key: _typed(key, value, kind) for key, value in options.items()}


_BM25_OPTIONS = ("method", "k1", "b", "delta", "lower", "stopwords", "stemmer", "backend", "n_threads", "name")
_FTS5_OPTIONS = ("tokenize", "match", "keywords", "name")
_PLACEMENT = ("device", "dtype")
_COLBERT_OPTIONS = (
    "model",
    "max_seq_length",
    "query_length",
    "document_length",
    "doc_chunk_size",
    "max_documents",
    "budget_mb",
    "name",
    *_PLACEMENT,
)
_DENSE_OPTIONS = (
    "model",
    "backend",
    "pooling",
    "max_seq_length",
    "prompts",
    "query_prompt",
    "revision",
    "tokenizer",
    "normalize",
    "output_name",
    *_PLACEMENT,
)
_CE_OPTIONS = ("model", "max_length", "name", "revision", *_PLACEMENT)
_API_RERANK_OPTIONS = (
    "model",
    "api_base",
    "api_key_env",
    "api_key_file",
    "api_key",
    "name",
    "texts_per_request",
    "max_concurrency",
    "request_timeout",
    "max_retries",
    "price_per_mtok",
    "tls_verify",
)


# the options each kind of stage takes (a reranker mapping also takes ``top_k``: how many candidates it reads)
STAGE_OPTIONS: dict[str, tuple[str, ...]] = {
    "bm25": _BM25_OPTIONS,
    "fts5": _FTS5_OPTIONS,
    "dense": _DENSE_OPTIONS,
    "colbert": _COLBERT_OPTIONS,
    "cross-encoder": _CE_OPTIONS,
    "api-rerank": _API_RERANK_OPTIONS,
}


def check_stage(spec: str | Mapping[str, Any], *, reranker: bool = False) -> None:
    """A stage spec's kind, option names and option values checked without building it (nothing loads); a one-line
    error naming the unknown kind or option, or the bad value. A reranker whose kind is decided from its model
    folder takes the options of any reranker kind.

    >>> check_stage("bm25:k1=inf")
    Traceback (most recent call last):
    embedscope.errors.ConfigError: bm25 stage option k1=inf: expected a finite number
    """
    options = parse_stage(spec)
    kind = options.pop("type")
    if reranker:
        _typed("top_k", options.pop("top_k", 1), "reranker")
    if kind is None and not reranker:
        kind = "dense"
    allowed = RERANKER_KINDS if reranker else RETRIEVER_KINDS
    if kind is not None and kind not in allowed:
        raise ConfigError(str(UnknownNameError("reranker type" if reranker else "retriever type", kind, allowed)))
    names = (
        STAGE_OPTIONS[kind] if kind is not None else tuple(dict.fromkeys(o for k in allowed for o in STAGE_OPTIONS[k]))
    )
    _take(options, names, kind or "reranker")


def _detect_reranker_kind(model: str) -> str:
    from embedscope.retrieval.cross_encoder import is_cross_encoder_checkpoint
    from embedscope.retrieval.late_interaction import is_multi_vector_checkpoint

    path = Path(model).expanduser()
    if path.is_dir():
        if is_cross_encoder_checkpoint(path):
            return "cross-encoder"
        if is_multi_vector_checkpoint(path):
            return "colbert"
    return "dense"


def build_stage(
    spec: str | Mapping[str, Any],
    *,
    reranker: bool = False,
    cache: Any = None,
    model_options: Mapping[str, Any] | None = None,
) -> Any:
    """A retriever (or, with ``reranker=True``, a reranker) from a stage spec.

    ``cache`` (an :class:`~embedscope.models.cache.EmbeddingCache` or None) wraps dense encoders;
    ``model_options`` are defaults for dense models (pooling, prompts, …).
    """
    options = parse_stage(spec)
    kind = options.pop("type")
    if kind is None:
        kind = _detect_reranker_kind(str(options.get("model", ""))) if reranker else "dense"
    allowed = RERANKER_KINDS if reranker else RETRIEVER_KINDS
    if kind not in allowed:
        raise UnknownNameError("reranker type" if reranker else "retriever type", kind, allowed)
    if kind == "bm25":
        from embedscope.retrieval.bm25 import BM25Retriever

        if isinstance(options.get("stopwords"), list):
            options["stopwords"] = tuple(options["stopwords"])
        return BM25Retriever(**_take(options, _BM25_OPTIONS, kind))
    if kind == "fts5":
        from embedscope.retrieval.fts5 import FTS5Retriever

        return FTS5Retriever(**_take(options, _FTS5_OPTIONS, kind))
    if kind == "colbert":
        from embedscope.retrieval.late_interaction import (
            LateInteraction,
            load_token_encoder,
        )

        options = _take(options, _COLBERT_OPTIONS, kind)
        model = options.pop("model", "minilm")
        encoder_keys = ("max_seq_length", "query_length", "document_length", "device", "dtype")
        placed = {k: v for k, v in (model_options or {}).items() if k in _PLACEMENT}
        encoder = load_token_encoder(
            str(model), **{**placed, **{k: options.pop(k) for k in encoder_keys if k in options}}
        )
        return LateInteraction(encoder, **options)
    if kind == "api-rerank":
        from embedscope.retrieval.api_reranker import reranker_from_spec

        return reranker_from_spec(_take(options, _API_RERANK_OPTIONS, kind))
    if kind == "cross-encoder":
        from embedscope.retrieval.cross_encoder import CrossEncoderReranker

        options = _take(options, _CE_OPTIONS, kind)
        if "model" not in options:
            raise ConfigError(
                "cross-encoder stage needs a model (cross-encoder:PATH or {type: cross-encoder, model: PATH})"
            )
        placed = {k: v for k, v in (model_options or {}).items() if k in _PLACEMENT}
        return CrossEncoderReranker(options.pop("model"), **{**placed, **options})
    from embedscope.models.specs import load_encoder
    from embedscope.retrieval.dense import DenseRetriever

    options = _take(options, _DENSE_OPTIONS, kind)
    merged = {**(model_options or {}), **options}
    dense_encoder: Encoder = load_encoder(str(merged.pop("model", "minilm")), **merged)
    if cache is not None:
        from embedscope.models.cache import CachedEncoder

        dense_encoder = CachedEncoder(dense_encoder, cache)
    return DenseRetriever(dense_encoder)


# ---------------------------------------------------------------------------------------------
# Pipelines


@dataclass(frozen=True)
class RerankStep:
    """A reranker and how many of the previous stage's candidates it reads (``None`` = all)."""

    reranker: Reranker
    depth: int | None = None


@dataclass
class StageRun:
    """One stage's output run and cost. ``stage`` is ``stage1``, ``stage2`` … for pipeline stages and
    ``stage1.<name>`` for a retriever whose run is fused into stage 1."""

    stage: str
    name: str
    kind: str
    run: RankedRun
    stats: StageStats = field(default_factory=StageStats)


@dataclass
class Pipeline:
    """Retrievers → (fusion) → rerankers. See the module docstring for stage specs.

    Examples:
        >>> from embedscope import Pipeline
        >>> pipeline = Pipeline.build(["fts5", "fts5:match=all"], fusion="rrf")
        >>> pipeline.name, pipeline.fusion is not None
        ('fts5+fts5_rrf-k60', True)
    """

    retrievers: list[Any]
    fusion: Fusion | None = None
    rerankers: list[RerankStep] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        if not self.retrievers and not self.rerankers:
            raise ConfigError("a pipeline needs a retriever or a reranker")
        for r in self.retrievers:
            if not isinstance(r, Retriever):
                raise ConfigError(f"{getattr(r, 'name', r)!r} cannot retrieve (it is a reranker only)")
        for step in self.rerankers:
            if not isinstance(step.reranker, Reranker):
                raise ConfigError(f"{getattr(step.reranker, 'name', step.reranker)!r} cannot rerank candidates")
        if len(self.retrievers) > 1 and self.fusion is None:
            self.fusion = Fusion("rrf")
        if len(self.retrievers) == 1 and self.fusion is not None:
            raise ConfigError("fusion needs two or more retrievers")
        if not self.name:
            self.name = self.default_name()

    @classmethod
    def build(
        cls,
        retrievers: Sequence[str | Mapping[str, Any]] | str | Mapping[str, Any],
        *,
        fusion: str | Mapping[str, Any] | Fusion | None = None,
        rerankers: Sequence[str | Mapping[str, Any]] | str | Mapping[str, Any] | None = None,
        name: str | None = None,
        cache: Any = None,
        model_options: Mapping[str, Any] | None = None,
    ) -> Pipeline:
        """A pipeline from stage specs (strings or mappings); a reranker mapping may set ``top_k``."""
        if isinstance(retrievers, (str, Mapping)):
            retrievers = [retrievers]
        if isinstance(rerankers, (str, Mapping)):
            rerankers = [rerankers]
        built = [build_stage(s, cache=cache, model_options=model_options) for s in retrievers]
        steps = []
        for spec in rerankers or []:
            spec = parse_stage(spec)
            depth = spec.pop("top_k", None)
            steps.append(RerankStep(build_stage(spec, reranker=True, cache=cache, model_options=model_options), depth))
        pipeline = cls(built, parse_fusion(fusion), steps, name or "")
        _check_model_options_used(pipeline, model_options)
        return pipeline

    # -- identity ---------------------------------------------------------------------------

    def default_name(self) -> str:
        if not self.retrievers:  # a reranker alone (for reranking tasks)
            return "__".join(step.reranker.name for step in self.rerankers)
        name = "+".join(r.name for r in self.retrievers)
        if self.fusion is not None:
            name += f"_{self.fusion.label}"
        for step in self.rerankers:
            name += f"__rerank-{step.reranker.name}" + (f"@{step.depth}" if step.depth else "")
        return name

    def describe(self) -> dict[str, Any]:
        """What ``model_meta.json`` records about the pipeline."""

        def stage(x: Any) -> dict[str, Any]:
            return {"name": x.name, "class": type(x).__name__, "fingerprint": x.fingerprint}

        return {
            "name": self.name,
            "retrievers": [stage(r) for r in self.retrievers],
            "fusion": None if self.fusion is None else vars(self.fusion),
            "rerankers": [{**stage(s.reranker), "depth": s.depth} for s in self.rerankers],
        }

    @property
    def fingerprint(self) -> str:
        return short(
            hash_dict(
                {
                    "retrievers": [r.fingerprint for r in self.retrievers],
                    "fusion": None if self.fusion is None else vars(self.fusion),
                    "rerankers": [(s.reranker.fingerprint, s.depth) for s in self.rerankers],
                }
            )
        )

    @property
    def revision(self) -> str:
        return self.fingerprint

    @property
    def searches(self) -> bool:
        """Whether it can search a corpus (a reranker alone scores given candidates only)."""
        return bool(self.retrievers)

    @property
    def dense_stages(self) -> list[Any]:
        """Its single-vector retrievers (where dense post-processing and approximate indexes act)."""
        from embedscope.retrieval.dense import DenseRetriever

        return [r for r in self.retrievers if isinstance(r, DenseRetriever)]

    def stage_models(self) -> list[Any]:
        """The model behind each stage (an encoder inside a retriever or reranker, else the stage itself)."""
        stages = [*self.retrievers, *(s.reranker for s in self.rerankers)]
        return [getattr(s, "encoder", s) for s in stages]

    @property
    def dense_encoder(self) -> Any:
        """The encoder when the pipeline is a single dense retriever (usable for every task type), else None."""
        from embedscope.retrieval.dense import DenseRetriever

        if len(self.retrievers) == 1 and not self.rerankers and isinstance(self.retrievers[0], DenseRetriever):
            return self.retrievers[0].encoder
        return None

    def candidate_scorer(self) -> Any:
        """What scores a reranking task's given candidates: the last reranker, else a retriever that can."""
        if self.rerankers:
            if self.retrievers:
                logger.info("%s: reranking tasks are scored by its last reranker alone", self.name)
            return self.rerankers[-1].reranker
        if len(self.retrievers) == 1 and isinstance(self.retrievers[0], Reranker):
            return self.retrievers[0]
        raise ConfigError(
            f"{self.name} cannot score given candidates (reranking tasks): add a reranker, or use a "
            "dense, ColBERT or cross-encoder model"
        )

    # -- running ----------------------------------------------------------------------------

    def stage_runs(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> list[StageRun]:
        """Run every stage; return each stage's run and cost, in order (the last is the output)."""
        if not self.retrievers:
            raise ConfigError(
                f"{self.name} has no first-stage retriever: it can score reranking tasks only "
                "(add a retriever, e.g. bm25, to evaluate retrieval)"
            )
        out: list[StageRun] = []
        runs = []
        for retriever in self.retrievers:
            with measure() as stats:
                run = retriever.retrieve(queries, corpus, options)
            label = "stage1" if len(self.retrievers) == 1 else f"stage1.{retriever.name}"
            out.append(StageRun(label, retriever.name, "retriever", run, stats))
            runs.append(run)
        if self.fusion is not None:
            with measure() as stats:
                fused = self.fusion.fuse(runs, options.top_k)
            out.append(StageRun("stage1", self.fusion.label, "fusion", fused, stats))
        current = out[-1].run
        for n, step in enumerate(self.rerankers, start=2):
            depth = options.top_k if step.depth is None else min(step.depth, options.top_k)
            candidates = sort_and_cut(current, depth)
            with measure() as stats:
                current = rerank(step.reranker, queries, corpus, candidates, options)
            out.append(StageRun(f"stage{n}", step.reranker.name, "reranker", current, stats))
        return out

    def retrieve(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> RankedRun:
        return self.stage_runs(queries, corpus, options)[-1].run

    def search_stages(self, queries: Queries, corpus: Corpus, options: SearchOptions) -> Search:
        """The pipeline as a :class:`~embedscope.retrieval.roles.Searcher`: every stage's run and cost."""
        runs = self.stage_runs(queries, corpus, options)
        return Search(runs[-1].run, {f"{s.stage}:{s.name}": s.stats.seconds for s in runs}, tuple(runs))


def _check_model_options_used(pipeline: Pipeline, model_options: Mapping[str, Any] | None) -> None:
    """Model options other than device and dtype act on embedding-model stages; a pipeline with none of those
    would drop them silently, so they are refused."""
    from embedscope.retrieval.dense import DenseRetriever

    unused = sorted(k for k, v in (model_options or {}).items() if k not in _PLACEMENT and v is not None)
    stages = [*pipeline.retrievers, *(s.reranker for s in pipeline.rerankers)]
    if unused and not any(isinstance(s, DenseRetriever) or hasattr(s, "encode") for s in stages):
        raise ConfigError(
            f"model option(s) {', '.join(unused)} apply to embedding models, and {pipeline.name} has none "
            "(BM25, FTS5, ColBERT and cross-encoder stages take their options in the stage spec, e.g. colbert:M,"
            "query_length=32)"
        )


def parse_fusion(fusion: str | Mapping[str, Any] | Fusion | None) -> Fusion | None:
    """``"rrf"``, ``"wsum"``, ``"wsum-zmuv"``, ``{method: wsum, norm: min-max, weights: [...]}`` …

    >>> parse_fusion("wsum-zmuv")
    Fusion(method='wsum', k=60, norm='zmuv', weights=None)
    """
    if fusion is None or isinstance(fusion, Fusion):
        return fusion
    if isinstance(fusion, str):
        method, _, norm = fusion.partition("-")
        return Fusion(method, norm=norm or "min-max") if method == "wsum" else Fusion(fusion)
    options = dict(fusion)
    unknown = set(options) - {"method", "k", "norm", "weights"}
    if unknown:
        raise ConfigError(f"fusion: unknown option(s) {sorted(unknown)}. Valid options: method, k, norm, weights")
    if options.get("weights") is not None:
        options["weights"] = tuple(options["weights"])
    return Fusion(**options)


def is_pipeline_spec(spec: str) -> bool:
    """Whether a ``model`` setting names a non-dense retriever (``bm25``, ``fts5``, ``colbert:…``) or a
    cross-encoder (``cross-encoder:PATH``, or a cross-encoder checkpoint folder)."""
    kind = parse_stage(spec)["type"]
    if kind is None:
        from embedscope.retrieval.cross_encoder import is_cross_encoder_checkpoint

        return Path(spec).expanduser().is_dir() and is_cross_encoder_checkpoint(Path(spec).expanduser())
    return kind in ("bm25", "fts5", "colbert", "cross-encoder", "api-rerank")


def model_pipeline(spec: str, *, cache: Any = None, model_options: Mapping[str, Any] | None = None) -> Pipeline:
    """The pipeline a single ``model`` setting stands for: one retriever, or a cross-encoder alone."""
    kind = parse_stage(spec)["type"]
    if kind in ("cross-encoder", "api-rerank") or (kind is None and _detect_reranker_kind(spec) == "cross-encoder"):
        return Pipeline([], rerankers=[RerankStep(build_stage(spec, reranker=True))])
    return Pipeline.build([spec], cache=cache, model_options=model_options)
