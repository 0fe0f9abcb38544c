"""Learned-sparse (SPLADE) models on a tiny checkpoint built here: the same vectors as sentence-transformers'
``SparseEncoder`` bit for bit, the same retrieval scores as mteb's ``SparseEncoderWrapper`` (every key) and as
sentence-transformers + exact dot-product ranking + pytrec_eval, in a pipeline with BM25, and bad input in one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from embedscope.errors import ConfigError, SettingError, UnknownNameError
from embedscope.models.specs import detect_kind, load_encoder

pytestmark = pytest.mark.slow

TEXTS = [
    "what causes heart disease in older adults",
    "The election results were announced on Friday night after a long count.",
    "a film about music",
    "Shares in the company rose sharply after it reported record profits for the year, beating forecasts.",
    "",
    "sport",
]


@pytest.fixture(scope="module")
def splade(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.tiny_models import build_tiny_splade

    return build_tiny_splade(tmp_path_factory.mktemp("splade") / "model")


def _sentence_transformers(path: Path, pooling: str = "max", chunk_size: int | None = None):
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    modules = [Transformer(str(path), transformer_task="fill-mask"), SpladePooling(pooling, chunk_size=chunk_size)]
    return SparseEncoder(modules=modules, device="cpu")


def _dense(tensor) -> np.ndarray:
    return tensor.to_dense().numpy() if tensor.is_sparse else tensor.numpy()


def test_vectors_equal_sentence_transformers_sparse_encoder_bit_for_bit(splade: Path, tmp_path: Path) -> None:
    encoder = load_encoder(str(splade), backend="splade", device="cpu", prompts={"query": "query: "})
    reference = _sentence_transformers(splade)
    assert encoder.backend == "sparse" and encoder.similarity == "dot" and encoder.embed_dim == 30522
    ours_q = encoder.encode(TEXTS, role="query", batch_size=4)
    ours_d = encoder.encode(TEXTS, role="document", batch_size=4)
    theirs_q = _dense(reference.encode_query(TEXTS, prompt="query: ", batch_size=4, convert_to_tensor=True))
    theirs_d = _dense(reference.encode_document(TEXTS, prompt="", batch_size=4, convert_to_tensor=True))
    assert ours_q.tobytes() == theirs_q.tobytes() and ours_d.tobytes() == theirs_d.tobytes()
    assert 5 < (ours_d[0] > 0).sum() < 500  # tens of active terms, not the vocabulary
    sparse_rows = encoder.encode_sparse(TEXTS, role="document", batch_size=4)
    assert sparse_rows.toarray().tobytes() == ours_d.tobytes()

    saved = tmp_path / "saved"  # a SparseEncoder folder as sentence-transformers saves it: detected, sum pooling
    _sentence_transformers(splade, "sum", chunk_size=3).save(str(saved))
    assert detect_kind(saved) == "sparse"
    summed = load_encoder(str(saved), device="cpu")
    assert summed.backend == "sparse" and summed.pooling == "sum"  # its chunk size is not saved: its own encode
    expected = _dense(_sentence_transformers(splade, "sum").encode_document(TEXTS, convert_to_tensor=True))
    assert summed.encode(TEXTS, role="document").tobytes() == expected.tobytes()


def _tiny_retrieval():
    from embedscope.data.beir import RetrievalData
    from embedscope.data.builtin import bbc_news_articles
    from embedscope.types import Corpus, Queries

    articles = bbc_news_articles()[:60]
    corpus = Corpus(tuple(a.id for a in articles), tuple(a.body[:400] for a in articles))
    queries = Queries(tuple(f"q{i}" for i in range(30)), tuple(a.title for a in articles[:30]))
    qrels = {f"q{i}": {articles[i].id: 1} for i in range(30)}
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels)


def test_retrieval_scores_equal_mteb_sparse_wrapper_and_sentence_transformers_with_pytrec_eval(
    splade: Path, tmp_path: Path
) -> None:
    import pytrec_eval
    from mteb.models import SparseEncoderWrapper

    from embedscope.evaluation.runner import evaluate
    from embedscope.tasks.retrieval import RetrievalTask
    from support.mteb_reference import mteb_scores

    data = _tiny_retrieval()
    task = RetrievalTask("TinySparse", lambda split: data)
    report = evaluate(
        str(splade),
        [task],
        output_folder=tmp_path,
        cache=tmp_path / "cache",
        show_progress=False,
        model_options={"backend": "sparse"},
    )
    ours = report.outcomes[0].result.scores["test"][0]
    theirs = mteb_scores(SparseEncoderWrapper(_sentence_transformers(splade)), data)
    keys = [k for k, v in theirs.items() if isinstance(v, float)]
    assert len(keys) >= 149
    for key in keys:
        assert ours[key] == theirs[key] or (np.isnan(ours[key]) and np.isnan(theirs[key])), key
    assert ours["sparse_active_dims_query_mean"] > 0 and ours["sparse_flops"] > 0 and ours["sparse_index_bytes"] > 0

    reference = _sentence_transformers(splade)  # its own encode, an exact dot-product ranking, pytrec_eval
    q = reference.encode_query(list(data.queries.texts), convert_to_tensor=True)
    d = reference.encode_document(list(data.corpus.texts), convert_to_tensor=True)
    scores = _dense(reference.similarity(q, d))
    run = {
        qid: {data.corpus.ids[j]: float(scores[i, j]) for j in np.argsort(-scores[i], kind="stable")[:1000]}
        for i, qid in enumerate(data.queries.ids)
    }
    evaluator = pytrec_eval.RelevanceEvaluator(data.qrels, {"ndcg_cut.10"})
    ndcg = np.mean([v["ndcg_cut_10"] for v in evaluator.evaluate(run).values()])
    assert round(float(ndcg), 5) == ours["ndcg_at_10"]

    warm = evaluate(
        str(splade),
        [task],
        output_folder=tmp_path / "warm",
        cache=tmp_path / "cache",
        show_progress=False,
        model_options={"backend": "sparse"},
    )
    assert warm.cache.encoded == 0
    assert json.dumps(warm.outcomes[0].result.scores["test"][0]) == json.dumps(ours)  # NaN-aware, exact


@pytest.mark.long  # two end-to-end runs: in the long tier
def test_a_sparse_retriever_fuses_with_bm25_in_a_pipeline(splade: Path, tmp_path: Path) -> None:
    from embedscope.evaluation.runner import evaluate
    from embedscope.tasks.retrieval import RetrievalTask

    data = _tiny_retrieval()
    task = RetrievalTask("TinySparse", lambda split: data)
    spec = {"model": str(splade), "backend": "sparse"}
    pipeline = {"retrievers": ["bm25", spec], "fusion": "rrf"}
    fused = evaluate(pipeline, [task], output_folder=tmp_path, cache=False, show_progress=False).outcomes[0]
    alone = evaluate(
        str(splade),
        [task],
        output_folder=tmp_path / "alone",
        cache=False,
        show_progress=False,
        model_options={"backend": "sparse"},
    ).outcomes[0]
    [stages] = fused.result.to_dict()["pipeline_stages"].values()
    sparse_stage = next(s for s in stages if s["name"] == splade.name)
    assert sparse_stage["stage"].startswith("stage1.")
    assert sparse_stage["main_score"] == alone.result.main_score()
    assert fused.result.main_score() > 0


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"backend": "sparse", "pooling": "mean"}, "Unknown pooling mode 'mean'"),
        ({"backend": "sparse", "normalize": True}, "normalize cannot apply to a sparse model"),
        ({"backend": "sentence-transformers", "pooling": "sum"}, "sum pools a sparse (SPLADE) model's term weights"),
    ],
)
def test_bad_sparse_model_options_are_refused_in_one_line(splade: Path, given: dict, message: str) -> None:
    with pytest.raises((ConfigError, SettingError, UnknownNameError)) as caught:
        load_encoder(str(splade), device="cpu", **given)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_the_builtin_sparse_alias_has_no_fast_path_and_no_dense_backend() -> None:
    for backend, message in (
        ("onnx-int8", "a sparse model's fast paths are not built"),
        ("transformers", "needs backend 'sparse'"),
    ):
        with pytest.raises((ConfigError, SettingError)) as caught:
            load_encoder("splade-tiny", backend=backend, device="cpu")
        assert message in str(caught.value)


def test_a_checkpoint_without_an_mlm_head_is_not_a_sparse_model(tmp_path: Path) -> None:
    from support.tiny_models import build_tiny_splade

    folder = build_tiny_splade(tmp_path / "bert", head=False)
    with pytest.raises(
        ConfigError, match="a sparse model needs a masked-language-model head, and this checkpoint is BertModel"
    ):
        load_encoder(str(folder), backend="sparse", device="cpu")


def test_a_sweep_over_sparse_and_bm25_reports_bytes_per_vector_and_flops(splade: Path, tmp_path: Path) -> None:
    import embedscope
    from embedscope.tasks.retrieval import RetrievalTask

    saved = tmp_path / "saved-splade"  # a SparseEncoder folder: detected as sparse with no option
    _sentence_transformers(splade).save(str(saved))
    data = _tiny_retrieval()
    result = embedscope.sweep(
        {"model": [str(saved), "bm25"]},
        tasks=[RetrievalTask("TinySparse", lambda split: data)],
        output_folder=str(tmp_path / "out"),
        cache=False,
        show_progress=False,
        compare_options=embedscope.CompareOptions(rounds=200),
    )
    sparse_row = next(r for r in result.rows if r.model == "saved-splade")
    bm25_row = next(r for r in result.rows if r.model != "saved-splade")
    stored = json.loads(Path(sparse_row.path).read_text())["scores"]["test"][0]
    assert sparse_row.costs["bytes_per_vector"] == 8 * stored["sparse_active_dims_document_mean"]
    assert sparse_row.costs["flops"] == stored["sparse_flops"] and bm25_row.costs["flops"] is None
    assert "FLOPS" in result.table() and "flops" in result.csv().splitlines()[0]


@pytest.mark.long  # mteb side by side on 30,522-d rows: in the long tier
def test_sts_scores_equal_mteb_sparse_wrapper(splade: Path) -> None:
    """Every task type but retrieval scores dense rows, as mteb's SparseEncoderWrapper densifies them."""
    from mteb.models import SparseEncoderWrapper

    from embedscope.settings import RunSettings
    from embedscope.tasks.sts import STSData, STSTask, lee_sts_split
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores, mteb_sts_task

    encoder = load_encoder(str(splade), backend="sparse", device="cpu")
    wrapper = SparseEncoderWrapper(_sentence_transformers(splade))
    full = lee_sts_split("test")
    pairs = STSData(full.sentence1[:40], full.sentence2[:40], full.scores[:40])
    task = STSTask("Lee", lambda split: pairs, min_score=0, max_score=1)
    ours = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores
    assert_same_scores(
        ours, mteb_split_scores(wrapper, mteb_sts_task(pairs, min_score=0, max_score=1)), "cosine_spearman"
    )


@pytest.mark.long
def test_classification_scores_equal_mteb_sparse_wrapper(splade: Path) -> None:
    """Logistic regression on 30,522-d rows (ten experiments on each side): minutes, so in the long tier."""
    import warnings

    from mteb.models import SparseEncoderWrapper

    from embedscope.settings import RunSettings
    from embedscope.tasks.classification import ClassificationTask, bbc_news_classification_split
    from support.mteb_reference_labels import assert_same_scores, mteb_classification_task, mteb_label_scores

    encoder = load_encoder(str(splade), backend="sparse", device="cpu")
    wrapper = SparseEncoderWrapper(_sentence_transformers(splade))
    splits = {
        "train": bbc_news_classification_split("train").select(range(0, 1060, 40)),
        "test": bbc_news_classification_split("test").select(range(0, 1060, 60)),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = mteb_label_scores(wrapper, mteb_classification_task(splits, samples_per_label=2))["test"][0]
        task = ClassificationTask("T", splits.__getitem__, samples_per_label=2)
        ours = task.evaluate_split("test", encoder, RunSettings().search_options(show_progress=False)).scores
    assert_same_scores(ours, theirs, "accuracy")


def test_an_inference_free_model_encodes_queries_by_static_weights_as_sentence_transformers(
    splade: Path, tmp_path: Path
) -> None:
    from sentence_transformers.sparse_encoder import SparseEncoder

    from support.tiny_models import build_tiny_inference_free_splade

    folder = build_tiny_inference_free_splade(tmp_path / "inference-free", splade)
    assert detect_kind(folder) == "sparse"
    encoder = load_encoder(str(folder), device="cpu")
    reference = SparseEncoder(str(folder), device="cpu")
    ours_q = encoder.encode(TEXTS, role="query")
    ours_d = encoder.encode_sparse(TEXTS, role="document").toarray()
    theirs_q = _dense(reference.encode_query(TEXTS, prompt="", convert_to_tensor=True))
    theirs_d = _dense(reference.encode_document(TEXTS, prompt="", convert_to_tensor=True))
    assert ours_q.tobytes() == theirs_q.tobytes() and ours_d.tobytes() == theirs_d.tobytes()
    assert not np.array_equal(ours_q[0] > 0, ours_d[0] > 0)  # two routes: the query's terms are its own tokens
