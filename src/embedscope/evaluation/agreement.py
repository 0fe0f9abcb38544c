"""Evaluate two models and compare them, with per-text embedding agreement (``compare --models A B --tasks …``).

Both models run through :func:`~embedscope.evaluation.runner.evaluate` (stored results and the embedding cache are
reused), their results are compared (:func:`~embedscope.compare.core.compare_folders` with fidelity measures), and
each task's per-text cosines (:func:`~embedscope.compare.embeddings.embedding_agreement`) join the rows.
"""

from __future__ import annotations

from collections.abc import Sequence

from embedscope.compare.core import CompareOptions, Comparison, check_options, compare_folders
from embedscope.compare.embeddings import embedding_agreement
from embedscope.errors import ConfigError
from embedscope.models.base import Encoder
from embedscope.settings import RunSettings


def compare_model_runs(
    models: Sequence[str],
    tasks: Sequence[str],
    output_folder: str,
    options: CompareOptions = CompareOptions(),
    *,
    cache: bool | str = True,
    limits: int | None = None,
    batch_size: int | None = None,
    show_progress: bool = False,
) -> Comparison:
    """Evaluate two models on ``tasks`` (stored results are reused), compare them with fidelity measures, and add
    each task's per-text embedding agreement (``embedding_cosine_*``) to the comparison rows. ``batch_size``: None
    is each model's device default (:func:`~embedscope.models.device.default_batch_size`), as ``run`` uses, so the
    vectors a run cached are served."""
    from embedscope.evaluation.runner import evaluate
    from embedscope.models.cache import CachedEncoder, EmbeddingCache
    from embedscope.models.specs import load_encoder
    from embedscope.tasks.registry import resolve_task

    check_options(options)
    if len(models) != 2:
        raise ConfigError(f"--models takes two models (reference and candidate), got {len(models)}")
    if not tasks:
        raise ConfigError("--models needs --tasks: the tasks to evaluate both models on")
    resolved = [resolve_task(t) for t in tasks]
    encoders: list[Encoder] = []
    for spec in models:
        encoder: Encoder = load_encoder(spec)
        if cache:
            encoder = CachedEncoder(encoder, EmbeddingCache(None if cache is True else cache))
        encoders.append(encoder)
    folders = []
    for encoder in encoders:
        report = evaluate(
            encoder,
            resolved,
            output_folder=output_folder,
            cache=False,
            limits=limits,
            batch_size=batch_size,
            show_progress=show_progress,
        )
        folders.append(report.outcomes[0].path.parent)
    if folders[0] == folders[1]:
        raise ConfigError(f"{models[0]} and {models[1]} are the same model (results in {folders[0]})")
    comparison = compare_folders(folders, options, [t.name for t in resolved], fidelity=True)
    search = RunSettings(limits=limits).search_options(batch_size=batch_size, show_progress=show_progress)
    agreement = embedding_agreement(encoders[0], encoders[1], resolved, search)
    for row in comparison.rows:
        row.extra.update(agreement.get(row.task, {}))
    return comparison
