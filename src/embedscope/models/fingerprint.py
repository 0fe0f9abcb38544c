"""Stable hashes for encoder fingerprints: of settings (dicts) and of model files (content).

File hashes are cached in memory by ``(path, size, mtime_ns)``, so hashing a model folder a second
time in the same process costs a few ``stat`` calls.

>>> hash_dict({"b": 1, "a": [1, 2]}) == hash_dict({"a": [1, 2], "b": 1})
True
>>> len(hash_dict({}))
64
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

_CHUNK = 1 << 20
_FILE_CACHE: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()

# Files that can change a vector: weights, configs, tokenizers, vocabularies.
MODEL_FILE_SUFFIXES: tuple[str, ...] = (
    ".safetensors",
    ".bin",
    ".pt",
    ".pth",
    ".onnx",
    ".onnx_data",
    ".data",
    ".json",
    ".txt",
    ".model",
    ".npy",
    ".msgpack",
    ".h5",
)
_SKIP_NAMES = {"README.md", "data_config.json"}  # documentation and training metadata
_SKIP_DIRS = {".git", ".cache", "__pycache__", ".ipynb_checkpoints"}


def hash_dict(data: Any) -> str:
    """sha256 (hex) of ``data`` as canonical JSON (sorted keys, no whitespace; non-JSON values via ``str``)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hash_file(path: str | Path) -> str:
    """sha256 (hex) of a file's bytes, cached by ``(resolved path, size, mtime_ns)``."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _LOCK:
        found = _FILE_CACHE.get(key)
    if found is not None:
        return found
    h = hashlib.sha256()
    with open(p, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    digest = h.hexdigest()
    with _LOCK:
        _FILE_CACHE[key] = digest
    return digest


def hash_tensors(state: Any) -> str:
    """sha256 (hex) over the names, shapes, dtypes and bytes of a state dict's tensors (weights a
    caller holds in memory rather than in files)."""
    import torch

    h = hashlib.sha256()
    for key in sorted(state):
        data = state[key].detach().cpu().contiguous()
        h.update(f"{key}|{tuple(data.shape)}|{data.dtype}|".encode())
        if data.numel():
            h.update(data.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def model_files(folder: str | Path) -> list[Path]:
    """The files of a model folder that can change a vector, sorted by relative path."""
    root = Path(folder)
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in filenames:
            if name in _SKIP_NAMES or not name.lower().endswith(MODEL_FILE_SUFFIXES):
                continue
            found.append(Path(dirpath) / name)
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def hash_folder(folder: str | Path, files: list[Path] | None = None) -> str:
    """sha256 (hex) over the relative paths and content hashes of a model folder's files."""
    root = Path(folder)
    entries = [
        (p.relative_to(root).as_posix() if p.is_relative_to(root) else p.name, hash_file(p))
        for p in (files if files is not None else model_files(root))
    ]
    return hash_dict(entries)


def short(digest: str, n: int = 12) -> str:
    """The first ``n`` hex digits of a digest, for revisions in result paths.

    >>> short("0123456789abcdef")
    '0123456789ab'
    """
    return digest[:n]
