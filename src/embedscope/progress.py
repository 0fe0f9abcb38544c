"""Progress bars only where someone watches them: a terminal (or a notebook), never piped output or logs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


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


# -- labels: "BBCNewsRetrieval: corpus (2,225 texts)" -------------------------------------------------------

_TASK: ContextVar[tuple[str, str] | None] = ContextVar("embedscope_progress_task", default=None)
_LABEL: ContextVar[str | None] = ContextVar("embedscope_progress_label", default=None)


@contextmanager
def task_progress(name: str, document_label: str = "texts") -> Iterator[None]:
    """Bars drawn inside are labelled with this task, its documents called ``document_label``."""
    token = _TASK.set((name, document_label))
    try:
        yield
    finally:
        _TASK.reset(token)


def bar_label(role: str, count: int) -> str:
    """What a bar encoding ``count`` texts of ``role`` is called: task, what the texts are, how many.

    >>> with task_progress("BBCNewsRetrieval", "corpus"):
    ...     bar_label("document", 2225)
    'BBCNewsRetrieval: corpus (2,225 texts)'
    >>> bar_label("query", 3)
    'queries (3 texts)'
    """
    task = _TASK.get()
    what = {"query": "queries", "document": "corpus" if task is None else task[1]}.get(role, role)
    return f"{task[0] + ': ' if task else ''}{what} ({count:,} texts)"


@contextmanager
def encoding_label(role: str, count: int) -> Iterator[None]:
    """The label of the bars drawn inside (see :func:`current_label`)."""
    token = _LABEL.set(bar_label(role, count))
    try:
        yield
    finally:
        _LABEL.reset(token)


def current_label(default: str = "Encoding") -> str:
    return _LABEL.get() or default


def announce() -> None:
    """For libraries that draw their own unlabelled bar (sentence-transformers' "Batches"): the label on the
    line above it."""
    from tqdm.auto import tqdm

    tqdm.write(current_label(), file=sys.stderr)
