"""embedscope: which embedding model or retrieval setup is best on this data, and by how much?

One call evaluates a model on tasks with MTEB-exact numbers::

    import embedscope
    report = embedscope.evaluate("minilm", ["BBCNewsRetrieval"])
    print(report.table())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from embedscope.version import __version__

__all__ = [
    "__version__",
    "evaluate",
    "evaluate_config",
    "load_encoder",
    "load_retrieval",
    "score_run",
    "evaluate_ranking",
]

if TYPE_CHECKING:  # pragma: no cover
    from embedscope.data.detect import load_retrieval
    from embedscope.evaluation.runner import evaluate, evaluate_config, score_run
    from embedscope.metrics import evaluate_ranking
    from embedscope.models.specs import load_encoder

_LAZY = {
    "evaluate": "embedscope.evaluation.runner",
    "evaluate_config": "embedscope.evaluation.runner",
    "score_run": "embedscope.evaluation.runner",
    "load_encoder": "embedscope.models.specs",
    "load_retrieval": "embedscope.data.detect",
    "evaluate_ranking": "embedscope.metrics",
}


def __getattr__(name: str) -> Any:  # lazy imports keep `import embedscope` and `--help` fast
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'embedscope' has no attribute {name!r}")
