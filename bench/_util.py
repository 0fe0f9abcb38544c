"""Timing helpers shared by the benchmark scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


def median_time(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> tuple[float, Any]:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs, and its last result."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def best_time(fn: Callable[[], Any], repeats: int = 3, warmup: int = 1) -> tuple[float, Any]:
    """Best (least) wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs, and its last result: on a
    machine others share, the run least disturbed by them."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out
