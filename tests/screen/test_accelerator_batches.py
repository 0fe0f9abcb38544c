"""On an accelerator (default batch 256, not the CPU's 32) the passes that re-encode what a run encoded form the
run's batches, so the embedding cache serves every vector: ``screen``'s fidelity step and ``compare --models``.

The accelerator is faked (device detection says ``cuda:0`` is here) and the models are deterministic hash encoders
that count what they encode; the task's calls hold more texts than 32, so a 32-text batch plan would miss."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import embedscope
from embedscope.models.device import default_batch_size
from embedscope.models.options import encoder_options
from embedscope.screen.run import screen
from embedscope.testing.fakes import HashEncoder
from embedscope.testing.tiny import tiny_tasks_of_every_type
from embedscope.types import Role

ENCODED: list[int] = []  # texts per model call


class CountingEncoder(HashEncoder):
    """A hash encoder per model name, on the device it is given, that records each call's number of texts."""

    def __init__(self, name: str, device: Any, dtype: str | None) -> None:
        super().__init__(dim=16, name=name, device=device)
        self._place(device, dtype)

    def settings(self) -> dict:
        return {**super().settings(), "name": self.name}

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        ENCODED.append(len(texts))
        return super()._encode([f"{self.name}|{t}" for t in texts], role, batch_size, show_progress)


@pytest.fixture
def accelerator(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``cuda:0`` is here, and a model name loads a :class:`CountingEncoder` (search scores on the CPU: only the
    encoding is on the fake accelerator)."""
    # evaluation.models binds specs.load_encoder at import: imported under the patch below, it would keep the fake
    # for every later test of this worker (an API model's run, for one)
    import embedscope.evaluation.models  # noqa: F401
    from embedscope.models import device, specs
    from embedscope.retrieval import dense

    monkeypatch.setattr(device, "available_devices", lambda: ["cpu", "cuda:0"])
    monkeypatch.setattr(dense, "compute_device", lambda model: "cpu")

    def load(spec: str, options: Any = None, /, **given: Any) -> CountingEncoder:
        opts = encoder_options(options, **given)
        return CountingEncoder(f"toy/{spec}", opts.device, opts.dtype)

    monkeypatch.setattr(specs, "load_encoder", load)
    from embedscope.sweep import preflight

    monkeypatch.setattr(preflight, "check_model_available", lambda spec, options: None)  # every name loads, above
    ENCODED.clear()
    yield
    ENCODED.clear()


def _tasks() -> list[Any]:
    """An STS task whose encode calls hold more than 32 texts, and a retrieval task."""
    return [t for t in tiny_tasks_of_every_type(n=80) if t.type in ("STS", "Retrieval")]


def test_the_fake_accelerator_is_one(accelerator) -> None:
    from embedscope.models.specs import load_encoder

    encoder = load_encoder("a")
    assert encoder.device == "cuda:0" and default_batch_size(encoder.device) == 256


@pytest.mark.slow
def test_screens_fidelity_step_encodes_nothing_the_run_cached(accelerator, tmp_path: Path) -> None:
    kwargs: dict[str, Any] = {
        "fast": "bf16",
        "confirm": 2,
        "output_folder": str(tmp_path / "out"),
        "cache_dir": str(tmp_path / "cache"),
        "show_progress": False,
    }
    screen(["a", "b"], _tasks(), fidelity=False, **kwargs)  # every pass runs and caches
    assert ENCODED and max(ENCODED) > 32  # the runner batched as the accelerator's default does
    ENCODED.clear()
    report = screen(["a", "b"], _tasks(), fidelity=True, **kwargs)
    assert ENCODED == []
    for m in report.models:  # the step did run, on both tasks
        texts = {f["task"]: f["texts"] for f in m.fidelity}
        assert set(texts) == {"TinySTS", "TinyRetrieval"} and texts["TinySTS"] > 32


@pytest.mark.slow
def test_compare_models_encodes_nothing_the_run_cached(accelerator, tmp_path: Path) -> None:
    from embedscope.evaluation.agreement import compare_model_runs

    cache = str(tmp_path / "cache")
    for model in ("a", "b"):
        embedscope.evaluate(model, _tasks(), output_folder=str(tmp_path / "out"), cache_dir=cache)
    assert ENCODED and max(ENCODED) > 32
    ENCODED.clear()
    comparison = compare_model_runs(["a", "b"], _tasks(), str(tmp_path / "out"), cache=cache)
    assert ENCODED == []
    texts = {row.task: row.extra["texts"] for row in comparison.rows}
    assert set(texts) == {"TinySTS", "TinyRetrieval"} and texts["TinySTS"] > 32
