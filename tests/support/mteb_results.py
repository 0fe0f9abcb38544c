"""Read embedscope result folders with mteb's own loaders (tests check that mteb accepts every file)."""

from __future__ import annotations

import tempfile
from pathlib import Path


def result_files(folder: str | Path) -> list[Path]:
    """Every task-result JSON under ``folder`` (final and ``stage*/`` results), not model metadata or predictions."""
    return sorted(
        p for p in Path(folder).rglob("*.json") if p.name != "model_meta.json" and "predictions" not in p.parent.parts
    )


def mteb_file_scores(folder: str | Path) -> dict[Path, float]:
    """``mteb.TaskResult.from_disk(path).get_score()`` of every result file under ``folder``."""
    import mteb

    return {p: float(mteb.TaskResult.from_disk(p).get_score()) for p in result_files(folder)}


def mteb_folder_scores(output_folder: str | Path) -> dict[tuple[str, str, str], float]:
    """``{(model, revision, task): score}`` as ``mteb.ResultCache(...).load_results()`` reads an output folder.

    mteb reads ``<cache>/results/<model>/<revision>/<Task>.json`` (and, for runs with other settings,
    ``<model>/<revision>/experiments/<name>/<Task>.json``), so the folder is linked as ``results`` of a
    temporary cache.
    """
    import mteb

    with tempfile.TemporaryDirectory() as cache:
        (Path(cache) / "results").symlink_to(Path(output_folder).resolve(), target_is_directory=True)
        loaded = mteb.ResultCache(cache_path=cache).load_results(include_remote=False, load_experiments="match_name")
        return {
            (m.model_name, str(m.model_revision), t.task_name): float(t.get_score())
            for m in loaded.model_results
            for t in m.task_results
        }
