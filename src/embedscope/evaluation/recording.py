"""Recording a run's results in the results store (the ``store`` setting, else ``$EMBEDSCOPE_STORE``).

The result folder stays the source of truth: a store that cannot be used fails the recording in one line (the
report's ``recorded.error``), never the run, and ``embedscope results import FOLDER`` records it later.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.errors import EmbedscopeError, SettingError


@dataclass(frozen=True)
class Recorded:
    """Where a run's results were recorded: the store (its URL masked), the run's id, whether it is new, its tag —
    or the one line saying why it was not."""

    store: str
    run_id: str | None = None
    new: bool = False
    tag: str | None = None
    error: str | None = None

    def line(self) -> str:
        if self.error:
            return self.error
        what = "recorded" if self.new else "already recorded (the same results)"
        return f"{what} in {self.store} as run {self.run_id}" + (f", tag {self.tag}" if self.tag else "")


def store_url(settings: Any) -> str | None:
    """The store a run records in: the ``store`` setting, else ``$EMBEDSCOPE_STORE``, else None."""
    from embedscope.history.kinds import store_url_from

    return store_url_from(settings.store)


def check_recording(settings: Any, models: int) -> None:
    """Refuse a tag without a store, or one tag for several models (a tag names one run)."""
    if settings.tag is None:
        return
    if store_url(settings) is None:
        raise SettingError("tag", "{tag} names a run in a results store: give {store} (or set $EMBEDSCOPE_STORE)")
    if models > 1:
        raise SettingError(
            "tag",
            f"{{tag}} names one run, and this run evaluates {models} models: tag each one later with "
            "'embedscope results tag NAME run:ID'",
        )


def host_record() -> dict[str, Any]:
    """Versions and hardware of the machine a run is recorded on."""
    from embedscope.version import __version__

    record: dict[str, Any] = {
        "embedscope": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
    }
    for module in ("torch", "sentence_transformers", "transformers", "onnxruntime", "openvino"):
        from importlib.metadata import PackageNotFoundError, version

        try:
            record[module] = version(module.replace("_", "-"))
        except PackageNotFoundError:
            continue
    return record


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def record_run(settings: Any, folder: Path, tasks: Sequence[str]) -> Recorded | None:
    """Record the ``tasks`` a run just wrote in ``folder``; None without a store."""
    import dataclasses

    url = store_url(settings)
    if url is None or not tasks:
        return None
    from embedscope.history.kinds import mask_text

    shown = mask_text(url)
    try:
        from embedscope.history.folders import read_run
        from embedscope.history.store import Store

        store = Store(url)
        shown = store.url
        record = dataclasses.replace(
            read_run(folder, tasks, source="run"),
            host=host_record(),
            tags=(settings.tag,) if settings.tag else (),
        )
        run_id, new = store.record(record)
        store.dispose()
        return Recorded(shown, run_id, new, settings.tag)
    except (EmbedscopeError, OSError) as e:
        from embedscope.history.kinds import parse_store_url, scrub

        try:
            secret_url: Any = parse_store_url(url)[1]
        except EmbedscopeError:
            secret_url = None
        reason = scrub(str(e), secret_url) if secret_url is not None else mask_text(str(e))
        return Recorded(
            shown,
            error=f"results written to {folder} but not recorded in the store: {reason}; record them later with: "
            f"embedscope results import {folder} --store {shown}",
        )
