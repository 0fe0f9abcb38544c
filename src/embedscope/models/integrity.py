"""Cheap checks of a local model's files before a library loads them, so that a corrupt or truncated
file is reported by name in one line instead of as a deep traceback of the loading library.

Checked: every JSON file of the model folder (``modules.json``, ``tokenizer.json``, ``config.json`` and
the module folders' configs) parses, and every ``.safetensors`` file holds its whole header and data.
ONNX files cannot be checked cheaply: :func:`corrupt_model_error` explains a failed load instead.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Iterator
from pathlib import Path

from embedscope.errors import ConfigError, EmbedscopeError

_HINT = "the file is corrupt or truncated: copy, download or export the model again"


def check_model_files(path: Path, tokenizer: str | Path | None = None) -> None:
    """ConfigError naming the first unreadable JSON or safetensors file of the model at ``path``."""
    files = [path] if path.is_file() else [*sorted(path.glob("*")), *sorted(path.glob("*/*"))]
    if tokenizer is not None and Path(tokenizer).is_file():
        files.append(Path(tokenizer))
    for file in files:
        if not file.is_file():
            continue
        if file.suffix == ".json":
            _check_json(file)
        elif file.suffix == ".safetensors":
            _check_safetensors(file)


def _check_json(file: Path) -> None:
    try:
        json.loads(file.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{file}: not UTF-8 JSON ({e.reason} at byte {e.start}); {_HINT}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{file}: invalid JSON ({e.msg} at line {e.lineno}); {_HINT}") from None


def _check_safetensors(file: Path) -> None:
    """The 8-byte header length, the JSON header and the data it describes are all there."""
    size = file.stat().st_size
    with open(file, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ConfigError(f"{file}: {size} bytes, too short for a safetensors file; {_HINT}")
        (header_len,) = struct.unpack("<Q", head)
        if 8 + header_len > size:
            raise ConfigError(f"{file}: its header says {header_len} bytes but the file has {size}; {_HINT}")
        try:
            header = json.loads(f.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ConfigError(f"{file}: unreadable safetensors header; {_HINT}") from None
    ends = [
        int(v["data_offsets"][1])
        for k, v in header.items()
        if k != "__metadata__" and isinstance(v, dict) and "data_offsets" in v
    ]
    expected = 8 + header_len + max(ends, default=0)
    if expected != size:
        raise ConfigError(f"{file}: the tensors need {expected} bytes but the file has {size}; {_HINT}")


def corrupt_model_error(path: Path, error: Exception) -> ConfigError:
    """The one-line error for a local model its library could not load."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return ConfigError(
        f"{path}: cannot load this model ({type(error).__name__}: {first[:300]}); if a model file "
        "is corrupt or truncated, copy, download or export the model again"
    )


@contextlib.contextmanager
def model_load_errors(path: Path) -> Iterator[None]:
    """Inside it, a model library's error for unreadable files (:func:`is_load_error`) becomes the one-line
    :func:`corrupt_model_error` naming ``path``; embedscope's own errors and other bugs pass unchanged."""
    try:
        yield
    except EmbedscopeError:
        raise
    except Exception as e:
        if is_load_error(e):
            raise corrupt_model_error(path, e) from e
        raise


LOAD_ERRORS: tuple[type[Exception], ...] = (ValueError, OSError, RuntimeError, KeyError, EOFError)


def is_load_error(error: Exception) -> bool:
    """An exception a model library raises for unreadable files (not a bug of ours): one of :data:`LOAD_ERRORS`, or
    raised by a module a registered backend names (:func:`~embedscope.models.backends.error_modules`)."""
    from embedscope.models.backends import error_modules

    return isinstance(error, LOAD_ERRORS) or type(error).__module__.split(".")[0] in error_modules()
