"""Third-party libraries kept inside the folders a run names: their telemetry switched off with their own switches,
their caches moved into embedscope's cache folder.

- ONNX Runtime (1.2x+ on Linux) sends telemetry through Microsoft's 1DS SDK, which writes a device id and an event
  database under ``~/.cache/Microsoft/DeveloperTools/.onnxruntime/`` and a ``.ses`` file in the temporary folder.
  ``ORT_DISABLE_TELEMETRY=1``, set before onnxruntime initialises, turns all of it off (no uploader, device id or
  offline store); ``onnxruntime.disable_telemetry_events()`` as well once it is imported.
- OpenVINO (its model converter, loaded by ``import openvino``) and NNCF send telemetry through the ``openvino_telemetry``
  package, which writes ``~/intel/{stats,openvino_ga_cid}``; its only opt-out is a consent file in that same
  folder. Both libraries fall back to their own no-op telemetry stub when ``openvino_telemetry`` cannot be
  imported, so embedscope makes it unimportable in its own process before it loads them
  (``sys.modules["openvino_telemetry"] = None``), unless something imported it already.
- torch creates ``$TMPDIR/torchinductor_<user>`` when ``torch._dynamo`` is imported (sentence-transformers imports
  it); ``TORCHINDUCTOR_CACHE_DIR`` points it into ``$EMBEDSCOPE_CACHE``, or at the temporary folder itself.
- NNCF draws its own progress bars (rich, on rich's global console) and logs at INFO while it quantizes:
  :func:`quiet_nncf` silences both for the call.

A variable the user set is left as it is.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path


def keep_torch_inside() -> None:
    """torch's inductor cache folder, which importing ``torch._dynamo`` creates (embedscope compiles nothing, so
    nothing is written in it): inside ``$EMBEDSCOPE_CACHE`` when that names the cache folder, else the temporary
    folder itself, which exists already (so no folder is created there)."""
    import tempfile

    env = os.environ.get("EMBEDSCOPE_CACHE")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(Path(env) / "torchinductor") if env else tempfile.gettempdir())


def quiet_onnxruntime() -> None:
    """ONNX Runtime's telemetry off: the environment switch before it initialises, the API switch after."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    module = sys.modules.get("onnxruntime")
    if module is not None and hasattr(module, "disable_telemetry_events"):
        module.disable_telemetry_events()


def quiet_openvino() -> None:
    """OpenVINO's and NNCF's telemetry off: ``openvino_telemetry`` made unimportable so that both use their stubs."""
    if "openvino_telemetry" not in sys.modules:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]


@contextlib.contextmanager
def quiet_nncf(nncf: object) -> Iterator[None]:
    """No NNCF progress bars and no INFO lines while the block runs (rich's global console kept quiet, NNCF's
    logger at WARNING); both restored after."""
    try:
        from rich import get_console
    except ImportError:  # pragma: no cover - NNCF requires rich
        console = None
    else:
        console = get_console()
    logger = logging.getLogger("nncf")
    level, quiet = logger.level, console.quiet if console is not None else False
    logger.setLevel(logging.WARNING)
    if console is not None:
        console.quiet = True
    try:
        yield
    finally:
        logger.setLevel(level)
        if console is not None:
            console.quiet = quiet
