"""Fast paths for an ONNX model, through the same export cache as a torch model's (:mod:`embedscope.models.exports`).

An ONNX graph needs no torch export; the fast-path backends whose registry record lists ``onnx`` among its
``sources`` act on it directly:

* ``openvino`` / ``openvino-bf16``: ``openvino.convert_model`` reads the graph (fp32, or quantized already: a graph
  with int8 weights or quantize/dequantize nodes runs as it is) and saves it as an IR, run in f32 or bf16;
* ``openvino-int8``: that IR of an fp32 graph, statically quantized by NNCF on a calibration sample;
* ``onnx-int8``: an fp32 graph quantized dynamically by ONNX Runtime (int8 weights per output channel).

Quantizing a graph that is quantized already is refused in one line (run it on ``openvino``, the faster runtime).
The graph's output, pooling, normalisation, prompts, similarity, maximum length and tokenizer are read as the
``onnx`` backend reads them (an alias's or the user's options first), kept in the export's manifest, and used by
the exported encoder; a pooled output stays pooled.

>>> QUANTIZED_OPS >= {"QuantizeLinear", "MatMulInteger"}
True
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.errors import SettingError
from embedscope.models.fingerprint import hash_dict
from embedscope.models.folder import EmbeddingSettings
from embedscope.models.options import EncoderOptions

QUANTIZED_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "QLinearMatMul",
        "ConvInteger",
        "QLinearConv",
        "QGemm",
        "QAttention",
        "DynamicQuantizeMatMul",
        "MatMulNBits",
    }
)
_INTEGER_WEIGHTS = ("INT8", "UINT8", "INT4", "UINT4")
TOKEN_OUTPUT, POOLED_OUTPUT = "token_embeddings", "sentence_embedding"  # the exported graph's one output


def quantized_graph(onnx_file: Path) -> str | None:
    """Why the graph at ``onnx_file`` is quantized already, or None for a floating-point graph.

    Quantize/dequantize or integer-matmul nodes count, and so do integer weights (a weight-only quantized graph
    stores them as int8 and casts them back at run time)."""
    import onnx

    model = onnx.load(str(onnx_file), load_external_data=False)
    ops = sorted({node.op_type for node in model.graph.node} & QUANTIZED_OPS)
    if ops:
        return f"it has {', '.join(ops)} nodes"
    dtypes = {t.data_type for t in model.graph.initializer}
    integer = [n for n in _INTEGER_WEIGHTS if getattr(onnx.TensorProto, n, None) in dtypes]
    return f"its weights are stored as {'/'.join(w.lower() for w in integer)}" if integer else None


@dataclass(frozen=True)
class OnnxSource(EmbeddingSettings):
    """An ONNX model as a fast path reads it (through the ``onnx`` backend's own resolution).

    Attributes:
        onnx_file: the graph.
        fingerprint: sha256 over the graph, its external data, the output used and the tokenizer's content.
        output: the graph output whose vectors are used.
        pooled: whether that output is pooled already (``[batch, hidden]``).
        roles: graph input name → ``input_ids``, ``attention_mask`` or ``token_type_ids``.
        tokenizer: the tokenizer folder, ``tokenizer.json`` or hub id.
        quantized: why the graph is quantized already (None: floating point).
    """

    onnx_file: Path
    fingerprint: str
    output: str
    pooled: bool
    roles: dict[str, str]
    tokenizer: str
    quantized: str | None

    def meta(self) -> dict[str, Any]:
        """The embedding settings the export carries in its manifest, with the graph's output and tokenizer."""
        return {"form": "onnx", "output": self.output, **super().meta(), "tokenizer_source": self.tokenizer}


def onnx_source(path: str | Path, options: EncoderOptions) -> OnnxSource:
    """The :class:`OnnxSource` of ``path`` (a ``.onnx`` file or a folder holding one), with ``options``' output,
    tokenizer, pooling, normalisation, prompts and maximum length applied as the ``onnx`` backend applies them."""
    from embedscope.models.integrity import model_load_errors
    from embedscope.models.onnx_backend import find_onnx_file, find_tokenizer_folder

    onnx_file = find_onnx_file(path)
    tokenizer = options.tokenizer or find_tokenizer_folder(onnx_file)
    with model_load_errors(onnx_file):
        graph = _read_graph(onnx_file, tokenizer, options)
        quantized = quantized_graph(onnx_file)
    return OnnxSource(
        onnx_file=onnx_file,
        fingerprint=hash_dict(
            [graph.content_hash, graph.external_data_hash, graph.output_name, graph.tokenizer.content]
        ),
        output=graph.output_name,
        pooled=graph.pooled_output,
        roles=graph.input_roles,
        tokenizer=str(tokenizer),
        quantized=quantized,
        pooling=graph.pooling,
        normalize=graph.normalize,
        prompts=dict(graph.prompts),
        similarity=graph.similarity,
        max_seq_length=graph.max_seq_length,
    )


def _read_graph(onnx_file: Path, tokenizer: Any, options: EncoderOptions) -> Any:
    """The graph as the ``onnx`` backend reads it, with ``options`` (its session runs nothing)."""
    from embedscope.models.onnx_backend import OnnxEncoder

    return OnnxEncoder(
        onnx_file,
        tokenizer=tokenizer,
        pooling=options.pooling,
        output_name=options.output_name,
        max_seq_length=options.max_seq_length,
        normalize=options.normalize,
        prompts=dict(options.prompts) if options.prompts is not None else None,
        query_prompt=options.query_prompt,
        device=options.device,
        threads=1,
    )


def refuse_requantizing(source: OnnxSource, backend: str, quantization: str | None) -> None:
    """A one-line SettingError when ``backend`` would quantize a graph that is quantized already."""
    if source.quantized is not None and quantization is not None and quantization.startswith("int8"):
        raise SettingError(
            "model_options.backend",
            f"{source.onnx_file}: {{model_options.backend}} {backend} quantizes an fp32 graph, and this one is "
            f"quantized already ({source.quantized}): run it on OpenVINO as it is with backend openvino",
        )


def copy_tokenizer(source: OnnxSource, target: Path, files: Sequence[str]) -> None:
    """The source's tokenizer files into ``target`` (a hub id is kept by name, in the manifest)."""
    given = Path(source.tokenizer)
    if given.is_file():
        shutil.copy2(given, target / given.name)
    elif given.is_dir():
        for name in files:
            if (given / name).is_file():
                shutil.copy2(given / name, target / name)


def export_tokenizer(source: OnnxSource, folder: Path) -> str:
    """Where the export's encoder reads its tokenizer: the copy in ``folder``, else the source's hub id."""
    given = Path(source.tokenizer)
    if given.is_file():
        return str(folder / given.name)
    return str(folder) if given.is_dir() else source.tokenizer


def convert_ir(source: OnnxSource, target: Path) -> None:
    """The graph as an OpenVINO IR (``target/model.xml`` + ``.bin``, weights as the graph stores them): inputs named
    by their roles, one output (``token_embeddings`` or ``sentence_embedding``)."""
    from embedscope.models.third_party import quiet_openvino

    quiet_openvino()  # its converter's telemetry off before openvino loads (the extra was checked by the caller)
    import openvino as ov

    model = ov.convert_model(str(source.onnx_file))
    found = [port for port in model.outputs if source.output in port.get_names()]
    if not found:
        raise SettingError(
            "model_options.output_name", f"{source.onnx_file}: OpenVINO finds no output {source.output!r}"
        )
    port = found[0]
    port.get_tensor().set_names({POOLED_OUTPUT if source.pooled else TOKEN_OUTPUT})
    single = ov.Model([port], model.get_parameters(), "embedding")
    for parameter in single.get_parameters():
        name = parameter.get_output_tensor(0).get_any_name()
        parameter.get_output_tensor(0).set_names({source.roles.get(name, name)})
    target.mkdir(parents=True, exist_ok=True)
    ov.save_model(single, str(target / "model.xml"), compress_to_fp16=False)


def build(
    source: OnnxSource,
    variant: str,
    target: Path,
    calibration: Sequence[str] | None,
    files: Sequence[str],
    quantize: Callable[[Path, Path], None],
) -> None:
    """Export ``source`` for ``variant`` (``openvino``, ``openvino-int8`` or ``onnx-int8``: ``quantize(graph,
    target_file)``, the torch exports' dynamic quantizer) into ``target``."""
    copy_tokenizer(source, target, files)
    if variant == "onnx-int8":
        quantize(source.onnx_file, target / "model.onnx")
    elif variant == "openvino":
        convert_ir(source, target)
    else:
        from embedscope.models.openvino_backend import quantize_ir_int8

        work = target / ".work"
        convert_ir(source, work)
        quantize_ir_int8(
            work,
            target,
            tokenizer_source=Path(export_tokenizer(source, target)),
            calibration_texts=list(calibration or []),
            max_seq_length=source.max_seq_length,
        )
        shutil.rmtree(work)
