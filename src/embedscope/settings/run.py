"""The one settings type of a run: every option, checked once, whether it came from flags, a file or ``evaluate()``.

:class:`RunSettings` is embedscope's config-file schema as it is (``model``/``models``, ``pipeline``/``pipelines``,
``model_options``, ``tasks`` …); the command line, EvalScope's schema (:mod:`embedscope.settings.evalscope`) and
:func:`embedscope.evaluate` build the same object through :func:`embedscope.settings.sources.build_settings`, which
records where each value came from. Everything downstream receives its resolved parts (:meth:`RunSettings.runs`):
the devices resolved once, the dtype parsed once, the batch size's default worked out once.

>>> s = RunSettings.model_validate({"models": ["minilm", {"model": "static-64", "device": "cpu"}], "limits": 5})
>>> [(r.model, r.options.get("device")) for r in s.model_runs()]
[('minilm', None), ('static-64', 'cpu')]
>>> RunSettings.model_validate({"engine": "ray", "ray_workers": 2}).engine.workers
2
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    SerializeAsAny,
    Tag,
    ValidationInfo,
    field_serializer,
    field_validator,
    model_validator,
)

from embedscope.engines.base import EngineSettings, engine_names, engine_settings
from embedscope.errors import ConfigError, SettingError
from embedscope.settings.options import option, register_root

if TYPE_CHECKING:
    from embedscope.models.options import EncoderOptions

if TYPE_CHECKING:
    from embedscope.retrieval.base import SearchOptions

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "minilm"
OverwriteName = Literal["only-missing", "never", "always", "only-cache"]


def _as_text(value: Any) -> Any:
    return str(value) if isinstance(value, PurePath) else value


Folder = Annotated[str, BeforeValidator(_as_text)]  # a folder or file path, given as text or a Path


def _budget(value: Any) -> Any:
    """A budget as text (``50000``, ``$0.50``) once it parses (:func:`embedscope.models.api.encoder.parse_budget`)."""
    from embedscope.models.api.encoder import parse_budget

    parse_budget(value)
    return str(value).strip()


Budget = Annotated[str, BeforeValidator(_budget)]  # an API model's cap: tokens or a spend (the run option budget)


def _memory_size(value: Any) -> Any:
    """A memory size as text (``8GB``, ``512MB``) once it parses (:func:`embedscope.profiling.parse_bytes`)."""
    from embedscope.profiling import parse_bytes

    parse_bytes(value)
    return str(value).strip()


MemorySize = Annotated[str, BeforeValidator(_memory_size)]  # the run option memory_limit


def _not_bool(value: Any) -> Any:
    """A number field refuses ``true``/``false`` (a bool is an int to Python: ``top_k: true`` would be 1)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, not {str(value).lower()}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]
Float = Annotated[float, BeforeValidator(_not_bool)]
PositiveInt = Annotated[int, BeforeValidator(_not_bool), Field(gt=0)]
NonNegativeInt = Annotated[int, BeforeValidator(_not_bool), Field(ge=0)]
PositiveFloat = Annotated[float, BeforeValidator(_not_bool), Field(gt=0)]
NonNegativeFloat = Annotated[float, BeforeValidator(_not_bool), Field(ge=0)]


def _strict(arbitrary_types_allowed: bool = False) -> ConfigDict:
    return ConfigDict(extra="forbid", allow_inf_nan=False, arbitrary_types_allowed=arbitrary_types_allowed)


_NON_FINITE = ("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def check_finite_tree(value: Any, where: str = "") -> Any:
    """``value`` when every number inside it (strings such as ``"nan"`` too) is finite; else a ValueError naming
    where inside it.

    >>> check_finite_tree({"a": [1, 2.5]})
    {'a': [1, 2.5]}
    >>> check_finite_tree({"weights": [1, float("nan")]})
    Traceback (most recent call last):
    ValueError: weights[1] = nan is not a finite number
    """
    if (isinstance(value, float) and not math.isfinite(value)) or (
        isinstance(value, str) and value.strip().lower() in _NON_FINITE
    ):
        raise ValueError(f"{where or 'value'} = {value} is not a finite number")
    if isinstance(value, Mapping):
        for k, v in value.items():
            check_finite_tree(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            check_finite_tree(v, f"{where}[{i}]")
    return value


def _checked_model_spec(value: Any) -> Any:
    """A model given as a retriever or reranker spec (``bm25:k1=1.2``, ``colbert:M,query_length=32``,
    ``cross-encoder:PATH``) checked as a pipeline stage is, before any model loads (a misspelt key, ``k1=inf``, a key
    given twice); names, paths and model objects are left to the run's checks."""
    if isinstance(value, str):
        from embedscope.retrieval.pipeline import RETRIEVER_KINDS, check_stage, parse_stage

        kind = parse_stage(value)["type"]
        if kind is not None and kind != "dense":  # dense:… is not a model spec (a model is named as it is)
            check_stage(value, reranker=kind not in RETRIEVER_KINDS)
    return value


ModelSpec = Annotated[Any, AfterValidator(_checked_model_spec)]  # a model name, path, stage spec or object


_ON_RETRIEVAL = {"task_type": ["Retrieval"]}
_ON_SEARCH = {"task_type": ["Retrieval", "InstructionRetrieval"]}


class ModelOptions(BaseModel):
    """How a model given by name or path is loaded (:func:`~embedscope.models.specs.load_encoder`'s options)."""

    model_config = _strict()
    backend: str | None = option(
        None,
        group="model options",
        help="force a backend (a fast path of a torch model is exported once into the cache folder)",
        help_from="embedscope.models.backends:backend_choices",
    )
    pooling: str | None = option(
        None,
        group="model options",
        help="cls | mean | max | lasttoken | weightedmean | mean_sqrt_len_tokens; a sparse (SPLADE) model: max | sum",
    )
    max_seq_length: PositiveInt | None = option(None, group="model options", help="truncate texts to this many tokens")
    query_prompt: str | None = option(None, group="model options", help="instruction prepended to queries only")
    prompts: dict[str, str] | None = option(
        None,
        group="model options",
        help="prompts by role or task name ({query: 'query: ', document: 'passage: '})",
        config_only="a mapping of role or task name to prompt; --query-prompt sets the query's",
    )
    tokenizer: str | None = option(
        None, group="model options", help="tokenizer.json or folder (ONNX models without one)"
    )
    revision: str | None = option(None, group="model options", help="hub revision of the model")
    normalize: bool | None = option(
        None,
        group="model options",
        help="normalise the vectors to unit length (default: as the model's own configuration says)",
        flags=("--normalize",),
        action="boolean",
    )
    output_name: str | None = option(
        None,
        group="model options",
        help="the model output read as the embedding (ONNX models with several outputs)",
    )
    device: str | None = option(
        None,
        group="model options",
        help="this model's device",
        config_only="per model (models[].device); the run-wide device is --device",
        stored=False,
    )
    dtype: str | None = option(
        None,
        group="model options",
        help="this model's precision",
        config_only="per model (models[].dtype); the run-wide precision is --dtype",
    )
    calibration: str | None = option(
        None,
        group="model options",
        metavar="FILE",
        acts={"backend": ["openvino-int8"]},
        help="--backend openvino-int8: texts to calibrate on (one a line, or .jsonl with 'text'); "
        "default: a seeded sample of 300 of the run's task texts",
    )
    # a model behind an API: openai:NAME, cohere:NAME, voyage:NAME, or a name with api_base (embedscope.models.api)
    api_base: str | None = option(
        None, group="model options", metavar="URL", help="API models: the service's base URL (default: the provider's)"
    )
    api_key: SecretStr | None = option(
        None,
        group="model options",
        help="API models: the key itself (EvalScope's api_key); never written, shown masked",
        config_only="a key on the command line stays in the shell history: give --api-key-env or --api-key-file",
        stored=False,
    )
    api_key_env: str | None = option(
        None,
        group="model options",
        metavar="VAR",
        help="API models: the environment variable holding the key (default OPENAI_API_KEY, CO_API_KEY, VOYAGE_API_KEY)",
        stored=False,
    )
    api_key_file: str | None = option(
        None, group="model options", metavar="FILE", help="API models: a file whose first line is the key", stored=False
    )
    dimensions: PositiveInt | None = option(
        None, group="model options", metavar="D", help="API models: the dimensions the service returns (Matryoshka)"
    )
    price_per_mtok: NonNegativeFloat | None = option(
        None,
        group="model options",
        metavar="USD",
        help="API models: the price per million tokens, for the cost columns (none is built in: prices change)",
        stored=False,
    )
    max_concurrency: PositiveInt | None = option(
        None,
        group="model options",
        metavar="N",
        help="API models: requests in flight at once (default 4)",
        stored=False,
    )
    requests_per_minute: PositiveInt | None = option(
        None, group="model options", metavar="N", help="API models: at most this many requests a minute", stored=False
    )
    tokens_per_minute: PositiveInt | None = option(
        None, group="model options", metavar="N", help="API models: at most this many tokens a minute", stored=False
    )
    texts_per_request: PositiveInt | None = option(
        None,
        group="model options",
        metavar="N",
        help="API models: texts per request (default: the batch size)",
        stored=False,
    )
    tokens_per_request: PositiveInt | None = option(
        None, group="model options", metavar="N", help="API models: estimated tokens per request at most", stored=False
    )
    request_timeout: PositiveFloat | None = option(
        None,
        group="model options",
        metavar="S",
        help="API models: request timeout in seconds (default 60)",
        stored=False,
    )
    max_retries: NonNegativeInt | None = option(
        None,
        group="model options",
        metavar="N",
        help="API models: retries of a failed request (default 6)",
        stored=False,
    )
    tls_verify: bool | None = option(
        None,
        group="model options",
        flags=("--tls-verify",),
        action="boolean",
        help="API models: verify the service's TLS certificate (default: on; --no-tls-verify turns it off)",
        stored=False,
    )

    @field_validator("backend")
    @classmethod
    def _backend(cls, value: str | None) -> str | None:
        from embedscope.models.backends import normalize_backend

        return normalize_backend(value) if value is not None else None

    @field_validator("pooling")
    @classmethod
    def _pooling(cls, value: str | None) -> str | None:
        from embedscope.models.pooling import ANY_POOLING_MODES, check_pooling_mode

        return check_pooling_mode(value, ANY_POOLING_MODES) if value is not None else None

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        from embedscope.models.device import parse_devices

        return ",".join(parse_devices(value)) if value is not None else None

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        from embedscope.models.device import parse_dtype, short_dtype

        return short_dtype(parse_dtype(value)) if value is not None else None

    @field_validator("revision")
    @classmethod
    def _revision(cls, value: str | None) -> str | None:
        from embedscope.results.store import check_path_name

        return check_path_name(value, "revision") if value is not None else None

    def given(self) -> dict[str, Any]:
        """The options that are set."""
        return self.model_dump(exclude_none=True)

    def to_encoder_options(self) -> EncoderOptions:
        """These options as the encoder's one options object (:class:`~embedscope.models.options.EncoderOptions`)."""
        from embedscope.models.api import API_OPTIONS
        from embedscope.models.options import EncoderOptions

        return EncoderOptions(**{k: v for k, v in self.given().items() if k not in API_OPTIONS and k != "api_key"})


MODEL_OPTION_KEYS = tuple(ModelOptions.model_fields)


class ModelEntry(ModelOptions):
    """One ``models`` entry given as a mapping: ``{model: NAME, device: cuda:1, pooling: cls, …}``; ``tasks``
    limits it to some of the run's tasks (EvalScope's per-task prompts use this)."""

    model_config = _strict(arbitrary_types_allowed=True)
    model: ModelSpec
    tasks: list[Any] | None = None
    batch_size: PositiveInt | None = None

    @model_validator(mode="before")
    @classmethod
    def _needs_model(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "model" not in data:
            raise ValueError("a models entry given as a mapping needs 'model' (e.g. {model: minilm, device: cuda:1})")
        return data


class FusionSettings(BaseModel):
    """How a pipeline fuses its retrievers (:class:`embedscope.retrieval.fusion.Fusion`); each parameter acts with
    its methods only (``k`` with rrf; ``norm`` and ``weights`` with wsum): one given for another is refused. Given as
    text, ``rrf`` or ``wsum-NORM``."""

    model_config = _strict()
    method: str = option(
        "rrf",
        group="pipeline",
        flags=("--fusion",),
        help="how to fuse several retrievers: rrf (default), wsum-min-max, wsum-zmuv, wsum-none",
    )
    k: Annotated[int, BeforeValidator(_not_bool), Field(ge=0)] = option(
        60, group="pipeline", flags=("--rrf-k",), help="RRF constant k (default 60)", acts={"fusion": ["rrf"]}
    )
    norm: str = option(
        "min-max",
        group="pipeline",
        help="wsum's score normalisation: min-max (default), zmuv, none",
        config_only="on the command line it is part of --fusion (wsum-zmuv)",
        acts={"fusion": ["wsum"]},
    )
    weights: list[Float] | None = option(
        None,
        group="pipeline",
        nargs="+",
        help="wsum weights, one per retriever (finite)",
        acts={"fusion": ["wsum"]},
    )

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, data: Any) -> Any:
        if isinstance(data, str):  # "rrf", "wsum", "wsum-zmuv"
            method, _, norm = data.partition("-")
            return {"method": method, "norm": norm} if method == "wsum" and norm else {"method": data}
        if isinstance(data, Mapping) and isinstance(data.get("method"), str) and "-" in data["method"]:
            method, _, norm = data["method"].partition("-")
            if method == "wsum" and norm:  # --fusion wsum-zmuv
                return {**data, "method": method, "norm": norm}
        return data

    @field_validator("weights", mode="before")
    @classmethod
    def _finite(cls, value: Any) -> Any:
        return check_finite_tree(value, "weights")

    @field_validator("method")
    @classmethod
    def _method(cls, value: str) -> str:
        from embedscope.errors import UnknownNameError
        from embedscope.retrieval.fusion import FUSION_METHODS

        if value not in FUSION_METHODS:
            known = ("rrf", "wsum", "wsum-min-max", "wsum-zmuv", "wsum-none")
            raise ValueError(str(UnknownNameError("fusion method", value, known)))
        return value

    @field_validator("k", "norm", "weights")
    @classmethod
    def _acts(cls, value: Any, info: ValidationInfo) -> Any:
        from embedscope.settings.options import refuse_if_idle

        refuse_if_idle(f"pipeline.fusion.{info.field_name}", {"fusion": [str(info.data.get("method", "rrf"))]})
        return value

    @field_validator("norm")
    @classmethod
    def _norm(cls, value: str) -> str:
        from embedscope.retrieval.fusion import Fusion

        return Fusion("wsum", norm=value).norm

    def given(self) -> dict[str, Any]:
        """The parameters given (the fusion's own defaults fill the rest)."""
        return self.model_dump(include=self.model_fields_set | {"method"}, exclude_none=True)


class PipelineConfig(BaseModel):
    """A retrieval pipeline: retriever(s), optional fusion, optional reranker(s).

    Stage entries are spec strings (``bm25:k1=1.2``) or mappings (``{type: bm25, k1: 1.2}``); their options are
    checked, by type, when the stage is built.
    """

    model_config = _strict()
    name: str | None = option(
        None,
        group="pipeline",
        flags=("--pipeline-name",),
        help="name results are filed under (default: from the stages)",
    )
    retriever: str | dict[str, Any] | None = option(
        None,
        group="pipeline",
        help="the first-stage retriever",
        config_only="one stage in a config file; on the command line --retriever (repeatable) gives the retrievers",
    )
    retrievers: list[str | dict[str, Any]] = option(
        group="pipeline",
        default_factory=list,
        flags=("--retriever",),
        action="append",
        metavar="SPEC",
        help="first-stage retriever (repeat to fuse several): bm25[:k1=..,b=..,method=..], "
        "fts5[:match=all], MODEL or dense:MODEL, colbert:MODEL",
    )
    fusion: FusionSettings | None = None
    reranker: str | dict[str, Any] | None = option(
        None,
        group="pipeline",
        help="the reranker",
        config_only="one stage in a config file; on the command line --reranker (repeatable) gives the rerankers",
    )
    rerankers: list[str | dict[str, Any]] = option(
        group="pipeline",
        default_factory=list,
        flags=("--reranker",),
        action="append",
        metavar="SPEC",
        help="rerank the top --top-k candidates: a cross-encoder folder (or cross-encoder:PATH), "
        "colbert:MODEL, or an embedding model; repeat for more stages",
    )
    tasks: list[Any] | None = option(
        None,
        group="pipeline",
        help="only these of the run's tasks",
        config_only="a pipeline among several in a config file; the command line's --tasks names the run's tasks",
    )

    @field_validator("retriever", "retrievers", "reranker", "rerankers")
    @classmethod
    def _stages(cls, value: Any, info: ValidationInfo) -> Any:
        """Each stage's keys and values checked by its kind, before any model loads (a misspelt key, ``k1=inf``)."""
        from embedscope.retrieval.pipeline import check_stage

        check_finite_tree(value)
        for stage in value if isinstance(value, list) else [value] if value is not None else []:
            check_stage(stage, reranker=str(info.field_name).startswith("reranker"))
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        from embedscope.results.store import check_path_name

        return check_path_name(value, "pipeline name") if value is not None else None

    @model_validator(mode="after")
    def _has_a_stage(self) -> PipelineConfig:
        if self.retriever is None and not self.retrievers and self.reranker is None and not self.rerankers:
            raise ValueError("a pipeline needs 'retriever' (or a 'retrievers' list) or a reranker")
        return self

    def spec(self) -> dict[str, Any]:
        """Keyword arguments of :meth:`embedscope.retrieval.pipeline.Pipeline.build`."""
        retrievers = ([self.retriever] if self.retriever is not None else []) + list(self.retrievers)
        rerankers = ([self.reranker] if self.reranker is not None else []) + list(self.rerankers)
        fusion = self.fusion.given() if self.fusion is not None else None
        return {"retrievers": retrievers, "fusion": fusion, "rerankers": rerankers, "name": self.name}


class ChunkingSettings(BaseModel):
    """How retrieval documents become passages (:class:`embedscope.data.documents.ChunkOptions`): ``method`` tokens
    (sentence-aware token windows), paragraphs, fastbook-reference or a fastbook paragraph strategy
    (fastbook-paragraphs-a … -f). A task whose relevance names documents is scored per document, by its best
    passage; a QA task whose relevance is context strings is scored per passage, relevance recomputed by substring.
    """

    model_config = _strict()
    method: str = option(
        "tokens",
        group="chunking",
        flags=("--chunking",),
        renamed_from=("--method",),  # f986061: chunk and fastbook's chunking flags took the settings' spellings
        metavar="METHOD",
        help="retrieval on passages: chunk each document by tokens (default) | paragraphs | fastbook-reference (the "
        "study's corpus: each document cut in halves, then --chunk-size token windows with the study's overlap "
        "min(size/4, size/2, 64)) | fastbook-paragraphs-a … -f; relevance by document scores each document by its "
        "best passage, QA relevance (context strings) is recomputed per passage",
        acts=_ON_RETRIEVAL,
    )
    chunk_size: PositiveInt = option(
        500,
        group="chunking",
        metavar="N",
        help="tokens per passage (chunking tokens, fastbook-reference; default 500)",
        acts=_ON_RETRIEVAL,
    )
    overlap: Annotated[int, BeforeValidator(_not_bool), Field(ge=0)] | None = option(
        None,
        group="chunking",
        flags=("--chunk-overlap",),
        renamed_from=("--overlap",),
        metavar="N",
        help="tokens shared by neighbouring passages (chunking tokens; default 64; fastbook-reference: the study's rule)",
        acts=_ON_RETRIEVAL,
    )
    tokenizer: str = option(
        "cl100k_base",
        group="chunking",
        flags=("--chunk-tokenizer",),
        renamed_from=("--tokenizer",),  # on commands where --tokenizer is not the model's (as on run and eval)
        help="what counts the tokens of a passage: cl100k_base (tiktoken, default), a model alias or tokenizer.json",
        acts=_ON_RETRIEVAL,
    )
    paragraphs: PositiveInt = option(
        1,
        group="chunking",
        flags=("--chunk-paragraphs",),
        renamed_from=("--paragraphs",),
        metavar="N",
        help="paragraphs per passage (chunking paragraphs; default 1)",
        acts=_ON_RETRIEVAL,
    )
    keep_headers: bool = option(
        True,
        group="chunking",
        flags=("--no-chunk-headers",),
        renamed_from=("--no-headers",),
        action="store_false",
        help="drop Markdown header paragraphs (chunking paragraphs)",
        acts=_ON_RETRIEVAL,
    )
    stop_at: str | None = option(
        "## Questionnaire",
        group="chunking",
        flags=("--chunk-stop-at",),
        renamed_from=("--stop-at",),
        metavar="TEXT",
        help="stop reading a document at the first markdown cell (or line) containing this (default "
        "'## Questionnaire'); '' reads everything",
        acts=_ON_RETRIEVAL,
    )

    @model_validator(mode="after")
    def _valid(self) -> ChunkingSettings:
        try:
            self.options()
        except SettingError:
            raise  # a ValueError that names its settings by key: build_settings names them as the user gave them
        except ConfigError as e:
            raise ValueError(str(e)) from None
        return self

    def options(self) -> Any:
        """The data layer's :class:`~embedscope.data.documents.ChunkOptions`."""
        from embedscope.data.documents import ChunkOptions
        from embedscope.models.specs import tokenizer_location

        return ChunkOptions(**{**self.model_dump(), "tokenizer": tokenizer_location(self.tokenizer)})

    def record(self) -> dict[str, Any]:
        """Every option written out (defaults included), so equal chunkings record equally."""
        return self.model_dump()


class CustomTask(BaseModel):
    """A task over the user's own files (``custom_tasks`` entries of both schemas). Keys beyond these fields are
    protocol parameters of the entry's type (its own, a registered type's too), checked by that type's record when the
    task is built (:func:`embedscope.tasks.params.task_param_fields`): a name the type lacks is refused there."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    name: str
    data_path: Folder
    eval_splits: list[str] = Field(default_factory=lambda: ["test"])
    main_score: str | None = None  # the type's main score (ndcg_at_10 for retrieval)
    ignore_identical_ids: bool = False
    columns: dict[str, str] | None = None
    type: str = "Retrieval"  # embedscope extension: STS, PairClassification, Classification, ...
    # protocol parameters, checked per type (embedscope.tasks.params)
    samples_per_label: Int | None = None
    n_experiments: Int | None = None
    max_document_to_embed: Int | str | None = None
    max_fraction_of_documents_to_embed: Float | str | None = None
    group_sets: str | None = None  # clustering: the column grouping rows into mteb's legacy sets
    legacy: bool | None = None
    k: list[Int] | Int | str | None = None
    top_k: Int | None = None

    def task_params(self) -> dict[str, Any]:
        """The protocol parameters this entry sets."""
        names = (
            "samples_per_label",
            "n_experiments",
            "max_document_to_embed",
            "max_fraction_of_documents_to_embed",
            "group_sets",
            "legacy",
            "k",
            "top_k",
        )
        declared = {n: getattr(self, n) for n in names if n in self.model_fields_set}
        return {**declared, **check_finite_tree(dict(self.model_extra or {}))}

    @model_validator(mode="after")
    def _finite_params(self) -> CustomTask:
        """Its undeclared protocol parameters' numbers finite, at validation (their names are the type's to check)."""
        check_finite_tree(dict(self.model_extra or {}))
        return self

    @field_validator("name")
    @classmethod
    def _file_name(cls, name: str) -> str:
        """The name names the result file: no path separators, '..' or absolute paths."""
        from embedscope.results.store import check_path_name

        return check_path_name(name, "task name")

    def task(self) -> Any:
        """The task object."""
        from embedscope.tasks.custom import custom_task, task_type_of
        from embedscope.tasks.params import task_param_fields

        kind = task_type_of(self.type)
        extra: dict[str, Any] = task_param_fields(
            kind, self.task_params(), where=f"custom task {self.name!r}: parameter"
        )
        if kind == "Retrieval":
            extra["ignore_identical_ids"] = self.ignore_identical_ids
        elif self.ignore_identical_ids:
            raise ConfigError(f"custom task {self.name!r}: ignore_identical_ids applies to retrieval tasks only")
        return custom_task(
            self.data_path,
            type=self.type,
            name=self.name,
            eval_splits=tuple(self.eval_splits),
            columns=self.columns,
            main_score=self.main_score,
            **extra,
        )


def _entry_kind(entry: Any) -> str:
    if isinstance(entry, PipelineConfig) or (
        isinstance(entry, Mapping) and any(k in entry for k in ("retriever", "retrievers", "reranker", "rerankers"))
    ):
        return "~pipeline"
    return "~options" if isinstance(entry, (Mapping, ModelEntry)) else "~model"


# a ``models`` entry: a pipeline mapping, a mapping with its own options, or a name, path or model object
ModelsEntry = Annotated[
    Annotated[PipelineConfig, Tag("~pipeline")]
    | Annotated[ModelEntry, Tag("~options")]
    | Annotated[ModelSpec, Tag("~model")],
    Discriminator(_entry_kind),
]
ENTRY_TAGS = {"~pipeline": PipelineConfig, "~options": ModelEntry, "~model": None}  # tag → the entry's model


def _engine_from_input(data: dict[str, Any]) -> dict[str, Any]:
    """``engine: NAME`` (or a mapping) with the flat ``NAME_FIELD`` keys folded into ``engine``; a flat key of an
    engine that is not the chosen one is an error (it would have no effect)."""
    engine = data.get("engine", "local")
    if isinstance(engine, EngineSettings):
        return data
    chosen = dict(engine) if isinstance(engine, Mapping) else {"name": engine}
    chosen.setdefault("name", "local")
    name = str(chosen["name"])
    for key in list(data):
        prefix = next((e for e in engine_names() if key.startswith(f"{e}_")), None)
        if prefix is None:
            continue
        if prefix != name:
            raise ValueError(f"{key} applies to engine {prefix!r} only, and this run's engine is {name!r}")
        chosen[key.removeprefix(f"{prefix}_")] = data.pop(key)
    data["engine"] = chosen
    return data


class RunSettings(BaseModel):
    """Everything a run is asked to do (embedscope's config-file schema; see the module docstring).

    Examples:
        >>> from embedscope import RunSettings
        >>> settings = RunSettings(model="minilm", tasks=["LeeDocumentSimilarity"], limits=10)
        >>> settings.limits, settings.top_k, settings.output_folder
        (10, 1000, 'results')
        >>> RunSettings(limits=0)
        Traceback (most recent call last):
        ...
        pydantic_core._pydantic_core.ValidationError: 1 validation error for RunSettings
        ...
    """

    model_config = _strict(arbitrary_types_allowed=True)

    # models: names/paths, mappings with their own options, pipelines, or model objects (evaluate() only)
    model: Any = option(
        None,
        group="models",
        flags=("--model", "-m"),
        help="alias (see 'embedscope models'), local path, hub id, or a retriever: bm25, fts5, colbert:MODEL "
        "(options as bm25:k1=1.2,b=0.75)",
    )
    models: list[ModelsEntry] | None = option(
        None,
        group="models",
        nargs="+",
        metavar="MODEL",
        help="several models (each as --model takes); in a config file also mappings with their own options "
        "({model: M, device: cuda:1}) or pipelines",
    )
    pipeline: PipelineConfig | None = None
    pipelines: list[PipelineConfig] = option(
        group="pipeline",
        default_factory=list,
        help="several retrieval pipelines",
        config_only="a list of pipelines (a config file or a sweep axis); the flags give one pipeline",
    )
    model_options: ModelOptions = Field(default_factory=ModelOptions)
    fingerprint: str | None = option(
        None,
        group="models",
        help="the identity of a model object embedscope cannot fingerprint itself",
        config_only="for a model object given to evaluate(), which a command line cannot pass",
    )
    # tasks
    tasks: list[Any] = option(
        group="tasks",
        default_factory=list,
        flags=("--tasks", "-t"),
        nargs="+",
        help="task names (see 'embedscope tasks'), folders of custom retrieval data, or TYPE:PATH (sts:pairs.csv …); "
        "default: the 4 built-in tasks",
    )
    benchmark: str | None = option(
        None,
        group="tasks",
        flags=("--benchmark", "-b"),
        metavar="NAME",
        help="run one of mteb's benchmarks, e.g. \"MTEB(eng, v2)\" (see 'embedscope tasks --benchmarks')",
    )
    custom_tasks: list[CustomTask] = option(
        group="tasks",
        default_factory=list,
        help="tasks over your own files",
        config_only="a list of mappings (name, data_path, type, columns …); on the command line a folder or "
        "TYPE:PATH in --tasks",
    )
    task_types: list[str] | None = option(
        None,
        group="tasks",
        flags=("--task-type",),
        nargs="+",
        metavar="TYPE",
        help="keep only the tasks of these types (as 'embedscope tasks --type'), e.g. Retrieval STS",
    )
    languages: list[str] | None = option(
        None,
        group="tasks",
        flags=("--language",),
        nargs="+",
        metavar="LANG",
        help="keep only the tasks in these languages (ISO 639-3, e.g. eng rus)",
    )
    task_params: dict[str, Any] = option(
        group="tasks",
        default_factory=dict,
        flags=("--task-param",),
        action="append",
        metavar="NAME=VALUE",
        key_values=True,
        help="protocol parameter, repeatable: samples_per_label, n_experiments (classification); "
        "max_document_to_embed, max_fraction_of_documents_to_embed, n_experiments, legacy (clustering); "
        "k (retrieval/reranking cutoffs, e.g. 1,10; multilabel neighbours), top_k (retrieval)",
    )
    splits: list[str] | None = option(
        None,
        group="tasks",
        nargs="+",
        metavar="SPLIT",
        help="evaluate these splits instead of each task's own (e.g. validation)",
    )
    data_dir: Folder | None = option(
        None, group="tasks", help="local copies of catalog datasets (<dir>/<Task>, hub layout)"
    )
    # where and how to encode
    device: str = option(
        "auto",
        group="encoding",
        flags=("--device", "--devices"),
        help="auto (default: the best accelerator here, else cpu) | cpu | cuda | cuda:N | mps; several "
        "(cuda:0,cuda:1) shard the encoding, with the same vectors as one device",
        stored=False,
    )
    dtype: str | None = option(
        None,
        group="encoding",
        help="model precision: fp32 (default, the exact path), fp16 or bf16 (faster on GPUs; scores shift slightly)",
    )
    batch_size: PositiveInt | None = option(
        None,
        group="encoding",
        help="texts per encoding batch (default: 32 on the CPU, MTEB's and the exact path; 256 on a GPU)",
    )
    budget: Budget | None = option(
        None,
        group="encoding",
        metavar="CAP",
        help="API models: stop before paying more than this: tokens (50000) or a spend ('$0.50', with --price-per-mtok);"
        " what was answered stays in the cache, so a rerun pays only for the rest",
        stored=False,
    )
    memory_limit: MemorySize | None = option(
        None,
        group="encoding",
        metavar="SIZE",
        help="the memory this run may reach (8GB, 512MB; default: what the machine has available, its control "
        "group's limit or MemAvailable): a run whose estimated peak is above it is refused before encoding, naming "
        "the --batch-size, --corpus-chunk-size or --max-seq-length that fits",
        stored=False,
    )
    engine: SerializeAsAny[EngineSettings] = option(
        group="encoding",
        default_factory=lambda: engine_settings("local").model_validate({}),
        help="where encoding runs: in this process (local, the default) or on a Ray cluster "
        "(pip install 'embedscope[ray]')",
        stored=False,
    )
    # search
    top_k: PositiveInt = option(
        1000,
        group="search",
        help="documents kept per query (default 1000; with a reranker: stage-1 candidates); retrieval only",
        acts=_ON_SEARCH,
    )
    corpus_chunk_size: PositiveInt = option(
        50_000,
        group="search",
        help="documents encoded and scored at once (default MTEB's 50,000; bounds memory); retrieval only",
        acts=_ON_SEARCH,
    )
    limits: PositiveInt | None = option(
        None, group="search", help="EvalScope limits: first N queries, judged docs only (inflates scores)"
    )
    filter_field: str | None = option(
        None,
        group="search",
        metavar="NAME",
        help="filtered search: each query searches only the documents whose metadata NAME equals its own (a column "
        "of the corpus and queries files, or a key of BEIR's metadata); BM25/FTS5 statistics stay whole-corpus",
        acts=_ON_RETRIEVAL,
    )
    group_by: str | None = option(
        None,
        group="search",
        metavar="FIELD",
        help="query groups: each result also holds, per value of the queries' metadata FIELD (a column of the "
        "queries file, or a key of BEIR's metadata), the group's main score, its bootstrap CI and query count",
        acts=_ON_RETRIEVAL,
    )
    # dense retrieval post-processing, on the vectors as encoded (embedscope.retrieval.compression / .ann)
    truncate_dim: PositiveInt | None = option(
        None,
        group="dense post-processing",
        metavar="D",
        help="dense retrieval on the first D dimensions of each vector (Matryoshka; re-normalised for cosine "
        "models); the cached vectors are reused",
        acts=_ON_RETRIEVAL,
    )
    precision: Literal["fp32", "int8", "binary"] = option(
        "fp32",
        group="dense post-processing",
        help="dense retrieval on fp32 (default) | int8 (per-dimension ranges from the corpus) | binary (sign bits, "
        "Hamming distance) vectors, as sentence-transformers' quantize_embeddings",
        acts=_ON_RETRIEVAL,
    )
    rescore_multiplier: PositiveInt | None = option(
        None,
        group="dense post-processing",
        flags=("--rescore",),
        metavar="R",
        help="with --precision int8/binary: rescore the top R × top-k candidates with the float query",
        acts={**_ON_RETRIEVAL, "precision": ["int8", "binary"]},
    )
    index: dict[str, Any] | None = option(
        None,
        group="dense post-processing",
        metavar="SPEC",
        help="dense retrieval through an approximate faiss index: exact (default) | hnsw:M=32,ef_construction=40,"
        "ef_search=16 | ivfpq:nlist=256,m=16,nbits=8,nprobe=8 (needs embedscope[ann]); reports ann_recall_at_10",
        acts=_ON_RETRIEVAL,
    )
    # documents → passages before retrieval (a sweep axis: chunking.chunk_size: [100, 500, 2000])
    chunking: ChunkingSettings | None = None
    latency_sample: PositiveInt | None = option(
        None,
        group="search",
        metavar="N",
        help="after the run, time N sampled queries one at a time (query encoded by the model, not the cache, then "
        "searched): p50/p95 latency in the result's query_latency; fp32 dense search only; scores unchanged",
        acts=_ON_RETRIEVAL,
    )
    # results and caches
    output_folder: Folder = option(
        "results",
        group="results",
        help="where results go (default results): <folder>/<org__model>/<revision>/<Task>.json; runs with other "
        "settings (--pooling, --query-prompt, --max-seq-length, --dtype, --top-k, --limits …) go to "
        "<folder>/<org__model>/<revision>/experiments/<settings-hash>/",
    )
    overwrite: OverwriteName = option(
        "only-missing",
        group="results",
        nargs="?",
        const="always",
        metavar="STRATEGY",
        help="re-run and replace stored results ('always', the default when the flag is given alone), or "
        "only-missing (the default) | never | only-cache",
        stored=False,
    )
    save_predictions: bool = option(
        False,
        group="results",
        action="store_true",
        help="also write each task's ranked run",
        acts={"task_type": ["Retrieval", "Reranking"]},
    )
    cache: bool = option(
        True,
        group="results",
        flags=("--no-cache",),
        action="store_false",
        help="do not use the embedding cache",
        stored=False,
    )
    cache_dir: Folder | None = option(
        None,
        group="results",
        help="embedding cache folder (default $EMBEDSCOPE_CACHE or ~/.cache/embedscope)",
        stored=False,
    )
    store: str | None = option(
        None,
        group="results",
        metavar="URL",
        help="also record every result in a results store: sqlite:///FILE (one user) or postgresql://USER@HOST/DB (a "
        "team's server); default $EMBEDSCOPE_STORE; its password is never printed or written (embedscope results, "
        "gate, serve read it)",
        stored=False,
    )
    tag: str | None = option(
        None,
        group="results",
        metavar="NAME",
        help="name the recorded run in the store (baseline, v1.3): a gate or the leaderboard refers to it as tag:NAME; "
        "a tag names one run, and moves to this one (needs a store and one model)",
        stored=False,
    )
    show_progress: bool = option(
        True,
        group="results",
        flags=("--no-progress",),
        action="store_false",
        help="no progress bars (they are shown only when stderr is a terminal)",
        stored=False,
    )
    verbosity: Int | None = option(
        None,
        group="results",
        help="EvalScope's logging level: 0 errors only … 3 debug",
        config_only="EvalScope's key; the command line has --verbose",
        stored=False,
        ge=0,
        le=3,
    )

    @field_validator("models")
    @classmethod
    def _some_models(cls, value: list[Any] | None) -> list[Any] | None:
        if value is not None and not value:
            raise ValueError("an empty list: name at least one model, or leave the key out for the default (minilm)")
        return value

    @field_validator("filter_field")
    @classmethod
    def _filter_field(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("an empty field name: name a metadata field (a column of the corpus and queries files)")
        return value

    @field_validator("group_by")
    @classmethod
    def _group_by(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("an empty field name: name a metadata field of the queries (a column of the queries file)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _fold(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        if isinstance(data.get("cache"), (str, Path)):  # `cache: FOLDER` is the cache folder
            data["cache_dir"], data["cache"] = str(data["cache"]), True
        return _engine_from_input(data)

    @field_validator("model")
    @classmethod
    def _one_model(cls, value: Any) -> Any:
        if isinstance(value, (list, tuple, set, bool, int, float)):
            raise ValueError("give one model name or path (several go under 'models')")
        return _checked_model_spec(value)

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, value: Any) -> Any:
        if isinstance(value, EngineSettings):
            return value
        return engine_settings(str(value.get("name", "local"))).model_validate(value)

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        from embedscope.models.device import parse_devices

        return ",".join(parse_devices(value))

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        return ModelOptions._dtype(value)

    @field_validator("output_folder")
    @classmethod
    def _output_folder(cls, value: str) -> str:
        if not str(value).strip():
            raise ValueError("an empty output folder: name a folder (e.g. results)")
        return value

    @field_validator("store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is not None:
            from embedscope.history.kinds import parse_store_url

            parse_store_url(value)  # an unknown scheme or a malformed URL: refused before anything runs
        return value

    @field_serializer("store")
    def _masked_store(self, value: str | None) -> str | None:  # every dump (--print-settings, manifests) masks it
        from embedscope.history.kinds import mask_text

        return mask_text(value) if value is not None else None

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str | None) -> str | None:
        if value is not None:
            from embedscope.history.store import check_tag

            check_tag(value)
        return value

    @field_validator("task_params")
    @classmethod
    def _task_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        return check_finite_tree(value)

    @field_validator("rescore_multiplier")
    @classmethod
    def _rescore(cls, value: int | None, info: ValidationInfo) -> int | None:
        from embedscope.settings.options import refuse_if_idle

        if value is not None:
            refuse_if_idle("rescore_multiplier", {"precision": [str(info.data.get("precision", "fp32"))]})
        return value

    @field_validator("index", mode="before")
    @classmethod
    def _index(cls, value: Any, info: ValidationInfo) -> dict[str, Any] | None:
        """Every option written out (defaults included), so equal indexes record equally; exact search is None."""
        from embedscope.retrieval.ann import ExactIndex, parse_index

        if value is None:
            return None
        spec = parse_index(check_finite_tree(value))
        if isinstance(spec, ExactIndex):
            return None
        precision = info.data.get("precision", "fp32")
        if precision != "fp32":
            raise ValueError(f"index {spec.type} searches fp32 vectors, and the precision is {precision}")
        return spec.model_dump()

    @field_validator("latency_sample")
    @classmethod
    def _latency(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("precision", "fp32") != "fp32":
            raise ValueError("per-query latency is measured for fp32 dense search (exact or an index): drop precision")
        if value is not None and info.data.get("filter_field") is not None:
            raise ValueError("per-query latency is not measured with filter_field: drop one of them")
        return value

    def dense_post_processing(self) -> dict[str, Any]:
        """The dense post-processing settings that depart from MTEB's exact fp32 search (empty when none)."""
        values = {
            "truncate_dim": self.truncate_dim,
            "precision": None if self.precision == "fp32" else self.precision,
            "rescore_multiplier": self.rescore_multiplier,
            "index": self.index,
        }
        return {k: v for k, v in values.items() if v is not None}

    # -- resolved parts ------------------------------------------------------------------------

    def _given_models(self) -> list[tuple[str, Any]]:
        """Each model or pipeline given, with the key that gave it, in order."""
        given: list[tuple[str, Any]] = [("model", self.model)] if self.model is not None else []
        given += [("models", m) for m in self.models or []]
        given += [("pipeline", self.pipeline)] if self.pipeline else []
        return given + [("pipelines", p) for p in self.pipelines]

    @model_validator(mode="after")
    def _each_model_once(self) -> RunSettings:
        """The same model (or pipeline) with the same options, tasks and batch size listed twice would run twice: it is
        refused, naming the key of the second; with other options (a pooling, a backend) it is another model."""
        keys = [key for key, _ in self._given_models()]
        runs = self.model_runs()
        for i, run in enumerate(runs):
            if any(_same_run(run, earlier) for earlier in runs[:i]):
                raise SettingError(
                    keys[i],
                    f"{{{keys[i]}}}: {_model_label(run.model)} is given twice with the same options (it would "
                    "run twice): give it once",
                )
        return self

    def model_runs(self) -> list[ModelRun]:
        """One :class:`ModelRun` per model or pipeline, each with its options (run-wide ones under its own)."""
        given: list[Any] = [entry for _, entry in self._given_models()]
        if not given:
            given = [DEFAULT_MODEL]
        shared = self.model_options.given()
        runs = []
        for entry in given:
            if isinstance(entry, PipelineConfig):
                runs.append(ModelRun(entry.spec(), dict(shared), entry.tasks))
            elif isinstance(entry, ModelEntry):
                own = entry.model_dump(exclude_none=True, exclude={"model", "tasks", "batch_size"})
                runs.append(ModelRun(entry.model, {**shared, **own}, entry.tasks, entry.batch_size))
            else:
                runs.append(ModelRun(entry, dict(shared), None))
        return runs

    def task_specs(self) -> list[Any] | None:
        """The tasks asked for (names, folders, task objects), or None for the default suite."""
        tasks: list[Any] = list(self.tasks) + [c.task() for c in self.custom_tasks]
        if self.benchmark:
            from embedscope.tasks.catalog import benchmark_specs

            specs, missing = benchmark_specs(self.benchmark)
            if missing:
                logger.warning(
                    "%s: %d task(s) are not text tasks embedscope runs, left out: %s",
                    self.benchmark,
                    len(missing),
                    ", ".join(missing[:8]) + (" …" if len(missing) > 8 else ""),
                )
            if not specs:
                raise ConfigError(f"{self.benchmark}: none of its tasks is a text task embedscope runs")
            tasks += specs
        return tasks or None

    # -- views for the layers below: computed from the fields above, where each default lives ---------------

    def search_options(self, **resolved: Any) -> SearchOptions:
        """The search's :class:`~embedscope.retrieval.base.SearchOptions`: each of its fields is the setting of the
        same name (chunking as the data layer's options); ``resolved`` overrides what the runner works out per model
        (``batch_size``, ``show_progress``)."""
        from embedscope.retrieval.base import SearchOptions

        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(SearchOptions)}
        values["chunking"] = self.chunking.options() if self.chunking is not None else None
        return SearchOptions(**{**values, **resolved})

    def score_settings(self) -> dict[str, Any]:
        """The search settings that change a score, as results record them (chunking as its record): those every
        result records, and the others when they are not their default."""
        from embedscope.retrieval.base import SearchOptions

        always, never = SearchOptions.recorded("always"), SearchOptions.recorded("never")
        out: dict[str, Any] = {}
        for f in dataclasses.fields(SearchOptions):
            value = getattr(self, f.name)
            if f.name in never or (f.name not in always and value == type(self).model_fields[f.name].default):
                continue
            out[f.name] = value.record() if isinstance(value, ChunkingSettings) else value
        return out

    def result_record(self, model: Any, pipeline: bool = False) -> dict[str, Any]:
        """The ``run_settings`` every result of ``model`` (a ``pipeline``: its fingerprint covers every stage)
        records: the model's identity and :meth:`score_settings`."""
        from embedscope.results.settings import run_settings

        return run_settings(model, self.score_settings(), pipeline)

    def experiment_key(self, model_options: Mapping[str, Any] | None) -> dict[str, Any]:
        """What this run sets apart from a plain run of the model (MTEB's ``experiment_kwargs``, whose hash names the
        experiments folder): the model options that change a vector, the dtype, every score setting that is not its
        default, and the task parameters; empty for a plain run."""
        from embedscope.results.settings import model_kwargs

        kwargs = model_kwargs(model_options, self.dtype)
        defaults = type(self).model_fields
        kwargs.update({k: v for k, v in self.score_settings().items() if v != defaults[k].default})
        if self.task_params:
            kwargs["task_params"] = dict(self.task_params)  # another protocol: its own folder, as mteb's
        return kwargs


@dataclass(frozen=True)
class ModelRun:
    """One model of a run and its options (``load_encoder``'s: pooling, prompts, device, dtype …)."""

    model: Any
    options: dict[str, Any]
    tasks: list[Any] | None = None
    batch_size: int | None = None  # its own; else the run's


def _same_run(a: ModelRun, b: ModelRun) -> bool:
    """Whether two model runs are the same: equal names, paths or pipeline specs (one model object: itself), equal
    options, tasks and batch size."""
    try:
        if isinstance(a.model, (str, Mapping)) and isinstance(b.model, (str, Mapping)):
            same = bool(a.model == b.model)
        else:
            same = a.model is b.model
        return same and bool((a.options, a.tasks, a.batch_size) == (b.options, b.tasks, b.batch_size))
    except (TypeError, ValueError):  # objects that cannot say (arrays inside): not known to be the same
        return False


def _model_label(model: Any) -> str:
    """A model as an error names it: its spec, the pipeline's name or stages, the object."""
    from embedscope.messages import clip

    if isinstance(model, Mapping):
        stages = [*(model.get("retrievers") or []), *(model.get("rerankers") or [])]
        name = model.get("name") or "+".join(s if isinstance(s, str) else str(s.get("type", s)) for s in stages)
        return f"the pipeline {clip(name)}"
    return clip(model)


def flag_keys() -> Sequence[str]:
    """The top-level settings keys, and each engine's flat ``NAME_FIELD`` keys."""
    keys = [k for k in RunSettings.model_fields if k != "engine"] + ["engine"]
    for name in engine_names():
        keys += [f"{name}_{f}" for f in engine_settings(name).model_fields if f != "name"]
    return keys


register_root(RunSettings)
