"""Which tasks a run evaluates: resolved once, before any model loads, then chosen per model by the roles it plays.

- :func:`resolve_tasks`: the tasks named (names, folders, ``TYPE:PATH``, custom tasks, a benchmark), kept by the
  ``task_types`` / ``languages`` filters (``mteb.get_tasks``' semantics), with ``task_params`` and ``splits`` set; a
  run option that none of them uses (``top_k`` on STS alone, …) is an error;
- :func:`model_tasks`: a model's share: the tasks its entry names, else all, else the built-in suite's tasks its
  roles can play; a task whose type cannot use the model is an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from embedscope.engines.base import EngineSettings
from embedscope.errors import ConfigError, UnknownNameError
from embedscope.messages import listing
from embedscope.results.store import check_path_name
from embedscope.settings.options import acts_nowhere, option_at
from embedscope.settings.run import ModelRun, RunSettings
from embedscope.tasks.base import Task
from embedscope.tasks.registry import DEFAULT_TASKS, resolve_task
from embedscope.tasks.types import TASK_TYPES, get_task_type


def _named(settings: RunSettings, key: str) -> str:
    """How the user wrote ``key`` (the flag, the file and key, or the keyword)."""
    namer = getattr(settings, "display_name", None)
    return namer(key) if namer is not None else key


def _keep(task: Task, types: set[str] | None, languages: set[str] | None) -> bool:
    if types is not None and task.type not in types:
        return False
    return languages is None or any(lang.split("-")[0] in languages for lang in task.languages)


def _filtered(tasks: list[Task], settings: RunSettings) -> list[Task]:
    """The tasks of the types and languages asked for; an unknown type is an error naming the known ones."""
    try:
        types = {get_task_type(t).name for t in settings.task_types} if settings.task_types is not None else None
    except UnknownNameError as e:
        raise ConfigError(f"{_named(settings, 'task_types')}: {e}") from None
    languages = {lang.split("-")[0].lower() for lang in settings.languages} if settings.languages is not None else None
    kept = [t for t in tasks if _keep(t, types, languages)]
    if not kept:
        asked = [f"types {sorted(types)}" if types else "", f"languages {sorted(languages)}" if languages else ""]
        raise ConfigError(
            f"{_named(settings, 'task_types' if types else 'languages')}: none of the "
            f"{len(tasks)} task(s) asked for is of {' and '.join(a for a in asked if a)} "
            f"(they are: {listing(sorted({f'{t.name} ({t.type}, {t.languages[0]})' for t in tasks}))})"
        )
    return kept


def check_task_names(tasks: Sequence[Task]) -> None:
    """Every task name can name a result file, and no two tasks of a run share one."""
    seen: dict[str, str] = {}
    for t in tasks:
        check_path_name(t.name, "task name")
        source = str(getattr(t, "source", ""))
        if t.name in seen and seen[t.name] != source:
            raise ConfigError(
                f"two tasks are named {t.name!r} ({seen[t.name] or 'built-in'} and {source}): results "
                "are filed by task name, so give them distinct names (custom_tasks[].name)"
            )
        seen[t.name] = source


def _prepared(tasks: list[Task], settings: RunSettings) -> list[Task]:
    tasks = _filtered(tasks, settings)
    check_task_names(tasks)
    if settings.task_params or settings.splits:
        from embedscope.tasks.params import apply_task_options

        tasks = apply_task_options(tasks, settings.task_params, settings.splits)
    _check_run_options(tasks, settings)
    return tasks


def given_paths(settings: RunSettings, model: BaseModel | None = None, prefix: str = "") -> list[str]:
    """The key paths given explicitly (nested settings by path: ``chunking.chunk_size``)."""
    model = settings if model is None else model
    out = []
    for name in model.model_fields_set:
        value = getattr(model, name)
        if isinstance(value, BaseModel) and not isinstance(value, EngineSettings) and value.model_fields_set:
            out += given_paths(settings, value, f"{prefix}{name}.")
        else:
            out.append(f"{prefix}{name}")
    return out


def _check_run_options(tasks: Sequence[Task], settings: RunSettings) -> None:
    """An option given explicitly that acts on none of the run's task types is an error (it would do nothing): each
    option declares the task types it acts on (:mod:`embedscope.settings.options`); a task type registered elsewhere
    adds itself with ``TaskType.run_options``."""
    types = sorted({t.type for t in tasks})
    for path in given_paths(settings):
        declared = option_at(path)
        if declared is None or "task_type" not in declared.acts:
            continue
        plugins = [t.name for t in TASK_TYPES if path.split(".")[0] in t.run_options]
        where = list(dict.fromkeys([*declared.acts["task_type"], *plugins]))
        if set(where) & set(types):
            continue
        raise ConfigError(
            f"{_named(settings, path)} has no effect on the task(s) of this run ({listing(types)}): it applies to "
            f"{listing(where)} tasks; drop it"
        )


def check_model_options(settings: RunSettings) -> None:
    """A model option given for a model whose backend it does not act on (``calibration`` without openvino-int8) is
    an error, before any model loads: each option declares its backends."""
    shared = settings.model_options.given()
    for n, run in enumerate(settings.model_runs()):
        if not isinstance(run.model, str):
            continue
        backend = str(run.options.get("backend") or "the default backend")
        for key in run.options:
            idle = acts_nowhere(f"model_options.{key}", {"backend": [backend]})
            if idle is None:
                continue
            named = _named(settings, f"model_options.{key}") if key in shared else f"models[{n}].{key}"
            raise ConfigError(f"{named} applies to --backend {' or '.join(idle[1])} only, not {backend}: drop it")


def check_run(settings: RunSettings) -> None:
    """The checks a run makes before any model loads (tasks resolved and filtered, every option acting somewhere),
    for ``--print-settings``."""
    if resolve_tasks(settings) is None:
        _prepared([resolve_task(t, data_dir=settings.data_dir) for t in DEFAULT_TASKS], settings)


def resolve_tasks(settings: RunSettings) -> list[Task] | None:
    """The run's tasks, checked before any model loads (each model's options too); None when none are named (each
    model's default suite)."""
    check_model_options(settings)
    specs = settings.task_specs()
    if specs is None:
        if settings.task_types is not None or settings.languages is not None or settings.task_params or settings.splits:
            return _prepared([resolve_task(t, data_dir=settings.data_dir) for t in DEFAULT_TASKS], settings)
        return None
    return _prepared([resolve_task(t, data_dir=settings.data_dir) for t in specs], settings)


def _accepts(task: Task, roles: frozenset[str]) -> bool:
    return bool(set(get_task_type(task.type).model_roles) & roles)


def model_tasks(
    tasks: list[Task] | None, entry: ModelRun, roles: frozenset[str], settings: RunSettings, name: str
) -> list[Task]:
    """The tasks one model evaluates: its entry's own subset, else the run's, else the default suite's tasks whose
    type can use the model. A task that cannot use the model is an error saying which model fits."""
    if tasks is None:
        tasks = _prepared([resolve_task(t, data_dir=settings.data_dir) for t in DEFAULT_TASKS], settings)
        suited = [t for t in tasks if _accepts(t, roles)]
        if not suited:
            raise ConfigError(f"{name} evaluates none of the default tasks: name the tasks to run (--tasks)")
        return suited
    if entry.tasks is not None:
        wanted = {t if isinstance(t, str) else t.name for t in entry.tasks}
        tasks = [t for t in tasks if t.name in wanted]
    wrong = [f"{t.name} ({t.type})" for t in tasks if not _accepts(t, roles)]
    if wrong:
        if "searcher" in roles or "candidate_scorer" in roles:
            kinds = " and ".join(t.name for t in TASK_TYPES if set(t.model_roles) & roles)
            raise ConfigError(
                f"{name} is a retrieval pipeline{' without a first-stage retriever' if 'searcher' not in roles else ''}:"
                f" it evaluates {kinds} tasks only, not {listing(wrong)}. "
                + (
                    "For retrieval, give a retriever too (--retriever bm25 --reranker MODEL)."
                    if "searcher" not in roles
                    else "Evaluate those with an embedding model."
                )
            )
        raise ConfigError(f"{name} cannot evaluate {listing(wrong)}: their task types need another kind of model")
    return tasks


def entry_tasks(tasks: list[Task] | None, entry: ModelRun, settings: RunSettings) -> list[Task]:
    """The tasks one model entry is planned to run before its model is known: its own subset of the run's tasks, or
    the default suite (what a static-int8 fast path calibrates on when no calibration file is named)."""
    if tasks is None:
        tasks = _prepared([resolve_task(t, data_dir=settings.data_dir) for t in DEFAULT_TASKS], settings)
    if entry.tasks is not None:
        wanted = {t if isinstance(t, str) else t.name for t in entry.tasks}
        tasks = [t for t in tasks if t.name in wanted]
    return tasks
