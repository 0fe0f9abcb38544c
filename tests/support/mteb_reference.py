"""Run ``mteb`` itself on the same local data, for side-by-side checks (tests and bench/).

Needs the optional dependency ``mteb`` (``pip install -e .[test]``). Nothing here is used by
embedscope's own evaluation path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from embedscope.types import RetrievalData

_GENERAL = {
    "description": "Local data evaluated side by side with embedscope.",
    "reference": "https://github.com/embeddings-benchmark/mteb",
    "category": "t2t",
    "eval_splits": ["test"],
    "eval_langs": ["eng-Latn"],
    "date": ("2020-01-01", "2020-01-01"),
    "dialect": ["Written"],
    "domains": [],
    "task_subtypes": [],
    "license": "cc-by-4.0",
    "annotations_creators": "derived",
    "modalities": ["text"],
    "sample_creation": "found",
    "bibtex_citation": "",
}


def mteb_retrieval_task(data: RetrievalData, *, name: str = "LocalRetrieval", ignore_identical_ids: bool = False):
    """An mteb ``AbsTaskRetrieval`` whose single test split is ``data`` (titles already merged)."""
    from datasets import Dataset
    from mteb.abstasks.retrieval import AbsTaskRetrieval
    from mteb.abstasks.retrieval_dataset_loaders import RetrievalSplitData
    from mteb.abstasks.task_metadata import TaskMetadata

    metadata = TaskMetadata(
        type="Retrieval",
        name=name,
        main_score="ndcg_at_10",
        dataset={"path": "local/" + name, "revision": data.revision},
        **_GENERAL,
    )

    class _Task(AbsTaskRetrieval):
        def load_data(self, **kwargs: Any) -> None:
            corpus = Dataset.from_dict(
                {"id": list(data.corpus.ids), "text": list(data.corpus.texts), "title": [""] * len(data.corpus)}
            )
            queries = Dataset.from_dict({"id": list(data.queries.ids), "text": list(data.queries.texts)})
            qrels = {q: dict(d) for q, d in data.qrels.items()}
            self.dataset = {
                "default": {
                    "test": RetrievalSplitData(queries=queries, corpus=corpus, relevant_docs=qrels, top_ranked=None)
                }
            }
            self.data_loaded = True

    _Task.metadata = metadata
    _Task.ignore_identical_ids = ignore_identical_ids
    return _Task()


class EncoderForMteb:
    """Presents an embedscope Encoder to mteb (``encode`` over mteb's DataLoader, ``similarity``)."""

    def __init__(self, encoder, batch_size: int = 32) -> None:
        from mteb.models.model_meta import ModelMeta

        self.encoder = encoder
        self.batch_size = batch_size
        self.mteb_model_meta = ModelMeta(
            loader=None,
            name=encoder.name if "/" in encoder.name else f"embedscope/{encoder.name}",
            revision=encoder.revision,
            release_date=None,
            languages=None,
            n_parameters=None,
            memory_usage_mb=None,
            max_tokens=None,
            embed_dim=None,
            license=None,
            open_weights=None,
            public_training_code=None,
            public_training_data=None,
            framework=[],
            similarity_fn_name=encoder.similarity,
            use_instructions=None,
            training_datasets=None,
        )

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs) -> np.ndarray:
        texts = [t for batch in inputs for t in batch["text"]]
        role = "query" if prompt_type is not None and prompt_type.value == "query" else "document"
        return self.encoder.encode(texts, role=role, batch_size=self.batch_size)

    def similarity(self, a, b):
        from mteb.similarity_functions import cos_sim, dot_score

        return cos_sim(a, b) if self.encoder.similarity == "cosine" else dot_score(a, b)

    def similarity_pairwise(self, a, b):
        from mteb.similarity_functions import pairwise_cos_sim, pairwise_dot_score

        return pairwise_cos_sim(a, b) if self.encoder.similarity == "cosine" else pairwise_dot_score(a, b)


def mteb_scores(
    model,
    data: RetrievalData,
    *,
    name: str = "LocalRetrieval",
    ignore_identical_ids: bool = False,
    batch_size: int = 32,
) -> dict[str, Any]:
    """mteb's score dict for ``data`` with ``model`` (an mteb model wrapper, or an embedscope Encoder)."""
    import mteb

    if not hasattr(model, "mteb_model_meta"):
        model = EncoderForMteb(model, batch_size)
    task = mteb_retrieval_task(data, name=name, ignore_identical_ids=ignore_identical_ids)
    result = mteb.evaluate(
        model, [task], cache=None, encode_kwargs={"batch_size": batch_size, "show_progress_bar": False}
    )
    return dict(result.task_results[0].scores["test"][0])


def mteb_sentence_transformer(path: str):
    """mteb's own wrapper around a sentence-transformers model folder (what ``mteb run`` would use)."""
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    return SentenceTransformerEncoderWrapper(SentenceTransformer(path, device="cpu"))
