"""Writing files safely: atomically (temporary file, fsync, rename), naming the user's path in every error, never
the temporary file, and refusing symbolic link loops in one line. Every package that writes a file uses these.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError


def resolved(path: str | Path) -> Path:
    """``path`` made absolute with its links followed; a symbolic link loop on the way is a ConfigError naming it.

    >>> import os, tempfile; d = tempfile.mkdtemp(); os.symlink(f"{d}/a", f"{d}/a")
    >>> resolved(f"{d}/a/x.json")
    Traceback (most recent call last):
    embedscope.errors.ConfigError: .../a/x.json: symbolic link loop (a link on this path points back to itself); give another path
    """
    try:
        return Path(path).resolve()
    except RuntimeError:  # Python < 3.13 reports a loop this way
        pass
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
    raise ConfigError(f"{path}: symbolic link loop (a link on this path points back to itself); give another path")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to a temporary file in the same folder, fsync it, then rename it over ``path``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to a temporary file in the same folder, fsync it, then rename it over ``path``.

    A failure names ``path`` (never the temporary file): a folder at ``path`` is a ConfigError."""
    path = Path(path)
    if resolved(path).is_dir():
        raise ConfigError(f"{path} is a folder: give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise ConfigError(f"{path}: cannot write ({e.strerror or e}); check the folder") from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes 0600; a result file gets the usual mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        if path.is_dir():
            raise ConfigError(f"{path} is a folder: give a file name") from None
        raise ConfigError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (read by setting and restoring it)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON atomically (see :func:`atomic_write_text`)."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False, allow_nan=True) + "\n")
