"""Cross-encoder reranking: a model that reads the query and a document together and scores the pair.

Loaded with sentence-transformers' ``CrossEncoder`` (any ``*ForSequenceClassification`` checkpoint
or a saved CrossEncoder). Pairs are scored in batches; a model with two or more output labels
is scored by its last label's logit (the "relevant" class of binary rerankers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import ModelBase
from embedscope.models.device import default_batch_size, with_oom_halving
from embedscope.models.fingerprint import hash_folder, hash_tensors, short
from embedscope.retrieval.base import SearchOptions
from embedscope.types import Corpus, Queries, RankedRun


def is_cross_encoder_checkpoint(folder: str | Path) -> bool:
    """A saved CrossEncoder, or a transformers sequence-classification checkpoint."""
    folder = Path(folder)
    st_config = folder / "config_sentence_transformers.json"
    if st_config.is_file():
        try:
            return json.loads(st_config.read_text(encoding="utf-8")).get("model_type") == "CrossEncoder"
        except json.JSONDecodeError:
            return False
    config = folder / "config.json"
    if config.is_file() and not (folder / "modules.json").is_file():
        try:
            architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
        except json.JSONDecodeError:
            return False
        return any(a.endswith("ForSequenceClassification") for a in architectures)
    return False


class CrossEncoderReranker(ModelBase):
    """Scores (query, document) pairs with a cross-encoder.

    Args:
        model: a local checkpoint folder, a hub id (online), or a ``CrossEncoder`` the caller holds
            (used on its own device).
        max_length: truncation length of a pair in tokens (default: the model's).
        name: what results are filed under (default: the folder name or hub id).
        device: ``auto`` (default), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        dtype: ``fp32`` (default), ``fp16`` or ``bf16``.
    """

    backend = "cross-encoder"

    def __init__(
        self,
        model: Any,
        *,
        max_length: int | None = None,
        name: str | None = None,
        revision: str | None = None,
        device: str | None = "auto",
        dtype: str | None = None,
    ) -> None:
        if not isinstance(model, (str, Path)):  # a model the caller holds: its weights identify it
            self._hold(model, name, revision)
            return
        self._place(device, dtype)
        path = Path(str(model)).expanduser()
        local = path.exists()
        if not local:
            from embedscope.hub import hub_offline, looks_like_hub_id, offline_reason

            if not looks_like_hub_id(str(model)):
                raise ConfigError(f"cross-encoder {model}: no such file or folder (nor a hub id owner/name)")
            if hub_offline():
                raise ConfigError(
                    f"cross-encoder {model}: not a local folder, and the hub is offline ({offline_reason()})"
                )
        from sentence_transformers import CrossEncoder  # after the checks above: a wrong path loads no library

        try:
            self.model = CrossEncoder(
                str(path if local else model),
                device=self.device,
                max_length=max_length,
                revision=None if local else revision,
            )
        except (OSError, ValueError) as e:
            raise ConfigError(f"cross-encoder {model} cannot be loaded: {e}") from e
        self._load_torch_model(self.model.model)
        self.name = name or (path.name if local else str(model))
        self.content = hash_folder(path) if local else str(model)
        self.revision = revision or (short(self.content) if local else "main")

    def _hold(self, model: Any, name: str | None, revision: str | None) -> None:
        """Use a ``CrossEncoder`` the caller holds, on its own device."""
        from sentence_transformers import CrossEncoder

        from embedscope.models.sentence_transformers_backend import model_placement

        if not isinstance(model, CrossEncoder):
            raise ConfigError(
                f"cross-encoder {model!r}: give a folder, a hub id or a sentence-transformers CrossEncoder"
            )
        self.model = model
        self.device, self.dtype = model_placement(model.model)
        self.name = (
            name or str(getattr(model.config, "_name_or_path", "") or "cross-encoder").rstrip("/").rsplit("/", 1)[-1]
        )
        self.content = hash_tensors(model.model.state_dict())
        self.revision = revision or short(self.content)

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "content": self.content, "max_length": self.model.max_length}

    def score_pairs(
        self, pairs: list[tuple[str, str]], batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        """One score per (query, document) pair, float64."""
        if not pairs:
            return np.zeros(0)
        scores = with_oom_halving(
            lambda bs: self.model.predict(pairs, batch_size=bs, show_progress_bar=show_progress, convert_to_numpy=True),
            batch_size or default_batch_size(self.device),
            what=f"{self.name}: scoring pairs",
        )
        scores = np.asarray(scores, dtype=np.float32)
        if scores.ndim == 2:
            scores = scores[:, -1]
        return scores.astype(np.float64)

    def score_candidates(
        self, queries: Queries, corpus: Corpus, candidates: RankedRun, options: SearchOptions
    ) -> np.ndarray:
        rows, cols = np.nonzero(candidates.doc_index >= 0)
        pairs = [
            (queries.texts[r], corpus.texts[candidates.doc_index[r, c]]) for r, c in zip(rows.tolist(), cols.tolist())
        ]
        out = np.full(candidates.doc_index.shape, -np.inf)
        out[rows, cols] = self.score_pairs(pairs, options.batch_size, options.show_progress)
        return out
