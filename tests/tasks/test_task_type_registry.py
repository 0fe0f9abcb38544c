"""The task-type registry (issue 14): a new task type is one module — its class and one registration.

The toy ``WordCount`` type below is defined and registered here and nowhere else, then run through the
API, the ``TYPE:PATH`` route, the CLI (``embedscope run --tasks wordcount:FILE``) and the report.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from scipy.stats import spearmanr

import embedscope
from embedscope.cli.main import build_parser, main
from embedscope.errors import ConfigError, UnknownNameError
from embedscope.models.base import Encoder
from embedscope.results.settings import task_settings
from embedscope.tasks.base import SearchOptions, SplitOutcome, Task, TaskInfo
from embedscope.tasks.custom import custom_task, split_type_prefix, task_type_of
from embedscope.tasks.params import apply_task_options
from embedscope.tasks.registry import resolve_task
from embedscope.tasks.types import TASK_TYPES, TaskType, TaskTypeRegistry, TypeNames, get_task_type
from embedscope.testing.fakes import KeywordEncoder

# ---- the new type: everything it needs, in one place ------------------------------------------------------


@dataclass(frozen=True)
class WordCountTask(TaskInfo):
    """Toy type: Spearman correlation between each text's embedding L1 norm and its gold word count."""

    load_split: Callable[[str], list[tuple[str, int]]] = field(repr=False, compare=False)
    eval_splits: tuple[str, ...] = ("test",)
    main_score: str = "spearman"
    min_count: int = 0  # a protocol parameter: rows with fewer words are skipped
    type: ClassVar[str] = "WordCount"

    def evaluate_split(self, split: str, encoder: Encoder, options: SearchOptions) -> SplitOutcome:
        rows = [(text, n) for text, n in self.load_split(split) if n >= self.min_count]
        vectors = encoder.encode([text for text, _ in rows], role="document", batch_size=options.batch_size)
        norms = np.abs(vectors).sum(axis=1)
        rho = float(spearmanr(norms, [n for _, n in rows]).statistic)
        return SplitOutcome({"spearman": rho}, n_queries=len(rows))


def read_word_counts(path: Path) -> list[tuple[str, int]]:
    """``TEXT<TAB>COUNT`` lines."""
    return [(text, int(count)) for text, count in (line.split("\t") for line in path.read_text().splitlines())]


def _read_files(folder: Path, columns: dict[str, str] | None, fields: dict[str, Any]) -> WordCountTask:
    return WordCountTask(load_split=lambda split: read_word_counts(folder), **fields)


WORD_COUNT = TaskType(
    "WordCount",
    WordCountTask,
    main_score="spearman",
    aliases=("word-count",),
    read_files=_read_files,
    params={"min_count": ("min_count", int)},
)

# ------------------------------------------------------------------------------------------------------------

ROWS = [("cat dog cat", 3), ("dog", 1), ("a cat sat", 3), ("the dog and the cat ran", 6), ("cat cat cat cat", 4)]


@pytest.fixture
def word_count() -> Iterator[TaskType]:
    TASK_TYPES.register(WORD_COUNT)
    yield WORD_COUNT
    TASK_TYPES.unregister("WordCount")


@pytest.fixture
def counts_file(tmp_path: Path) -> Path:
    path = tmp_path / "counts.tsv"
    path.write_text("".join(f"{text}\t{n}\n" for text, n in ROWS))
    return path


def _expected_spearman() -> float:
    """Independent reference: the keyword encoder's L1 norm is the number of keyword occurrences."""
    norms = [sum(text.split().count(k) for k in ("cat", "dog")) for text, _ in ROWS]
    return float(spearmanr(norms, [n for _, n in ROWS]).statistic)


def test_a_registered_type_runs_through_the_route_and_writes_its_result(word_count, counts_file, tmp_path):
    assert split_type_prefix(f"wordcount:{counts_file}") == ("WordCount", str(counts_file))
    task = resolve_task(f"word-count:{counts_file}")
    assert isinstance(task, WordCountTask) and isinstance(task, Task) and task.name == "counts"
    report = embedscope.evaluate(
        KeywordEncoder(["cat", "dog"]), [f"wordcount:{counts_file}"], output_folder=tmp_path / "out", cache=False
    )
    outcome = report.outcomes[0]
    stored = json.loads(outcome.path.read_text())
    assert outcome.path.name == "counts.json" and stored["task_name"] == "counts"
    assert stored["scores"]["test"][0]["main_score"] == pytest.approx(_expected_spearman(), abs=1e-12)
    assert 0 < _expected_spearman() < 1
    assert stored["task_settings"] == {
        "main_score": "spearman",
        "min_count": 0,
        "dataset_revision": "custom",
        "type": "WordCount",
    }


@pytest.mark.slow
def test_the_cli_runs_a_registered_type_from_a_file(word_count, counts_file, tmp_path, capsys):
    from support.tiny_models import build_tiny_sentence_transformer

    model = build_tiny_sentence_transformer(tmp_path / "tiny-st")  # a model the test builds: the fast tier
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "--model",
                str(model),
                "--tasks",
                f"wordcount:{counts_file}",
                "--task-param",
                "min_count=2",
                "--output-folder",
                str(out),
                "--no-cache",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    [path] = [p for p in out.rglob("counts.json")]
    stored = json.loads(path.read_text())
    assert stored["task_settings"]["min_count"] == 2 and stored["task_settings"]["type"] == "WordCount"
    assert isinstance(stored["scores"]["test"][0]["main_score"], float)
    build_parser().parse_args(["tasks", "--type", "WordCount"])
    assert "WordCount" in str(TypeNames())


def test_the_report_knows_a_registered_types_main_metric(word_count):
    from embedscope.results.report import type_main_metric

    assert type_main_metric("WordCount") == "spearman" and type_main_metric("Nope") is None


def test_task_params_come_from_the_registered_type(word_count, counts_file):
    task = custom_task(counts_file, type="wordcount")
    [changed] = apply_task_options([task], {"min_count": "3"})
    assert changed.min_count == 3
    with pytest.raises(ConfigError, match="valid: min_count"):
        apply_task_options([task], {"k": "3"})


def test_an_unknown_type_suggests_close_registered_ones(word_count):
    with pytest.raises(UnknownNameError, match="Did you mean 'WordCount'.*Known: .*Retrieval.*WordCount"):
        task_type_of("wordcont")
    with pytest.raises(UnknownNameError, match="Did you mean 'STS'"):
        custom_task(".", type="stss")


def test_unregistering_removes_the_route(counts_file):
    TASK_TYPES.register(WORD_COUNT)
    TASK_TYPES.unregister("word-count")
    assert split_type_prefix(f"wordcount:{counts_file}") is None and "WordCount" not in TASK_TYPES


def test_a_name_or_alias_is_registered_once():
    registry = TaskTypeRegistry()
    registry.register(WORD_COUNT)
    with pytest.raises(ValueError, match="already registered"):
        registry.register(TaskType("Other", WordCountTask, main_score="x", aliases=("Word_Count",)))
    with pytest.raises(ValueError, match="already registered"):
        TASK_TYPES.register(TaskType("Sts", WordCountTask, main_score="x"))


def test_builtin_types_are_registered_by_their_modules():
    names = TASK_TYPES.names()
    assert names[:3] == ["Retrieval", "Reranking", "STS"] and len(names) == 11
    for spec in TASK_TYPES:
        assert spec.task_class.type == spec.name and spec.read_files is not None and spec.from_catalog is not None
        assert issubclass(spec.task_class, TaskInfo)
    assert get_task_type("bitext").name == "BitextMining"
    assert get_task_type("Pair_Classification").main_score == "max_ap"


def test_task_info_keeps_the_constructor_and_stored_settings():
    """The shared fields come from TaskInfo; ``name`` stays positional and the stored ``task_settings`` keep
    their keys, values and order (as written before TaskInfo existed)."""
    from embedscope.tasks.sts import STSTask

    task = STSTask("X", lambda split: None, hf_subset="ru", dataset_revision="abc", languages=("rus-Cyrl",))
    assert (task.name, task.type, task.hf_subset, task.source) == ("X", "STS", "ru", "")
    assert list(task_settings(task).items()) == [
        ("main_score", "cosine_spearman"),
        ("min_score", 0),
        ("max_score", 5),
        ("dataset_revision", "abc"),
        ("type", "STS"),
    ]
