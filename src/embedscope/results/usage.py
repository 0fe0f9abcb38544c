"""What a model served by an API used: requests, tokens, what the embedding cache saved, spend and request latency.

A model (or any part of it: an encoder inside the embedding cache or a lazy wrapper, a pipeline's stages) that
reports its use has ``api_usage() -> {requests, tokens, avoided_requests, avoided_tokens, latency_p50_ms,
latency_p95_ms, cost}``, counted since it was built (``cost`` is None without a ``price_per_mtok``). Each result
records the use of its own task (``api_usage``: the counters' increase while the task ran; the latency percentiles
are those of every request the model made up to the end of the task, which is all that the model reports).

>>> class Service:
...     def __init__(self): self.n = 0
...     def api_usage(self):
...         return {"requests": self.n, "tokens": 10 * self.n, "avoided_requests": 0, "avoided_tokens": 0,
...                 "latency_p50_ms": 5.0, "latency_p95_ms": 9.0, "cost": 0.1 * self.n}
>>> model = Service()
>>> before = api_usage(model)
>>> model.n = 3
>>> usage_since(model, before)["tokens"], round(usage_since(model, before)["cost"], 3)
(30, 0.3)
>>> api_usage(object()) is None
True
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

COUNTERS = ("requests", "tokens", "avoided_requests", "avoided_tokens")
LATENCIES = ("latency_p50_ms", "latency_p95_ms")
USAGE_KEYS = (*COUNTERS, *LATENCIES, "cost")


class ReportsApiUsage(Protocol):
    """A model that calls a paid or rate-limited service and counts what it used."""

    def api_usage(self) -> Mapping[str, Any]: ...


def _reporters(model: Any, depth: int = 0) -> Iterator[ReportsApiUsage]:
    """The parts of ``model`` that report API use. Looked up on each part's type, so that a wrapper forwarding
    unknown attributes (the embedding cache, a lazy encoder) is never made to load its model to answer."""
    if model is None or depth > 8:
        return
    if callable(getattr(type(model), "api_usage", None)):
        yield model
        return
    if callable(getattr(type(model), "stage_models", None)):  # a pipeline: every stage's model
        for part in model.stage_models():
            yield from _reporters(part, depth + 1)
        return
    own = vars(model) if hasattr(model, "__dict__") else {}
    for attr in ("encoder", "_encoder"):  # what a wrapper holds (a lazy encoder only once it has loaded)
        if own.get(attr) is not None:
            yield from _reporters(own[attr], depth + 1)
            return


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def api_usage(model: Any) -> dict[str, Any] | None:
    """The combined use of every part of ``model`` that reports it (None when no part does): counters and spend
    summed (spend None unless every part has a price), latency the slowest part's percentiles."""
    return total_usage([dict(p.api_usage()) for p in _reporters(model)])


def usage_since(model: Any, before: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What ``model`` used since ``before`` (an earlier :func:`api_usage`): counters and spend as increases, the
    latency percentiles as they stand now."""
    now = api_usage(model)
    if now is None:
        return None
    if before is None:
        return now
    out = dict(now)
    for key in (*COUNTERS, "cost"):
        a, b = _number(now.get(key)), _number(before.get(key))
        if a is not None:
            out[key] = a - (b or 0) if key == "cost" else int(a - (b or 0))
    return out


def recorded_usage(extra: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``api_usage`` a result records (None when it has none)."""
    usage = (extra or {}).get("api_usage")
    return dict(usage) if isinstance(usage, Mapping) else None


def file_usage(path: str | Path) -> dict[str, Any] | None:
    """The ``api_usage`` a result file records (None when it has none or cannot be read)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return recorded_usage(data) if isinstance(data, dict) else None


def folder_usage(folders: list[Path | None]) -> dict[str, Any] | None:
    """The API use recorded by the task results directly in ``folders`` (each counted once) together."""
    unique = dict.fromkeys(Path(f) for f in folders if f is not None)
    return total_usage([file_usage(p) for f in unique for p in sorted(f.glob("*.json"))])


def total_usage(usages: list[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """Several results' use together: counters and spend summed (spend None unless each has one), latency the
    largest percentile recorded (None when no result has a usage)."""
    present = [u for u in usages if u is not None]
    if not present:
        return None
    out: dict[str, Any] = {k: int(sum(_number(u.get(k)) or 0 for u in present)) for k in COUNTERS}
    for key in LATENCIES:
        values = [v for v in (_number(u.get(key)) for u in present) if v is not None]
        out[key] = max(values) if values else None
    costs = [_number(u.get("cost")) for u in present]
    out["cost"] = None if None in costs else float(sum(c for c in costs if c is not None))
    return out


def usage_cells(usage: Mapping[str, Any] | None) -> list[str]:
    """Table cells for :data:`USAGE_HEADER` (empty for a model that calls no service)."""
    if usage is None:
        return [""] * len(USAGE_HEADER)
    cost, p50, p95 = (
        _number(usage.get("cost")),
        _number(usage.get("latency_p50_ms")),
        _number(usage.get("latency_p95_ms")),
    )
    return [
        str(int(usage.get("requests") or 0)),
        str(int(usage.get("tokens") or 0)),
        str(int(usage.get("avoided_requests") or 0)),
        "" if cost is None else f"{cost:.4f}",
        "" if p50 is None else f"{p50:.1f}",
        "" if p95 is None else f"{p95:.1f}",
    ]


USAGE_HEADER = ["requests", "tokens", "cached requests", "cost", "p50 ms", "p95 ms"]
