"""embedscope: which embedding model or retrieval setup is best on this data, and by how much?

One call evaluates a model on tasks with MTEB-exact numbers; each command has its verb here (``run`` →
:func:`evaluate`, ``screen``, ``sweep``, ``compare``, ``score`` → :func:`score_run`, ``report``, ``inspect``), and
every verb returns one object whose ``table()`` is what the command prints and whose ``to_dict()`` is its JSON::

    import embedscope
    report = embedscope.evaluate("minilm", ["BBCNewsRetrieval"])
    print(report.table())

Names are imported on first use (module ``__getattr__``), so ``import embedscope`` stays fast.
"""

from __future__ import annotations

import sys as _sys
from types import ModuleType as _ModuleType
from typing import TYPE_CHECKING, Any

from embedscope.version import __version__

__all__ = [
    "__version__",
    # the verbs, one per command
    "evaluate",
    "evaluate_config",
    "screen",
    "sweep",
    "compare",
    "score_run",
    "report",
    "inspect",
    "gate",
    # the types users hold
    "RunSettings",
    "Pipeline",
    "CompareOptions",
    "EvaluationReport",
    "EvaluationReports",
    "TaskOutcome",
    "TaskResult",
    "ScreenReport",
    "SweepReport",
    "Comparison",
    "ReportTables",
    "Inspection",
    "Scores",
    "Store",
    "RunFilter",
    "GateResult",
    # the protocols
    "Encoder",
    "Searcher",
    "Task",
    # the extension points
    "TaskType",
    "register_task_type",
    "EngineSettings",
    "register_engine",
    "register_table_format",
    # EXTENSION POINT (backend registry): add the backend registry's register function here and in _LAZY once
    # it exists (issue: "a backend registry"), e.g. "register_backend": "embedscope.models.backends".
]

if TYPE_CHECKING:  # pragma: no cover
    from embedscope.api import EvaluationReports, Scores, compare, evaluate_config, inspect, report, score_run, sweep
    from embedscope.compare.core import CompareOptions, Comparison
    from embedscope.data.tables import register_table_format
    from embedscope.engines.base import EngineSettings, register_engine
    from embedscope.evaluation.inspect import Inspection
    from embedscope.evaluation.runner import EvaluationReport, TaskOutcome, evaluate
    from embedscope.history.gate import GateResult, gate
    from embedscope.history.store import RunFilter, Store
    from embedscope.models.base import Encoder
    from embedscope.results.report import ReportTables
    from embedscope.results.schema import TaskResult
    from embedscope.retrieval.pipeline import Pipeline
    from embedscope.retrieval.roles import Searcher
    from embedscope.screen.run import ScreenReport, screen
    from embedscope.settings import RunSettings
    from embedscope.sweep.report import SweepReport
    from embedscope.tasks.base import Task
    from embedscope.tasks.types import TaskType, register_task_type

_LAZY = {
    "evaluate": "embedscope.evaluation.runner",
    "evaluate_config": "embedscope.api",
    "screen": "embedscope.screen.run",
    "sweep": "embedscope.api",
    "compare": "embedscope.api",
    "score_run": "embedscope.api",
    "report": "embedscope.api",
    "inspect": "embedscope.api",
    "gate": "embedscope.history.gate",
    "Store": "embedscope.history.store",
    "RunFilter": "embedscope.history.store",
    "GateResult": "embedscope.history.gate",
    "RunSettings": "embedscope.settings",
    "Pipeline": "embedscope.retrieval.pipeline",
    "CompareOptions": "embedscope.compare.core",
    "EvaluationReport": "embedscope.evaluation.runner",
    "EvaluationReports": "embedscope.api",
    "TaskOutcome": "embedscope.evaluation.runner",
    "TaskResult": "embedscope.results.schema",
    "ScreenReport": "embedscope.screen.run",
    "SweepReport": "embedscope.sweep.report",
    "Comparison": "embedscope.compare.core",
    "ReportTables": "embedscope.results.report",
    "Inspection": "embedscope.evaluation.inspect",
    "Scores": "embedscope.api",
    "Encoder": "embedscope.models.base",
    "Searcher": "embedscope.retrieval.roles",
    "Task": "embedscope.tasks.base",
    "TaskType": "embedscope.tasks.types",
    "register_task_type": "embedscope.tasks.types",
    "EngineSettings": "embedscope.engines.base",
    "register_engine": "embedscope.engines.base",
    "register_table_format": "embedscope.data.tables",
    # earlier public helpers, still importable (not in __all__: the verbs above cover them)
    "load_encoder": "embedscope.models.specs",
    "load_retrieval": "embedscope.data.detect",
    "evaluate_ranking": "embedscope.metrics",
}


def __getattr__(name: str) -> Any:  # lazy imports keep `import embedscope` and `--help` fast
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'embedscope' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# Three verbs share their names with the subpackages that implement them (``embedscope.compare``, ``.sweep``,
# ``.screen``). Importing a subpackage makes Python set it as an attribute of this package, which would hide the verb;
# the verb keeps the name (the subpackage stays importable: ``from embedscope.sweep.grid import SweepGrid``).
_VERBS_OVER_PACKAGES = frozenset({"compare", "sweep", "screen"})


class _Package(_ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name in _VERBS_OVER_PACKAGES and isinstance(value, _ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
