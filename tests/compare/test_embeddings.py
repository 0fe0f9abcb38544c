"""Per-text embedding agreement: the texts a task encodes, and cosines of two models' vectors."""

from __future__ import annotations

import numpy as np
import pytest

from embedscope.cli.main import main
from embedscope.compare.embeddings import embedding_agreement, row_cosines, task_texts
from embedscope.errors import ConfigError
from embedscope.settings import RunSettings
from embedscope.testing.fakes import HashEncoder
from embedscope.testing.tiny import TINY_CORPUS, TINY_QUERIES, tiny_retrieval_task, tiny_tasks_of_every_type


class HalfZeroed(HashEncoder):
    """The hash encoder with its last half of dimensions set to zero."""

    def encode(self, texts, *, role, batch_size=32, show_progress=False):
        out = super().encode(texts, role=role)
        out[:, self.dim // 2 :] = 0
        return out


def test_task_texts_cover_roles_and_splits():
    texts = task_texts(tiny_retrieval_task(), RunSettings().search_options(show_progress=False))
    assert set(texts) == {("query", q) for q in TINY_QUERIES.values()} | {("document", d) for d in TINY_CORPUS.values()}
    sts = next(t for t in tiny_tasks_of_every_type() if t.name == "TinySTS")
    data = sts.load_split("test")
    assert {t for _, t in task_texts(sts, RunSettings().search_options(show_progress=False))} == set(
        data.sentence1
    ) | set(data.sentence2)


def test_cosines_by_hand():
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    b = np.array([[2.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    assert row_cosines(a, b).tolist() == pytest.approx([1.0, 1 / np.sqrt(2), 0.0])
    with pytest.raises(ConfigError, match="same dimension"):
        row_cosines(a, np.ones((3, 3)))


def test_agreement_of_a_degraded_model():
    ref, cand = HashEncoder(dim=16), HalfZeroed(dim=16)
    task = tiny_retrieval_task()
    got = embedding_agreement(ref, cand, [task], RunSettings().search_options(show_progress=False))["TinyRetrieval"]
    texts = task_texts(task, RunSettings().search_options(show_progress=False))
    v = np.array([ref.encode([t], role=r)[0] for r, t in texts])
    expected = np.linalg.norm(v[:, :8], axis=1)  # unit vectors: cos = ‖first half‖
    assert got["texts"] == 7 and got["embedding_cosine_mean"] == pytest.approx(expected.mean())
    assert got["embedding_cosine_min"] == pytest.approx(expected.min())
    same = embedding_agreement(ref, HashEncoder(dim=16), [task], RunSettings().search_options(show_progress=False))[
        "TinyRetrieval"
    ]
    assert same["embedding_cosine_min"] == pytest.approx(1.0) and same["share_below_0.99"] == 0.0
    other = embedding_agreement(ref, HashEncoder(dim=32), [task], RunSettings().search_options(show_progress=False))[
        "TinyRetrieval"
    ]
    assert other == {"embedding_agreement": "dimensions differ (16 vs 32)"}


def test_cli_models_needs_two_models_and_tasks(capsys):
    assert main(["compare", "--models", "static-64", "--tasks", "LeeDocumentSimilarity"]) == 2
    assert "two models" in capsys.readouterr().err
    assert main(["compare", "a", "--models", "static-64", "static-64"]) == 2
    assert "not both" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_models_minilm_against_its_int8_export(tmp_path, capsys):
    args = [
        "compare",
        "--models",
        "minilm",
        "minilm-int8",
        "--tasks",
        "LeeDocumentSimilarity",
        "--limits",
        "40",
        "--output-folder",
        str(tmp_path / "out"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
    ]
    assert main(args) == 0
    import json

    (row,) = json.loads(capsys.readouterr().out)["comparisons"]
    assert 0.95 < row["extra"]["embedding_cosine_mean"] <= 1.0 and row["extra"]["texts"] > 40
    assert 0.9 < row["extra"]["similarity_spearman"] <= 1.0 and row["test"] == "bootstrap-pairs"
