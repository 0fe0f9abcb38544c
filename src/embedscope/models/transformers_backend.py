"""Plain Hugging Face transformers backend: AutoTokenizer + AutoModel + explicit pooling.

The pooling mode defaults to the one in a sentence-transformers ``1_Pooling/config.json`` next to
the weights (legacy ``pooling_mode_*_tokens`` flags included), else ``"mean"``; normalisation
defaults to whether ``modules.json`` lists a ``Normalize`` module. Texts are tokenised in
length-sorted batches (longest first, as sentence-transformers does), truncated to
``max_seq_length``, run under ``torch.inference_mode`` on the chosen device in float32 (or
float16 / bfloat16) and pooled in float32 with :func:`embedscope.models.pooling.pool`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import BaseEncoder, Similarity, prompted_texts
from embedscope.models.batching import encode_sorted
from embedscope.models.device import torch_dtype
from embedscope.models.fingerprint import hash_folder, short
from embedscope.models.folder import (
    quiet_loading,
    resolve_prompts,
    snapshot_folder,
    st_max_seq_length,
    st_normalizes,
    st_pooling_mode,
    st_prompts,
    st_similarity,
)
from embedscope.models.options import Placement
from embedscope.models.pooling import check_pooling_mode, normalize_rows, pool
from embedscope.types import Role

BACKEND = "transformers"


class TransformersEncoder(BaseEncoder):
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
        device: ``auto`` (default), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        dtype: ``fp32`` (default), ``fp16`` or ``bf16``.
    """

    backend = BACKEND

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
        device: str | Placement | None = "auto",
        dtype: str | None = None,
    ) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as e:  # pragma: no cover
            raise MissingDependencyError("transformers", "The transformers backend") from e
        self._place(device, dtype)
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
            self.model = AutoModel.from_pretrained(
                str(model_name_or_path), revision=revision, dtype=torch_dtype(self.dtype)
            )
        self.model.to(self.device).eval()
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
        self.prompts = resolve_prompts(own_prompts, prompts, query_prompt)
        self.similarity: Similarity = st_similarity(folder) if folder else "cosine"

        if self.is_local:
            self.name = name or path.resolve().name
            self.content_hash: str | None = hash_folder(path)
            self.revision = revision or short(self.content_hash)
        else:
            self.name = name or str(model_name_or_path)
            snapshot = snapshot_folder(str(model_name_or_path), revision)
            self.content_hash = hash_folder(snapshot) if snapshot is not None else None
            self.revision = snapshot.name if snapshot is not None else (revision or "main")
        tok_path = Path(tok_source)
        self.tokenizer_id = (
            hash_folder(tok_path)
            if tokenizer is not None and tok_path.is_dir()
            else str(tokenizer)
            if tokenizer
            else None
        )

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
            "tokenizer": self.tokenizer_id,
            "tokenizer_class": type(self.tokenizer).__name__,
            "padding_side": getattr(self.tokenizer, "padding_side", None),
        }

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        torch = self._torch
        features = self.tokenizer(
            texts, padding=True, truncation="longest_first", max_length=self.max_seq_length, return_tensors="pt"
        )
        features = features.to(self.device)
        with torch.inference_mode():
            out = self.model(**features)
        hidden = out[0] if not hasattr(out, "last_hidden_state") else out.last_hidden_state
        vectors = pool(hidden.float(), features["attention_mask"], self.pooling)
        return normalize_rows(vectors) if self.normalize else vectors

    def padded_lengths(self, texts: Sequence[str], *, role: Role) -> list[int]:
        """Each text's token count as :meth:`_encode_batch` tokenizes it (the role's prompt in, truncated)."""
        features = self.tokenizer(
            prompted_texts(texts, role, self.prompts), truncation="longest_first", max_length=self.max_seq_length
        )
        return [len(ids) for ids in features["input_ids"]]

    def token_lengths(self, texts: Sequence[str], *, role: Role) -> list[int] | None:
        """Each text's token count as :meth:`_encode_batch` tokenizes it (the role's prompt in), untruncated."""
        features = self.tokenizer(prompted_texts(texts, role, self.prompts), truncation=False, verbose=False)
        return [len(ids) for ids in features["input_ids"]]

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """Encode ``texts`` (the role's prompt prepended) in length-sorted batches."""
        texts = prompted_texts(texts, role, self.prompts)
        return encode_sorted(
            texts, self._encode_batch, batch_size=batch_size, show_progress=show_progress, dim=self.embed_dim
        )
