"""Encoders whose batches run elsewhere: on several local devices, or on a Ray cluster.

An engine asks one model replica for the batch plan of an encode call (the exact batches an
in-process call would form), has the batches encoded by its workers, and streams the vectors
back in plan order. Same batches, same model, same kind of device: the same vectors, bit for bit.

>>> import numpy as np
>>> from embedscope.testing.fakes import KeywordEncoder
>>> enc = LocalPlanned(KeywordEncoder(["cat", "dog"]))
>>> enc.encode(["a dog", "cat cat", "dog"], role="query", batch_size=2).tolist()
[[0.0, 1.0], [2.0, 0.0], [0.0, 1.0]]
>>> [idx for idx, _ in enc.encode_stream(["a dog", "cat cat", "dog"], role="query", batch_size=2)]
[[1, 0], [2]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from embedscope.models.base import IDENTITY_META, check_finite, check_role, encoder_identity
from embedscope.models.device import default_batch_size
from embedscope.types import Role


class PlannedEncoder:
    """Base of the engines: identity from the workers' encoder, planned batches run by :meth:`_run`."""

    engine = "planned"

    def __init__(self, info: dict[str, Any]) -> None:
        self.info = info
        self.name: str = info["name"]
        self.revision: str = info["revision"]
        self.fingerprint: str = info["fingerprint"]
        self.similarity = info["similarity"]
        self.prompts: dict[str, str] = info["prompts"]
        self.embed_dim: int | None = info.get("embed_dim")
        self.dtype: str = info["dtype"]
        self.device: str = info["device"]
        for attr in IDENTITY_META:
            if attr in info and attr not in ("embed_dim", "device", "dtype", "engine"):  # those are the engine's
                setattr(self, attr, info[attr])

    def describe(self) -> dict[str, Any]:
        return {"backend": self.info.get("backend"), "device": self.device, "dtype": self.dtype, "engine": self.engine}

    # -- what an engine implements --------------------------------------------------------------

    def _plan(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        raise NotImplementedError

    def _run(self, batches: list[list[str]], role: Role) -> Iterator[np.ndarray]:
        """The vectors of each batch, in the order given."""
        raise NotImplementedError

    # -- encoding ---------------------------------------------------------------------------------

    def batch_plan(self, lengths: Sequence[int], batch_size: int) -> list[list[int]]:
        """The batches (indices, in order) that :meth:`encode_stream` forms for texts of these lengths."""
        return self._plan(list(lengths), batch_size)

    def encode_batches(self, batches: Sequence[Sequence[str]], *, role: Role) -> Iterator[np.ndarray]:
        """The vectors of each given batch, in order, each encoded as one batch (the embedding cache
        sends only the planned batches it lacks)."""
        check_role(role)
        for vectors in self._run([list(b) for b in batches], role):
            yield np.asarray(vectors, dtype=np.float32)

    def encode_sparse(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> Any:
        """A sparse model's vectors as a float32 CSR matrix, each batch made sparse as it streams back."""
        from embedscope.models.sparse_rows import csr_rows, in_order, stack_csr

        parts, order = [], []
        for idx, vectors in self.encode_stream(texts, role=role, batch_size=batch_size, show_progress=show_progress):
            parts.append(csr_rows(vectors))
            order.extend(idx)
        return in_order(stack_csr(parts, int(self.embed_dim or 0)), order)

    def encode_stream(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> Iterator[tuple[list[int], np.ndarray]]:
        """``(indices, vectors)`` for each planned batch, in plan order, as workers finish them."""
        check_role(role)
        texts = list(texts)
        if not texts:
            return
        plan = self._plan([len(t) for t in texts], batch_size or default_batch_size(self.device))
        progress = None
        if show_progress:
            from tqdm.auto import tqdm

            from embedscope.progress import bar_label

            progress = tqdm(total=len(texts), desc=f"{bar_label(role, len(texts))} [{self.engine}]", unit="text")
        try:
            for idx, vectors in zip(plan, self._run([[texts[i] for i in b] for b in plan], role)):
                vectors = np.asarray(vectors, dtype=np.float32)
                if vectors.ndim != 2 or vectors.shape[0] != len(idx):
                    raise ValueError(f"a worker returned shape {vectors.shape} for {len(idx)} texts")
                check_finite(vectors, [texts[i] for i in idx], self.name)
                if progress is not None:
                    progress.update(len(idx))
                yield idx, vectors
        finally:
            if progress is not None:
                progress.close()

    def encode(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> np.ndarray:
        out: np.ndarray | None = None
        for idx, vectors in self.encode_stream(texts, role=role, batch_size=batch_size, show_progress=show_progress):
            if out is None:
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[idx] = vectors
        return out if out is not None else np.zeros((0, self.embed_dim or 0), dtype=np.float32)

    def close(self) -> None:
        """Release the workers (a no-op where there are none)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, device={self.device!r})"


class LocalPlanned(PlannedEncoder):
    """One in-process replica encoding the planned batches one by one (the reference the engines match)."""

    engine = "local-batches"

    def __init__(self, encoder: Any) -> None:
        super().__init__(encoder_identity(encoder))
        self.encoder = encoder

    def _plan(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        return self.encoder.batch_plan(lengths, batch_size)

    def _run(self, batches: list[list[str]], role: Role) -> Iterator[np.ndarray]:
        for batch in batches:
            yield self.encoder.encode_batch(batch, role=role)
