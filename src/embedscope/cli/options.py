"""Command-line helpers shared by several commands: mteb benchmarks."""

from __future__ import annotations

import sys

from embedscope.errors import ConfigError


def benchmark_tasks(name: str | None) -> list[str]:
    """The catalog tasks of benchmark ``name`` (none for None); its tasks outside the text catalog are named."""
    if not name:
        return []
    from embedscope.tasks.catalog import benchmark_specs

    specs, missing = benchmark_specs(name)
    if missing:
        print(
            f"embedscope: {name}: {len(missing)} task(s) are not text tasks embedscope runs, left out: "
            f"{', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}",
            file=sys.stderr,
        )
    if not specs:
        raise ConfigError(f"{name}: none of its tasks is a text task embedscope runs")
    return specs
