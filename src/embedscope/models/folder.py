"""What a model folder says about itself: sentence-transformers configs, prompts, hub snapshots.

Every backend reads these; none imports another backend for them.

>>> resolve_prompts({"query": "q: ", "passage": "p: "}, {"query": "Q: "})
{'query': 'Q: ', 'document': 'p: '}
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.models.base import ROLES, Similarity

logger = logging.getLogger(__name__)

_DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")  # encode_document's fallbacks


def hub_offline() -> bool:
    """True when an offline flag is set or the hub does not answer (:func:`embedscope.hub.hub_offline`)."""
    from embedscope.hub import hub_offline as offline

    return offline()


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


def snapshot_folder(repo_id: str, revision: str | None) -> Path | None:
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


@dataclass(frozen=True)
class EmbeddingSettings:
    """How an export's vectors are read from its output (kept in its manifest, used by its encoder)."""

    pooling: str
    normalize: bool
    prompts: dict[str, str]
    similarity: str
    max_seq_length: int

    def meta(self) -> dict[str, Any]:
        """The embedding settings the exported model carries (in its manifest)."""
        return {
            "pooling": self.pooling,
            "normalize": self.normalize,
            "prompts": self.prompts,
            "similarity": self.similarity,
            "max_seq_length": self.max_seq_length,
        }
