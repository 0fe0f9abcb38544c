"""Static (Model2Vec) embeddings: the mean of token vectors, via ``model2vec.StaticModel``.

A model2vec folder holds ``config.json`` (with keys such as ``normalize``), ``model.safetensors``
and ``tokenizer.json``, and no ``modules.json``. Normalisation follows the folder's config
unless ``normalize`` is given. Vectors do not depend on the batch, so batching is model2vec's.
A static model is a table lookup done in numpy: it runs on the CPU in float32 whatever device is
asked for (an accelerator would only add transfers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import BaseEncoder, Similarity, prompted_texts
from embedscope.models.fingerprint import hash_folder, short
from embedscope.models.folder import resolve_prompts
from embedscope.models.options import Placement
from embedscope.types import Role

BACKEND = "model2vec"
_LOADED: dict[tuple[Any, ...], Any] = {}  # (folder, content hash, normalize, max length) → StaticModel


def is_model2vec_folder(folder: str | Path) -> bool:
    """``config.json`` + ``model.safetensors`` + ``tokenizer.json``, no ``modules.json``, and a config
    that is model2vec's (``model_type: model2vec`` or a ``normalize`` key, and no transformers ``architectures``).
    """
    p = Path(folder)
    if (
        not (
            p.is_dir()
            and (p / "config.json").is_file()
            and (p / "model.safetensors").is_file()
            and (p / "tokenizer.json").is_file()
        )
        or (p / "modules.json").is_file()
    ):
        return False
    try:
        config = json.loads((p / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict) or "architectures" in config:
        return False
    return config.get("model_type") == "model2vec" or "normalize" in config


class StaticEncoder(BaseEncoder):
    """A model2vec static model as an :class:`~embedscope.models.base.Encoder`.

    Args:
        path: model2vec folder.
        name: what results are filed under (default: the folder name).
        revision: recorded revision (default: a short content hash of the folder).
        normalize: L2-normalise (default: the folder's ``config.json``).
        max_seq_length: token limit per text (default: model2vec's, 512 unless configured).
        prompts / query_prompt: role → prompt prepended to the text; the query-only prompt.
    """

    backend = BACKEND
    pooling = "mean"
    similarity: Similarity = "cosine"
    supported_dtypes = ("float32",)

    def __init__(
        self,
        path: str | Path,
        *,
        name: str | None = None,
        revision: str | None = None,
        normalize: bool | None = None,
        max_seq_length: int | None = None,
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        source: str | None = None,
        device: str | Placement | None = "auto",
        dtype: str | None = None,
    ) -> None:
        try:
            from model2vec import StaticModel
        except ImportError as e:  # pragma: no cover
            raise MissingDependencyError("model2vec", "Static (Model2Vec) models") from e
        self._place(device, dtype)  # checks that the device exists and the dtype is fp32 ...
        self.device = "cpu"  # ... and then looks up in numpy on the CPU

        folder = Path(path)
        if not folder.is_dir():
            raise ConfigError(f"{path}: a model2vec model is a folder (config.json, model.safetensors, tokenizer.json)")
        kwargs: dict[str, Any] = {"normalize": normalize, "force_download": False}
        if max_seq_length is not None:
            if max_seq_length < 1:
                raise ConfigError(f"max_seq_length must be >= 1, got {max_seq_length}")
            kwargs["max_length"] = max_seq_length
        self.content_hash = hash_folder(folder)
        key = (str(folder.resolve()), self.content_hash, normalize, max_seq_length)
        if key not in _LOADED:  # loading the 276k-token vocabulary takes seconds; the model is read-only
            _LOADED[key] = StaticModel.from_pretrained(str(folder), **kwargs)
        self.model = _LOADED[key]
        self.source = source or str(path)
        self.normalize = bool(self.model.normalize)
        self.max_seq_length = self.model.max_length
        self.embed_dim = int(self.model.dim)
        self.prompts = resolve_prompts(None, prompts, query_prompt)
        self.name = name or folder.resolve().name
        self.revision = revision or short(self.content_hash)

    def thread_budget(self) -> dict[str, Any]:
        """No runtime of its own: its compute threads are numpy's BLAS, which the result's threadpoolctl entry records."""
        return {}

    def settings(self) -> dict[str, Any]:
        """Everything that changes a vector apart from text and role (hashed into ``fingerprint``)."""
        return {
            "backend": self.backend,
            "content": self.content_hash,
            "normalize": self.normalize,
            "max_seq_length": self.max_seq_length,
            "pooling": self.pooling,
        }

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """Encode ``texts`` (the role's prompt prepended) into float32 ``[n, dim]``."""
        texts = prompted_texts(texts, role, self.prompts)
        if show_progress:
            from embedscope.progress import announce

            announce()
        out = self.model.encode(
            texts, show_progress_bar=show_progress, batch_size=max(batch_size, 1024), use_multiprocessing=False
        )
        return np.ascontiguousarray(out, dtype=np.float32).reshape(len(texts), -1)

    def batch_plan(self, lengths: Sequence[int], batch_size: int) -> list[list[int]]:
        """Vectors do not depend on the batch: consecutive slices of at least 1,024 texts."""
        size = max(batch_size, 1024)
        return [list(range(s, min(s + size, len(lengths)))) for s in range(0, len(lengths), size)]
