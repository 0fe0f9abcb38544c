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


# -- the memory of this process and of the machine ------------------------------------------------------------

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "m": 1000**2,
    "mb": 1000**2,
    "g": 1000**3,
    "gb": 1000**3,
    "t": 1000**4,
    "tb": 1000**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}


def parse_bytes(value: object) -> int:
    """A memory size given as bytes (``512000000``) or with a unit: ``8GB``, ``512 MB``, ``1.5GiB`` (KB, MB, GB, TB
    are powers of 1000; KiB, MiB, GiB, TiB of 1024); positive and finite, else a ValueError.

    >>> parse_bytes("8GB"), parse_bytes("512 mb"), parse_bytes("1GiB"), parse_bytes(1000)
    (8000000000, 512000000, 1073741824, 1000)
    >>> parse_bytes("lots")
    Traceback (most recent call last):
    ValueError: 'lots': give a memory size such as 8GB or 512MB
    """
    import math
    import re

    if isinstance(value, bool):
        raise ValueError(f"{value!r}: give a memory size such as 8GB or 512MB")
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"{value!r}: give a memory size such as 8GB or 512MB")
    amount = float(match.group(1)) * _UNITS[unit]
    if not math.isfinite(amount) or amount < 1:
        raise ValueError(f"{value!r}: a memory size is a positive number of bytes (8GB, 512MB)")
    return int(amount)


def format_bytes(n: float) -> str:
    """A size for people, in powers of 1000 (as :func:`parse_bytes` reads them back).

    >>> format_bytes(14_234_000_000), format_bytes(512_000_000), format_bytes(2_500)
    ('14.2 GB', '512 MB', '2.5 kB')
    """
    for unit, size in (("TB", 1000**4), ("GB", 1000**3), ("MB", 1000**2), ("kB", 1000)):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f} {unit}" if value < 100 else f"{value:.0f} {unit}"
    return f"{int(n)} B"


def resident_bytes() -> int:
    """This process's resident set size now (bytes)."""
    return _rss()


def _cgroup_room() -> int | None:
    """What this process's control group lets it use beyond what it uses now (cgroup v2, else v1), or None when no
    limit is set."""
    from pathlib import Path

    for limit_file, usage_file in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
    ):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:
            return None
        return max(0, int(limit) - usage)
    return None


def available_bytes() -> int:
    """The memory this process may grow to: its resident set now plus what the machine has available
    (``MemAvailable``), or less when its control group's limit leaves less room."""
    import psutil

    room = int(psutil.virtual_memory().available)
    cgroup = _cgroup_room()
    if cgroup is not None:
        room = min(room, cgroup)
    return _rss() + room
