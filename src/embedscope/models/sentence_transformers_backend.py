"""sentence-transformers backend: encodes exactly as mteb's ``SentenceTransformerEncoderWrapper``.

mteb 2.26 (text-only path) collects every text of a call and makes one call
``model.encode_query(texts, prompt=prompt, batch_size=..., show_progress_bar=...)`` for queries
(``encode_document`` for documents), with sentence-transformers' defaults otherwise
(``convert_to_numpy=True``, no extra normalisation, float32). This encoder makes the same call
with the same prompt, so for the same list of texts the vectors are bit-identical.

Prompts are passed to sentence-transformers (not glued onto the text here) because a Pooling
module with ``include_prompt=False`` must know where the prompt ends; the effect on the text is
the same: the prompt of the role is prepended.

The model runs on any torch device in float32 (the exact path), float16 or bfloat16. A
``SentenceTransformer`` the caller already holds is used where it sits.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import BaseEncoder, Similarity, batches, order_by_length
from embedscope.models.fingerprint import hash_folder, hash_tensors, short
from embedscope.models.folder import quiet_loading, resolve_prompts, similarity_name, snapshot_folder
from embedscope.models.options import Placement
from embedscope.models.pooling import check_pooling_mode
from embedscope.types import Role

logger = logging.getLogger(__name__)

BACKEND = "sentence-transformers"


def st_order(model: Any, lengths: Sequence[int]) -> list[int]:
    """The order in which ``model.encode`` visits texts of these (character) lengths:
    sentence-transformers 6.2's ``np.argsort`` of negative lengths (:func:`~embedscope.models.base.order_by_length`),
    interleaved when the model flattens inputs."""
    order = order_by_length(lengths)
    if flattens(model):
        order = model._interleave_sorted_indices(np.asarray(order))
    return [int(i) for i in order]


def flattens(model: Any) -> bool:
    """Whether sentence-transformers flattens this model's inputs (and interleaves their order)."""
    can_flatten = getattr(model, "_can_flatten_inputs", None)
    return bool(callable(can_flatten) and can_flatten())


def model_placement(model: Any) -> tuple[str, str]:
    """``(device, dtype)`` of a torch model, e.g. ``("cuda:0", "float16")``."""
    params = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
    device = str(getattr(model, "device", None) or (params.device if params is not None else "cpu"))
    if device == "cuda":
        device = "cuda:0"
    dtype = str(params.dtype).removeprefix("torch.") if params is not None else "float32"
    return device, dtype


class SentenceTransformerEncoder(BaseEncoder):
    """A sentence-transformers model (local folder or hub id) as an :class:`~embedscope.models.base.Encoder`.

    Args:
        model_name_or_path: local folder or hub id.
        name: what results are filed under (default: the hub id, or the folder name).
        revision: hub revision to load.
        prompts: role → prompt, overriding the model's own ``prompts``.
        query_prompt: prompt for queries only (EvalScope's ``prompt``).
        pooling: replace the mode of the model's Pooling module.
        max_seq_length: replace the model's maximum sequence length.
        normalize: ``True`` adds L2 normalisation; ``None`` keeps the model's own setting.
        model: an already loaded ``SentenceTransformer`` (then ``model_name_or_path`` only names it);
            it keeps its device and dtype, and its weights are hashed for the fingerprint.
        source: where the model came from (recorded in results).
        device: ``auto`` (default: the best accelerator here), ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.
        dtype: ``fp32`` (default, the exact path), ``fp16`` or ``bf16``.
    """

    backend = BACKEND

    def __init__(
        self,
        model_name_or_path: str | Path,
        *,
        name: str | None = None,
        revision: str | None = None,
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        model: Any = None,
        source: str | None = None,
        device: str | Placement | None = "auto",
        dtype: str | None = None,
    ) -> None:
        path = Path(model_name_or_path)
        self.is_local = path.exists()
        held = model is not None
        if model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:  # pragma: no cover
                raise MissingDependencyError("sentence-transformers", "The sentence-transformers backend") from e
            self._place(device, dtype)
            with quiet_loading():
                model = self._load_torch_model(
                    SentenceTransformer(str(model_name_or_path), revision=revision, device=self.device)
                )
        else:
            self.device, self.dtype = model_placement(model)
        self.model = model
        self.source = source or str(model_name_or_path)

        self._pooling_module = next((m for m in model if type(m).__name__ == "Pooling"), None)
        if pooling is not None:
            check_pooling_mode(pooling)
            if self._pooling_module is None:
                raise ConfigError(
                    f"{model_name_or_path}: the model has no Pooling module, so pooling={pooling!r} cannot apply"
                )
            self._pooling_module.pooling_mode = pooling
        if max_seq_length is not None:
            if max_seq_length < 1:
                raise ConfigError(f"max_seq_length must be >= 1, got {max_seq_length}")
            model.max_seq_length = max_seq_length
        has_normalize = any(type(m).__name__ == "Normalize" for m in model)
        if normalize is False and has_normalize:
            raise ConfigError(
                f"{model_name_or_path}: the model normalises its embeddings (Normalize module); normalize=False "
                "would need a different model definition"
            )
        self._normalize_call = bool(normalize) and not has_normalize
        self.normalize = has_normalize or bool(normalize)

        self.prompts = resolve_prompts(
            getattr(model, "prompts", None), prompts, query_prompt, getattr(model, "default_prompt_name", None)
        )
        self.similarity: Similarity = similarity_name(getattr(model, "similarity_fn_name", None))

        content: str | None  # None: a hub model not in the local cache
        if self.is_local:
            self.name = name or path.resolve().name
            content = hash_folder(path)
            self.revision = revision or short(content)
        elif held:  # a model the caller holds, from no folder: its weights are what it is
            self.name = name or str(model_name_or_path)
            content = hash_tensors(model.state_dict())
            self.revision = revision or short(content)
        else:
            self.name = name or str(model_name_or_path)
            snapshot = snapshot_folder(str(model_name_or_path), revision)
            content = hash_folder(snapshot) if snapshot is not None else None
            self.revision = snapshot.name if snapshot is not None else (revision or "main")
        self.content_hash = content

    # -- attributes the runner records ------------------------------------------------------

    @property
    def pooling(self) -> str | None:
        mode = getattr(self._pooling_module, "pooling_mode", None)
        return mode if isinstance(mode, str) or mode is None else "+".join(mode)

    @property
    def max_seq_length(self) -> int | None:
        value = getattr(self.model, "max_seq_length", None)
        return int(value) if value is not None else None

    @property
    def embed_dim(self) -> int | None:  # type: ignore[override]  # read from the model; other backends set it
        getter = getattr(self.model, "get_embedding_dimension", None) or getattr(
            self.model, "get_sentence_embedding_dimension", None
        )
        try:
            return int(getter()) if getter else None
        except Exception:  # pragma: no cover - exotic modules
            return None

    def settings(self) -> dict[str, Any]:
        """Everything that changes a vector apart from text and role (hashed into ``fingerprint``)."""
        modules = []
        for m in self.model:
            entry: dict[str, Any] = {"type": type(m).__name__}
            for attr in ("pooling_mode", "include_prompt"):
                if hasattr(m, attr):
                    entry[attr] = getattr(m, attr)
            modules.append(entry)
        tokenizer = getattr(self.model, "tokenizer", None)
        return {
            "backend": self.backend,
            "name": self.name,
            "revision": self.revision,
            "content": self.content_hash,
            "modules": modules,
            "pooling": self.pooling,
            "max_seq_length": self.max_seq_length,
            "normalize": self.normalize,
            "truncate_dim": getattr(self.model, "truncate_dim", None),
            "tokenizer": type(tokenizer).__name__ if tokenizer is not None else None,
            "do_lower_case": getattr(self.model[0], "do_lower_case", None) if len(self.model) else None,
        }

    # -- encoding ---------------------------------------------------------------------------

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """As mteb does: one ``encode_query``/``encode_document`` call with the role's prompt."""
        fn = self.model.encode_query if role == "query" else self.model.encode_document
        kwargs: dict[str, Any] = {"batch_size": batch_size, "show_progress_bar": show_progress}
        if show_progress:
            from embedscope.progress import announce

            announce()
        if self._normalize_call:
            kwargs["normalize_embeddings"] = True
        # An explicit prompt ("" when the role has none) so that the model's default prompt never
        # applies behind the back of ``self.prompts``.
        out = fn(texts, prompt=self.prompts.get(role, ""), **kwargs)
        if hasattr(out, "detach"):
            out = out.detach().cpu().float().numpy()
        return np.asarray(out, dtype=np.float32)

    def batch_plan(self, lengths: Sequence[int], batch_size: int) -> list[list[int]]:
        """sentence-transformers' own batches for one ``encode`` call over texts of these lengths."""
        return batches(st_order(self.model, lengths), batch_size)

    def padded_lengths(self, texts: Sequence[str], *, role: Role) -> list[int]:
        """Each text's token count as ``encode`` tokenizes it (the role's prompt in, truncated to
        ``max_seq_length``): sentence-transformers' ``preprocess``, 256 texts at a time."""
        prompt = self.prompts.get(role, "")
        out: list[int] = []
        for start in range(0, len(texts), 256):
            features = self.model.preprocess(list(texts[start : start + 256]), prompt=prompt)
            out.extend(int(n) for n in features["attention_mask"].sum(dim=1).tolist())
        return out

    def token_lengths(self, texts: Sequence[str], *, role: Role) -> list[int] | None:
        """Each text's token count as ``encode`` tokenizes it (the role's prompt in) before truncation:
        sentence-transformers' ``preprocess`` with truncation off, 256 texts at a time; None for a model whose
        inputs it flattens (no attention mask to count)."""
        prompt = self.prompts.get(role, "")
        untruncated = {"text": {"truncation": False, "verbose": False}}  # verbose: no warning per long text
        out: list[int] = []
        for start in range(0, len(texts), 256):
            part = list(texts[start : start + 256])
            features = self.model.preprocess(part, prompt=prompt, processing_kwargs=untruncated)
            if "attention_mask" not in features:
                return None
            out.extend(int(n) for n in features["attention_mask"].sum(dim=1).tolist())
        return out
