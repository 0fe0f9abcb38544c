"""Progress bars only where someone watches them: a terminal (or a notebook), never piped output or logs."""

from __future__ import annotations

import sys


def on_terminal() -> bool:
    """True when stderr is a terminal, or inside a Jupyter kernel (tqdm.auto draws widgets there)."""
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)()) or "ipykernel" in sys.modules


def progress_wanted(requested: bool) -> bool:
    """``requested`` and someone watching; when not, the libraries' own bars (transformers' "Loading weights",
    huggingface_hub's downloads) are switched off too, for the rest of the process."""
    if requested and on_terminal():
        return True
    quiet_library_bars()
    return False


def quiet_library_bars() -> None:
    """Switch off huggingface_hub's and transformers' progress bars (imported or not)."""
    try:
        from huggingface_hub.utils import disable_progress_bars
    except ImportError:  # pragma: no cover - a dependency of sentence-transformers and datasets
        return
    disable_progress_bars()  # transformers reads this when it is imported
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
