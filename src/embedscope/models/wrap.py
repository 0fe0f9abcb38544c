"""Model objects a user already holds, as encoders: ``embedscope.evaluate(SentenceTransformer(...), ...)``.

Accepted, as ``mteb.evaluate`` accepts them:

- an embedscope encoder (anything with ``name``, ``revision``, ``fingerprint``, ``similarity``,
  ``prompts`` and ``encode(texts, role=...)``) — used as it is;
- a ``SentenceTransformer``, on whatever device and in whatever dtype it sits — its weights are
  hashed for the fingerprint;
- an mteb model (its encoder protocol: ``encode(DataLoader, task_metadata=..., hf_split=...,
  hf_subset=..., prompt_type=...)``);
- any object with ``encode(list[str]) -> array``.

Without a fingerprint (given, or derivable from weights) an encoder cannot be cached safely:
:func:`as_encoder` then returns it with ``fingerprint=None``, and the runner turns the cache off
and says so in one line.

>>> import numpy as np
>>> class Mine:
...     def encode(self, texts):
...         return np.ones((len(texts), 2))
>>> enc = as_encoder(Mine())
>>> enc.name, enc.fingerprint, enc.encode(["a", "b"], role="query").shape
('Mine', None, (2, 2))
>>> as_encoder(Mine(), fingerprint="v1").fingerprint
'v1'
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import BaseEncoder, Encoder, Similarity
from embedscope.types import Role

_ENCODER_ATTRS = ("name", "revision", "fingerprint", "similarity", "prompts")


def is_sentence_transformer(obj: Any) -> bool:
    """A ``sentence_transformers.SentenceTransformer`` instance (checked without importing it)."""
    module = sys.modules.get("sentence_transformers")
    return module is not None and isinstance(obj, module.SentenceTransformer)


def is_cross_encoder(obj: Any) -> bool:
    """A ``sentence_transformers.CrossEncoder`` instance (checked without importing it)."""
    module = sys.modules.get("sentence_transformers")
    return module is not None and isinstance(obj, module.CrossEncoder)


def is_mteb_model(obj: Any) -> bool:
    """An mteb model: it has ``mteb_model_meta``, or its ``encode`` takes ``task_metadata``."""
    if hasattr(obj, "mteb_model_meta"):
        return True
    encode = getattr(obj, "encode", None)
    try:
        return callable(encode) and "task_metadata" in inspect.signature(encode).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return False


def _held_model_name(model: Any) -> str:
    card = getattr(model, "model_card_data", None)
    for value in (getattr(card, "base_model", None), getattr(card, "model_id", None)):
        if isinstance(value, str) and value:
            return value
    try:
        path = model[0].auto_model.config._name_or_path
    except (AttributeError, IndexError, KeyError, TypeError):
        path = None
    if isinstance(path, str) and path:
        return path.rstrip("/").rsplit("/", 2)[-1] if path.startswith(("/", ".")) else path
    return type(model).__name__


class CallableEncoder(BaseEncoder):
    """Any object with ``encode(list[str]) -> array`` (``batch_size`` passed when it takes one).

    Roles are not told apart unless ``prompts`` are given (prepended to the texts).
    """

    backend = "python-object"
    exact_batch_plan = False  # it batches inside its own encode(), unseen: the cache keys a call as one batch

    def __init__(
        self,
        obj: Any,
        *,
        name: str | None = None,
        revision: str | None = None,
        fingerprint: str | None = None,
        similarity: Similarity = "cosine",
        prompts: dict[str, str] | None = None,
    ) -> None:
        self.obj = obj
        self.name = name or getattr(obj, "name", None) or type(obj).__name__
        self.revision = revision or str(getattr(obj, "revision", None) or "none")
        self._fingerprint = fingerprint or getattr(obj, "fingerprint", None)
        self.similarity = similarity
        self.prompts = dict(prompts or {})
        self.device, self.dtype = "cpu", "float32"
        try:
            self._takes_batch_size = "batch_size" in inspect.signature(obj.encode).parameters
        except (TypeError, ValueError):  # pragma: no cover
            self._takes_batch_size = False

    @property
    def fingerprint(self) -> str | None:  # type: ignore[override]
        return self._fingerprint

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "fingerprint": self._fingerprint}

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        prompt = self.prompts.get(role, "")
        texts = [prompt + t for t in texts] if prompt else texts
        out = self.obj.encode(texts, batch_size=batch_size) if self._takes_batch_size else self.obj.encode(texts)
        if hasattr(out, "detach"):
            out = out.detach().float().cpu().numpy()
        out = np.asarray(out, dtype=np.float32)
        if out.ndim != 2 or out.shape[0] != len(texts):
            raise ConfigError(
                f"{self.name}.encode returned shape {out.shape} for {len(texts)} texts; expected [n_texts, dim]"
            )
        return out


class MtebModelEncoder(CallableEncoder):
    """An mteb model (``mteb.get_model(...)``, or any object following mteb's encoder protocol)."""

    backend = "mteb-model"

    def __init__(self, obj: Any, *, fingerprint: str | None = None) -> None:
        meta = getattr(obj, "mteb_model_meta", None)
        name = getattr(meta, "name", None) or type(obj).__name__
        revision = getattr(meta, "revision", None) or "none"
        super().__init__(obj, name=name, revision=revision, fingerprint=fingerprint)
        self._metadata: Any = None

    def _task_metadata(self) -> Any:
        if self._metadata is None:
            from mteb.abstasks.task_metadata import TaskMetadata

            self._metadata = TaskMetadata(
                type="Retrieval",
                name="embedscope",
                main_score="ndcg_at_10",
                dataset={"path": "local/embedscope", "revision": "1"},
                description="Texts encoded for embedscope.",
                reference=None,
                category="t2t",
                eval_splits=["test"],
                eval_langs=["eng-Latn"],
                date=None,
                dialect=[],
                domains=[],
                task_subtypes=[],
                license=None,
                annotations_creators=None,
                modalities=["text"],
                sample_creation=None,
                bibtex_citation="",
            )
        return self._metadata

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        from datasets import Dataset
        from mteb.types import PromptType
        from torch.utils.data import DataLoader

        loader = DataLoader(Dataset.from_dict({"text": list(texts)}), batch_size=batch_size)
        out = self.obj.encode(
            loader,
            task_metadata=self._task_metadata(),
            hf_split="test",
            hf_subset="default",
            prompt_type=PromptType(role),
            batch_size=batch_size,
            show_progress_bar=show_progress,
        )
        if hasattr(out, "detach"):
            out = out.detach().float().cpu().numpy()
        return np.asarray(out, dtype=np.float32)


def as_encoder(obj: Any, *, fingerprint: str | None = None, name: str | None = None) -> Encoder:
    """An :class:`~embedscope.models.base.Encoder` for a model object (see the module docstring)."""
    if is_sentence_transformer(obj):
        from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder

        model_name = name or _held_model_name(obj)
        enc = SentenceTransformerEncoder(model_name, model=obj, name=model_name, source="object")
        enc.given_fingerprint = fingerprint
        return enc
    if all(hasattr(obj, a) for a in _ENCODER_ATTRS) and callable(getattr(obj, "encode", None)):
        return obj  # already an embedscope encoder
    if is_mteb_model(obj):
        return MtebModelEncoder(obj, fingerprint=fingerprint)
    if callable(getattr(obj, "encode", None)):
        return CallableEncoder(obj, fingerprint=fingerprint, name=name)
    raise ConfigError(
        f"{type(obj).__name__} is not a model embedscope can evaluate: give a model name or path, "
        "a SentenceTransformer, an mteb model, or an object with encode(list[str]) -> array"
    )
