"""STS: pure scores against scipy/sklearn, and the whole protocol side by side with mteb."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from embedscope.metrics.sts import sts_scores
from embedscope.settings import RunSettings
from embedscope.tasks.sts import STSData, STSTask, load_sts_file
from embedscope.testing.fakes import HashEncoder, KeywordEncoder


def test_scores_against_scipy_directly():
    rng = np.random.default_rng(0)
    e1, e2 = rng.standard_normal((30, 8)), rng.standard_normal((30, 8))
    gold = rng.integers(0, 6, 30).astype(float)  # ties in the gold scores
    ours = sts_scores(e1, e2, gold)
    cos = (e1 * e2).sum(1) / np.linalg.norm(e1, axis=1) / np.linalg.norm(e2, axis=1)
    assert ours["cosine_spearman"] == pytest.approx(spearmanr(gold, cos).statistic, abs=1e-12)
    assert ours["cosine_pearson"] == pytest.approx(pearsonr(gold / 5, cos).statistic, abs=1e-12)
    assert ours["manhattan_spearman"] == pytest.approx(spearmanr(gold, -np.abs(e1 - e2).sum(1)).statistic, abs=1e-12)
    assert ours["euclidean_pearson"] == pytest.approx(
        pearsonr(gold, -np.linalg.norm(e1 - e2, axis=1)).statistic, abs=1e-12
    )


def _pairs_with_duplicates_and_ties(n: int = 40) -> STSData:
    rng = np.random.default_rng(1)
    words = ["cat", "dog", "fish", "sun"]
    s1 = tuple(" ".join(rng.choice(words, 3)) for _ in range(n))  # 64 possible texts: duplicates
    s2 = tuple(" ".join(rng.choice(words, 3)) for _ in range(n))
    return STSData(s1, s2, tuple(float(x) for x in rng.integers(0, 11, n) / 10))  # tied gold scores


@pytest.mark.parametrize(
    "encoder",
    [HashEncoder(dim=12), KeywordEncoder(["cat", "dog", "fish"], similarity="dot")],
    ids=["hash-cosine", "keyword-dot"],
)
@pytest.mark.parametrize("bounds", [(0, 1), (0, 5)])
def test_same_scores_as_mteb(encoder, bounds):
    pytest.importorskip("mteb")
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores, mteb_sts_task

    data = _pairs_with_duplicates_and_ties()
    ours = (
        STSTask("LocalSTS", lambda split: data, min_score=bounds[0], max_score=bounds[1])
        .evaluate_split("test", encoder, RunSettings().search_options(show_progress=False))
        .scores
    )
    theirs = mteb_split_scores(encoder, mteb_sts_task(data, min_score=bounds[0], max_score=bounds[1]))
    assert_same_scores(ours, theirs, "cosine_spearman")
    assert list(ours) == [k for k in theirs if k in ours]  # same key order


def test_encodes_first_then_second_sentences_with_document_role():
    encoder = KeywordEncoder(["cat"])
    data = STSData(("cat a", "cat b", "cat a"), ("x", "cat a", "y"), (1.0, 2.0, 3.0))
    STSTask("S", lambda split: data).evaluate_split(
        "test", encoder, RunSettings(limits=2).search_options(show_progress=False)
    )
    assert encoder.calls == [("document", ["cat a", "cat b"]), ("document", ["x", "cat a"])]


def test_file_loader_maps_columns_and_explains_errors(tmp_path):
    from embedscope.errors import DataFormatError

    (tmp_path / "p.csv").write_text("a,b,gold\nx,y,1\nz,w,2.5\n")
    data = load_sts_file(tmp_path / "p.csv", {"sentence1": "a", "sentence2": "b", "score": "gold"})
    assert data == STSData(("x", "z"), ("y", "w"), (1.0, 2.5))
    with pytest.raises(DataFormatError, match=r"p.csv, line 2: missing field 'sentence1'"):
        load_sts_file(tmp_path / "p.csv")


@pytest.mark.slow
def test_builtin_lee_similarity_with_minilm_matches_mteb(minilm, mteb_minilm):
    pytest.importorskip("mteb")

    from embedscope.tasks.sts import lee_sts_split
    from support.mteb_reference_labels import assert_same_scores
    from support.mteb_reference_pairs import mteb_split_scores, mteb_sts_task

    full = lee_sts_split("test")
    data = STSData(full.sentence1[:60], full.sentence2[:60], full.scores[:60])  # 60 pairs keep CI fast
    ours = (
        STSTask("Lee", lambda split: data, min_score=0, max_score=1)
        .evaluate_split("test", minilm, RunSettings().search_options(show_progress=False))
        .scores
    )
    theirs = mteb_split_scores(mteb_minilm, mteb_sts_task(data, min_score=0, max_score=1))
    assert_same_scores(ours, theirs, "cosine_spearman")
    assert ours["cosine_spearman"] > 0.2  # MiniLM tracks human ratings (0.508 on all 1,225 pairs)
