"""sentence-transformers backend: encodes exactly as mteb's ``SentenceTransformerEncoderWrapper``.

mteb 2.26 (text-only path) collects every text of a call and makes one call
``model.encode_query(texts, prompt=prompt, batch_size=..., show_progress_bar=...)`` for queries
(``encode_document`` for documents), with sentence-transformers' defaults otherwise
(``convert_to_numpy=True``, no extra normalisation, float32). This encoder makes the same call
with the same prompt, so for the same list of texts the vectors are bit-identical.

Prompts are passed to sentence-transformers (not glued onto the text here) because a Pooling
module with ``include_prompt=False`` must know where the prompt ends; the effect on the text is
the same: the prompt of the role is prepended.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import ROLES, Similarity, check_role
from embedscope.models.fingerprint import hash_dict, hash_folder, short
from embedscope.models.pooling import check_pooling_mode
from embedscope.types import Role

logger = logging.getLogger(__name__)

BACKEND = "sentence-transformers"
_DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")  # encode_document's fallbacks


def similarity_name(value: Any) -> Similarity:
    """Map a sentence-transformers similarity name onto ``"cosine"`` or ``"dot"``.

    >>> similarity_name("dot"), similarity_name(None)
    ('dot', 'cosine')
    """
    value = getattr(value, "value", value)
    if value in ("dot", "dot_product"):
        return "dot"
    if value not in (None, "cosine"):
        logger.warning("similarity %r is not supported; ranking with cosine similarity", value)
    return "cosine"


def resolve_prompts(
    model_prompts: dict[str, Any] | None,
    prompts: dict[str, str] | None = None,
    query_prompt: str | None = None,
    default_prompt_name: str | None = None,
) -> dict[str, str]:
    """Role → prompt: the model's own prompts, overridden by ``prompts``, then by ``query_prompt``.

    The model's ``default_prompt_name`` fills a role without a prompt (sentence-transformers
    applies it then), and ``passage``/``corpus`` serve documents as in ``encode_document``.
    Empty prompts are dropped.

    >>> resolve_prompts({"query": "q: ", "passage": "p: "}, {"query": "Q: "})
    {'query': 'Q: ', 'document': 'p: '}
    >>> resolve_prompts(None, None, "Find: ")
    {'query': 'Find: '}
    """
    own = {k: v for k, v in (model_prompts or {}).items() if isinstance(v, str)}
    merged = {**own, **(prompts or {})}
    if query_prompt is not None:
        merged["query"] = query_prompt
    out: dict[str, str] = {}
    if merged.get("query") is not None:
        out["query"] = merged["query"]
    for candidate in _DOCUMENT_PROMPT_NAMES:
        if merged.get(candidate) is not None:
            out["document"] = merged[candidate]
            break
    default = own.get(default_prompt_name) if default_prompt_name else None
    for role in ROLES:
        if role not in out and default:
            out[role] = default
    return {role: p for role, p in out.items() if p}


def _snapshot_folder(repo_id: str, revision: str | None) -> Path | None:
    """The local snapshot folder of a hub model already in the Hugging Face cache, if any."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return None
    for filename in ("modules.json", "config.json"):
        found = try_to_load_from_cache(repo_id, filename, revision=revision)
        if isinstance(found, str):
            return Path(found).parent
    return None


class SentenceTransformerEncoder:
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
        model: an already loaded ``SentenceTransformer`` (then ``model_name_or_path`` only names it).
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
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        model: Any = None,
        source: str | None = None,
    ) -> None:
        path = Path(model_name_or_path)
        self.is_local = path.exists()
        if model is None:
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as e:  # pragma: no cover
                raise MissingDependencyError("sentence-transformers", "The sentence-transformers backend") from e
            from embedscope.models.transformers_backend import quiet_loading

            with quiet_loading():
                model = SentenceTransformer(str(model_name_or_path), revision=revision, device="cpu")
        self.model = model
        self.source = source or str(model_name_or_path)

        self._pooling_module = next((m for m in model if type(m).__name__ == "Pooling"), None)
        if pooling is not None:
            check_pooling_mode(pooling)
            if self._pooling_module is None:
                raise ConfigError(f"{model_name_or_path}: the model has no Pooling module, so pooling={pooling!r} cannot apply")
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

        if self.is_local:
            self.name = name or path.resolve().name
            content = hash_folder(path)
            self.revision = revision or short(content)
        else:
            self.name = name or str(model_name_or_path)
            snapshot = _snapshot_folder(str(model_name_or_path), revision)
            content = hash_folder(snapshot) if snapshot is not None else None
            self.revision = snapshot.name if snapshot is not None else (revision or "main")
        self.content_hash = content

        self.fingerprint = hash_dict(self.settings())

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
    def embed_dim(self) -> int | None:
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
            "dtype": self.dtype,
            "tokenizer": type(tokenizer).__name__ if tokenizer is not None else None,
            "do_lower_case": getattr(self.model[0], "do_lower_case", None) if len(self.model) else None,
        }

    # -- encoding ---------------------------------------------------------------------------

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray:
        """Encode as mteb does: one ``encode_query``/``encode_document`` call with the role's prompt."""
        check_role(role)
        texts = list(texts)
        dim = self.embed_dim or 0
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        fn = self.model.encode_query if role == "query" else self.model.encode_document
        kwargs: dict[str, Any] = {"batch_size": batch_size, "show_progress_bar": show_progress}
        if self._normalize_call:
            kwargs["normalize_embeddings"] = True
        # An explicit prompt ("" when the role has none) so that the model's default prompt never
        # applies behind the back of ``self.prompts``.
        out = fn(texts, prompt=self.prompts.get(role, ""), **kwargs)
        if hasattr(out, "detach"):
            out = out.detach().cpu().float().numpy()
        return np.asarray(out, dtype=np.float32)

    def __repr__(self) -> str:
        return f"SentenceTransformerEncoder(name={self.name!r}, revision={self.revision!r})"
