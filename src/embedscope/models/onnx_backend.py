"""ONNX backend: onnxruntime (CPU, or CUDA with ``onnxruntime-gpu``), with inputs and outputs read from the graph.

* Device: ``cpu`` runs CPUExecutionProvider; ``cuda``/``cuda:N`` runs CUDAExecutionProvider on that
  GPU (with ``onnxruntime-gpu`` installed in place of ``onnxruntime``), and is an error naming the providers present
  when it is missing. The graph fixes the precision: only ``dtype=fp32`` (the graph's own) applies.

* Inputs: the names come from the session. ``input_ids`` and ``attention_mask`` are fed by
  name, ``token_type_ids`` (zeros) only when the graph declares it; any other input is an error
  that names it. Integer widths follow the graph (int64 or int32).
* Shapes: a dynamic sequence dimension is padded to the longest text of the batch; a fixed one
  (an int in the graph) makes every batch padded/truncated to exactly that length. A fixed batch
  dimension is honoured by running sub-batches of that size.
* Output: ``output_name`` if given; else a pooled 2-D float output ``[batch, hidden]``
  (``sentence_embedding`` first; ``pooler_output`` — BERT's CLS head, not a sentence embedding —
  only as a last resort), unless ``pooling`` was asked for; else the token output
  ``[batch, seq, hidden]`` pooled with the attention mask by :func:`embedscope.models.pooling.pool`.
* Tokenizer: ``tokenizer.json`` (``tokenizers``) or a transformers tokenizer folder, from the
  model's folder or an explicit ``tokenizer`` path or hub id.
* Fingerprint: sha256 of the ``.onnx`` bytes (cached by path, size and mtime), plus tokenizer
  content and every setting.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import BaseEncoder, Similarity, prompted_texts
from embedscope.models.batching import cpu_threads, encode_sorted
from embedscope.models.device import DeviceUnavailableError, device_kind
from embedscope.models.fingerprint import hash_dict, hash_file, hash_folder, short
from embedscope.models.folder import (
    resolve_prompts,
    st_max_seq_length,
    st_normalizes,
    st_pooling_mode,
    st_prompts,
    st_similarity,
)
from embedscope.models.options import Placement, requested_device
from embedscope.models.pooling import check_pooling_mode, normalize_rows, pool
from embedscope.models.third_party import quiet_onnxruntime
from embedscope.types import Role

BACKEND = "onnx"
POOLED_OUTPUT_NAMES = ("sentence_embedding", "sentence_embeddings", "embeddings", "embedding", "text_embeds")
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
    "special_tokens_map.json",
    "merges.txt",
    "vocab.json",
)
_INT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


def find_onnx_file(path: str | Path) -> Path:
    """The ``.onnx`` file of ``path``: the file itself, or ``model.onnx`` (or ``onnx/model.onnx``) in a folder."""
    p = Path(path)
    if p.is_file():
        return p
    for candidate in (p / "model.onnx", p / "onnx" / "model.onnx"):
        if candidate.is_file():
            return candidate
    found = sorted(p.glob("*.onnx")) if p.is_dir() else []
    if len(found) == 1:
        return found[0]
    raise ConfigError(
        f"{path}: no ONNX model found (expected a .onnx file, or a folder with model.onnx)"
        + (f"; several .onnx files: {', '.join(f.name for f in found)} — pass the file" if found else "")
    )


def find_tokenizer_folder(onnx_file: Path) -> Path | None:
    """A folder next to the ONNX file (or one level up, for ``onnx/model.onnx``) that holds a tokenizer."""
    for folder in (onnx_file.parent, onnx_file.parent.parent):
        if (
            (folder / "tokenizer.json").is_file()
            or (folder / "tokenizer_config.json").is_file()
            or (folder / "vocab.txt").is_file()
        ):
            return folder
    return None


class _Tokenizer:
    """Batch tokenisation to numpy ``input_ids``/``attention_mask``/``token_type_ids``."""

    def __init__(self, source: str | Path) -> None:
        p = Path(source)
        json_file = p if p.is_file() else (p / "tokenizer.json" if (p / "tokenizer.json").is_file() else None)
        self.source = str(source)
        self._fast = None
        self._hf = None
        if json_file is not None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(json_file))
            padding = tok.padding
            self.pad_id = int(padding["pad_id"]) if padding else self._guess_pad_id(tok)
            self.pad_type_id = int(padding["pad_type_id"]) if padding else 0
            self.padding_left = bool(padding and padding.get("direction") == "Left")
            tok.no_padding()
            tok.no_truncation()
            self._fast = tok
            self.kind = "tokenizers"
            self.content = hash_file(json_file)
            config = p / "tokenizer_config.json" if p.is_dir() else json_file.parent / "tokenizer_config.json"
            self.model_max_length = _model_max_length(config)
        else:
            try:
                from transformers import AutoTokenizer
            except ImportError as e:  # pragma: no cover
                raise MissingDependencyError("transformers", f"Loading the tokenizer {source}") from e
            self._hf = AutoTokenizer.from_pretrained(str(source))
            self.kind = type(self._hf).__name__
            self.pad_id = self._hf.pad_token_id or 0
            self.padding_left = getattr(self._hf, "padding_side", "right") == "left"
            self.content = (
                hash_folder(p, [p / f for f in _TOKENIZER_FILES if (p / f).is_file()]) if p.is_dir() else str(source)
            )
            mml = getattr(self._hf, "model_max_length", None)
            self.model_max_length = mml if isinstance(mml, int) and 0 < mml < 1_000_000 else None

    @staticmethod
    def _guess_pad_id(tok: Any) -> int:
        for token in ("[PAD]", "<pad>", "<PAD>"):
            idx = tok.token_to_id(token)
            if idx is not None:
                return int(idx)
        return 0

    def counts(self, texts: Sequence[str], max_length: int) -> list[int]:
        """Each text's token count as :meth:`__call__` truncates it to ``max_length`` (before padding)."""
        if self._hf is not None:
            return [len(ids) for ids in self._hf(list(texts), truncation=True, max_length=max_length)["input_ids"]]
        tok = self._fast
        assert tok is not None  # __init__ sets either _hf or _fast
        tok.enable_truncation(max_length=max_length)
        return [len(e.ids) for e in tok.encode_batch(list(texts))]

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's token count, untruncated (special tokens in)."""
        if self._hf is not None:
            return [len(ids) for ids in self._hf(list(texts), truncation=False, verbose=False)["input_ids"]]
        tok = self._fast
        assert tok is not None  # __init__ sets either _hf or _fast
        tok.no_truncation()
        return [len(e.ids) for e in tok.encode_batch(list(texts))]

    def __call__(self, texts: list[str], max_length: int, pad_to: int | None) -> dict[str, np.ndarray]:
        if self._hf is not None:
            enc = self._hf(
                texts,
                padding="max_length" if pad_to else True,
                truncation=True,
                max_length=pad_to or max_length,
                return_tensors="np",
                return_token_type_ids=True,
            )
            out = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
            out["token_type_ids"] = enc.get("token_type_ids", np.zeros_like(enc["input_ids"]))
            return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}
        tok = self._fast
        assert tok is not None  # __init__ sets either _hf or _fast
        tok.enable_truncation(max_length=max_length)
        encodings = tok.encode_batch(texts)
        width = pad_to or max(len(e.ids) for e in encodings)
        ids = np.full((len(texts), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        types = np.full((len(texts), width), self.pad_type_id, dtype=np.int64)
        for row, e in enumerate(encodings):
            n = min(len(e.ids), width)
            sl = slice(width - n, width) if self.padding_left else slice(0, n)
            ids[row, sl] = e.ids[:n]
            mask[row, sl] = e.attention_mask[:n]
            types[row, sl] = e.type_ids[:n]
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _model_max_length(config_file: Path) -> int | None:
    try:
        value = json.loads(config_file.read_text(encoding="utf-8")).get("model_max_length")
    except (OSError, ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, (int, float)) and 0 < value < 1_000_000 else None


def _fixed(dim: Any) -> int | None:
    return int(dim) if isinstance(dim, int) and dim > 0 else None


def _has_cuda_provider(ort: Any) -> bool:
    return "CUDAExecutionProvider" in ort.get_available_providers()


def execution_providers(ort: Any, device: str) -> list[Any]:
    """onnxruntime providers for ``device``: the CPU's, or CUDA's on that GPU (CPU as fallback for
    the few operators CUDA lacks)."""
    if device_kind(device) == "cpu":
        return ["CPUExecutionProvider"]
    if device_kind(device) != "cuda" or not _has_cuda_provider(ort):
        raise DeviceUnavailableError(
            f"device {device!r}: onnxruntime here has only {', '.join(ort.get_available_providers())}; "
            "for CUDA, replace onnxruntime with onnxruntime-gpu (pip uninstall -y onnxruntime && pip install onnxruntime-gpu)"
        )
    index = int(device.split(":", 1)[1]) if ":" in device else 0
    return [("CUDAExecutionProvider", {"device_id": index}), "CPUExecutionProvider"]


class OnnxEncoder(BaseEncoder):
    """An ONNX embedding model run with onnxruntime as an :class:`~embedscope.models.base.Encoder`.

    Args:
        model_path: ``.onnx`` file or folder holding ``model.onnx``.
        name: what results are filed under (default: the folder or file name).
        revision: recorded revision (default: a short hash of the ``.onnx`` bytes).
        tokenizer: ``tokenizer.json``, tokenizer folder or hub id (default: next to the model).
        pooling: pool the token output with this mode (default ``"mean"`` when no pooled output is used).
        max_seq_length: truncation length (default: the graph's fixed sequence length, else
            ``sentence_bert_config.json``, else the tokenizer's ``model_max_length``, else 512).
        normalize: L2-normalise the vectors (default: whether ``modules.json`` has ``Normalize``).
        output_name: the graph output to use.
        prompts / query_prompt: role → prompt prepended to the text; the query-only prompt.
        similarity: ``"cosine"`` (default) or ``"dot"``.
        threads: intra-op threads (default: the usable cores).
        device: ``auto`` (default: CUDA when onnxruntime-gpu and a GPU are here), ``cpu``, ``cuda``, ``cuda:N``.
        dtype: ``fp32`` only (an ONNX graph has its own precision; export an fp16 graph for fp16).
    """

    backend = BACKEND
    supported_dtypes = ("float32",)
    fast_path: dict[str, Any] | None = None  # set by embedscope.models.exports: the export this graph came from
    export_key: str | None = None

    def __init__(
        self,
        model_path: str | Path,
        *,
        name: str | None = None,
        revision: str | None = None,
        tokenizer: str | Path | None = None,
        pooling: str | None = None,
        max_seq_length: int | None = None,
        normalize: bool | None = None,
        output_name: str | None = None,
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        similarity: Similarity | None = None,
        threads: int | None = None,
        source: str | None = None,
        device: str | Placement | None = "auto",
        dtype: str | None = None,
    ) -> None:
        quiet_onnxruntime()  # telemetry off before onnxruntime initialises
        try:
            import onnxruntime as ort
        except ImportError as e:  # pragma: no cover
            raise MissingDependencyError("onnxruntime", "The ONNX backend") from e
        quiet_onnxruntime()
        self._place(device, dtype)
        if (
            requested_device(device) in (None, "auto")
            and device_kind(self.device) != "cpu"
            and not _has_cuda_provider(ort)
        ):
            self.device = "cpu"  # auto: onnxruntime without its CUDA provider runs on the CPU
        self.onnx_file = find_onnx_file(model_path)
        self.source = source or str(model_path)
        folder = self.onnx_file.parent
        st_folder = (
            folder
            if (folder / "modules.json").is_file()
            else (folder.parent if (folder.parent / "modules.json").is_file() else None)
        )

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or cpu_threads()
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self.session = ort.InferenceSession(
            str(self.onnx_file), options, providers=execution_providers(ort, self.device)
        )

        # inputs
        self.input_names: list[str] = []
        self._input_roles: dict[str, str] = {}
        self._input_dtypes: dict[str, Any] = {}
        fixed_seq: set[int] = set()
        fixed_batch: set[int] = set()
        for inp in self.session.get_inputs():
            lowered = inp.name.lower()
            role = next((r for r in ("input_ids", "attention_mask", "token_type_ids") if r in lowered), None)
            if role is None:
                raise ConfigError(
                    f"{self.onnx_file}: graph input {inp.name!r} is not input_ids, attention_mask or "
                    "token_type_ids; embedscope cannot feed it"
                )
            self.input_names.append(inp.name)
            self._input_roles[inp.name] = role
            self._input_dtypes[inp.name] = _INT_TYPES.get(inp.type, np.int64)
            shape = list(inp.shape or [])
            if len(shape) == 2:
                if _fixed(shape[1]):
                    fixed_seq.add(int(shape[1]))
                if _fixed(shape[0]):
                    fixed_batch.add(int(shape[0]))
        if "input_ids" not in self._input_roles.values():
            raise ConfigError(f"{self.onnx_file}: the graph has no input_ids input (inputs: {self.input_names})")
        if len(fixed_seq) > 1 or len(fixed_batch) > 1:
            raise ConfigError(
                f"{self.onnx_file}: inputs disagree on fixed shapes {sorted(fixed_seq)} {sorted(fixed_batch)}"
            )
        self.fixed_seq_length = fixed_seq.pop() if fixed_seq else None
        self.fixed_batch_size = fixed_batch.pop() if fixed_batch else None

        # output
        outputs = {o.name: o for o in self.session.get_outputs()}
        if pooling is not None:
            check_pooling_mode(pooling)
        if output_name is not None:
            if output_name not in outputs:
                raise ConfigError(f"{self.onnx_file}: no output {output_name!r}; outputs: {', '.join(outputs)}")
            chosen = outputs[output_name]
        else:
            chosen = self._choose_output(list(outputs.values()), want_tokens=pooling is not None)
        rank = len(chosen.shape or [])
        if rank not in (2, 3) or chosen.type != "tensor(float)":
            raise ConfigError(
                f"{self.onnx_file}: output {chosen.name!r} is {chosen.type} of rank {rank}; need float [batch, hidden] "
                "or [batch, seq, hidden]"
            )
        self.output_name = chosen.name
        self.pooled_output = rank == 2
        if self.pooled_output and pooling is not None:
            raise ConfigError(
                f"{self.onnx_file}: output {chosen.name!r} is already pooled; pooling={pooling!r} cannot apply"
            )
        self.pooling = (
            "graph"
            if self.pooled_output
            else check_pooling_mode(pooling or (st_pooling_mode(st_folder) if st_folder else None) or "mean")
        )
        hidden = chosen.shape[-1]
        self.embed_dim = int(hidden) if _fixed(hidden) else None

        # tokenizer
        tok_source: str | Path | None = tokenizer
        if tok_source is None:
            tok_source = find_tokenizer_folder(self.onnx_file)
        if tok_source is None:
            raise ConfigError(
                f"{self.onnx_file}: no tokenizer next to the model; pass tokenizer=<tokenizer.json, folder or hub id>"
            )
        self.tokenizer = _Tokenizer(tok_source)

        # lengths
        if max_seq_length is None:
            max_seq_length = self.fixed_seq_length or (st_max_seq_length(st_folder) if st_folder else None)
            max_seq_length = max_seq_length or self.tokenizer.model_max_length or 512
        if max_seq_length < 1:
            raise ConfigError(f"max_seq_length must be >= 1, got {max_seq_length}")
        if self.fixed_seq_length is not None and max_seq_length > self.fixed_seq_length:
            raise ConfigError(
                f"max_seq_length={max_seq_length} exceeds the graph's fixed sequence length {self.fixed_seq_length}"
            )
        self.max_seq_length = int(max_seq_length)

        self.normalize = bool(normalize) if normalize is not None else bool(st_folder and st_normalizes(st_folder))
        self.prompts = resolve_prompts(st_prompts(st_folder) if st_folder else {}, prompts, query_prompt)
        self.similarity: Similarity = similarity or (st_similarity(st_folder) if st_folder else "cosine")

        self.content_hash = hash_file(self.onnx_file)
        extra = sorted(p for p in folder.glob(self.onnx_file.name + "*") if p != self.onnx_file and p.is_file())
        self.external_data_hash = hash_dict([(p.name, hash_file(p)) for p in extra]) if extra else None
        self.name = name or (folder.name if self.onnx_file.name == "model.onnx" else self.onnx_file.stem)
        self.revision = revision or short(self.content_hash)

    @property
    def input_roles(self) -> dict[str, str]:
        """Each graph input's name → what it is fed: ``input_ids``, ``attention_mask`` or ``token_type_ids``."""
        return dict(self._input_roles)

    @staticmethod
    def _choose_output(outputs: list[Any], want_tokens: bool) -> Any:
        floats = [o for o in outputs if o.type == "tensor(float)"]
        pooled = [o for o in floats if len(o.shape or []) == 2]
        tokens = [o for o in floats if len(o.shape or []) == 3]
        named = [o for o in pooled if o.name in POOLED_OUTPUT_NAMES]
        others = [o for o in pooled if o.name not in POOLED_OUTPUT_NAMES and o.name != "pooler_output"]
        pooler = [o for o in pooled if o.name == "pooler_output"]
        order = tokens + named + others + pooler if want_tokens else named + others + tokens + pooler
        if not order:
            raise ConfigError(
                "no float output of shape [batch, hidden] or [batch, seq, hidden]; outputs: "
                + ", ".join(f"{o.name} {o.type} {o.shape}" for o in outputs)
            )
        return order[0]

    def settings(self) -> dict[str, Any]:
        """Everything that changes a vector apart from text and role (hashed into ``fingerprint``)."""
        return {
            "backend": self.backend,
            "onnx_sha256": self.content_hash,
            "external_data": self.external_data_hash,
            "output": self.output_name,
            "pooling": self.pooling,
            "max_seq_length": self.max_seq_length,
            "fixed_seq_length": self.fixed_seq_length,
            "normalize": self.normalize,
            "tokenizer": self.tokenizer.content,
            "tokenizer_kind": self.tokenizer.kind,
            **({"fast_path": self.fast_path} if self.fast_path else {}),
        }

    def padded_lengths(self, texts: Sequence[str], *, role: Role) -> list[int]:
        """Each text's token count as a batch pads it (the role's prompt in, truncated; a fixed sequence length
        pads every batch to it)."""
        if self.fixed_seq_length is not None:
            return [self.fixed_seq_length] * len(texts)
        return self.tokenizer.counts(prompted_texts(list(texts), role, self.prompts), self.max_seq_length)

    def token_lengths(self, texts: Sequence[str], *, role: Role) -> list[int] | None:
        """Each text's token count as the tokenizer makes it (the role's prompt in), untruncated."""
        return self.tokenizer.lengths(prompted_texts(list(texts), role, self.prompts))

    def thread_budget(self) -> dict[str, Any]:
        """onnxruntime's threads as the session holds them: ``intra_op`` as configured (0 is onnxruntime's
        default, one per physical core, which it does not report: then None, and ``configured`` says 0; the CPU
        count is in the result's ``compute.cpu``)."""
        options = self.session.get_session_options()
        intra, inter = int(options.intra_op_num_threads), int(options.inter_op_num_threads)
        return {
            "onnxruntime": {
                "intra_op": intra or None,
                "inter_op": inter or None,
                "configured": {"intra_op": intra, "inter_op": inter},
                "providers": list(self.session.get_providers()),
            }
        }

    def _run(self, batch: dict[str, np.ndarray]) -> np.ndarray:
        feed = {
            name: batch[role].astype(self._input_dtypes[name], copy=False) for name, role in self._input_roles.items()
        }
        return self.session.run([self.output_name], feed)[0]

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        batch = self.tokenizer(texts, self.max_seq_length, self.fixed_seq_length)
        n = len(texts)
        step = self.fixed_batch_size
        if step is None:
            out = self._run(batch)
        else:
            parts = []
            for start in range(0, n, step):
                sub = {k: v[start : start + step] for k, v in batch.items()}
                short_by = step - len(sub["input_ids"])
                if short_by:  # fill a partial batch with copies of its first row
                    sub = {k: np.concatenate([v, np.repeat(v[:1], short_by, axis=0)]) for k, v in sub.items()}
                parts.append(self._run(sub)[: step - short_by])
            out = np.concatenate(parts)
        if not self.pooled_output:
            out = pool(out, batch["attention_mask"], self.pooling)
        out = np.asarray(out, dtype=np.float32)
        return normalize_rows(out) if self.normalize else out

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """Encode ``texts`` (the role's prompt prepended) in length-sorted batches."""
        texts = prompted_texts(texts, role, self.prompts)
        return encode_sorted(
            texts, self._encode_batch, batch_size=batch_size, show_progress=show_progress, dim=self.embed_dim
        )

    def __repr__(self) -> str:
        return f"OnnxEncoder(name={self.name!r}, file={str(self.onnx_file)!r}, output={self.output_name!r})"
