"""The encoder protocol, and the base every model backend shares.

An encoder turns texts into a float32 matrix. Its ``fingerprint`` names everything that changes
a vector apart from the text and the role (model identity and revision or file hash, backend,
pooling, max length, normalisation, dtype, and the kind of device that computed it); the
embedding cache keys on it together with the role, the prompt for that role and the text.

:class:`BaseEncoder` holds what every backend has in common: identity, fingerprint, prompts,
the empty input, device and dtype, the default batch size per device, the out-of-memory
fallback, and the batch plan that lets engines (several devices, a Ray cluster) encode exactly
the batches an in-process call would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from embedscope.models.device import default_batch_size, device_kind, with_oom_halving
from embedscope.models.fingerprint import hash_dict
from embedscope.models.options import Placement
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

    Examples:
        >>> from embedscope import Encoder
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> encoder = KeywordEncoder(["cat", "dog"])
        >>> isinstance(encoder, Encoder), encoder.encode(["a cat and a dog"], role="query").tolist()
        (True, [[1.0, 1.0]])
    """

    @property
    def name(self) -> str: ...

    @property
    def revision(self) -> str: ...

    @property
    def fingerprint(self) -> str | None: ...

    @property
    def similarity(self) -> Similarity: ...

    @property
    def prompts(self) -> dict[str, str]: ...

    def encode(
        self,
        texts: Sequence[str],
        *,
        role: Role,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray: ...


ROLES: tuple[Role, ...] = ("query", "document")


def check_finite(vectors: np.ndarray, texts: Sequence[str], model: str, source: str = "the model") -> np.ndarray:
    """``vectors`` if every value is finite, else :class:`NonFiniteError` naming the model and the first bad text.

    >>> check_finite(np.array([[1.0], [np.nan]]), ["ok", "bad"], "m")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    embedscope.errors.NonFiniteError: m: the model gave a vector with NaN or infinity for text 2 of 2 ('bad'); ...
    """
    finite = np.isfinite(vectors)
    if finite.all():
        return vectors
    from embedscope.errors import NonFiniteError

    row = int(np.flatnonzero(~finite.reshape(len(vectors), -1).all(axis=1))[0]) if len(vectors) else 0
    text = texts[row] if row < len(texts) else "?"
    shown = text if len(text) <= 80 else text[:77] + "..."
    raise NonFiniteError(
        f"{model}: {source} gave a vector with NaN or infinity for text {row + 1} of {len(texts)} "
        f"({shown!r}); no score can be computed from it. "
        + (
            "Check the model's weights and dtype (fp16 can overflow)"
            if source == "the model"
            else "Delete that cache (or run without the cache) to encode the texts again"
        )
    )


def encode_rows(
    encoder: Encoder,
    texts: Sequence[str],
    rows: Sequence[int],
    *,
    role: Role,
    batch_size: int | None = None,
    show_progress: bool = False,
) -> np.ndarray:
    """The vectors of ``texts[rows]`` as ``encoder.encode(texts)`` makes them: the encoder's own ``encode_rows``
    (a backend's or the cache's: only the batches holding a row are encoded), else the whole call's rows."""
    own = getattr(encoder, "encode_rows", None)
    if own is not None:
        return np.asarray(
            own(texts, rows, role=role, batch_size=batch_size, show_progress=show_progress), dtype=np.float32
        )
    out = encoder.encode(list(texts), role=role, batch_size=batch_size, show_progress=show_progress)
    return np.asarray(out, dtype=np.float32)[list(rows)]


def check_role(role: str) -> Role:
    """``role`` if it is ``"query"`` or ``"document"``, else ValueError."""
    if role not in ROLES:
        raise ValueError(f"role must be 'query' or 'document', got {role!r}")
    return role


def prompted_texts(texts: Sequence[str], role: str, prompts: dict[str, str]) -> list[str]:
    """The texts with the role's prompt prepended (the role is checked first).

    >>> prompted_texts(["cats"], "query", {"query": "query: "})
    ['query: cats']
    """
    prompt = prompts.get(check_role(role), "")
    return [prompt + t for t in texts] if prompt else list(texts)


def length_order(texts: Sequence[str]) -> list[int]:
    """Indices of ``texts`` sorted by length, longest first, ties as :func:`order_by_length` orders them.

    >>> length_order(["a", "ccc", "bb", "dd"])
    [1, 2, 3, 0]
    """
    return order_by_length([len(t) for t in texts])


# the order every batch plan follows (order_by_length), in the key of each plan the embedding cache stores: plans made
# before it (ties in input order) are planned again rather than reused
BATCH_ORDER = "argsort"


def order_by_length(lengths: Sequence[int]) -> list[int]:
    """Indices longest first, ties in the order of numpy's default ``argsort`` of the negated lengths: the order in
    which sentence-transformers visits texts, so that every backend forms the same batches of one call (a screen's
    proxy, drawn as whole batches of that plan, is then whole batches of each model's own). Short inputs keep the
    order of ties; long ones need not (numpy's introsort).

    >>> order_by_length([1, 3, 2, 2])
    [1, 2, 3, 0]
    """
    return [int(i) for i in np.argsort(-np.asarray(lengths, dtype=np.int64))]


def batches(order: Sequence[int], batch_size: int) -> list[list[int]]:
    """Consecutive slices of ``order`` of at most ``batch_size`` items.

    >>> batches([3, 1, 2], 2)
    [[3, 1], [2]]
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [list(order[start : start + batch_size]) for start in range(0, len(order), batch_size)]


class ModelBase:
    """Identity, fingerprint, device and dtype: what every model shares (single-vector encoders,
    ColBERT token encoders, cross-encoders). A subclass sets ``name`` and ``revision``, calls
    :meth:`_place` and implements :meth:`settings`."""

    backend: str = "custom"
    name: str = "model"
    revision: str = "none"
    device: str = "cpu"
    dtype: str = "float32"
    engine: str = "local"
    supported_dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    given_fingerprint: str | None = None  # a fingerprint the user vouches for, used instead of the derived one

    def _place(self, device: str | Placement | None, dtype: str | None) -> None:
        """Take ``device`` as resolved (a :class:`~embedscope.models.options.Placement`), else resolve it (``auto`` →
        the best accelerator here), and check ``dtype``."""
        placement = Placement.resolve(device, dtype)
        self.device, self.dtype = placement.device, placement.dtype
        if self.dtype not in self.supported_dtypes:
            from embedscope.errors import ConfigError

            raise ConfigError(
                f"{self.backend} models compute in {' or '.join(self.supported_dtypes)} only; "
                f"dtype {self.dtype!r} cannot apply"
            )

    def _load_torch_model(self, model: Any) -> Any:
        """Move a freshly loaded torch model to this device and dtype."""
        from embedscope.models.device import torch_dtype

        model.to(self.device)
        if self.dtype != "float32":
            model.to(torch_dtype(self.dtype))
        return model

    def settings(self) -> dict[str, Any]:
        """Everything that changes an output apart from the input, dtype and device kind."""
        raise NotImplementedError

    @property
    def fingerprint(self) -> str:
        """sha256 of :meth:`settings` plus dtype and device kind (a GPU vector is not a CPU vector)."""
        if self.given_fingerprint:
            return hash_dict(
                {"given": self.given_fingerprint, "dtype": self.dtype, "device_kind": device_kind(self.device)}
            )
        return hash_dict({**self.settings(), "dtype": self.dtype, "device_kind": device_kind(self.device)})

    def describe(self) -> dict[str, Any]:
        """What results and ``model_meta.json`` record about how outputs were made."""
        return {"backend": self.backend, "device": self.device, "dtype": self.dtype, "engine": self.engine}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, device={self.device!r}, dtype={self.dtype!r})"


COUNT_SLICE = 64  # texts whose untruncated tokens are counted at once (a tokenizer holds ~200 bytes a token)


class BaseEncoder(ModelBase):
    """What every single-vector backend shares. A backend sets its identity in ``__init__``,
    implements :meth:`settings` and :meth:`_encode`, and (if it batches differently) :meth:`batch_plan`.

    Attributes set by backends: ``name``, ``revision``, ``prompts``, ``similarity``, ``embed_dim``;
    ``device`` and ``dtype`` come from :meth:`_place`.

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> enc = KeywordEncoder(["cat"])
    >>> enc.encode([], role="query").shape
    (0, 1)
    >>> enc.batch_plan([1, 3, 2], 2)
    [[1, 2], [0]]
    """

    prompts: dict[str, str] = {}
    similarity: Similarity = "cosine"
    embed_dim: int | None = None
    exact_batch_plan: bool = True  # batch_plan + encode_batch give encode()'s vectors bit for bit

    # -- encoding -----------------------------------------------------------------------------

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        """Texts (the role's prompt prepended) → float32 ``[n, dim]``.

        ``batch_size`` defaults per device (32 on the CPU, the exact path; larger on an
        accelerator); on out-of-memory the batch size is halved and the call retried.
        """
        check_role(role)
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.embed_dim or 0), dtype=np.float32)
        size = batch_size or default_batch_size(self.device)
        self._count_truncated(texts, role)
        from embedscope.progress import encoding_label

        with encoding_label(role, len(texts)):
            out = with_oom_halving(
                lambda bs: self._encode(texts, role, bs, show_progress), size, what=f"{self.name}: encoding"
            )
        return check_finite(np.asarray(out, dtype=np.float32), texts, self.name)

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """The backend's in-process encoding of a non-empty list."""
        raise NotImplementedError

    def batch_plan(self, lengths: Sequence[int], batch_size: int) -> list[list[int]]:
        """The batches (indices, in order) that :meth:`encode` forms for texts of these lengths.

        Engines encode these batches elsewhere with :meth:`encode_batch`, so their vectors are the
        in-process vectors bit for bit. Default: longest first, ties as sentence-transformers orders them
        (:func:`order_by_length`).
        """
        return batches(order_by_length(lengths), batch_size)

    def encode_rows(
        self,
        texts: Sequence[str],
        rows: Sequence[int],
        *,
        role: Role,
        batch_size: int | None = None,
        show_progress: bool = False,
    ) -> np.ndarray:
        """``encode(texts)[rows]``, encoding only the batches of that call (:meth:`batch_plan`) that hold a row
        (the whole call when the plan is not exact).

        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> KeywordEncoder(["cat", "dog"]).encode_rows(["a cat", "a dog", "dog"], [1], role="query").tolist()
        [[0.0, 1.0]]
        """
        texts, rows = list(texts), list(rows)
        if not rows:
            return np.zeros((0, self.embed_dim or 0), dtype=np.float32)
        if getattr(type(self), "vectors_per_text", False):  # a text's vector does not depend on its batch
            return self.encode([texts[i] for i in rows], role=role, batch_size=batch_size, show_progress=show_progress)
        if not self.exact_batch_plan:
            return self.encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)[rows]
        plan = self.batch_plan([len(t) for t in texts], batch_size or default_batch_size(self.device))
        wanted, found = set(rows), dict[int, np.ndarray]()
        for batch in plan:
            if wanted.intersection(batch):
                found.update(zip(batch, self.encode_batch([texts[i] for i in batch], role=role)))
        return np.stack([found[i] for i in rows]).astype(np.float32, copy=False)

    def padded_lengths(self, texts: Sequence[str], *, role: Role) -> list[int]:
        """Each text's length in tokens as a batch pads it (its prompt in, truncated): what
        :func:`~embedscope.testing.rows.compare_rows` groups rows by. The cache does not rely on it: a row can also
        depend on the rest of its batch (``bench/bench_row_invariance.py``)."""
        raise NotImplementedError(f"{type(self).__name__} does not say its padded lengths")

    def token_lengths(self, texts: Sequence[str], *, role: Role) -> list[int] | None:
        """Each text's length in tokens as the model's tokenizer makes it, the role's prompt in and nothing
        truncated (compared with ``max_seq_length``: what was truncated); None when the backend cannot say (a model
        behind an API, a static model)."""
        return None

    def truncation_counts(self) -> dict[str, dict[str, int]]:
        """Per role, the texts this encoder has encoded in this process (``texts``) and those longer than its
        ``max_seq_length`` (``truncated``), with that length (``max_length``); counted by :meth:`encode` with
        :meth:`token_lengths`, so only texts the model itself encodes (never those the embedding cache serves)."""
        return {role: dict(counts) for role, counts in self.__dict__.get("_truncation", {}).items()}

    def _count_truncated(self, texts: Sequence[str], role: Role) -> None:
        limit = getattr(self, "max_seq_length", None)
        if not isinstance(limit, int) or limit < 1:
            return
        lengths: list[int] = []
        for start in range(0, len(texts), COUNT_SLICE):  # a slice at a time: untruncated encodings are large
            part = self.token_lengths(texts[start : start + COUNT_SLICE], role=role)
            if part is None:
                return
            lengths += part
        counts = self.__dict__.setdefault("_truncation", {}).setdefault(
            role, {"texts": 0, "truncated": 0, "max_length": limit}
        )
        counts["texts"] += len(lengths)
        counts["truncated"] += sum(1 for n in lengths if n > limit)
        counts["max_length"] = limit

    def thread_budget(self) -> dict[str, Any]:
        """The threads this backend computes with, as its runtime reports them now: torch's intra- and inter-op
        threads by default (empty when torch is not loaded); backends on another runtime override it."""
        return torch_threads()

    def encode_batch(self, texts: Sequence[str], *, role: Role) -> np.ndarray:
        """One planned batch, in the given order (no re-batching)."""
        check_role(role)
        return self.encode(texts, role=role, batch_size=max(len(texts), 1))


def torch_threads() -> dict[str, Any]:
    """``{"torch": {"intra_op": torch.get_num_threads(), "inter_op": torch.get_num_interop_threads()}}`` when torch
    is loaded (this never imports it), else ``{}``."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return {}
    return {"torch": {"intra_op": int(torch.get_num_threads()), "inter_op": int(torch.get_num_interop_threads())}}


IDENTITY_META: tuple[str, ...] = (
    "backend",
    "pooling",
    "max_seq_length",
    "normalize",
    "embed_dim",
    "source",
    "device",
    "dtype",
    "engine",
    "export_key",
)


def encoder_identity(encoder: Any) -> dict[str, Any]:
    """What a run needs of an encoder without its model (a Ray driver, a warm run): name, revision,
    fingerprint, similarity, prompts, and the metadata in :data:`IDENTITY_META` that it has.

    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> info = encoder_identity(KeywordEncoder(["cat"]))
    >>> info["name"], info["device"], info["dtype"], info["embed_dim"]
    ('fake/keyword-encoder', 'cpu', 'float32', 1)
    """
    describe = encoder.describe() if hasattr(encoder, "describe") else {}
    info: dict[str, Any] = {
        "name": encoder.name,
        "revision": encoder.revision,
        "fingerprint": encoder.fingerprint,
        "similarity": encoder.similarity,
        "prompts": dict(encoder.prompts),
        "device": "cpu",
        "dtype": "float32",
    }
    for attr in IDENTITY_META:
        value = describe.get(attr, getattr(encoder, attr, None))
        if isinstance(value, (str, int, float, bool)):
            info[attr] = value
    return info
