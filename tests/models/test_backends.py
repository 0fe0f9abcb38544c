"""Model backends on the bundled models: exactness against mteb and sentence-transformers, ONNX graph handling."""

from __future__ import annotations

import json

import numpy as np
import pytest

from embedscope.errors import ConfigError
from embedscope.models.base import Encoder
from embedscope.models.specs import alias_path, load_encoder
from support.lazy import lazy_module

torch = lazy_module("torch")  # imported by the first test that uses it: collection imports nothing heavy
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

TEXTS = [
    "A man is playing a guitar.",
    "A person plays the guitar.",
    "The stock market fell sharply today.",
    "x",
    "",
    "Photosynthesis converts light energy into chemical energy in plants. " * 12,  # longer than 256 tokens
    "How do plants make energy from sunlight?",
    "Solar panels convert sunlight into electricity.",
    "The cat sat on the mat.",
    "Ünïcödé tèxt wïth äccents and emoji 🙂",
    "What is the capital of France?",
    "Paris is the capital and most populous city of France.",
    "BBC News: the government announced a new budget.",
    "Football: the match ended in a 2-2 draw.",
    "Tech firms report record profits.",
    "A   lot    of     spaces",
    "UPPER CASE TEXT",
    "numbers 1234567890",
    "short",
    "The quick brown fox jumps over the lazy dog.",
]


@pytest.fixture(scope="module")
def minilm_vectors(minilm):
    return minilm.encode(TEXTS, role="document")


# -- sentence-transformers backend -------------------------------------------------------------


def _mteb_encode(model, texts, prompt_type, model_prompts=None, batch_size=32):
    mteb_wrapper = pytest.importorskip("mteb.models.sentence_transformer_wrapper")
    from datasets import Dataset
    from mteb.abstasks.task_metadata import TaskMetadata
    from torch.utils.data import DataLoader

    from support.mteb_reference import _GENERAL

    wrapper = mteb_wrapper.SentenceTransformerEncoderWrapper(model, model_prompts=model_prompts)
    metadata = TaskMetadata(
        type="Retrieval",
        name="LocalCheck",
        main_score="ndcg_at_10",
        dataset={"path": "local/LocalCheck", "revision": "1"},
        **_GENERAL,
    )
    loader = DataLoader(Dataset.from_dict({"text": list(texts)}), batch_size=batch_size)
    return np.asarray(
        wrapper.encode(
            loader,
            task_metadata=metadata,
            hf_split="test",
            hf_subset="default",
            prompt_type=prompt_type,
            batch_size=batch_size,
            show_progress_bar=False,
        )
    )


@pytest.mark.slow
@pytest.mark.parametrize("role", ["query", "document"])
def test_sentence_transformers_bit_identical_to_mteb_wrapper(minilm, minilm_vectors, role):
    from mteb.types import PromptType

    theirs = _mteb_encode(minilm.model, TEXTS, PromptType(role))
    ours = minilm_vectors if role == "document" else minilm.encode(TEXTS, role=role)
    assert ours.dtype == np.float32 and theirs.dtype == np.float32
    assert ours.tobytes() == theirs.tobytes()


@pytest.mark.slow
def test_sentence_transformers_prompts_bit_identical_to_mteb_wrapper(minilm):
    from mteb.types import PromptType

    from embedscope.models.sentence_transformers_backend import SentenceTransformerEncoder

    prompts = {"query": "query: ", "document": "passage: "}
    enc = SentenceTransformerEncoder(alias_path("minilm"), name=minilm.name, model=minilm.model, prompts=prompts)
    assert enc.prompts == prompts and enc.fingerprint == minilm.fingerprint  # prompts live in cache keys, not here
    for role in ("query", "document"):
        theirs = _mteb_encode(minilm.model, TEXTS[:8], PromptType(role), model_prompts=prompts, batch_size=3)
        assert enc.encode(TEXTS[:8], role=role, batch_size=3).tobytes() == theirs.tobytes()
    with_prompt = enc.encode(["the cat"], role="query")
    assert np.allclose(with_prompt, minilm.encode(["query: the cat"], role="query"), atol=1e-6)


@pytest.mark.slow
def test_sentence_transformers_attributes(minilm):
    assert isinstance(minilm, Encoder)
    assert minilm.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert (minilm.backend, minilm.pooling, minilm.max_seq_length, minilm.normalize, minilm.embed_dim) == (
        "sentence-transformers",
        "mean",
        256,
        True,
        384,
    )
    assert minilm.similarity == "cosine" and minilm.prompts == {}
    assert len(minilm.revision) == 12 and len(minilm.fingerprint) == 64
    assert minilm.encode([], role="query").shape == (0, 384)


# -- transformers backend ----------------------------------------------------------------------


@pytest.mark.slow
def test_transformers_mean_pooling_matches_sentence_transformers(minilm_transformers, minilm_vectors):
    enc = minilm_transformers
    assert (enc.pooling, enc.max_seq_length, enc.normalize, enc.embed_dim) == ("mean", 256, True, 384)
    ours = enc.encode(TEXTS, role="document", batch_size=7)
    assert ours.dtype == np.float32 and ours.shape == minilm_vectors.shape
    assert np.abs(ours - minilm_vectors).max() < 1e-5


@pytest.mark.slow
def test_fingerprints_change_with_settings_and_are_stable(minilm, minilm_transformers):
    from embedscope.models.transformers_backend import TransformersEncoder

    path = alias_path("minilm")
    base = minilm_transformers.fingerprint
    variants = {
        "cls": TransformersEncoder(path, pooling="cls").fingerprint,
        "len": TransformersEncoder(path, max_seq_length=128).fingerprint,
        "raw": TransformersEncoder(path, normalize=False).fingerprint,
    }
    again = TransformersEncoder(path, name="sentence-transformers/all-MiniLM-L6-v2").fingerprint
    assert again == base
    assert len({base, minilm.fingerprint, *variants.values()}) == 5
    assert load_encoder("minilm", pooling="cls").fingerprint != minilm.fingerprint
    assert load_encoder("minilm", max_seq_length=64).fingerprint != minilm.fingerprint


# -- ONNX backend on the bundled models --------------------------------------------------------


@pytest.mark.slow
def test_minilm_int8_close_to_minilm(minilm_int8, minilm_vectors):
    enc = minilm_int8
    assert (enc.backend, enc.pooling, enc.normalize, enc.max_seq_length) == ("onnx", "mean", True, 256)
    assert enc.input_names == ["input_ids", "attention_mask", "token_type_ids"]
    ours = enc.encode(TEXTS, role="document")
    cos = (ours * minilm_vectors).sum(axis=1)  # both L2-normalised
    assert cos.mean() >= 0.95, cos
    assert load_encoder("minilm-int8").fingerprint == enc.fingerprint  # stable across loads


@pytest.mark.slow
def test_paraphrase_l3_uses_its_pooled_output(paraphrase_l3):
    enc = paraphrase_l3
    assert enc.output_name == "461" and enc.pooling == "graph" and enc.embed_dim == 384
    assert enc.input_names == ["input_ids", "attention_mask"]  # no token_type_ids in this graph
    v = enc.encode(TEXTS[:3], role="query")
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    assert v[0] @ v[1] > 0.7 > 0.2 > v[0] @ v[2]
    tokens = load_encoder("paraphrase-minilm-l3", output_name="onnx::Shape_422", pooling="mean")
    assert tokens.pooling == "mean" and tokens.fingerprint != enc.fingerprint


# -- ONNX backend on tiny graphs built here -------------------------------------------------------

VOCAB = ["[PAD]", "[UNK]", "the", "cat", "dog", "sat", "on", "mat", "a", "big", "red", "fish"]


def _tiny(with_types: bool, pooled: bool):
    """A tiny token model (torch is imported by the first test that builds one)."""

    class _Tiny(torch.nn.Module):
        def __init__(self, with_types: bool, pooled: bool) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.emb = torch.nn.Embedding(len(VOCAB), 6)
            self.pos = torch.nn.Parameter(torch.randn(64, 6))
            self.types = torch.nn.Embedding(2, 6)
            self.proj = torch.nn.Linear(6, 6)
            self.with_types, self.pooled = with_types, pooled

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            h = self.emb(input_ids) + self.pos[: input_ids.shape[1]]
            if self.with_types:
                h = h + self.types(token_type_ids)
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            h = torch.tanh(self.proj(h)) * m
            if not self.pooled:
                return h
            return h, (h * m).sum(1) / m.sum(1).clamp(min=1e-9) * 2.0  # a "pooled" output that differs from mean

    return _Tiny(with_types, pooled)


def _export(folder, *, seq: int | None, batch: int | None = None, with_types=False, pooled=False):
    """Export a tiny token model to ``folder/model.onnx`` with a WordLevel ``tokenizer.json``."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    model = _tiny(with_types, pooled).eval()
    n, L = batch or 2, seq or 5
    ids = torch.randint(2, len(VOCAB), (n, L))
    mask = torch.ones(n, L, dtype=torch.int64)
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_types else [])
    args = (ids, mask) + ((torch.zeros_like(ids),) if with_types else ())
    outputs = ["token_embeddings"] + (["sentence_embedding"] if pooled else [])
    axes: dict = {}
    for name in names:
        axes[name] = {**({} if batch else {0: "batch"}), **({} if seq else {1: "sequence"})}
    axes["token_embeddings"] = {**({} if batch else {0: "batch"}), **({} if seq else {1: "sequence"})}
    if pooled and not batch:
        axes["sentence_embedding"] = {0: "batch"}
    try:
        import onnx  # noqa: F401
    except ImportError:  # the legacy exporter only needs onnx to add custom functions; there are none here
        from torch.onnx._internal.torchscript_exporter import utils as ts_utils

        original = ts_utils.onnx_proto_utils._add_onnxscript_fn
        ts_utils.onnx_proto_utils._add_onnxscript_fn = lambda proto, custom_opsets: proto
    else:
        original = None
    try:
        torch.onnx.export(
            model,
            args,
            str(folder / "model.onnx"),
            input_names=names,
            output_names=outputs,
            dynamic_axes={k: v for k, v in axes.items() if v},
            opset_version=17,
            dynamo=False,
        )
    except Exception as e:  # pragma: no cover - exporter unavailable
        pytest.skip(f"torch.onnx.export unavailable: {e}")
    finally:
        if original is not None:
            ts_utils.onnx_proto_utils._add_onnxscript_fn = original
    return model


def _reference(model, texts, width):
    rows = [[VOCAB.index(w) if w in VOCAB else 1 for w in t.split()][:width] for t in texts]
    ids = torch.zeros(len(rows), width, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r, dtype=torch.int64)
        mask[i, : len(r)] = 1
    with torch.inference_mode():
        h = model(ids, mask, torch.zeros_like(ids))
    return h, mask


SMALL = ["the cat sat on the mat", "a dog", "big red fish sat on a big red mat today", "cat"]


@pytest.mark.slow  # imports a heavy library (mteb, onnx, nncf): seconds
def test_onnx_fixed_sequence_length_pads_and_truncates(tmp_path):
    from embedscope.models.onnx_backend import OnnxEncoder
    from embedscope.models.pooling import pool

    model = _export(tmp_path / "fixed", seq=8)
    enc = OnnxEncoder(tmp_path / "fixed")
    assert enc.fixed_seq_length == 8 and enc.max_seq_length == 8
    assert enc.padded_lengths(SMALL, role="document") == [8] * 4  # every batch padded to the graph's length
    assert enc.input_names == ["input_ids", "attention_mask"]  # read from the graph, no token_type_ids
    seen = []
    run = enc.session.run
    enc.session.run = lambda names, feed: seen.append({k: v.shape for k, v in feed.items()}) or run(names, feed)
    out = enc.encode(SMALL, role="document", batch_size=3)
    assert len(seen) == 2 and all(shape[1] == 8 for s in seen for shape in s.values())
    assert set(seen[0]) == {"input_ids", "attention_mask"}
    h, mask = _reference(model, SMALL, 8)
    np.testing.assert_allclose(out, pool(h, mask, "mean"), rtol=1e-5, atol=1e-6)
    with pytest.raises(ConfigError, match="fixed sequence length"):
        OnnxEncoder(tmp_path / "fixed", max_seq_length=16)


@pytest.mark.slow  # imports a heavy library (mteb, onnx, sentence-transformers): seconds
def test_onnx_fixed_batch_dimension_runs_sub_batches(tmp_path):
    from embedscope.models.onnx_backend import OnnxEncoder
    from embedscope.models.pooling import pool

    model = _export(tmp_path / "b2", seq=6, batch=2)
    enc = OnnxEncoder(tmp_path / "b2" / "model.onnx", pooling="max")
    assert enc.fixed_batch_size == 2
    out = enc.encode(SMALL[:3], role="query", batch_size=32)  # 3 texts → batches of 2 and 1 (+1 filler)
    h, mask = _reference(model, SMALL[:3], 6)
    np.testing.assert_allclose(out, pool(h, mask, "max"), rtol=1e-5, atol=1e-6)


def test_onnx_dynamic_graph_token_type_ids_and_output_choice(tmp_path):
    from embedscope.models.onnx_backend import OnnxEncoder
    from embedscope.models.pooling import normalize_rows, pool

    model = _export(tmp_path / "dyn", seq=None, with_types=True, pooled=True)
    enc = OnnxEncoder(tmp_path / "dyn")
    assert enc.fixed_seq_length is None
    assert enc.input_names == ["input_ids", "attention_mask", "token_type_ids"]
    assert enc.output_name == "sentence_embedding" and enc.pooling == "graph"
    widths = []
    run = enc.session.run
    enc.session.run = lambda names, feed: widths.append(feed["input_ids"].shape[1]) or run(names, feed)
    pooled = enc.encode(SMALL, role="document", batch_size=2)
    assert sorted(widths) == [2, 10]  # each batch padded to its longest text (length-sorted batches)
    assert enc.padded_lengths(SMALL, role="document") == [6, 2, 10, 1]  # the widths it pads to, said
    h, mask = _reference(model, SMALL, 10)
    np.testing.assert_allclose(pooled, 2.0 * pool(h[0], mask, "mean"), rtol=1e-5, atol=1e-6)

    tokens = OnnxEncoder(tmp_path / "dyn", pooling="cls", normalize=True, prompts={"query": "the "})
    assert tokens.output_name == "token_embeddings" and tokens.pooling == "cls"
    assert tokens.padded_lengths(SMALL, role="query") == [7, 3, 11, 2]  # the query prompt counted
    np.testing.assert_allclose(
        tokens.encode(SMALL, role="document"), normalize_rows(pool(h[0], mask, "cls")), rtol=1e-5, atol=1e-6
    )
    named = OnnxEncoder(tmp_path / "dyn", output_name="token_embeddings", max_seq_length=3)
    assert named.pooling == "mean" and named.max_seq_length == 3
    assert named.padded_lengths(SMALL, role="document") == [3, 2, 3, 1]  # truncated
    h3, mask3 = _reference(model, SMALL, 3)
    np.testing.assert_allclose(named.encode(SMALL, role="query"), pool(h3[0], mask3, "mean"), rtol=1e-5, atol=1e-6)
    fps = {enc.fingerprint, tokens.fingerprint, named.fingerprint, OnnxEncoder(tmp_path / "dyn").fingerprint}
    assert len(fps) == 3
    with pytest.raises(ConfigError, match="no output 'nope'"):
        OnnxEncoder(tmp_path / "dyn", output_name="nope")


@pytest.mark.slow
def test_onnx_fingerprint_follows_file_content(tmp_path):
    from embedscope.models.onnx_backend import OnnxEncoder

    _export(tmp_path / "m", seq=None)
    first = OnnxEncoder(tmp_path / "m")
    (tmp_path / "m" / "model.onnx").write_bytes((tmp_path / "m" / "model.onnx").read_bytes())  # same bytes
    assert OnnxEncoder(tmp_path / "m").fingerprint == first.fingerprint
    _export(tmp_path / "m2", seq=7)
    assert OnnxEncoder(tmp_path / "m2").fingerprint != first.fingerprint
    meta = json.loads((tmp_path / "m" / "tokenizer.json").read_text())
    meta["normalizer"] = {"type": "Lowercase"}
    (tmp_path / "m" / "tokenizer.json").write_text(json.dumps(meta))
    assert OnnxEncoder(tmp_path / "m").fingerprint != first.fingerprint  # tokenizer content counts


@pytest.mark.slow
def test_onnx_without_tokenizer_asks_for_one(tmp_path):
    from embedscope.models.onnx_backend import OnnxEncoder

    _export(tmp_path / "t", seq=None)
    (tmp_path / "t" / "tokenizer.json").rename(tmp_path / "tok.json")
    with pytest.raises(ConfigError, match="tokenizer="):
        OnnxEncoder(tmp_path / "t")
    assert OnnxEncoder(tmp_path / "t", tokenizer=str(tmp_path / "tok.json")).encode(["cat"], role="query").shape == (
        1,
        6,
    )


# -- static backend ------------------------------------------------------------------------------


@pytest.mark.slow
def test_static_64_dims_and_determinism(static_64):
    enc = static_64
    assert (enc.backend, enc.embed_dim, enc.normalize) == ("model2vec", 64, True)
    a = enc.encode(TEXTS, role="document")
    b = enc.encode(list(reversed(TEXTS)), role="query", batch_size=3)[::-1]
    assert a.shape == (len(TEXTS), 64) and a.dtype == np.float32
    assert a.tobytes() == np.ascontiguousarray(b).tobytes()  # no dependence on batch, order or role
    norms = np.linalg.norm(a, axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5)
    again = load_encoder("static-64")
    assert again.fingerprint == enc.fingerprint and again.encode(TEXTS, role="document").tobytes() == a.tobytes()
    assert load_encoder("static-64", normalize=False).fingerprint != enc.fingerprint
