"""docs/architecture.md's "where to add" table is true, row by row: each thing it names is added here by a toy (a
task type with a protocol parameter, a model backend, a metric, a data format, an engine, a CLI command), in this one
file (the number of files the table states for a plugin), and works from every entry point; a run option, which a
test cannot add, is proven on a real one (``truncate_dim``), and a sweep axis needs nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import Field

import embedscope
from embedscope.cli.main import main
from embedscope.data.tables import register_table_format, unregister_table_format
from embedscope.engines import EngineSettings, register_engine
from embedscope.engines.base import unregister_engine
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import TINY_CORPUS, TINY_QRELS, TINY_QUERIES

BUILT: list[dict[str, Any]] = []


class EchoEngine(EngineSettings):
    """A toy engine: a keyword encoder in this process, whose vectors are scaled by ``scale``."""

    name: Literal["echo"] = "echo"
    scale: float = Field(1.0, gt=0, description="how much the toy engine scales its vectors")

    def devices(self, spec: str | None) -> list[str]:
        return ["cpu"]

    def build(self, spec: Any, options: dict[str, Any], devices: list[str], cache_dir: Path | None) -> Any:
        BUILT.append({"spec": spec, "scale": self.scale, "devices": devices})
        return KeywordEncoder(["cat", "dog", "fish"], name=f"toy/{spec}")


@pytest.fixture
def echo_engine() -> Iterator[None]:
    register_engine(EchoEngine)
    BUILT.clear()
    yield
    unregister_engine("echo")


@pytest.mark.slow
def test_a_toy_engine_is_one_module_and_one_registration(echo_engine, tmp_path, capsys):
    from embedscope.testing.tiny import tiny_retrieval_task

    report = embedscope.evaluate(
        "m", [tiny_retrieval_task()], engine="echo", echo_scale=2.5, output_folder=tmp_path, cache=False
    )
    assert BUILT == [{"spec": "m", "scale": 2.5, "devices": ["cpu"]}] and report.outcomes[0].result.main_score() == 1.0
    assert main(["run", "--engine", "echo", "--echo-scale", "3", "--print-settings"]) == 0
    assert '{"name": "echo", "scale": 3.0}' in capsys.readouterr().out
    assert main(["run", "--echo-scale", "3", "--print-settings"]) == 2
    assert "--echo-scale applies to the echo engine only" in capsys.readouterr().err
    assert main(["run", "--engine", "echo", "--echo-scale", "0", "--print-settings"]) == 2
    assert "--echo-scale: Input should be greater than 0" in capsys.readouterr().err
    config = tmp_path / "c.yaml"
    config.write_text("engine: echo\necho_scale: 4\n")
    assert main(["run", "--config", str(config), "--print-settings"]) == 0
    assert '{"name": "echo", "scale": 4.0}' in capsys.readouterr().out


def _pipe_rows(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """A toy table format: ``|``-separated cells under a header line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("|")
    for n, line in enumerate(lines[1:], start=2):
        yield f"{path}, line {n}", dict(zip(header, line.split("|")))


@pytest.fixture
def pipe_format() -> Iterator[None]:
    register_table_format(".pipe", _pipe_rows)
    yield
    unregister_table_format(".pipe")


def _write_pipe(path: Path, header: list[str], rows: list[list[Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join("|".join(map(str, r)) for r in [header, *rows]) + "\n")
    return path


def test_a_toy_table_format_is_read_by_every_loader(pipe_format, tmp_path):
    beir = tmp_path / "beir"
    _write_pipe(beir / "corpus.pipe", ["_id", "text"], [[k, v] for k, v in TINY_CORPUS.items()])
    _write_pipe(beir / "queries.pipe", ["_id", "text"], [[k, v] for k, v in TINY_QUERIES.items()])
    qrels = [[q, d, s] for q, docs in TINY_QRELS.items() for d, s in docs.items()]
    _write_pipe(beir / "qrels" / "test.pipe", ["query-id", "corpus-id", "score"], qrels)
    encoder = KeywordEncoder(["cat", "dog", "fish"])
    report = embedscope.evaluate(encoder, [str(beir)], output_folder=tmp_path / "o", cache=False)
    assert report.outcomes[0].result.main_score() == 1.0

    pairs = _write_pipe(
        tmp_path / "pairs.pipe",
        ["sentence1", "sentence2", "score"],
        [["cat", "cat cat", 5], ["dog", "fish", 0], ["fish", "fish", 4], ["cat", "dog", 1]],
    )
    sts = embedscope.evaluate(encoder, [f"sts:{pairs}"], output_folder=tmp_path / "o2", cache=False)
    assert sts.outcomes[0].task.type == "STS" and sts.outcomes[0].result.main_score() > 0

    from embedscope.data.hub_files import read_dataset

    hub = _write_pipe(tmp_path / "hub" / "test.pipe", ["text", "label"], [["a", 0], ["b", 1]])
    assert read_dataset([hub]).to_list() == [{"text": "a", "label": "0"}, {"text": "b", "label": "1"}]
    assert json.dumps(sorted(TINY_QUERIES))  # the tiny data the loaders read


# -- a model backend: one record, registered (here, from this test: 1 file) ------------------------------------

TOY_LOADS: list[dict[str, Any]] = []


def _load_toy(path: Any, options: Any) -> KeywordEncoder:
    """A toy backend: a keyword encoder per folder holding ``toy.json`` (its pooling and placement recorded)."""
    TOY_LOADS.append({"folder": Path(path).name, "pooling": options.pooling, "device": options.placement().device})
    return KeywordEncoder(["cat", "dog", "fish"], name=f"toy/{Path(path).name}")


@pytest.fixture
def toy_backend() -> Iterator[None]:
    from embedscope.models.backends import Backend, register_backend, unregister_backend

    register_backend(
        Backend(
            "toy",
            "a toy keyword encoder",
            ("a folder with toy.json",),
            _load_toy,
            lambda path: (path / "toy.json").is_file(),
            synonyms=("toy-backend",),
            fast_path=True,
        )
    )
    TOY_LOADS.clear()
    yield
    unregister_backend("toy")


def _toy_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "toy.json").write_text("{}")
    return path


@pytest.mark.slow
def test_a_toy_backend_is_one_record_and_every_entry_point_takes_it(toy_backend, tmp_path, capsys):
    from embedscope.models.backends import backend_help, backend_names
    from embedscope.screen.run import fast_path_overrides, fast_paths, screen
    from embedscope.testing.tiny import tiny_retrieval_task

    assert "toy" in backend_names() and "toy: a toy keyword encoder (a folder with toy.json" in backend_help()
    folder = _toy_folder(tmp_path / "m1")
    # evaluate(): the folder's form is detected, and model_options={"backend": ...} (a synonym too) names it
    report = embedscope.evaluate(str(folder), [tiny_retrieval_task()], output_folder=tmp_path / "o", cache=False)
    assert report.outcomes[0].result.main_score() == 1.0 and report.model_name == "toy/m1"
    embedscope.evaluate(
        str(folder),
        [tiny_retrieval_task()],
        output_folder=tmp_path / "o2",
        cache=False,
        model_options={"backend": "toy-backend", "pooling": "cls"},
    )
    assert TOY_LOADS == [
        {"folder": "m1", "pooling": None, "device": "cpu"},
        {"folder": "m1", "pooling": "cls", "device": "cpu"},
    ]
    # --backend (its help lists the record) and config backend:
    from embedscope.settings.options import declared_options

    assert "| toy" in next(o.help for o in declared_options() if o.path == "model_options.backend")
    assert main(["run", "--backend", "toy", "--print-settings"]) == 0
    assert '"backend": "toy"' in capsys.readouterr().out
    assert main(["run", "--backend", "toyy", "--print-settings"]) == 2
    assert "toy" in capsys.readouterr().err
    config = tmp_path / "c.yaml"
    config.write_text("model_options:\n  backend: toy\n")
    assert main(["run", "--config", str(config), "--print-settings"]) == 0
    assert '"backend": "toy"' in capsys.readouterr().out
    # screen: a backend that declares a fast path is one
    assert fast_paths()["toy"] == {"backend": "toy"} == fast_path_overrides("toy")
    other = _toy_folder(tmp_path / "m2")
    screened = screen(
        [str(folder), str(other)],
        [tiny_retrieval_task()],
        fast="toy",
        confirm=1,
        output_folder=str(tmp_path / "s"),
        cache=False,
        fidelity=False,
    )
    assert screened.fast_path == "toy" and all(m.fast_applied for m in screened.models)


# -- a metric: a pure function, checked against an independent reference; the task type that reports it ----------


def balanced_accuracy(gold: Sequence[int], predicted: Sequence[int]) -> float:
    """A toy metric: the mean over the gold classes of each class's recall, ``mean_c |{i: g_i = p_i = c}| / |{i:
    g_i = c}|`` (a plugin's pure function; a built-in one lives in ``metrics/<kind>.py``)."""
    classes = sorted(set(gold))
    recalls = [sum(g == p == c for g, p in zip(gold, predicted)) / sum(g == c for g in gold) for c in classes]
    return sum(recalls) / len(recalls)


def test_a_toy_metric_matches_its_reference_and_its_task_type_reports_it(longest_type, tmp_path):
    """The function equals sklearn's (the independent reference) and the toy ``Longest`` type below reports it:
    the metric and its reporting task module are this one file (a built-in metric: ``metrics/<kind>.py`` and the
    task module that reports it, 2 files; a ranking metric is ``metrics/ranking.py`` alone)."""
    import numpy as np
    from sklearn.metrics import balanced_accuracy_score

    rng = np.random.default_rng(3)
    for _ in range(20):
        gold, predicted = rng.integers(0, 3, 30).tolist(), rng.integers(0, 3, 30).tolist()
        assert balanced_accuracy(gold, predicted) == pytest.approx(balanced_accuracy_score(gold, predicted), abs=1e-12)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("cat dog fish\tcat\t1\ncat\tdog fish\t0\ndog\tfish\t1\nfish\tcat dog\t0\n")
    report = embedscope.evaluate(
        KeywordEncoder(["cat", "dog", "fish"]), [f"longest:{pairs}"], output_folder=tmp_path / "o", cache=False
    )
    stored = json.loads(report.outcomes[0].path.read_text())["scores"]["test"][0]
    # predicted: 1, 0, 0 (dog and fish tie), 0 against gold 1, 0, 1, 0
    assert stored["balanced_accuracy"] == pytest.approx(balanced_accuracy_score([1, 0, 1, 0], [1, 0, 0, 0]))
    assert stored["balanced_accuracy"] == 0.75 and stored["accuracy"] == 0.75


# -- a task type: one dataclass and one registration (here, from this test: 1 file) ----------------------------


def _toy_task_type() -> Any:
    """A toy type ``Longest``: accuracy of telling which of two texts holds more keywords, over rows whose keyword
    count is at least ``min_words`` (its protocol parameter)."""
    from dataclasses import dataclass, field
    from typing import ClassVar

    import numpy as np

    from embedscope.tasks.base import SplitOutcome, TaskInfo
    from embedscope.tasks.types import TaskType

    @dataclass(frozen=True)
    class LongestTask(TaskInfo):
        rows: tuple[tuple[str, str, int], ...] = field(default=(), repr=False, compare=False)
        eval_splits: tuple[str, ...] = ("test",)
        main_score: str = "accuracy"
        min_words: int = 0
        type: ClassVar[str] = "Longest"

        def evaluate_split(self, split: str, encoder: Any, options: Any) -> SplitOutcome:
            rows = [r for r in self.rows if len(r[0].split()) >= self.min_words]
            a = np.abs(encoder.encode([r[0] for r in rows], role="document")).sum(axis=1)
            b = np.abs(encoder.encode([r[1] for r in rows], role="document")).sum(axis=1)
            gold, predicted = [r[2] for r in rows], [int(x > y) for x, y in zip(a, b)]
            scores = {"accuracy": sum(g == p for g, p in zip(gold, predicted)) / len(rows)}
            return SplitOutcome({**scores, "balanced_accuracy": balanced_accuracy(gold, predicted)}, len(rows))

    def read(path: Path, columns: Any, fields: dict[str, Any]) -> LongestTask:
        rows = tuple((a, b, int(g)) for a, b, g in (line.split("\t") for line in path.read_text().splitlines()))
        return LongestTask(rows=rows, **fields)

    return TaskType("Longest", LongestTask, "accuracy", read_files=read, params={"min_words": ("min_words", int)})


@pytest.fixture
def longest_type() -> Iterator[None]:
    from embedscope.tasks.types import TASK_TYPES

    TASK_TYPES.register(_toy_task_type())
    yield
    TASK_TYPES.unregister("Longest")


def _scores(out: Path) -> dict[int, float]:
    """``min_words`` → main score of every result file under ``out``."""
    stored = [json.loads(p.read_text()) for p in out.rglob("pairs.json")]
    return {s["task_settings"]["min_words"]: s["scores"]["test"][0]["main_score"] for s in stored}


@pytest.mark.slow
def test_a_toy_task_type_with_a_protocol_parameter_runs_from_custom_tasks_and_the_cli(
    longest_type, toy_backend, tmp_path, capsys
):
    """The type's parameter is set by ``task_params`` (config key, ``--task-param``, ``evaluate(task_params=)``)
    for its ``custom_tasks`` entries and ``TYPE:PATH`` files alike, and by a ``custom_tasks`` entry's own key (checked
    by the type's record: a name it lacks is refused in one line)."""
    from embedscope.evaluation.runner import evaluate_config

    pairs = tmp_path / "data" / "pairs.tsv"
    pairs.parent.mkdir()
    # gold 1: the first text holds more keywords; the keyword count gets the one-word row wrong (dog vs fish)
    pairs.write_text("cat dog fish\tcat\t1\ncat\tdog fish\t0\ndog\tfish\t1\n")
    encoder = KeywordEncoder(["cat", "dog", "fish"])
    embedscope.evaluate(encoder, [f"longest:{pairs}"], output_folder=tmp_path / "api", cache=False)
    assert _scores(tmp_path / "api") == {0: 2 / 3}
    # a custom_tasks entry of the type, its parameter from the config's task_params
    entry = f"custom_tasks:\n  - name: pairs\n    type: longest\n    data_path: {pairs}\n"
    config = tmp_path / "c.yaml"
    config.write_text(entry + "task_params:\n  min_words: 2\n")
    evaluate_config(config, model=encoder, output_folder=str(tmp_path / "cfg"), cache=False)
    assert _scores(tmp_path / "cfg") == {2: 1.0}  # the parameter took effect
    config.write_text(entry + "    min_words: 2\n")  # the entry's own key: the type's parameter too
    evaluate_config(config, model=encoder, output_folder=str(tmp_path / "entry"), cache=False)
    assert _scores(tmp_path / "entry") == {2: 1.0}
    config.write_text(entry + "    min_word: 2\n")  # a name the type lacks: one line naming the valid ones
    assert main(["run", "--config", str(config), "--print-settings"]) == 2
    assert "min_words" in capsys.readouterr().err
    # the CLI: TYPE:PATH with --task-param (the model: the toy backend's folder)
    model = _toy_folder(tmp_path / "m")
    argv = ["run", "--model", str(model), "--tasks", f"longest:{pairs}", "--output-folder", str(tmp_path / "cli")]
    assert main([*argv, "--no-cache"]) == 0
    assert main([*argv, "--no-cache", "--task-param", "min_words=2"]) == 0
    assert _scores(tmp_path / "cli") == {0: 2 / 3, 2: 1.0}
    assert main([*argv, "--task-param", "min_word=2"]) == 2
    assert "min_words" in capsys.readouterr().err


# -- a run option that changes a score: a real one, truncate_dim, on every surface the table names -------------


@pytest.mark.slow
def test_a_run_option_that_changes_a_score_appears_on_every_surface(toy_backend, tmp_path, capsys):
    """A test cannot add a ``RunSettings`` field without editing ``settings/run.py`` (the option is a field of the
    model that the config, the API and the flags all validate against), so this proves a real one, ``truncate_dim``
    (declared once with ``option(...)``; read by ``retrieval/base.py: SearchOptions``), on every surface: the flag on
    the commands that pick its group (``run``; ``sweep`` takes settings keys by ``--axis``; ``screen`` does not pick
    the group, so refuses it), the
    config key, the ``evaluate()`` keyword, the result record, the experiments hash, a sweep axis and the refusal."""
    from embedscope.settings import Layer
    from embedscope.sweep.grid import SweepGrid, parse_axis_flag, run_sweep
    from embedscope.testing.tiny import tiny_retrieval_task

    assert main(["run", "--truncate-dim", "2", "--print-settings"]) == 0
    assert "| truncate_dim | 2 | command line (--truncate-dim) |" in capsys.readouterr().out
    config = tmp_path / "c.yaml"
    config.write_text("truncate_dim: 1\n")
    assert main(["run", "--config", str(config), "--print-settings"]) == 0
    assert "| truncate_dim | 1 | " in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["screen", "--truncate-dim", "2"])
    capsys.readouterr()
    encoder = KeywordEncoder(["cat", "dog", "fish"])
    full = embedscope.evaluate(encoder, [tiny_retrieval_task()], output_folder=tmp_path / "o", cache=False)
    cut = embedscope.evaluate(
        encoder, [tiny_retrieval_task()], output_folder=tmp_path / "o", cache=False, truncate_dim=1
    )
    stored = json.loads(cut.outcomes[0].path.read_text())
    assert (
        stored["run_settings"]["truncate_dim"] == 1
        and "truncate_dim" not in json.loads(full.outcomes[0].path.read_text())["run_settings"]
    )
    assert full.outcomes[0].path.parent != cut.outcomes[0].path.parent
    assert cut.outcomes[0].path.parent.parent.name == "experiments"  # its own experiments folder
    assert full.outcomes[0].result.main_score() == 1.0 > cut.outcomes[0].result.main_score()
    # a sweep axis over it (the flag --axis truncate_dim=…, run here by the API): two points, two result files, two scores
    base = Layer(
        "base",
        {
            "model": encoder,
            "tasks": [tiny_retrieval_task()],
            "output_folder": str(tmp_path / "s"),
            "cache": False,
            "show_progress": False,
        },
        "api",
    )
    assert parse_axis_flag("truncate_dim=1,2") == ("truncate_dim", [1, 2])
    points = run_sweep(SweepGrid([base], [("truncate_dim", [None, 1])]), log=None)
    files = [next(iter(p.paths.values())) for p in points]
    assert len(set(files)) == 2 and [json.loads(f.read_text())["scores"]["test"][0]["main_score"] for f in files] == [
        full.outcomes[0].result.main_score(),
        cut.outcomes[0].result.main_score(),
    ]
    # the refusal: on an STS-only run it acts nowhere
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("sentence1,sentence2,score\ncat,cat cat,5\ndog,fish,0\nfish,fish,4\ncat,dog,1\n")
    model = _toy_folder(tmp_path / "m")
    argv = [
        "run",
        "--model",
        str(model),
        "--tasks",
        f"sts:{pairs}",
        "--output-folder",
        str(tmp_path / "r"),
        "--no-cache",
    ]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--truncate-dim", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--truncate-dim" in err, err


# -- a sweep axis: nothing to add; any settings path is one --------------------------------------------------------


def test_any_settings_path_is_a_sweep_axis_and_one_that_changes_no_result_is_refused(tmp_path):
    """A nested path (``chunking.paragraphs``) is an axis with no code: two points, two result files, each recording
    its value. An axis over an option declared ``stored=False`` (``device``) is refused before any point runs; a
    stored option that is not part of the result's key (``batch_size``: it changes no score) gives points that share
    one result file, the second reusing the first."""
    from embedscope.errors import ConfigError
    from embedscope.settings import Layer
    from embedscope.sweep.grid import SweepGrid, run_sweep
    from embedscope.testing.tiny import tiny_retrieval_task

    def sweep(axis: str, values: list[Any], **more: Any) -> list[Any]:
        values_ = {"model": KeywordEncoder(["cat", "dog", "fish"]), "tasks": [tiny_retrieval_task()], **more}
        base = Layer("base", {**values_, "output_folder": str(tmp_path / axis), "show_progress": False}, "api")
        return run_sweep(SweepGrid([base], [(axis, values)]), log=None)

    points = sweep("chunking.paragraphs", [1, 2], cache=False, chunking={"method": "paragraphs"})
    files = [next(iter(p.paths.values())) for p in points]
    assert len(set(files)) == 2 and not any(p.reused for p in points)
    assert [json.loads(f.read_text())["run_settings"]["chunking"]["paragraphs"] for f in files] == [1, 2]
    with pytest.raises(ConfigError, match="axis 'device': device changes no stored result"):
        sweep("device", ["cpu", "cpu:0"], cache=False)
    shared = sweep("batch_size", [1, 2], cache=False)
    assert len({next(iter(p.paths.values())) for p in shared}) == 1 and [p.reused for p in shared] == [False, True]


# -- a CLI command: one cli/<group>.py-style module with register(sub), one library call --------------------------


class ToyGroup:
    """A toy command group, shaped as a ``cli/<group>.py`` module: ``register(sub)`` adds its command, whose
    function is one library call (here: the registered task types)."""

    @staticmethod
    def register(sub: Any) -> None:
        parser = sub.add_parser("types", help="list the registered task types")
        parser.add_argument("--contains", default="", help="keep the names holding this text")
        parser.set_defaults(func=ToyGroup.run)

    @staticmethod
    def run(args: Any) -> int:
        from embedscope.errors import ConfigError
        from embedscope.tasks.types import TASK_TYPES

        names = [n for n in TASK_TYPES.names() if args.contains.lower() in n.lower()]
        if not names:
            raise ConfigError(f"--contains {args.contains!r}: no task type holds it")
        print("\n".join(names))
        return 0


def test_a_toy_command_group_is_one_module_and_its_place_in_cli_main(monkeypatch, capsys):
    """``cli/main.py`` registers a fixed tuple of group modules (the order of ``embedscope --help``), so a new group
    is its module and its name in that tuple: 2 files. The toy stands in for that tuple entry by wrapping
    ``build_parser``; its user errors get the one line and exit code 2 of every command."""
    import argparse

    import embedscope.cli.main as cli_main

    built = cli_main.build_parser

    def with_toy() -> argparse.ArgumentParser:
        parser = built()
        [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        ToyGroup.register(sub)
        return parser

    monkeypatch.setattr(cli_main, "build_parser", with_toy)
    assert main(["types", "--contains", "sts"]) == 0
    assert capsys.readouterr().out.split() == ["STS"]
    assert main(["types", "--contains", "nope"]) == 2
    assert capsys.readouterr().err == "embedscope: error: --contains 'nope': no task type holds it\n"


# -- a results-store kind: one record (its URL schemes, SQLAlchemy driver, extra), registered here: 1 file -------------


@pytest.fixture
def lite_store_kind() -> Iterator[str]:
    import dataclasses

    from embedscope.history.kinds import STORE_KINDS, register_store_kind, unregister_store_kind

    # an embedded store on SQLite's driver under its own scheme: the record says where its file is and how it behaves
    register_store_kind(dataclasses.replace(STORE_KINDS.get("sqlite"), name="lite", schemes=("lite",)))
    yield "lite"
    unregister_store_kind("lite")


def test_a_toy_store_kind_records_runs_and_every_verb_reads_it(lite_store_kind, tmp_path, capsys):
    url = f"lite:///{tmp_path}/history.db"
    main(["results", "list", "--store", url])  # refused before any run: the store does not exist yet
    assert "no such file" in capsys.readouterr().err
    report = embedscope.evaluate(
        KeywordEncoder(["cat", "dog"], name="kw/lite"), [embedscope.testing.tiny.tiny_retrieval_task()],
        output_folder=str(tmp_path / "out"), cache=False, show_progress=False, store=url, tag="baseline",
    )  # fmt: skip
    assert report.recorded.store == f"lite:///{tmp_path}/history.db" and report.recorded.new
    assert main(["results", "list", "--store", url]) == 0 and "kw/lite" in capsys.readouterr().out
    folder = str(report.outcomes[0].path.parent)
    assert main(["gate", "tag:baseline", folder, "--store", url]) == 0
    assert main(["results", "export", "--store", url, "--output-folder", str(tmp_path / "x")]) == 0
