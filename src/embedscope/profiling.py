"""Wall time and peak memory of one stage of work.

Peak memory is the process's resident set size sampled every few milliseconds by a background
thread while the stage runs (psutil), reported as the peak and as the growth over the RSS at the
start of the stage. Short spikes between two samples can be missed; the figures are for
comparing stages, not for exact accounting.

>>> with measure() as stats:
...     _ = bytearray(10_000_000)
>>> stats.seconds > 0 and stats.peak_rss_mb > 0
True
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

_MB = 1024 * 1024


@dataclass
class StageStats:
    """What :func:`measure` recorded: seconds, peak RSS and its growth during the stage (MB)."""

    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    peak_delta_mb: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "seconds": round(self.seconds, 4),
            "peak_rss_mb": round(self.peak_rss_mb, 1),
            "peak_delta_mb": round(self.peak_delta_mb, 1),
        }


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


@contextmanager
def measure(interval: float = 0.005) -> Iterator[StageStats]:
    """Time the ``with`` block and sample its peak RSS."""
    stats = StageStats()
    start_rss = _rss()
    peak = [start_rss]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            peak[0] = max(peak[0], _rss())

    thread = threading.Thread(target=sample, name="embedscope-rss-sampler", daemon=True)
    thread.start()
    started = time.perf_counter()
    try:
        yield stats
    finally:
        stats.seconds = time.perf_counter() - started
        stop.set()
        thread.join()
        peak[0] = max(peak[0], _rss())
        stats.peak_rss_mb = peak[0] / _MB
        stats.peak_delta_mb = (peak[0] - start_rss) / _MB
