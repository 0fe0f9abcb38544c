"""Cross-encoder reranking: a model that reads the query and a document together and scores the pair.

Loaded with sentence-transformers' ``CrossEncoder`` (any ``*ForSequenceClassification`` checkpoint
or a saved CrossEncoder). Pairs are scored in batches; a model with two or more output labels
is scored by its last label's logit (the "relevant" class of binary rerankers).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.fingerprint import hash_dict, short
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


class CrossEncoderReranker:
    """Scores (query, document) pairs with a cross-encoder.

    Args:
        model: a local checkpoint folder, or a hub id (online).
        max_length: truncation length of a pair in tokens (default: the model's).
        name: what results are filed under (default: the folder name or hub id).
    """

    def __init__(self, model: str | Path, *, max_length: int | None = None, name: str | None = None,
                 revision: str | None = None) -> None:
        from sentence_transformers import CrossEncoder

        path = Path(str(model)).expanduser()
        local = path.exists()
        if not local:
            from embedscope.models.specs import _offline

            if _offline():
                raise ConfigError(f"cross-encoder {model}: not a local folder, and the hub is offline (HF_HUB_OFFLINE=1)")
        try:
            self.model = CrossEncoder(str(path if local else model), device="cpu", max_length=max_length,
                                      revision=None if local else revision)
        except (OSError, ValueError) as e:
            raise ConfigError(f"cross-encoder {model} cannot be loaded: {e}") from e
        self.name = name or (path.name if local else str(model))
        self.revision = revision or "local"
        self.fingerprint = short(hash_dict({"model": str(path.resolve() if local else model),
                                            "max_length": self.model.max_length, "kind": "cross-encoder"}))

    def score_pairs(self, pairs: list[tuple[str, str]], batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """One score per (query, document) pair, float64."""
        if not pairs:
            return np.zeros(0)
        scores = self.model.predict(pairs, batch_size=batch_size, show_progress_bar=show_progress,
                                    convert_to_numpy=True)
        scores = np.asarray(scores, dtype=np.float32)
        if scores.ndim == 2:
            scores = scores[:, -1]
        return scores.astype(np.float64)

    def score_candidates(self, queries: Queries, corpus: Corpus, candidates: RankedRun,
                         options: SearchOptions) -> np.ndarray:
        rows, cols = np.nonzero(candidates.doc_index >= 0)
        pairs = [(queries.texts[r], corpus.texts[candidates.doc_index[r, c]]) for r, c in zip(rows.tolist(), cols.tolist())]
        out = np.full(candidates.doc_index.shape, -np.inf)
        out[rows, cols] = self.score_pairs(pairs, options.batch_size, options.show_progress)
        return out
