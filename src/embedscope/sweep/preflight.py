"""Everything a sweep or a screen will need, checked before the first point or model runs, in one pass.

An hour of sweep must not end on an output path. :class:`Preflight` gathers every problem it finds — each point's
settings, tasks and pipeline stages (built as settings, never as models), each model's availability (an alias that is
installed, a local path that exists, a hub id in the local cache or reachable), each output file's and folder's
writability — and :meth:`Preflight.raise_if_any` turns them into one ConfigError whose single line numbers them all
(a problem several points share is listed once, with the first point it was seen on and how many more).

>>> check = Preflight("sweep")
>>> check.add("--csv out", "it is a folder: give a file name")
>>> check.add("point model=./a", "./a: no such file or folder")
>>> check.add("point model=./a, top_k=5", "./a: no such file or folder")
>>> check.message()
'sweep cannot start, 2 problems (nothing ran): (1) --csv out: it is a folder: give a file name; (2) point model=./a (and 1 more point): ./a: no such file or folder'
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, EmbedscopeError, UnknownNameError
from embedscope.evaluation.plan import check_run
from embedscope.settings.run import ModelRun, RunSettings


@dataclass
class Preflight:
    """The problems found so far, each with where it was seen (first seen first)."""

    what: str
    unit: str = "point"  # what the places are (a sweep's points, a screen's models)
    problems: dict[str, list[str]] = field(default_factory=dict)

    def add(self, where: str, problem: str) -> None:
        self.problems.setdefault(problem, []).append(where)

    def check(self, where: str, step: Callable[[], Any]) -> Any:
        """Run ``step``; a user error it raises is recorded against ``where`` (None returned)."""
        try:
            return step()
        except EmbedscopeError as e:
            self.add(where, _one_line(e))
            return None

    def message(self) -> str:
        parts = []
        for n, (problem, places) in enumerate(self.problems.items(), start=1):
            unit = self.unit + ("s" if len(places) > 2 else "")
            more = f" (and {len(places) - 1} more {unit})" if len(places) > 1 else ""
            parts.append(f"({n}) {places[0]}{more}: {problem}")
        count = f"{len(parts)} problem{'s' if len(parts) != 1 else ''}"
        return f"{self.what} cannot start, {count} (nothing ran): " + "; ".join(parts)

    def raise_if_any(self) -> None:
        if self.problems:
            raise ConfigError(self.message())


def _one_line(error: BaseException) -> str:
    text = getattr(error, "message", None) or str(error)
    return " ".join(str(text).split())


# -- output paths ---------------------------------------------------------------------------------------------


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def output_file_problem(path: str | Path) -> str | None:
    """Why a file cannot be written at ``path`` (a folder there, a file where a folder must be, no write
    permission), or None. Nothing is created."""
    target = Path(path)
    if str(path).strip() == "":
        return "empty path: give a file name"
    if target.is_dir():
        return f"{target} is a folder: give a file name"
    if target.exists():
        return None if os.access(target, os.W_OK) else f"{target}: no permission to write it"
    return _folder_problem(target.parent)


def output_folder_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be (or become) a folder embedscope writes in, or None. Nothing is created."""
    if str(path).strip() == "":
        return "empty path: give a folder"
    return _folder_problem(Path(path))


def _folder_problem(folder: Path) -> str | None:
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        return f"{existing} is a file, so {folder} cannot be a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing}: no permission to write in it"
    return None


# -- models ---------------------------------------------------------------------------------------------------


def _looks_like_path(spec: str) -> bool:
    return spec.startswith(("/", ".", "~")) or "\\" in spec or spec.count("/") > 1 or spec.endswith(".onnx")


def check_model_available(spec: str, options: Mapping[str, Any]) -> None:
    """``spec`` (with its load options) can be loaded here without loading it: an installed alias, an existing path,
    or a hub id in the local cache (or the hub reachable); the backend and calibration options fit. A one-line
    error otherwise, as :func:`~embedscope.models.specs.load_encoder` would raise it later."""
    from embedscope.models.api import is_api_model
    from embedscope.models.folder import hub_offline, snapshot_folder
    from embedscope.models.specs import ALIASES, alias_path, load_encoder, normalize_backend

    given = {k: v for k, v in options.items() if v is not None}
    if is_api_model(spec, given):  # a service: its options, base URL and key are checked as the encoder is made
        load_encoder(spec, **given)  # (no request is sent until it encodes)
        return
    backend = normalize_backend(options.get("backend"))
    key = spec.strip().lower()
    if key in ALIASES:
        alias_path(key)
    elif not Path(spec).expanduser().exists():
        if _looks_like_path(spec):
            raise ConfigError(f"{spec}: no such file or folder")
        if "/" not in spec:
            close = UnknownNameError("model alias", spec, ALIASES)
            if "Did you mean" in close.message:
                hint = "A local path or a hub id (org/name) also works."
                raise UnknownNameError("model alias", spec, ALIASES, hint=hint)
        if snapshot_folder(spec, options.get("revision")) is None and hub_offline():
            raise ConfigError(f"model {spec!r}: not in the local hub cache and the Hugging Face hub is offline")
    calibration = options.get("calibration")
    if calibration is not None:
        if backend != "openvino-int8":
            raise ConfigError(
                f"calibration applies to --backend openvino-int8 only, not {backend or 'the default backend'}"
            )
        if not Path(str(calibration)).expanduser().is_file():
            raise ConfigError(f"calibration {calibration}: no such file")


_MODEL_STAGES = ("dense", "colbert", "cross-encoder")


def check_pipeline(spec: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """A pipeline spec (retrievers, fusion, rerankers) checked as settings: every stage's kind and options, every
    stage model's availability, fusion against the number of retrievers. No model loads."""
    from embedscope.retrieval import pipeline as p

    retrievers = spec.get("retrievers") or []
    retrievers = [retrievers] if isinstance(retrievers, (str, Mapping)) else list(retrievers)
    rerankers = spec.get("rerankers") or []
    rerankers = [rerankers] if isinstance(rerankers, (str, Mapping)) else list(rerankers)
    if not retrievers and not rerankers:
        raise ConfigError("a pipeline needs a retriever or a reranker")
    for stage in retrievers:
        _check_stage(stage, options, reranker=False)
    for stage in rerankers:
        parsed = p.parse_stage(stage)
        parsed.pop("top_k", None)
        _check_stage(parsed, options, reranker=True)
    fusion = p.parse_fusion(spec.get("fusion"))
    if fusion is not None and len(retrievers) == 1:
        raise ConfigError("fusion needs two or more retrievers")
    weights = getattr(fusion, "weights", None)
    if weights is not None and len(weights) != len(retrievers):
        raise ConfigError(f"fusion weights: {len(weights)} given for {len(retrievers)} retrievers")


def _check_stage(stage: Any, options: Mapping[str, Any], reranker: bool) -> None:
    from embedscope.retrieval import pipeline as p

    parsed = p.parse_stage(stage)
    kind = parsed.pop("type")
    if kind is None:
        kind = p._detect_reranker_kind(str(parsed.get("model", ""))) if reranker else "dense"
    allowed = p.RERANKER_KINDS if reranker else p.RETRIEVER_KINDS
    if kind not in allowed:
        raise UnknownNameError("reranker type" if reranker else "retriever type", kind, allowed)
    taken = p._take(dict(parsed), p.STAGE_OPTIONS[kind], kind)  # each kind's options: declared once, in the pipeline
    if kind == "cross-encoder" and "model" not in taken:
        raise ConfigError(
            "cross-encoder stage needs a model (cross-encoder:PATH or {type: cross-encoder, model: PATH})"
        )
    if kind in _MODEL_STAGES:
        model = str(taken.get("model", "minilm"))
        own = {k: v for k, v in {**options, **taken}.items() if k in ("backend", "revision", "calibration")}
        check_model_available(model, own if kind == "dense" else {"revision": own.get("revision")})


def _encodes(run: ModelRun) -> bool | None:
    """Whether the run's model is an encoder (True), a pipeline (False), or a model object (None: not known)."""
    from embedscope.retrieval.pipeline import is_pipeline_spec, parse_stage

    model = run.model
    if isinstance(model, str):
        return not is_pipeline_spec(model)
    if isinstance(model, Mapping):
        retrievers = model.get("retrievers") or []
        retrievers = [retrievers] if isinstance(retrievers, (str, Mapping)) else list(retrievers)
        single = len(retrievers) == 1 and not model.get("rerankers") and not model.get("fusion")
        return single and parse_stage(retrievers[0])["type"] in (None, "dense")
    return None


def check_model_run(run: ModelRun, settings: RunSettings) -> None:
    """One model entry of a run, as settings: the model or pipeline available and well-formed, and the run options
    that need an encoder (``latency_sample``, dense post-processing) not set on a pipeline without one."""
    from embedscope.retrieval.pipeline import is_pipeline_spec, parse_stage

    model = run.model
    if isinstance(model, str):
        if is_pipeline_spec(model):
            kind = parse_stage(model)["type"]
            spec = {"rerankers": [model]} if kind == "cross-encoder" else {"retrievers": [model]}
            check_pipeline(spec, run.options)
        else:
            check_model_available(model, run.options)
    elif isinstance(model, Mapping):
        check_pipeline(model, run.options)
    encodes = _encodes(run)
    name = model if isinstance(model, str) else "the pipeline"
    if encodes is False and settings.latency_sample is not None:
        raise ConfigError(
            f"latency_sample: per-query latency is measured for a dense encoder's search, and {name} is a pipeline; "
            "drop latency_sample for it"
        )
    if encodes is False and settings.dense_post_processing() and not _has_dense_stage(model):
        key = next(iter(settings.dense_post_processing()))
        raise ConfigError(f"{key} acts on dense retrieval, and {name} has no dense retriever: drop it")


def _has_dense_stage(model: Any) -> bool:
    from embedscope.retrieval.pipeline import parse_stage

    if not isinstance(model, Mapping):
        return False
    retrievers = model.get("retrievers") or []
    retrievers = [retrievers] if isinstance(retrievers, (str, Mapping)) else list(retrievers)
    return any(parse_stage(r)["type"] in (None, "dense") for r in retrievers)


def check_settings(check: Preflight, where: str, settings: RunSettings, runs: Sequence[ModelRun] | None = None) -> None:
    """Every check one run of ``settings`` needs before it starts, recorded in ``check`` against ``where``: its
    tasks resolved, each model run (:func:`check_model_run`), its output folder writable."""
    from embedscope.evaluation.plan import resolve_tasks

    check.check(where, lambda: resolve_tasks(settings))
    for run in runs if runs is not None else settings.model_runs():
        check.check(where, functools.partial(check_model_run, run, settings))
    problem = output_folder_problem(settings.output_folder)
    if problem:
        check.add(where, f"output_folder: {problem}")
    if settings.tag is not None:
        check.add(
            where,
            f"tag: each {check.unit} of a {check.what} records a run of its own, and a tag names one run: tag the one "
            "you want afterwards with 'embedscope results tag NAME run:ID'",
        )


def check_seed(check: Preflight, flag: str, seed: int | None) -> None:
    """A resampling seed is 0 or more (numpy refuses a negative one)."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        check.add(f"{flag} {seed}", "give a seed of 0 or more")


def check_outputs(check: Preflight, outputs: Mapping[str, str | Path | None]) -> None:
    """Each named output file (``{"--csv": path}``) can be written."""
    for flag, path in outputs.items():
        if path is not None:
            problem = output_file_problem(path)
            if problem:
                check.add(f"{flag} {path}", problem)


def check_sweep(grid: Any, outputs: Mapping[str, str | Path | None], seed: int | None = None) -> None:
    """Everything :func:`~embedscope.sweep.grid.run_sweep` and its report will need, before the first point runs:
    every point's settings built, each point's tasks, models, pipeline stages and output folder
    (:func:`check_settings`), the report's output files and its seed. One ConfigError lists every problem."""
    check = Preflight("sweep")
    check_seed(check, "--seed", seed)
    check_outputs(check, outputs)
    points, problems = grid.checked_points()
    for where, problem in problems:
        check.add(where, problem)
    for point in points:
        check_settings(check, f"point {point.label}", point.settings)
        try:  # the run's own checks before any model loads: an option acting on none of the point's tasks
            check_run(point.settings)
        except ConfigError as e:
            check.add(f"point {point.label}", str(e))
    check.raise_if_any()
