"""Protocol parameters set by the ``task_params`` setting (on the command line ``NAME=VALUE`` items) and config files, checked per task type
(each type registers its own: ``TaskType.params``, see :mod:`embedscope.tasks.types`).

>>> parse_task_params(["samples_per_label=16", "k=1,10"])
{'samples_per_label': '16', 'k': '1,10'}
>>> task_param_fields("Classification", {"samples_per_label": "16"})
{'samples_per_label': 16}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from embedscope.errors import ConfigError, SettingError


def positive_int(value: Any) -> int:
    number = int(value) if not isinstance(value, bool) else None
    if number is None or number < 1 or (isinstance(value, float) and value != number):
        raise ValueError("a positive integer")
    return number


def fraction_or_none(value: Any) -> float | None:
    if value is None or str(value).lower() in ("none", "null", ""):
        return None
    number = float(value)
    if not 0 < number <= 1:
        raise ValueError("a fraction in (0, 1], or none")
    return number


def optional_positive_int(value: Any) -> int | None:
    return None if value is None or str(value).lower() in ("none", "null", "") else positive_int(value)


def positive_ints(value: Any) -> tuple[int, ...]:
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return tuple(positive_int(v) for v in items)


def boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError("true or false")
    return text in ("true", "1", "yes")


def column_name(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("a column name")
    return value


def _type_params(task_type: str) -> Mapping[str, tuple[str, Callable[[Any], Any]]]:
    """The ``task_params`` parameters of a registered type: NAME → (task field, converter); none for others."""
    from embedscope.tasks.types import TASK_TYPES

    spec = TASK_TYPES.find(task_type)
    return spec.params if spec is not None else {}


def valid_params(task_type: str) -> list[str]:
    return sorted(_type_params(task_type))


def parse_task_params(items: Iterable[str] | None) -> dict[str, str]:
    """``["NAME=VALUE", …]`` (the ``task_params`` items) → ``{NAME: VALUE}``; a malformed item is a ConfigError."""
    out: dict[str, str] = {}
    for item in items or ():
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SettingError(
                "task_params", f"{{task_params}} {item!r}: expected NAME=VALUE, e.g. samples_per_label=16"
            )
        if name.strip() in out:  # the last would win silently
            raise SettingError("task_params", f"{{task_params}} {item!r}: {name.strip()} is given twice: give it once")
        out[name.strip()] = value.strip()
    return out


def task_param_fields(task_type: str, params: Mapping[str, Any], *, where: str = "task parameter") -> dict[str, Any]:
    """``params`` checked against ``task_type``'s parameters and converted to the task's field values."""
    known = _type_params(task_type)
    out: dict[str, Any] = {}
    for name, value in params.items():
        if name not in known:
            valid = ", ".join(valid_params(task_type)) or "none"
            raise ConfigError(f"{where} {name!r} is not a parameter of {task_type} tasks (valid: {valid})")
        field, convert = known[name]
        try:
            out[field] = convert(value)
        except (TypeError, ValueError) as e:
            why = str(e) if not str(e).startswith(("invalid literal", "could not convert")) else "another value"
            raise ConfigError(f"{where} {name}={value!r}: expected {why}") from None
    if out.get("max_document_to_embed") is not None:
        out.setdefault("max_fraction_of_documents_to_embed", None)
    if out.get("max_fraction_of_documents_to_embed") is not None:
        out.setdefault("max_document_to_embed", None)
    return out


def apply_task_options(
    tasks: Sequence[Any], params: Mapping[str, Any] | None = None, splits: Sequence[str] | None = None
) -> list[Any]:
    """Tasks with ``task_params`` values (each where its type has the parameter) and ``splits`` set.

    A parameter no task's type has is an error naming the valid ones.
    """
    params = dict(params or {})
    types = {t.type for t in tasks}
    for name in params:
        if not any(name in _type_params(t) for t in types):
            valid = sorted({p for t in types for p in _type_params(t)})
            raise SettingError(
                "task_params",
                f"{{task_params}} {name!r} is not a parameter of the {', '.join(sorted(types))} task(s) "
                f"asked for (valid: {', '.join(valid) or 'none'})",
            )
    out = []
    for task in tasks:
        own = {k: v for k, v in params.items() if k in _type_params(task.type)}
        try:
            changes = task_param_fields(task.type, own, where="{task_params}")
        except ConfigError as e:
            raise SettingError("task_params", str(e)) from None
        if "group_sets" in changes:
            raise SettingError(
                "task_params",
                f"{{task_params}} group_sets: {task.name} is not custom clustering data; set it in the "
                "task's custom_tasks entry (or clustering:PATH with a config)",
            )
        cutoff = task.main_score.rpartition("_at_")[2]
        if "k_values" in changes and cutoff.isdigit() and int(cutoff) not in changes["k_values"]:
            raise SettingError(
                "task_params",
                f"{{task_params}} k: {task.name}'s main score {task.main_score} needs k {cutoff} among "
                f"the cutoffs (got {','.join(map(str, changes['k_values']))})",
            )
        if splits:
            changes["eval_splits"] = tuple(splits)
        out.append(dataclasses.replace(task, **changes) if changes else task)
    return out
