"""The ONNX seed's feature-extraction / sentence-similarity evaluator."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from scipy.stats import spearmanr

from embedscope.cli.main import main
from embedscope.errors import ConfigError, DataFormatError
from embedscope.evaluation.feature_extraction import evaluate_feature_extraction, parse_column_mapping
from embedscope.testing.fakes import KeywordEncoder

WORDS = ["cat", "dog", "fish", "bird"]


def _pairs_file(path, n=40):
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(n):
        a = " ".join(rng.choice(WORDS, size=3))
        b = " ".join(rng.choice(WORDS, size=3))
        rows.append({"left": a, "right": b, "gold": float(rng.integers(0, 6))})
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["left", "right", "gold"])
        writer.writeheader()
        writer.writerows(rows)
    return rows


def test_spearman_x100_of_cosines_matches_scipy_on_the_shuffled_sample(tmp_path):
    import datasets

    rows = _pairs_file(tmp_path / "pairs.csv")
    columns = parse_column_mapping(["input_column_1=left", "input_column_2=right", "score_column=gold"])
    record = evaluate_feature_extraction(
        KeywordEncoder(WORDS),
        model_id="kw",
        model_path="kw",
        dataset=str(tmp_path / "pairs.csv"),
        samples=25,
        columns=columns,
    )
    sample = datasets.Dataset.from_list(rows).shuffle(seed=42).select(range(25))  # the seed's sampling
    enc = KeywordEncoder(WORDS)
    a = enc.encode(sample["left"], role="document").astype(np.float64)
    b = enc.encode(sample["right"], role="document").astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert record["metrics"]["cosine_spearman"] == round(spearmanr(cos, sample["gold"]).statistic * 100, 2)
    assert record["dataset"] == {
        "path": str(tmp_path / "pairs.csv"),
        "split": "test",
        "samples": 25,
        "shuffle": True,
        "seed": 42,
        "columns_mapping": columns,
    }
    assert list(record) == ["model_id", "model_path", "task", "device", "dataset", "metrics"]


def test_bad_columns_and_keys_are_explained(tmp_path):
    _pairs_file(tmp_path / "pairs.csv")
    with pytest.raises(DataFormatError, match="sentence1.*columns are"):
        evaluate_feature_extraction(
            KeywordEncoder(WORDS), model_id="kw", model_path="kw", dataset=str(tmp_path / "pairs.csv")
        )
    with pytest.raises(ConfigError, match="valid keys"):
        parse_column_mapping(["text=left"])


@pytest.mark.slow
def test_cli_writes_the_seed_json_for_an_onnx_alias(tmp_path, capsys):
    _pairs_file(tmp_path / "pairs.csv", n=30)
    out = tmp_path / "eval.json"
    code = main(
        [
            "eval",
            "-m",
            "paraphrase-minilm-l3",
            "--model-id",
            "sentence-transformers/paraphrase-MiniLM-L3-v2",
            "--task",
            "feature-extraction",
            "--dataset",
            str(tmp_path / "pairs.csv"),
            "--split",
            "test",
            "--column",
            "input_column_1=left",
            "--column",
            "input_column_2=right",
            "--column",
            "score_column=gold",
            "--output",
            str(out),
        ]
    )
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert json.loads(out.read_text()) == printed
    assert printed["model_path"].endswith(".onnx") and printed["dataset"]["shuffle"] is False
    assert -100 <= printed["metrics"]["cosine_spearman"] <= 100


@pytest.mark.slow
def test_reference_model_fidelity_against_scipy(tmp_path):
    rows = _pairs_file(tmp_path / "pairs.csv", n=60)
    columns = {"input_column_1": "left", "input_column_2": "right", "score_column": "gold"}
    reference = KeywordEncoder(WORDS, name="ref")
    candidate = KeywordEncoder(WORDS[:3], name="cand")  # loses a dimension: other vectors, other similarities
    record = evaluate_feature_extraction(
        candidate,
        model_id="cand",
        model_path="x",
        dataset=str(tmp_path / "pairs.csv"),
        columns=columns,
        reference=reference,
    )
    ref = record["reference"]
    gold = np.array([r["gold"] for r in rows])

    def cosines(enc):
        a = enc.encode([r["left"] for r in rows], role="document").astype(np.float64)
        b = enc.encode([r["right"] for r in rows], role="document").astype(np.float64)
        n = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
        return np.where(n > 0, (a * b).sum(axis=1) / np.where(n > 0, n, 1), 0.0)

    rs, cs = cosines(reference), cosines(candidate)
    assert ref["metrics"]["cosine_spearman"] == round(spearmanr(rs, gold).statistic * 100, 2)
    assert ref["cosine_spearman_shift"] == round(
        record["metrics"]["cosine_spearman"] - ref["metrics"]["cosine_spearman"], 2
    )
    assert ref["similarity_spearman"] == pytest.approx(spearmanr(rs, cs).statistic, abs=1e-12)
    low, high = ref["shift_ci95"]
    assert low <= ref["cosine_spearman_shift"] + 0.01 and ref["cosine_spearman_shift"] - 0.01 <= high
    assert 0 < ref["shift_p_value"] <= 1
    discordant = sum((rs[i] - rs[j]) * (cs[i] - cs[j]) < 0 for i in range(60) for j in range(i + 1, 60))
    assert ref["discordant_pairs"] == discordant
    assert "dimensions differ (4 vs 3)" in ref["embedding_agreement"]

    same = evaluate_feature_extraction(
        reference,
        model_id="ref",
        model_path="x",
        dataset=str(tmp_path / "pairs.csv"),
        columns=columns,
        reference=KeywordEncoder(WORDS),
    )
    agreement = same["reference"]["embedding_agreement"]
    assert agreement["embedding_cosine_min"] == pytest.approx(1.0) and agreement["texts"] == 120
    assert same["reference"]["cosine_spearman_shift"] == 0 and same["reference"]["discordant_pairs"] == 0
    assert same["device"] == "cpu"
