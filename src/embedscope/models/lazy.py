"""Warm runs that load nothing they don't need: an encoder known by its stored identity.

The first run of a local model (an alias or a path) loads it and stores its identity — name,
revision, fingerprint, prompts, similarity and metadata — in the embedding cache folder, under a
key made of everything that decides that identity: the model files' content hash, the load options,
the resolved device, and the versions of embedscope and of the libraries that load models. A later
run with the same key gets a :class:`LazyEncoder`: when the cache holds every vector a task needs,
the model is never loaded, and sentence-transformers, transformers or onnxruntime never imported.
When a text is missing, the model loads then, and its fingerprint must equal the stored one.

>>> from embedscope.models.base import encoder_identity
>>> from embedscope.testing.fakes import KeywordEncoder
>>> enc = LazyEncoder(encoder_identity(KeywordEncoder(["cat"])), lambda: KeywordEncoder(["cat"]))
>>> enc.loaded, enc.name, enc.encode(["a cat"], role="query").tolist(), enc.loaded
(False, 'fake/keyword-encoder', [[1.0]], True)
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.models.base import IDENTITY_META, encoder_identity
from embedscope.models.fingerprint import hash_dict, hash_file, hash_folder
from embedscope.models.options import EncoderOptions, encoder_options
from embedscope.types import Role

logger = logging.getLogger(__name__)


def _versions(exported: bool = False) -> dict[str, str | None]:
    """Versions of embedscope and of the libraries every registered backend loads with (``exported``: and those that
    shape an exported fast path's graph)."""
    from embedscope.models.backends import libraries

    found: dict[str, str | None] = {}
    for dist in ("embedscope", *libraries(exported)):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[dist] = None
    return found


def _content(path: Path) -> str:
    return hash_file(path) if path.is_file() else hash_folder(path)


def identity_key(spec: str, options: EncoderOptions | Mapping[str, Any], device: str) -> str | None:
    """The key of a local model's identity, or None (a hub id: what it resolves to can change). ``options``: the
    load options (those set count, the device apart: ``device`` is the resolved one)."""
    from embedscope.models.specs import ALIASES, alias_path

    key = spec.strip().lower()
    if key in ALIASES:
        path = alias_path(key)
        tokenizer_from = ALIASES[key].tokenizer_from
        extra = [str(alias_path(tokenizer_from))] if tokenizer_from else []
    else:
        path = Path(os.path.expanduser(spec))
        if not path.exists():
            return None
        extra = []
    contents = [_content(path)] + [_content(Path(p)) for p in extra]
    given = encoder_options(options).given()
    tokenizer = given.get("tokenizer")
    if tokenizer and Path(str(tokenizer)).exists():
        contents.append(_content(Path(str(tokenizer))))
    return hash_dict(
        {
            "spec": key if key in ALIASES else str(path.resolve()),
            "contents": contents,
            "options": dict(sorted(given.items())),
            "device": device,
            "versions": _versions(exported="exports_dir" in given),
        }
    )


class IdentityStore:
    """Identities by key, one small JSON file each, in ``<cache>/identities/`` (written atomically)."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory) / "identities"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and "fingerprint" in data else None

    def put(self, key: str, info: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(info, f, sort_keys=True)
        os.replace(tmp, self.directory / f"{key}.json")


class LazyEncoder:
    """An encoder whose model loads on first use; until then it answers from its stored identity."""

    def __init__(self, info: dict[str, Any], load: Callable[[], Any]) -> None:
        self.info = info
        self._load = load
        self._encoder: Any = None
        for attr in ("name", "revision", "fingerprint", "similarity", "prompts", *IDENTITY_META):
            if attr in info:
                setattr(self, attr, info[attr])
        self.prompts = dict(info.get("prompts", {}))
        self.embed_dim = info.get("embed_dim")

    @property
    def loaded(self) -> bool:
        return self._encoder is not None

    def materialize(self) -> Any:
        """The real encoder, loaded now if it was not; its fingerprint must be the stored one."""
        if self._encoder is None:
            encoder = self._load()
            if encoder.fingerprint != self.info["fingerprint"]:
                raise RuntimeError(
                    f"{self.info['name']}: the loaded model's fingerprint differs from the stored "
                    "identity (a library changed without a version change?); remove the cache's "
                    "identities/ folder and run again"
                )
            self._encoder = encoder
        return self._encoder

    def describe(self) -> dict[str, Any]:
        return {k: self.info[k] for k in ("backend", "device", "dtype", "engine") if k in self.info}

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        return self.materialize().encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_") or item in IDENTITY_META or item == "encoder":
            raise AttributeError(item)  # metadata the identity lacks is absent, not a reason to load
        return getattr(self.materialize(), item)  # anything else (the torch model, batch plans): load

    def __repr__(self) -> str:
        return f"LazyEncoder(name={self.name!r}, loaded={self.loaded})"


def lazy_encoder(
    spec: str, options: EncoderOptions, device: str, cache_dir: str | Path, load: Callable[[], Any]
) -> Any:
    """A :class:`LazyEncoder` when this model's identity is stored, else the loaded encoder (whose
    identity is stored now, for the next run)."""
    key = identity_key(spec, options, device)
    if key is None:
        return load()
    store = IdentityStore(cache_dir)
    info = store.get(key)
    if info is not None:
        return LazyEncoder(info, load)
    encoder = load()
    try:
        store.put(key, encoder_identity(encoder))
    except OSError as e:  # a read-only cache still evaluates; it only stays cold
        logger.warning("could not store the model's identity in %s: %s", store.directory, e)
    return encoder
