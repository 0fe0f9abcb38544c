"""What a result records about the compute behind it: the thread budget and CPU (``compute``), and the share of texts
the model truncated at its maximum length (``truncated``).

A backend answers for itself: ``thread_budget()`` (torch's intra/inter-op threads by default, onnxruntime's session
options, OpenVINO's compiled-model properties) and ``truncation_counts()`` (per role, the texts it encoded and those
longer than ``max_seq_length``, counted with its own tokenizer). Both are looked up on each part's type, through the
wrappers that hold an encoder (the embedding cache, a lazy encoder once loaded, an engine's replica, a pipeline's
stages), so answering never loads a model. BLAS/OpenMP pools come from ``threadpoolctl`` when it is installed.

>>> class Part:
...     def thread_budget(self): return {"torch": {"intra_op": 4, "inter_op": 4}}
...     def truncation_counts(self): return {"document": {"texts": 10, "truncated": 3, "max_length": 256}}
>>> class Wrapper:
...     def __init__(self): self.encoder = Part()
>>> compute_record(Wrapper())["threads"]["torch"]
{'intra_op': 4, 'inter_op': 4}
>>> truncated = truncation_since(Wrapper(), None)
>>> truncated["document"]["share"]
0.3
>>> truncation_lines("BBC", truncated)
['BBC: 3 of 10 documents (30.0%) were truncated at 256 tokens']
"""

from __future__ import annotations

import functools
import os
import platform
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

SHOWN_SHARE = 0.05  # `run` prints a line for a role whose truncated share exceeds this
_ROLE_WORDS = {"document": "documents", "query": "queries"}
_NOTABLE_FLAGS = (
    "avx512f",
    "avx512_bf16",
    "avx512_vnni",
    "avx512vnni",
    "amx_bf16",
    "amx_int8",
    "avx_vnni",
    "avx2",
    "fma",
    "avx",
    "sse4_2",
    "asimd",
    "neon",
    "sve",
    "sve2",
    "i8mm",
    "bf16",
)
_ISA_ORDER = ("avx512f", "avx2", "avx", "sse4_2", "sve2", "sve", "asimd", "neon")


def _parts(model: Any, method: str, depth: int = 0) -> Iterator[Any]:
    """The parts of ``model`` whose type has ``method`` (never a wrapper's forwarded attribute, which could load
    its model)."""
    if model is None or depth > 8:
        return
    if callable(getattr(type(model), method, None)):
        yield model
        return
    if callable(getattr(type(model), "stage_models", None)):  # a pipeline: every stage's model
        for part in model.stage_models():
            yield from _parts(part, method, depth + 1)
        return
    own = vars(model) if hasattr(model, "__dict__") else {}
    for attr in ("encoder", "_encoder"):  # what a wrapper holds (a lazy encoder only once it has loaded)
        if own.get(attr) is not None:
            yield from _parts(own[attr], method, depth + 1)
            return


def thread_budget(model: Any) -> dict[str, Any]:
    """The threads each runtime of ``model``'s parts computes with (``{"torch": {...}}``, ``{"onnxruntime": {...}}``
    …), plus ``threadpools``: each BLAS/OpenMP pool loaded in this process as ``threadpoolctl`` reports it (absent
    without threadpoolctl)."""
    out: dict[str, Any] = {}
    for part in _parts(model, "thread_budget"):
        out.update(part.thread_budget())
    pools = threadpools()
    if pools is not None:
        out["threadpools"] = pools
    return out


def threadpools() -> list[dict[str, Any]] | None:
    """``threadpoolctl.threadpool_info()`` without file paths (None when threadpoolctl is not installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    keep = ("user_api", "internal_api", "prefix", "version", "num_threads", "threading_layer", "architecture")
    with warnings.catch_warnings():  # threadpoolctl warns about OpenMP runtimes loaded side by side
        warnings.simplefilter("ignore")
        info = threadpool_info()
    return [{k: lib[k] for k in keep if lib.get(k) is not None} for lib in info]


@functools.lru_cache(maxsize=1)
def cpu_info() -> dict[str, Any]:
    """The CPU: ``machine`` (``platform.machine()``), ``model`` name, ``isa`` (the widest vector instruction set its
    flags name: avx512f, avx2, … on x86; sve, asimd/neon on ARM), the notable ``flags`` and the CPU counts."""
    flags: set[str] = set()
    model: str | None = None
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model", "hardware") and model is None and value.strip():
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    try:
        usable: int | None = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        usable = None
    return {
        "machine": platform.machine(),
        "model": model or platform.processor() or None,
        "isa": next((f for f in _ISA_ORDER if f in flags), None),
        "flags": [f for f in _NOTABLE_FLAGS if f in flags],
        "cpus": os.cpu_count(),
        "usable_cpus": usable,
    }


def compute_record(model: Any) -> dict[str, Any]:
    """A result's ``compute``: ``{"threads": thread_budget(model), "cpu": cpu_info()}``."""
    return {"threads": thread_budget(model), "cpu": dict(cpu_info())}


def truncation_counts(model: Any) -> dict[str, dict[str, int]]:
    """Per role, the texts ``model``'s parts encoded so far and those truncated (summed over parts)."""
    total: dict[str, dict[str, int]] = {}
    for part in _parts(model, "truncation_counts"):
        for role, counts in part.truncation_counts().items():
            into = total.setdefault(role, {"texts": 0, "truncated": 0, "max_length": counts["max_length"]})
            into["texts"] += counts["texts"]
            into["truncated"] += counts["truncated"]
            into["max_length"] = max(into["max_length"], counts["max_length"])
    return total


def truncation_since(model: Any, before: Mapping[str, Mapping[str, int]] | None) -> dict[str, dict[str, Any]] | None:
    """A result's ``truncated``: per role, ``{texts, truncated, share, max_length}`` of the texts encoded since
    ``before`` (an earlier :func:`truncation_counts`); None when no part counts or nothing was encoded."""
    before = before or {}
    out: dict[str, dict[str, Any]] = {}
    for role, now in truncation_counts(model).items():
        earlier = before.get(role, {})
        texts = now["texts"] - earlier.get("texts", 0)
        if texts <= 0:
            continue
        truncated = now["truncated"] - earlier.get("truncated", 0)
        out[role] = {
            "texts": texts,
            "truncated": truncated,
            "share": round(truncated / texts, 6),
            "max_length": now["max_length"],
        }
    return out or None


def truncation_lines(task: str, truncated: Mapping[str, Any] | None, above: float = SHOWN_SHARE) -> list[str]:
    """One line per role whose truncated share exceeds ``above``, as ``run`` prints it."""
    lines = []
    for role, entry in (truncated or {}).items():
        if not isinstance(entry, Mapping) or not entry.get("texts") or float(entry.get("share", 0)) <= above:
            continue
        lines.append(
            f"{task}: {entry['truncated']:,} of {entry['texts']:,} {_ROLE_WORDS.get(role, role + 's')} "
            f"({100 * entry['share']:.1f}%) were truncated at {entry['max_length']} tokens"
        )
    return lines


def compute_line(record: Mapping[str, Any] | None) -> str:
    """A result's ``compute`` in a few words: each runtime's threads, then the CPU and its widest instruction set.

    >>> compute_line({"threads": {"torch": {"intra_op": 2, "inter_op": 2}, "threadpools": []},
    ...               "cpu": {"model": "Xeon", "isa": "avx512f"}})
    'torch intra_op 2, inter_op 2; Xeon (avx512f)'
    >>> compute_line(None)
    'not recorded'
    """
    if not record:
        return "not recorded"
    return "; ".join(part for part in (_threads_text(record), _cpu_text(record)) if part)


def _threads_text(record: Mapping[str, Any]) -> str:
    threads = {k: v for k, v in (record.get("threads") or {}).items() if k != "threadpools"}
    return "; ".join(
        f"{name} " + ", ".join(f"{k} {v}" for k, v in values.items())
        if isinstance(values, Mapping)
        else f"{name} {values}"
        for name, values in sorted(threads.items())
    )


def _cpu_text(record: Mapping[str, Any]) -> str:
    cpu = record.get("cpu") or {}
    return f"{cpu.get('model') or 'CPU'}" + (f" ({cpu['isa']})" if cpu.get("isa") else "")


def compute_differences(records: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """What differs between the compute of several results (``{label: record}``), in one line, or None when their
    threads and CPU agree: times measured under other thread budgets or on other CPUs compare unlike.

    >>> same = {"threads": {"torch": {"intra_op": 2}}, "cpu": {"model": "Xeon", "isa": "avx2"}}
    >>> other = {"threads": {"onnxruntime": {"intra_op": 4}}, "cpu": {"model": "Xeon", "isa": "avx2"}}
    >>> compute_differences({"a": same, "b": same}) is None
    True
    >>> compute_differences({"a": same, "b": other})
    'the seconds compare unlike compute: threads differ (a: torch intra_op 2; b: onnxruntime intra_op 4)'
    """
    known = {k: v for k, v in records.items() if v}
    if len(known) < 2:
        return None
    parts = []
    for what, text in (("threads", _threads_text), ("CPUs", _cpu_text)):
        seen = {label: text(record) or "none recorded" for label, record in known.items()}
        if len(set(seen.values())) > 1:
            parts.append(f"{what} differ ({'; '.join(f'{label}: {v}' for label, v in seen.items())})")
    return f"the seconds compare unlike compute: {', '.join(parts)}" if parts else None
