"""Result records in MTEB's ``TaskResult`` JSON format.

A file holds ``dataset_revision``, ``task_name``, ``mteb_version`` (null: we are not mteb; the
protocol version we reproduce is in ``protocol``), ``embedscope_version``, ``scores`` as
``{split: [{...metrics, main_score, hf_subset, languages}]}``, ``evaluation_time`` (seconds),
``kg_co2_emissions`` (null), ``date`` and ``evaluation_phases`` (mteb's ``PhaseTiming``: ``name``,
``start`` and ``end`` in seconds from the start of the task, ``split``, ``subset``). embedscope's own keys
(``embedscope_version``, ``protocol``, ``task_type``, ``pipeline_stages`` …) sit at the top level, where mteb's
pydantic model ignores extra keys. ``mteb.TaskResult.from_disk`` and ``mteb.ResultCache.load_results`` load
these files (tested for every task type in ``tests/results/test_mteb_loading.py``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from embedscope.version import __version__

PROTOCOL = "mteb-2.26"


@dataclass
class TaskResult:
    """Scores of one model on one task, all splits (MTEB's result JSON).

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> report = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"]), [tiny_retrieval_task()],
        ...                              output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> result = report.outcomes[0].result
        >>> result.task_name, result.main_score(), result.to_dict()["scores"]["test"][0]["ndcg_at_10"]
        ('TinyRetrieval', 1.0, 1.0)
    """

    task_name: str
    dataset_revision: str
    scores: dict[str, list[dict[str, Any]]]
    evaluation_time: float | None = None
    date: str | None = None
    evaluation_phases: list[dict[str, Any]] = field(default_factory=list)
    embedscope_version: str = __version__
    protocol: str = PROTOCOL
    extra: dict[str, Any] = field(default_factory=dict)

    def main_score(self, split: str | None = None) -> float:
        """Mean of ``main_score`` over subsets of ``split`` (or over all splits), as MTEB aggregates."""
        entries = [e for s, es in self.scores.items() if split in (None, s) for e in es]
        if not entries:
            raise KeyError(f"{self.task_name} has no scores for split {split!r} (splits: {sorted(self.scores)})")
        return float(sum(e["main_score"] for e in entries) / len(entries))

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset_revision": self.dataset_revision,
            "task_name": self.task_name,
            "mteb_version": None,
            "embedscope_version": self.embedscope_version,
            "protocol": self.protocol,
            "scores": self.scores,
            "evaluation_time": self.evaluation_time,
            "kg_co2_emissions": None,
            "date": self.date,
            "evaluation_phases": self.evaluation_phases,
            **self.extra,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskResult:
        known = {
            "dataset_revision",
            "task_name",
            "mteb_version",
            "scores",
            "evaluation_time",
            "kg_co2_emissions",
            "date",
            "evaluation_phases",
            "embedscope_version",
            "protocol",
        }
        return cls(
            task_name=data["task_name"],
            dataset_revision=str(data.get("dataset_revision", "")),
            scores=data["scores"],
            evaluation_time=data.get("evaluation_time"),
            date=data.get("date"),
            evaluation_phases=list(data.get("evaluation_phases") or []),
            embedscope_version=str(data.get("embedscope_version", "")),
            protocol=str(data.get("protocol", "")),
            extra={k: v for k, v in data.items() if k not in known},
        )


def score_entry(scores: dict[str, Any], main_score: str, hf_subset: str, languages: tuple[str, ...]) -> dict[str, Any]:
    """One ``scores[split]`` entry: the metrics plus MTEB's bookkeeping keys."""
    if main_score not in scores:
        raise KeyError(
            f"main score {main_score!r} is not among the computed metrics ({', '.join(sorted(scores)[:8])}, …)"
        )
    return {**scores, "main_score": scores[main_score], "hf_subset": hf_subset, "languages": list(languages)}


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat()


def phase_timings(
    split_timings: Sequence[tuple[str, Mapping[str, float]]], subset: str = "default"
) -> list[dict[str, Any]]:
    """mteb's ``evaluation_phases``: each measured phase as ``{name, start, end, split, subset}``.

    Phases are laid end to end in the order measured, starting at 0 (embedscope measures durations):
    ``start_i = sum_{j<i} seconds_j``, ``end_i = start_i + seconds_i``.

    >>> phase_timings([("test", {"encode": 1.5, "metrics": 0.25})])[1]
    {'name': 'metrics', 'start': 1.5, 'end': 1.75, 'split': 'test', 'subset': 'default'}
    """
    phases: list[dict[str, Any]] = []
    clock = 0.0
    for split, timings in split_timings:
        for name, seconds in timings.items():
            phases.append(
                {
                    "name": name,
                    "start": round(clock, 4),
                    "end": round(clock + seconds, 4),
                    "split": split,
                    "subset": subset,
                }
            )
            clock += seconds
    return phases
