"""Timing helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _run_times(fn: Callable[[], Any], repeats: int, warmup: int) -> tuple[list[float], Any]:
    """Wall times of ``repeats`` runs of ``fn()`` after ``warmup`` untimed runs, and its last result."""
    out = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def median_time(fn: Callable[[], Any], repeats: int = 5, warmup: int = 1) -> tuple[float, Any]:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs, and its last result."""
    times, out = _run_times(fn, repeats, warmup)
    return statistics.median(times), out


def best_time(fn: Callable[[], Any], repeats: int = 3, warmup: int = 1) -> tuple[float, Any]:
    """Best (least) wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs, and its last result: on a
    machine others share, the run least disturbed by them."""
    times, out = _run_times(fn, repeats, warmup)
    return min(times), out


def embedscope_process(args: list[str], cache: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time and output of one fresh ``embedscope`` process, offline, with its embedding cache in ``cache``
    (exits naming the command when it fails)."""
    env = {**os.environ, "EMBEDSCOPE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "embedscope", *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"embedscope {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done
