"""Is the Hugging Face hub reachable? Decided once per process, in at most ~1.5 s.

Without this, a hub id on a machine without network spends 30–80 s in huggingface_hub's retries
before failing. ``hub_offline()`` is true when an offline flag is set (``HF_HUB_OFFLINE``,
``TRANSFORMERS_OFFLINE``, ``HF_DATASETS_OFFLINE``) or when one TCP connection to the hub (or to the
HTTPS proxy, if one is set) does not open within :data:`PROBE_TIMEOUT_S`; the answer is cached.
When the probe fails, the offline flags are set for the rest of the process, so that a model already in
the Hugging Face cache loads from it without retries. ``EMBEDSCOPE_HUB_PROBE=0`` skips the probe (the hub is then taken as reachable unless a flag says not).

>>> looks_like_hub_id("mteb/scifact"), looks_like_hub_id("./my-reranker"), looks_like_hub_id("a/b/c")
(True, False, False)
"""

from __future__ import annotations

import os
import socket
import threading
from functools import lru_cache
from urllib.parse import urlsplit

OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE")
PROBE_TIMEOUT_S = 1.5
_TRUE = ("1", "true", "yes", "on")


def offline_flag() -> str | None:
    """The first offline environment flag that is set, or None."""
    return next((v for v in OFFLINE_FLAGS if os.environ.get(v, "").strip().lower() in _TRUE), None)


def _probe_target() -> tuple[str, int]:
    """Host and port one connection is tried to: the HTTPS proxy if one is set, else the hub endpoint."""
    proxy = next(
        (os.environ[v] for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy") if os.environ.get(v)), None
    )
    url = urlsplit(
        proxy
        if proxy and "://" in proxy
        else f"http://{proxy}"
        if proxy
        else os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    )
    default_port = 443 if url.scheme == "https" else 80
    return url.hostname or "huggingface.co", url.port or default_port


def _connect(host: str, port: int, outcome: list[str]) -> None:
    try:
        socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S).close()
        outcome.append("")
    except OSError as e:
        outcome.append(f"{type(e).__name__}: {e}")


@lru_cache(maxsize=1)
def unreachable_reason() -> str | None:
    """Why the hub cannot be reached (probed once per process), or None when it answered."""
    if os.environ.get("EMBEDSCOPE_HUB_PROBE", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    host, port = _probe_target()
    outcome: list[str] = []
    # a thread, so that a stalled DNS lookup cannot hold the caller beyond the timeout either
    worker = threading.Thread(target=_connect, args=(host, port, outcome), daemon=True)
    worker.start()
    worker.join(PROBE_TIMEOUT_S + 0.1)
    if outcome and not outcome[0]:
        return None
    _mark_offline()
    if not outcome:
        return f"{host}:{port} did not answer within {PROBE_TIMEOUT_S:g} s"
    return f"{host}:{port} is not reachable ({outcome[0]})"


def _mark_offline() -> None:
    """Tell huggingface_hub, transformers and datasets (imported or not) that the hub is out of reach, so that
    a model or dataset already in their cache loads from it at once instead of after minutes of retries."""
    import sys

    for flag in OFFLINE_FLAGS:
        os.environ[flag] = "1"
    for module, attr in (
        ("huggingface_hub.constants", "HF_HUB_OFFLINE"),
        ("datasets.config", "HF_HUB_OFFLINE"),
        ("datasets.config", "HF_DATASETS_OFFLINE"),
    ):
        if module in sys.modules and hasattr(sys.modules[module], attr):
            setattr(sys.modules[module], attr, True)


def hub_offline() -> bool:
    """True when an offline flag is set or the hub does not answer (see the module docstring)."""
    return offline_flag() is not None or unreachable_reason() is not None


def offline_reason() -> str:
    """Why the hub counts as offline, for messages (call when :func:`hub_offline` is true)."""
    probed = unreachable_reason() if unreachable_reason.cache_info().currsize else None
    if probed:  # checked first: a failed probe sets the flags itself
        return f"no network: {probed}"
    return f"{offline_flag() or 'HF_HUB_OFFLINE'}=1 is set"


def looks_like_hub_id(text: str) -> bool:
    """``owner/name`` with the hub's characters; a path (``./x``, ``~/x``, ``a/b/c``) is not one."""
    parts = text.split("/")
    return (
        len(parts) == 2
        and all(parts)
        and not text.startswith((".", "~"))
        and all(c.isalnum() or c in "-_." for c in text.replace("/", ""))
    )
