"""The memory guard: a run's peak memory estimated before anything is encoded, and a run that would not fit refused in
one line naming the setting that makes it fit.

For each model and each of its tasks (:mod:`embedscope.evaluation.workload`: the texts the task encodes, per call,
and the search it makes), the peak resident memory of the process is estimated as

.. code-block:: text

    peak = resident + runtime + weights + texts + max(encode phase of each call, search phase)

    resident   the process's resident set now (the devices resolved: torch imported)
    runtime    the model's library when it is not imported yet (sentence-transformers 300 MB, ONNX Runtime 20 MB …),
               and a CUDA device's context on the host (500 MB, stated) when none is made yet
    weights    the model's weight files when not loaded yet (ONNX Runtime, OpenVINO: max(2 w, w + 128 MB))
    texts      2 × Σ (characters + 100) over the task's distinct texts (one copy read, one in flight)

    encode phase of call c (n texts, longest L tokens untruncated, T = min(L, max length), b = min(batch, n)):
        held       the vectors of the task's earlier calls, Σ n_j × d × 4 (a retrieval task: its queries')
        vectors    4 × n × d × 4: the batches' outputs, their stack, the cache's copy and the finite check
                   (a corpus is encoded corpus_chunk_size texts a call)
        activations, when the model encodes in this process on the CPU:
            64 MB                              the runtime's workspaces and thread pools
          + max(b, min(64, n)) × L × 256       the tokenizer's encodings before truncation (a batch's, or the 64
                                               texts whose tokens the truncation count reads at once)
          + torch:  b × T × (4 H + 2 I) × v    a layer's input, query, key, value and output, its feed-forward's
                                               two intermediates (each layer's freed before the next)
                  + 2 × b × T²                 fused attention's padding mask (scores never held per head)
                    (eager attention instead: 2 × b × heads × T² × 4, the scores and their softmax)
                  + 2 × b × T × V × 4          a sparse model's vocabulary-wide logits
          + graph:  layers × b × (4 T H + heads × T²) × 4    ONNX Runtime / OpenVINO keep every layer's buffers
    search phase of a dense retrieval (q queries, D documents, c = min(corpus_chunk_size, D), k = min(top_k+1, D)):
        vectors    2 × (q + c) × d × 4        the queries and one corpus chunk, and their normalised copies
        scores     2 × min(q, 4096) × c × 4   (on the CPU) the score matrix and its top-k selection
                 + 3 × q × k × 16             the running top-k (scores and indices) and its merges
        index      2 × D × d × 4              int8/binary or an approximate index: the whole corpus at once

H, I, heads, layers, V (vocabulary) and the maximum length come from the model's configuration files
(:mod:`embedscope.models.shape`), d is its vector's dimension and v the bytes of its dtype (4, or 2 for
fp16/bf16); token counts are the model's tokenizer's (the longest texts of each call by characters), else one per 4
bytes. Models behind an API, pipelines (BM25, FTS5; their index as 3 × the corpus' characters) and model objects
count no activations. On an accelerator the activations and the score matrix are the accelerator's (encoding halves
its batch on out-of-memory), so only host memory is estimated. The constants were measured on torch 2.13 and
onnxruntime 1.31 on the CPU (``tests/evaluation/test_memory.py`` holds accepted runs to within 2× of their measured
peak).

The run makes the estimate once its model is built (a cold run's weights and library are then resident; a warm
run's lazy model counts them) and it knows which tasks its stored results do not already hold, before any of them
encodes. When the peak is above the memory available (``memory_limit``, else what the machine has:
:func:`embedscope.profiling.available_bytes`), the run is refused then, naming the first of
``batch_size``, ``corpus_chunk_size`` and ``model_options.max_seq_length`` that alone makes it fit, halved from its
value until it does.

>>> from embedscope.models.shape import ModelShape
>>> shape = ModelShape(hidden=32, layers=2, heads=2, intermediate=64, max_length=512, dim=32, vocab=100,
...                    weight_bytes=0, runtime="torch")
>>> sizes = TaskSizes("T", calls=((("document", 1000, 600, False),),), text_bytes=0)
>>> parts = estimate_memory(sizes, shape, Knobs(batch_size=64), resident=0)
>>> parts["activations"] == 64 * 2**20 + 64 * 600 * 256 + 64 * 512 * (4 * 32 + 2 * 64) * 4 + 2 * 64 * 512**2
True
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from embedscope.errors import SettingError
from embedscope.evaluation.workload import WorkSummary, summarize, task_workload
from embedscope.models.base import COUNT_SLICE
from embedscope.models.device import CPU_BATCH_SIZE
from embedscope.models.shape import ModelShape, model_shape, token_counter
from embedscope.profiling import available_bytes, format_bytes, parse_bytes, resident_bytes
from embedscope.settings.run import ModelRun, RunSettings
from embedscope.tasks.base import Task
from embedscope.types import Role

logger = logging.getLogger(__name__)

MB = 1000**2
WORKSPACE = 64 * 2**20  # the runtime's workspaces and thread pools during an encode call
TOKENIZER_BYTES = 256  # the tokenizer's encodings, per token of the batch before truncation (measured: 180-340)
QUERY_BLOCK = 4096  # dense search scores this many queries at once (retrieval.dense.top_k_search)
API_DIMENSION = 1536  # a model behind an API whose dimensions are not given: assumed
OBJECT_DIMENSION = 768  # a model object that does not say its dimension: assumed
KNOBS = ("batch_size", "corpus_chunk_size", "model_options.max_seq_length")


@dataclass(frozen=True)
class TaskSizes:
    """What one task makes a model hold, as plain numbers (the estimator's input): each split's encode calls, each as
    ``(role, texts, longest text's tokens before truncation, chunked)``, the characters (plus ``workload.TEXT_OVERHEAD``
    each) of its distinct texts, and its largest dense search's queries and documents (0: none). A retrieval task's
    calls are its query call and its corpus call (``chunked``: dense search encodes it ``corpus_chunk_size`` texts at a
    time)."""

    task: str
    calls: tuple[tuple[tuple[Role, int, int, bool], ...], ...]
    text_bytes: int
    queries: int = 0
    documents: int = 0


@dataclass(frozen=True)
class Knobs:
    """The settings the estimate depends on (those the guard may name first)."""

    batch_size: int = CPU_BATCH_SIZE
    corpus_chunk_size: int = 50_000
    max_length: int | None = None  # None: the model's own
    top_k: int = 1000
    post_processes: bool = False  # int8/binary or an approximate index: the whole corpus is held at once

    def with_key(self, key: str, value: int) -> Knobs:
        """These knobs with the setting at ``key`` (one of :data:`KNOBS`) set to ``value``."""
        if key == "batch_size":
            return replace(self, batch_size=value)
        if key == "corpus_chunk_size":
            return replace(self, corpus_chunk_size=value)
        return replace(self, max_length=value)

    def value(self, key: str, shape: ModelShape | None) -> int | None:
        if key == "model_options.max_seq_length":
            return self.max_length or (shape.max_length if shape is not None else None)
        return int(getattr(self, key))


@dataclass(frozen=True)
class ModelPlan:
    """A model of the run as the estimate sees it: its ``kind`` (``local``, ``api``, ``object``, ``pipeline``), shape
    (local models), vector dimension, whether it encodes and searches on this host's CPU, and the bytes its weights
    and library will add when they load (0 once they have)."""

    name: str
    kind: str
    shape: ModelShape | None
    dim: int
    device: str
    host_encoding: bool
    host_search: bool
    batch_size: int
    weights: int
    options: Mapping[str, Any] = field(default_factory=dict)
    runtime: int = 0  # what its library (and a CUDA context) will add when imported


@dataclass(frozen=True)
class MemoryEstimate:
    """One model on one task: each part of its estimated peak (bytes) and the memory available."""

    model: str
    task: str
    parts: Mapping[str, int]
    available: int

    @property
    def peak(self) -> int:
        return sum(self.parts.values())

    @property
    def fits(self) -> bool:
        return self.peak <= self.available

    def breakdown(self) -> str:
        """``resident 550 MB + weights 91 MB + …`` (the parts that are not zero)."""
        return " + ".join(f"{k} {format_bytes(v)}" for k, v in self.parts.items() if v)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "task": self.task, "peak": self.peak, "available": self.available, **self.parts}


# -- the formula ----------------------------------------------------------------------------------------------


def activation_bytes(
    shape: ModelShape, batch: int, longest: int, max_length: int | None = None, texts: int | None = None
) -> int:
    """One batch's host memory while the model encodes it (see the module docstring): ``batch`` texts of a call of
    ``texts``, the longest of ``longest`` tokens before truncation at ``max_length`` (default: the model's)."""
    tokens = min(longest, max_length or shape.max_length)
    b, t, v = batch, tokens, shape.bytes_per_value
    out = WORKSPACE + max(b, min(COUNT_SLICE, texts or b)) * longest * TOKENIZER_BYTES
    if shape.runtime == "torch":
        out += b * t * (4 * shape.hidden + 2 * shape.intermediate) * v
        out += 2 * b * shape.heads * t * t * 4 if shape.attention == "eager" else 2 * b * t * t
        if shape.sparse:
            out += 2 * b * t * shape.vocab * 4
    elif shape.runtime == "graph":
        out += shape.layers * b * (4 * t * shape.hidden + shape.heads * t * t) * 4
    return out


def estimate_memory(
    sizes: TaskSizes,
    shape: ModelShape | None,
    knobs: Knobs,
    *,
    resident: int,
    runtime: int = 0,
    weights: int = 0,
    dim: int | None = None,
    host_encoding: bool = True,
    host_search: bool = True,
    lexical: bool = False,
) -> dict[str, int]:
    """The parts of one task's estimated peak (bytes), in the module docstring's terms: ``resident``, ``runtime``,
    ``weights``, ``texts`` and the largest phase's ``activations``, ``vectors``, ``scores`` and ``index``. ``lexical``: a
    pipeline's search (its index by the corpus' characters, no vectors)."""
    d = dim if dim is not None else (shape.dim if shape is not None else OBJECT_DIMENSION)
    phases: list[dict[str, int]] = []
    if lexical:
        k = min(knobs.top_k + 1, max(sizes.documents, 1))
        phases.append({"index": 3 * sizes.text_bytes, "scores": 3 * sizes.queries * k * 16})
    else:
        for split in sizes.calls:
            held = 0  # the vectors of the split's earlier calls
            for _role, n, longest, chunked in split:
                if n == 0:
                    continue
                n_call = min(n, knobs.corpus_chunk_size) if chunked else n
                phase = {"vectors": held + 4 * n_call * d * 4, "activations": 0}
                if host_encoding and shape is not None:
                    batch = min(knobs.batch_size, n_call)
                    phase["activations"] = activation_bytes(shape, batch, longest, knobs.max_length, n_call)
                phases.append(phase)
                held += (0 if chunked else n) * d * 4
        if sizes.documents:
            q, docs = sizes.queries, sizes.documents
            chunk = min(knobs.corpus_chunk_size, docs)
            k = min(knobs.top_k + 1, docs)
            scores = 3 * q * k * 16 + (2 * min(q, QUERY_BLOCK) * chunk * 4 if host_search else 0)
            search = {"vectors": 2 * (q + chunk) * d * 4, "scores": scores}
            if knobs.post_processes:
                search["index"] = 2 * docs * d * 4
            phases.append(search)
    largest = max(phases, key=lambda p: sum(p.values()), default={})
    parts = {"resident": resident, "runtime": runtime, "weights": weights, "texts": 2 * sizes.text_bytes}
    for name in ("activations", "vectors", "scores", "index"):
        parts[name] = largest.get(name, 0)
    return parts


# -- a task's sizes and a model's plan --------------------------------------------------------------------------


def _longest(texts: Sequence[str], count: Callable[[Sequence[str]], list[int]] | None) -> int:
    """The longest of ``texts``' tokens before truncation: the model's tokenizer's, else one per 4 bytes."""
    if not texts:
        return 0
    if count is not None:
        return max(count(texts))
    from embedscope.models.api.encoder import estimate_tokens

    return max(estimate_tokens(t) for t in texts)


def task_sizes(work: WorkSummary, count: Callable[[Sequence[str]], list[int]] | None) -> TaskSizes:
    """A task's :class:`TaskSizes`, the longest texts' tokens counted by ``count`` (a model's tokenizer; None: 4
    bytes a token)."""
    calls = tuple(
        tuple((c.role, c.texts, _longest(c.longest, count), c.chunked) for c in split) for split in work.splits
    )
    return TaskSizes(work.task, calls, work.text_bytes, work.queries, work.documents)


RUNTIME_BYTES = {  # what importing a backend's library adds to the resident set (torch itself is in it already:
    "sentence_transformers": 300 * MB,  # resolving the devices imports it); measured with torch 2.13, ST 5
    "onnxruntime": 20 * MB,
    "openvino": 20 * MB,
    "model2vec": 5 * MB,
}


ACCELERATOR_CONTEXT = 500 * MB  # host memory a CUDA context and its kernels take once used (stated, not measured)


def _context_bytes(device: str) -> int:
    """The host memory a CUDA device's context will add, when this process has not made it yet."""
    import sys

    from embedscope.models.device import device_kind

    if device_kind(device) != "cuda":
        return 0
    torch = sys.modules.get("torch")
    return 0 if torch is not None and torch.cuda.is_initialized() else ACCELERATOR_CONTEXT


def _runtime_module(shape: ModelShape | None, options: Mapping[str, Any]) -> str | None:
    """The library a local model's backend loads it with."""
    if shape is None:
        return None
    if shape.runtime == "static":
        return "model2vec"
    if shape.runtime == "graph":
        backend = str(options.get("backend") or "onnx")
        return "openvino" if backend.startswith("openvino") else "onnxruntime"
    return "sentence_transformers"


def runtime_bytes(shape: ModelShape | None, options: Mapping[str, Any]) -> int:
    """What the model's library will add to the resident set when it is imported (0 once it is: a warm run whose
    vectors are all cached never imports it, and the guard does not either)."""
    import sys

    module = _runtime_module(shape, options)
    return RUNTIME_BYTES[module] if module is not None and module not in sys.modules else 0


def _loaded(model: Any) -> bool:
    """Whether a built encoder's model is in memory (a warm run's lazy encoder loads only when a text is missing)."""
    from embedscope.models.lazy import LazyEncoder

    inner = getattr(model, "encoder", model)  # behind the embedding cache
    return not (isinstance(inner, LazyEncoder) and not inner.loaded)


def _pipeline_label(spec: Any) -> str:
    """A pipeline as a message names it: its name, else its stages (``bm25+minilm``)."""
    if not isinstance(spec, Mapping):
        return str(spec)
    stages = [*(spec.get("retrievers") or []), *(spec.get("rerankers") or [])]
    labels = [s if isinstance(s, str) else str(s.get("type", "stage")) for s in stages]
    return str(spec.get("name") or "+".join(labels) or "pipeline")


def plan_model(
    entry: ModelRun, settings: RunSettings, model: Any = None, placement: Mapping[str, Any] | None = None
) -> ModelPlan:
    """How the estimate sees ``entry``'s model (see :class:`ModelPlan`): the ``model`` the run built (placed as
    ``placement`` says), or, before any is built (``run --dry-run``), as its spec and options say; nothing is loaded
    here."""
    from collections.abc import Mapping as MappingType

    from embedscope.models.api import is_api_model
    from embedscope.models.device import default_batch_size, device_kind
    from embedscope.retrieval.pipeline import is_pipeline_spec
    from embedscope.retrieval.roles import model_roles

    spec, options = entry.model, dict(entry.options)
    batch = entry.batch_size or settings.batch_size
    built = model is not None
    if (
        isinstance(spec, MappingType)
        or (isinstance(spec, str) and is_pipeline_spec(spec))
        or (built and "encoder" not in model_roles(model))
    ):
        name = str(getattr(model, "name", None) or _pipeline_label(spec))
        return ModelPlan(name, "pipeline", None, 0, "cpu", False, True, batch or default_batch_size("cpu"), 0, options)
    if isinstance(spec, str) and is_api_model(spec, options):
        dim = int(options.get("dimensions") or API_DIMENSION)
        return ModelPlan(spec, "api", None, dim, "cpu", False, True, batch or default_batch_size("cpu"), 0, options)
    if not isinstance(spec, str):  # a model object the caller holds: already resident
        device = str(getattr(spec, "device", "cpu")).split(",")[0]
        said = getattr(spec, "embed_dim", None)
        host = device_kind(device) == "cpu"
        name = str(getattr(spec, "name", type(spec).__name__))
        dim = int(said) if isinstance(said, int) and said > 0 else OBJECT_DIMENSION
        return ModelPlan(
            name, "object", None, dim, device, False, host, batch or default_batch_size(device), 0, options
        )
    if built:
        device = str((placement or {}).get("device", "cpu")).split(",")[0]  # as the run resolved it
        several = "," in str((placement or {}).get("device", ""))
    else:
        devices = settings.engine.devices(options.get("device") or settings.device)
        device, several = devices[0], len(devices) > 1
    local = settings.engine.name == "local"
    host = local and device_kind(device) == "cpu" and not several
    shape = model_shape(spec, {**options, "dtype": options.get("dtype") or settings.dtype})
    loaded = built and _loaded(model)
    weights = 0
    if shape is not None and local and not loaded:
        w = shape.weight_bytes
        weights = max(2 * w, w + 128 * MB) if shape.runtime == "graph" else w
    dim = shape.dim if shape is not None else OBJECT_DIMENSION
    batch = batch or default_batch_size(device)
    runtime = runtime_bytes(shape, options) + _context_bytes(device) if local else 0
    return ModelPlan(spec, "local", shape, dim, device, host, host, batch, weights, options, runtime=runtime)


def estimate_task(
    plan: ModelPlan,
    sizes: TaskSizes,
    settings: RunSettings,
    *,
    resident: int,
    available: int,
    knobs: Knobs | None = None,
) -> MemoryEstimate:
    """``plan``'s model on one task (:func:`estimate_memory`), with the run's settings or ``knobs``."""
    knobs = knobs if knobs is not None else run_knobs(plan, settings)
    parts = estimate_memory(
        sizes,
        plan.shape,
        knobs,
        resident=resident,
        runtime=plan.runtime,
        weights=plan.weights,
        dim=plan.dim,
        host_encoding=plan.host_encoding,
        host_search=plan.host_search,
        lexical=plan.kind == "pipeline",
    )
    return MemoryEstimate(plan.name, sizes.task, parts, available)


def run_knobs(plan: ModelPlan, settings: RunSettings) -> Knobs:
    """The settings the estimate of ``plan``'s model depends on, as this run sets them."""
    max_length = plan.options.get("max_seq_length")
    return Knobs(
        batch_size=plan.batch_size,
        corpus_chunk_size=settings.corpus_chunk_size,
        max_length=int(max_length) if max_length is not None else None,
        top_k=settings.top_k,
        post_processes=settings.precision != "fp32" or settings.index is not None,
    )


def memory_available(settings: RunSettings) -> int:
    """``memory_limit``, else what this process may grow to on this machine."""
    return parse_bytes(settings.memory_limit) if settings.memory_limit is not None else available_bytes()


# -- the guard ----------------------------------------------------------------------------------------------------


def _fitting(
    plan: ModelPlan, sizes: TaskSizes, settings: RunSettings, estimate: MemoryEstimate
) -> tuple[str, int, MemoryEstimate] | None:
    """The first of :data:`KNOBS` that alone brings the estimate within the memory available, and its value (the
    current one halved until it fits), or None."""
    knobs = run_knobs(plan, settings)
    calls = [call for split in sizes.calls for call in split]
    largest_call = max((n for _, n, _, _ in calls), default=0)
    longest = max((t for _, _, t, _ in calls), default=0)
    starts = {
        "batch_size": min(knobs.batch_size, largest_call) if plan.host_encoding and plan.shape is not None else 0,
        "corpus_chunk_size": min(knobs.corpus_chunk_size, sizes.documents) if plan.kind != "pipeline" else 0,
        "model_options.max_seq_length": (
            min(knobs.value("model_options.max_seq_length", plan.shape) or 0, longest)
            if plan.host_encoding and plan.shape is not None and plan.shape.layers
            else 0
        ),
    }
    floors = {"batch_size": 1, "corpus_chunk_size": 1, "model_options.max_seq_length": 8}
    for key in KNOBS:
        value = starts[key]
        while value // 2 >= floors[key]:
            value //= 2
            tried = estimate_task(
                plan,
                sizes,
                settings,
                resident=estimate.parts["resident"],
                available=estimate.available,
                knobs=knobs.with_key(key, value),
            )
            if tried.fits:
                return key, value, tried
    return None


def refusal(plan: ModelPlan, sizes: TaskSizes, settings: RunSettings, estimate: MemoryEstimate) -> SettingError:
    """The one-line error of a run whose estimate does not fit, naming the setting that would."""
    available = format_bytes(estimate.available)
    where = f"{{memory_limit}} {available}" if settings.memory_limit is not None else f"{available} available"
    head = (
        f"{plan.name} on {sizes.task}: estimated peak memory {format_bytes(estimate.peak)} > {where} "
        f"({estimate.breakdown()})"
    )
    found = _fitting(plan, sizes, settings, estimate)
    if found is not None:
        key, value, tried = found
        return SettingError(key, f"{head}: {{{key}}} {value} fits (estimated {format_bytes(tried.peak)})")
    return SettingError(
        "memory_limit",
        f"{head}: no one of {{batch_size}}, {{corpus_chunk_size}}, {{model_options.max_seq_length}} brings it within; "
        "use a machine with more memory, fewer texts ({limits}), or a higher {memory_limit} if the estimate is "
        "too cautious",
    )


class Workloads:
    """Each task's workload summary (:class:`~embedscope.evaluation.workload.WorkSummary`), sized once per run: every
    model of the run shares it."""

    def __init__(self, settings: RunSettings) -> None:
        self.options = settings.search_options(show_progress=False)
        self._found: dict[int, tuple[Task, WorkSummary]] = {}  # the task kept: its id stays its own

    def __call__(self, task: Task) -> WorkSummary:
        if id(task) not in self._found:
            self._found[id(task)] = (task, summarize(task_workload(task, self.options)))
        return self._found[id(task)][1]


def planned_tasks(entry: ModelRun, tasks: list[Task] | None, settings: RunSettings, plan: ModelPlan) -> list[Task]:
    """The tasks ``entry``'s model will run, as far as is known before it loads (those its kind can evaluate)."""
    from embedscope.evaluation.plan import entry_tasks
    from embedscope.retrieval.roles import model_roles
    from embedscope.tasks.types import get_task_type

    if plan.kind == "object":
        roles = set(model_roles(entry.model))
    elif plan.kind == "pipeline":
        roles = {"searcher", "candidate_scorer"}
    else:
        roles = {"encoder"}
    chosen = [t for t in entry_tasks(tasks, entry, settings) if set(get_task_type(t.type).model_roles) & roles]
    if plan.kind == "pipeline" and tasks is None:
        chosen = [t for t in chosen if "searcher" in get_task_type(t.type).model_roles]
    return chosen


def sized(task: Task) -> bool:
    """Whether a task is sized before the run: not a screen's proxy drawn within the full run's calls (its draw
    waits for them)."""
    return getattr(task, "encoder_within", None) is None


def guard_memory(
    plan: ModelPlan, tasks: Sequence[Task], settings: RunSettings, workloads: Workloads
) -> MemoryEstimate | None:
    """The largest estimate over ``tasks`` (those a model will run, before any encodes; its model as ``plan``:
    :func:`plan_model`); a :class:`SettingError` naming the setting that fits when one is above the memory available
    (see the module docstring). None without a task to size."""
    chosen = [t for t in tasks if sized(t)]
    if not chosen:
        return None
    count = token_counter(plan.shape.tokenizer) if plan.shape is not None else None
    all_sizes = [task_sizes(workloads(t), count) for t in chosen]
    resident, available = resident_bytes(), memory_available(settings)
    estimates = [estimate_task(plan, s, settings, resident=resident, available=available) for s in all_sizes]
    for sizes, estimate in zip(all_sizes, estimates):
        if not estimate.fits:
            raise refusal(plan, sizes, settings, estimate)
    largest = max(estimates, key=lambda e: e.peak)
    logger.info(
        "%s: estimated peak memory %s of %s available (%s, %s)",
        plan.name,
        format_bytes(largest.peak),
        format_bytes(available),
        largest.task,
        largest.breakdown(),
    )
    return largest
