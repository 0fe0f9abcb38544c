"""The encoder protocol every model backend implements.

An encoder turns texts into a float32 matrix. Its ``fingerprint`` names everything that changes
a vector apart from the text and the role (model identity and revision or file hash, backend,
pooling, max length, normalisation, dtype); the embedding cache keys on it together with the
role, the prompt for that role and the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

from embedscope.types import Role

Similarity = Literal["cosine", "dot"]


@runtime_checkable
class Encoder(Protocol):
    """Texts → float32 matrix ``[len(texts), dim]``.

    Attributes:
        name: what results are filed under (e.g. ``sentence-transformers/all-MiniLM-L6-v2``).
        revision: model revision or file fingerprint, used in result paths.
        fingerprint: stable hash of everything that changes a vector except text and role.
        similarity: how query and document vectors are compared.
        prompts: prompt (instruction) prepended per role; a missing role has no prompt.
    """

    name: str
    revision: str
    fingerprint: str
    similarity: Similarity
    prompts: dict[str, str]

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role,
        batch_size: int = 32,
        show_progress: bool = False,
    ) -> np.ndarray: ...


ROLES: tuple[Role, ...] = ("query", "document")


def check_role(role: str) -> Role:
    """``role`` if it is ``"query"`` or ``"document"``, else ValueError."""
    if role not in ROLES:
        raise ValueError(f"role must be 'query' or 'document', got {role!r}")
    return role  # type: ignore[return-value]


def prompted_texts(texts: Sequence[str], role: str, prompts: dict[str, str]) -> list[str]:
    """The texts with the role's prompt prepended (the role is checked first).

    >>> prompted_texts(["cats"], "query", {"query": "query: "})
    ['query: cats']
    """
    prompt = prompts.get(check_role(role), "")
    return [prompt + t for t in texts] if prompt else list(texts)
