"""Custom tasks of every type from local files: CLI ``TYPE:PATH``, config ``custom_tasks`` with a type."""

from __future__ import annotations

import json

import pytest

from embedscope.errors import UnknownNameError
from embedscope.evaluation.runner import evaluate
from embedscope.settings.files import load_settings
from embedscope.tasks.custom import custom_task
from embedscope.testing.fakes import HashEncoder


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def files(tmp_path):
    words = ["cat", "dog", "fish", "bird"]
    out = {
        "sts": _write(
            tmp_path / "sts.jsonl",
            [{"sentence1": f"{w} {i}", "sentence2": f"{w} x", "score": i % 5} for i, w in enumerate(words * 3)],
        ),
        "pairclassification": _write(
            tmp_path / "pairs.jsonl",
            [{"sentence1": f"{w} {i}", "sentence2": w, "label": i % 2} for i, w in enumerate(words * 3)],
        ),
        "clustering": _write(
            tmp_path / "clu.jsonl", [{"text": f"{w} {i}", "label": w} for i, w in enumerate(words * 5)]
        ),
        "reranking": _write(
            tmp_path / "rr.jsonl", [{"query": w, "positive": [f"{w} yes"], "negative": [f"{w} no", "x"]} for w in words]
        ),
    }
    return out


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind,main",
    [
        ("sts", "cosine_spearman"),
        ("pairclassification", "max_ap"),
        ("clustering", "v_measure"),
        ("reranking", "map_at_1000"),
    ],
)
def test_cli_style_type_prefix_runs_each_type(tmp_path, files, kind, main):
    report = evaluate(
        HashEncoder(), [f"{kind}:{files[kind]}"], output_folder=tmp_path / "out", cache=False, show_progress=False
    )
    entry = report.outcomes[0].result.scores["test"][0]
    assert entry["main_score"] == entry[main]


def test_config_custom_tasks_accept_a_type(tmp_path, files):
    settings = load_settings(
        {
            "model": "minilm",
            "tasks": [],
            "custom_tasks": [{"name": "MySTS", "data_path": str(files["sts"]), "type": "STS"}],
        }
    )
    (task,) = settings.task_specs()
    assert (task.name, task.type, task.main_score) == ("MySTS", "STS", "cosine_spearman")


def test_unknown_type_suggests(files):
    with pytest.raises(UnknownNameError, match="Did you mean 'STS'"):
        custom_task(files["sts"], type="STSS")
