"""Learned-sparse (SPLADE) models: term weights over the vocabulary, exactly as sentence-transformers'
``SparseEncoder`` computes them, without holding a batch's vocabulary logits at once.

A SPLADE model is a masked-language-model checkpoint whose vector for a text is, for every vocabulary term ``j``,

    w_j = pool over tokens t of log(1 + ReLU(logit_{t,j}))      (pool: max, or sum)

sentence-transformers computes every token's logits over the whole vocabulary first (batch × tokens × vocabulary
floats: about 2 GB for 32 texts of 512 tokens with BERT's 30,522 terms). Here the transformer runs once per batch
with its output projection (the vocabulary decoder) held back, and the decoder is applied to a slice of the token
positions at a time, each slice pooled into the running maximum: the same numbers bit for bit (max pooling is
exact in any order; the slices compute the same products), in ``batch × slice × vocabulary`` floats. Sum pooling
adds in sentence-transformers' own chunks (its ``SpladePooling.chunk_size``), so it slices only as that module does.

Other sparse forms (an inference-free model's static query weights behind a ``Router``, a sparse auto-encoder)
encode through sentence-transformers' own ``encode_query`` / ``encode_document``: the same numbers, its memory.

Vectors come out two ways: :meth:`SparseModelEncoder.encode` gives dense float32 rows ``[n, vocabulary]`` (what
every task type but retrieval scores, as mteb's ``SparseEncoderWrapper`` densifies them), and
:meth:`SparseModelEncoder.encode_sparse` a CSR matrix built batch by batch (what sparse search indexes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import check_finite, check_role
from embedscope.models.device import default_batch_size
from embedscope.models.folder import quiet_loading
from embedscope.models.options import Placement
from embedscope.models.pooling import SPARSE_POOLING_MODES, check_pooling_mode
from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder
from embedscope.models.sparse_rows import csr_rows, in_order, stack_csr
from embedscope.types import Role

BACKEND = "sparse"
SLICE_FLOATS = 32 * 2**20  # logits held at once: batch × token slice × vocabulary ≤ 32M floats (128 MB in float32)
_SPARSE_MODULES = ("SpladePooling", "SparseStaticEmbedding", "Router", "SparseAutoEncoder")


def is_sparse_folder(path: Path) -> bool:
    """A sentence-transformers ``SparseEncoder`` folder: its ``modules.json`` names a sparse module (SPLADE pooling,
    static query weights, a router between them, a sparse auto-encoder), or its config says ``SparseEncoder``."""
    if not path.is_dir():
        return False
    modules = path / "modules.json"
    if modules.is_file():
        try:
            text = modules.read_text(encoding="utf-8")
        except OSError:
            return False
        if any(name in text for name in _SPARSE_MODULES):
            return True
    config = path / "config_sentence_transformers.json"
    if config.is_file():
        try:
            return json.loads(config.read_text(encoding="utf-8")).get("model_type") == "SparseEncoder"
        except (OSError, ValueError, AttributeError):
            return False
    return False


def masked_lm_architecture(path: Path) -> str | None:
    """The checkpoint's architecture when ``config.json`` names a masked-language-model head (``…ForMaskedLM``),
    else None; ConfigError naming what it is when it has none (SPLADE's weights are that head's logits)."""
    config = path / "config.json"
    if not config.is_file():
        return None
    try:
        architectures = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError(f"{config}: not readable as JSON ({e})") from e
    masked = [a for a in architectures if str(a).endswith("ForMaskedLM")]
    if masked:
        return str(masked[0])
    raise ConfigError(
        f"{path}: a sparse model needs a masked-language-model head, and this checkpoint is "
        f"{', '.join(map(str, architectures)) or 'of no named architecture'} (SPLADE's term weights are the MLM "
        "head's vocabulary logits)"
    )


def load_sparse_model(source: str | Path, pooling: str | None, revision: str | None, device: str) -> Any:
    """A sentence-transformers ``SparseEncoder``: a saved one as it is; an MLM checkpoint (or hub id) as
    ``Transformer(fill-mask) + SpladePooling(pooling, default max)``."""
    try:
        from sentence_transformers.sparse_encoder import SparseEncoder
        from sentence_transformers.sparse_encoder.modules import SpladePooling
    except ImportError as e:  # pragma: no cover
        raise MissingDependencyError("sentence-transformers", "A sparse (SPLADE) model") from e
    path = Path(source)
    with quiet_loading():
        if path.exists() and is_sparse_folder(path):
            return SparseEncoder(str(path), device=device)
        if path.exists():
            masked_lm_architecture(path)
        else:  # a hub id: sentence-transformers decides its form (a saved SparseEncoder, or MLM + SPLADE pooling)
            return SparseEncoder(str(source), revision=revision, device=device)
        from sentence_transformers.base.modules import Transformer

        transformer = Transformer(str(path), transformer_task="fill-mask")
        strategy: Any = pooling or "max"  # checked: one of SPARSE_POOLING_MODES
        return SparseEncoder(modules=[transformer, SpladePooling(strategy)], device=device)


def _pooling_module(model: Any) -> Any:
    return next((m for m in model if type(m).__name__ == "SpladePooling"), None)


@contextmanager
def decoder_held_back(transformer: Any) -> Iterator[Any]:
    """The transformer's vocabulary decoder (its output embeddings), made the identity while inside: the model's
    forward then returns the MLM head's transformed hidden states, to which the decoder is applied by slices."""
    model = getattr(transformer, "auto_model", None) or transformer.model
    decoder = model.get_output_embeddings()
    decoder.forward = lambda hidden: hidden  # an instance attribute: the class's forward is untouched
    try:
        yield decoder
    finally:
        del decoder.forward


class SparseModelEncoder(SentenceTransformerEncoder):
    """A learned-sparse model as an :class:`~embedscope.models.base.Encoder` whose vectors are term weights.

    Args:
        model_name_or_path: an MLM checkpoint folder, a sentence-transformers ``SparseEncoder`` folder, or a hub id.
        pooling: ``max`` (SPLADE v2 and later; the default) or ``sum`` for an MLM checkpoint; for a saved
            ``SparseEncoder``, replaces its SPLADE pooling's strategy.
        normalize: refused when true: SPLADE scores are dot products of the weights as they are.
        Other arguments as :class:`~embedscope.models.sentence_transformers_backend.SentenceTransformerEncoder`.
    """

    backend = BACKEND

    def __init__(
        self,
        model_name_or_path: str | Path,
        *,
        pooling: str | None = None,
        normalize: bool | None = None,
        revision: str | None = None,
        device: str | Placement | None = "auto",
        dtype: str | None = None,
        **common: Any,
    ) -> None:
        if normalize:
            raise ConfigError(
                f"{model_name_or_path}: normalize cannot apply to a sparse model: its vectors are term weights, "
                "scored by their dot product as they are"
            )
        if pooling is not None:
            check_pooling_mode(pooling, SPARSE_POOLING_MODES)
        self._place(device, dtype)
        model = self._load_torch_model(load_sparse_model(model_name_or_path, pooling, revision, self.device))
        module = _pooling_module(model)
        if pooling is not None:
            if module is None:
                raise ConfigError(
                    f"{model_name_or_path}: the model has no SPLADE pooling, so pooling={pooling!r} cannot apply"
                )
            module.pooling_strategy = pooling
        super().__init__(model_name_or_path, model=model, revision=revision, **common)
        self.similarity = "dot"

    # -- what the runner records ------------------------------------------------------------------

    @property
    def pooling(self) -> str | None:
        module = _pooling_module(self.model)
        return str(module.pooling_strategy) if module is not None else None

    @property
    def embed_dim(self) -> int | None:  # type: ignore[override]
        """The vocabulary's size (every term a dimension)."""
        for module in self.model:
            model = getattr(module, "auto_model", None) or getattr(module, "model", None)
            vocabulary = getattr(getattr(model, "config", None), "vocab_size", None)
            if vocabulary:
                return int(vocabulary)
        return super().embed_dim

    def settings(self) -> dict[str, Any]:
        """The sentence-transformers settings and each sparse module's own (pooling, activation, pruning)."""
        sparse = [
            {a: getattr(m, a) for a in ("pooling_strategy", "activation_function", "chunk_size") if hasattr(m, a)}
            for m in self.model
            if type(m).__name__ in _SPARSE_MODULES
        ]
        return {
            **super().settings(),
            "sparse_modules": sparse,
            "max_active_dims": getattr(self.model, "max_active_dims", None),
        }

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "vectors": "sparse"}

    # -- encoding -----------------------------------------------------------------------------

    def _sliced(self) -> bool:
        """Whether the decoder can be applied by slices: a transformer with an MLM head, then SPLADE max pooling (sum
        pooling adds in the module's own chunks, so the slices are those chunks)."""
        module = _pooling_module(self.model)
        return (
            len(self.model) == 2
            and module is self.model[1]
            and getattr(self.model[0], "transformer_task", None) == "fill-mask"
            and getattr(self.model, "max_active_dims", None) is None
            and bool(module.pooling_strategy == "max" or module.chunk_size)
        )

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """Dense rows, batch by batch in sentence-transformers' own batches (:meth:`batch_plan`)."""
        plan = self.batch_plan([len(t) for t in texts], batch_size)
        out = np.empty((len(texts), int(self.embed_dim or 0)), dtype=np.float32)
        for batch in plan:
            out[batch] = self._batch([texts[i] for i in batch], role)
        return out

    def encode_sparse(
        self, texts: Sequence[str], *, role: Role, batch_size: int | None = None, show_progress: bool = False
    ) -> Any:
        """The vectors of ``encode(texts)`` as a float32 CSR matrix, each batch made sparse as it is encoded."""
        check_role(role)
        texts = list(texts)
        plan = self.batch_plan([len(t) for t in texts], batch_size or default_batch_size(self.device))
        parts = [self.encode_batch_sparse([texts[i] for i in batch], role=role) for batch in plan]
        return in_order(stack_csr(parts, int(self.embed_dim or 0)), [i for b in plan for i in b])

    def encode_batch_sparse(self, texts: Sequence[str], *, role: Role) -> Any:
        """One planned batch's vectors as a CSR matrix (checked finite first)."""
        return csr_rows(self.encode_batch(texts, role=role))

    def encode_batch(self, texts: Sequence[str], *, role: Role) -> np.ndarray:
        """One planned batch, in the given order (no re-batching), as dense rows."""
        check_role(role)
        texts = list(texts)
        return check_finite(self._batch(texts, role), texts, self.name)

    def _batch(self, texts: list[str], role: Role) -> np.ndarray:
        import torch

        if not self._sliced():
            fn = self.model.encode_query if role == "query" else self.model.encode_document
            out = fn(texts, prompt=self.prompts.get(role, ""), batch_size=max(len(texts), 1), convert_to_tensor=True)
            out = out.to_dense() if getattr(out, "is_sparse", False) else out
            return out.detach().cpu().float().numpy()
        features = self.model.preprocess(texts, prompt=self.prompts.get(role, ""))
        features = {k: v.to(self.device) if hasattr(v, "to") else v for k, v in features.items()}
        with torch.inference_mode(), decoder_held_back(self.model[0]) as decoder:
            hidden = self.model[0](features)["token_embeddings"]
            pooled = self._pool_by_slices(hidden, features["attention_mask"], decoder)
        return pooled.cpu().float().numpy()

    def _pool_by_slices(self, hidden: Any, attention_mask: Any, decoder: Any) -> Any:
        """SpladePooling's forward, the decoder applied to one slice of token positions at a time.

        Max pooling takes the maximum of the masked logits first and applies ``log(1 + ReLU(·))`` once per term:
        that function is non-decreasing, so ``max_t f(x_t) = f(max_t x_t)`` exactly (the same float goes in), at one
        logarithm per term instead of one per token and term. Sum pooling adds ``f`` of every token, in the module's
        chunks, as it does.
        """
        import torch

        module = self.model[1]
        batch, length, _ = hidden.shape
        vocabulary = decoder.weight.shape[0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        if module.pooling_strategy == "max":
            size = max(1, SLICE_FLOATS // max(batch * vocabulary, 1))
            top = torch.full((batch, vocabulary), float("-inf"), dtype=hidden.dtype, device=hidden.device)
            for start in range(0, length, size):
                logits = decoder.__class__.forward(decoder, hidden[:, start : start + size])
                torch.maximum(top, torch.amax(logits.mul_(mask[:, start : start + size]), dim=1), out=top)
            return self._activation(top)
        pooled = torch.zeros((batch, vocabulary), dtype=hidden.dtype, device=hidden.device)
        for start in range(0, length, int(module.chunk_size)):
            logits = decoder.__class__.forward(decoder, hidden[:, start : start + int(module.chunk_size)])
            pooled += torch.sum(self._activation(logits.mul_(mask[:, start : start + int(module.chunk_size)])), dim=1)
        return pooled

    def _activation(self, logits: Any) -> Any:
        """SPLADE's ``log(1 + ReLU(x))`` in place (``log1p_relu``: the logarithm twice), as SpladePooling applies it."""
        weights = logits.relu_().log1p_()
        if self.model[1].activation_function == "log1p_relu":
            weights = weights.log1p_()
        return weights.add_(0.0)  # -0.0 (a masked position's ReLU) as +0.0, as SpladePooling's maximum leaves it
