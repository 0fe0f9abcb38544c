"""Plain Hugging Face transformers backend: AutoTokenizer + AutoModel + explicit pooling.

The pooling mode defaults to the one in a sentence-transformers ``1_Pooling/config.json`` next to
the weights (legacy ``pooling_mode_*_tokens`` flags included), else ``"mean"``; normalisation
defaults to whether ``modules.json`` lists a ``Normalize`` module. Texts are tokenised in
length-sorted batches (longest first, as sentence-transformers does), truncated to
``max_seq_length``, run under ``torch.inference_mode`` in float32 and pooled with
:func:`embedscope.models.pooling.pool`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import Similarity, prompted_texts
from embedscope.models.batching import encode_sorted
from embedscope.models.fingerprint import hash_dict, hash_folder, short
from embedscope.models.pooling import check_pooling_mode, normalize_rows, pool
from embedscope.types import Role

BACKEND = "transformers"

_LEGACY_POOLING_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def st_modules(folder: str | Path) -> list[dict[str, Any]]:
    """The entries of a sentence-transformers ``modules.json`` (empty if there is none)."""
    data = _read_json(Path(folder) / "modules.json")
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def st_pooling_mode(folder: str | Path) -> str | None:
    """The pooling mode of a sentence-transformers folder's Pooling module, or ``None``.

    Reads the folder named in ``modules.json`` (else ``1_Pooling``); understands both
    ``pooling_mode`` and the legacy ``pooling_mode_*_tokens`` flags (the first active one).
    """
    root = Path(folder)
    candidates = [m.get("path", "") for m in st_modules(root) if str(m.get("type", "")).endswith("Pooling")]
    candidates.append("1_Pooling")
    for sub in candidates:
        config = _read_json(root / sub / "config.json")
        if not isinstance(config, dict):
            continue
        mode = config.get("pooling_mode")
        if isinstance(mode, list):
            mode = mode[0] if mode else None
        if isinstance(mode, str):
            return mode
        for flag, name in _LEGACY_POOLING_FLAGS.items():
            if config.get(flag):
                return name
    return None


def st_normalizes(folder: str | Path) -> bool:
    """Whether a sentence-transformers folder's ``modules.json`` ends in a ``Normalize`` module."""
    return any(str(m.get("type", "")).endswith("Normalize") for m in st_modules(folder))


def st_max_seq_length(folder: str | Path) -> int | None:
    """``max_seq_length`` from ``sentence_bert_config.json``, if present."""
    config = _read_json(Path(folder) / "sentence_bert_config.json")
    value = config.get("max_seq_length") if isinstance(config, dict) else None
    return int(value) if isinstance(value, int) else None


def st_similarity(folder: str | Path) -> Similarity:
    """``similarity_fn_name`` from ``config_sentence_transformers.json`` (default cosine)."""
    config = _read_json(Path(folder) / "config_sentence_transformers.json")
    value = config.get("similarity_fn_name") if isinstance(config, dict) else None
    return "dot" if value in ("dot", "dot_product") else "cosine"


def st_prompts(folder: str | Path) -> dict[str, str]:
    """``prompts`` from ``config_sentence_transformers.json`` (may be empty)."""
    config = _read_json(Path(folder) / "config_sentence_transformers.json")
    prompts = config.get("prompts") if isinstance(config, dict) else None
    return {k: v for k, v in prompts.items() if isinstance(v, str)} if isinstance(prompts, dict) else {}


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """Hide transformers' per-load "Loading weights" progress bar (restored afterwards)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover
        yield
        return
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class TransformersEncoder:
    """A transformers model with explicit pooling as an :class:`~embedscope.models.base.Encoder`.

    Args:
        model_name_or_path: local folder or hub id of the transformer.
        name: what results are filed under (default: the hub id, or the folder name).
        revision: hub revision to load.
        pooling: one of :data:`~embedscope.models.pooling.POOLING_MODES` (default from the
            folder's sentence-transformers Pooling config, else ``"mean"``).
        max_seq_length: truncation length in tokens (default: ``sentence_bert_config.json``, else
            the tokenizer's ``model_max_length`` capped at the model's position embeddings).
        normalize: L2-normalise the vectors (default: whether ``modules.json`` has ``Normalize``).
        prompts: role → prompt, prepended to the text.
        query_prompt: prompt for queries only.
        tokenizer: tokenizer folder or hub id (default: the model's).
        source: where the model came from (recorded in results).
    """

    backend = BACKEND
    dtype = "float32"

    def __init__(
        self,
        model_name_or_path: str | Path,
        *,
        name: str | None = None,
        revision: str | None = None,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        tokenizer: str | Path | None = None,
        source: str | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as e:  # pragma: no cover
            raise MissingDependencyError("transformers", "The transformers backend") from e
        path = Path(model_name_or_path)
        self.is_local = path.exists()
        folder = path if self.is_local else None
        self.source = source or str(model_name_or_path)

        self.pooling = check_pooling_mode(pooling or (st_pooling_mode(folder) if folder else None) or "mean")
        self.normalize = bool(normalize) if normalize is not None else bool(folder and st_normalizes(folder))

        tok_source = str(tokenizer) if tokenizer is not None else str(model_name_or_path)
        tok_revision = None if tokenizer is not None else revision
        with quiet_loading():
            self.tokenizer = AutoTokenizer.from_pretrained(tok_source, revision=tok_revision)
            self.model = AutoModel.from_pretrained(str(model_name_or_path), revision=revision, dtype=torch.float32)
        self.model.eval()
        self._torch = torch

        limit = getattr(self.model.config, "max_position_embeddings", None)
        if max_seq_length is None:
            max_seq_length = st_max_seq_length(folder) if folder else None
        if max_seq_length is None:
            tok_max = getattr(self.tokenizer, "model_max_length", None)
            candidates = [v for v in (tok_max, limit) if isinstance(v, int) and 0 < v < 1_000_000]
            max_seq_length = min(candidates) if candidates else 512
        if max_seq_length < 1:
            raise ConfigError(f"max_seq_length must be >= 1, got {max_seq_length}")
        self.max_seq_length = int(max_seq_length)
        self.embed_dim = int(getattr(self.model.config, "hidden_size", 0)) or None

        own_prompts = st_prompts(folder) if folder else {}
        from embedscope.models.sentence_transformers_backend import resolve_prompts

        self.prompts = resolve_prompts(own_prompts, prompts, query_prompt)
        self.similarity: Similarity = st_similarity(folder) if folder else "cosine"

        if self.is_local:
            self.name = name or path.resolve().name
            self.content_hash = hash_folder(path)
            self.revision = revision or short(self.content_hash)
        else:
            from embedscope.models.sentence_transformers_backend import _snapshot_folder

            self.name = name or str(model_name_or_path)
            snapshot = _snapshot_folder(str(model_name_or_path), revision)
            self.content_hash = hash_folder(snapshot) if snapshot is not None else None
            self.revision = snapshot.name if snapshot is not None else (revision or "main")
        tok_path = Path(tok_source)
        self.tokenizer_id = (
            hash_folder(tok_path) if tokenizer is not None and tok_path.is_dir() else str(tokenizer) if tokenizer else None
        )
        self.fingerprint = hash_dict(self.settings())

    def settings(self) -> dict[str, Any]:
        """Everything that changes a vector apart from text and role (hashed into ``fingerprint``)."""
        return {
            "backend": self.backend,
            "name": self.name,
            "revision": self.revision,
            "content": self.content_hash,
            "pooling": self.pooling,
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
            "dtype": self.dtype,
            "tokenizer": self.tokenizer_id,
            "tokenizer_class": type(self.tokenizer).__name__,
            "padding_side": getattr(self.tokenizer, "padding_side", None),
        }

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        features = self.tokenizer(
            texts, padding=True, truncation="longest_first", max_length=self.max_seq_length, return_tensors="pt"
        )
        with torch.inference_mode():
            out = self.model(**features)
        hidden = out[0] if not hasattr(out, "last_hidden_state") else out.last_hidden_state
        vectors = pool(hidden, features["attention_mask"], self.pooling)
        return normalize_rows(vectors) if self.normalize else vectors

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Encode ``texts`` (the role's prompt prepended) into float32 ``[n, dim]``."""
        texts = prompted_texts(texts, role, self.prompts)
        return encode_sorted(
            texts, self._encode_batch, batch_size=batch_size, show_progress=show_progress, dim=self.embed_dim
        )

    def __repr__(self) -> str:
        return f"TransformersEncoder(name={self.name!r}, pooling={self.pooling!r})"
