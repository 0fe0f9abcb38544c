"""Checks made in one place and not another, now made once, at validation (the settings' one check): a non-finite
stage parameter given in a model spec, a key given twice in a ``key=value,…`` spec, the same model listed twice.

Each refused case is refused by ``run``, ``run --print-settings``, ``sweep`` and ``screen`` in the same one line
naming the key, with exit code 2, before anything loads; each has a neighbour that stays allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

import embedscope
from embedscope.cli import main as cli_main
from embedscope.cli.main import main
from embedscope.errors import ConfigError
from embedscope.evaluation.feature_extraction import parse_column_mapping
from embedscope.retrieval.ann import parse_index
from embedscope.retrieval.pipeline import check_stage, parse_stage
from embedscope.settings import Layer, build_settings
from embedscope.settings.files import config_layer
from embedscope.tasks.params import parse_task_params


@pytest.fixture(scope="module", autouse=True)
def _one_parser():
    """``main`` parses with one parser for this module (building it takes 50 ms a command): the same parser it builds."""
    parser = cli_main.build_parser()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli_main, "build_parser", lambda: parser)
        yield


def _cli_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one error line of a command that must exit 2 (no traceback, nothing else on stderr)."""
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("embedscope: error: ") and "Traceback" not in err, err
    return err.strip().removeprefix("embedscope: error: ")


def _every_command(capsys: pytest.CaptureFixture[str], config: Path) -> str:
    """The one line ``run``, ``run --print-settings``, ``sweep`` and ``screen`` give for the same config file."""
    lines = {
        "run": _cli_error(capsys, ["run", "--config", str(config)]),
        "run --print-settings": _cli_error(capsys, ["run", "--config", str(config), "--print-settings"]),
        "sweep": _cli_error(capsys, ["sweep", "--config", str(config), "--axis", "top_k=10,20"]),
        "screen": _cli_error(capsys, ["screen", "--config", str(config)]),
    }
    assert len(set(lines.values())) == 1, lines
    return lines["run"]


def _run_and_print_settings(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line ``run`` and ``run --print-settings`` give for the same flags."""
    run = _cli_error(capsys, ["run", *argv])
    assert _cli_error(capsys, ["run", *argv, "--print-settings"]) == run
    return run


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"  # were a case let through, it would write under tmp_path only
    path.write_text(text + f"tasks: [LeeDocumentSimilarity]\noutput_folder: {tmp_path / 'out'}\ncache: false\n")
    return path


def _allowed(tmp_path: Path, text: str, flags: dict | None = None) -> embedscope.RunSettings:
    layers = [config_layer(_config(tmp_path, text))]
    if flags:
        layers.append(Layer("command line", flags, "flag", {k: f"--{k.replace('_', '-')}" for k in flags}))
    return build_settings(layers)


# -- 1. every number of a stage spec is finite, checked at validation ------------------------------------------------

# (config text, the key path the error names, what it says)
NON_FINITE = {
    "bm25 k1 infinite in a model spec": (
        'model: "bm25:k1=inf"\n',
        "model",
        "bm25 stage option k1=inf: expected a finite number",
    ),
    "bm25 k1 overflowing to infinity": (
        'model: "bm25:k1=1e999"\n',
        "model",
        "bm25 stage option k1=inf: expected a finite number",
    ),
    "bm25 b nan in a models list": (
        'models: [fts5, "bm25:b=nan"]\n',
        "models[1]",
        "bm25 stage option b=nan: expected a finite number",
    ),
    "bm25 k1 infinite in a models mapping": (
        'models: [{model: "bm25:k1=inf"}]\n',
        "models[0].model",
        "bm25 stage option k1=inf: expected a finite number",
    ),
    "an undeclared stage option (bm25 stopwords) nan": (
        'model: "bm25:stopwords=nan"\n',
        "model",
        "bm25 stage option stopwords=nan: expected a finite number",
    ),
    "a colbert stage's budget infinite": (
        'model: "colbert:minilm,budget_mb=inf"\n',
        "model",
        "colbert stage option budget_mb=inf: expected a finite number",
    ),
    "a pipeline stage mapping {type: bm25, k1: .inf}": (
        "pipeline:\n  retrievers: [{type: bm25, k1: .inf}, fts5]\n",
        "pipeline.retrievers",
        "[0].k1 = inf is not a finite number",
    ),
    "a pipeline stage spec bm25:k1=inf": (
        'pipeline:\n  retrievers: ["bm25:k1=inf", fts5]\n',
        "pipeline.retrievers",
        "bm25 stage option k1=inf: expected a finite number",
    ),
    "fusion k infinite": (
        "pipeline:\n  retrievers: [bm25, fts5]\n  fusion: {method: rrf, k: .inf}\n",
        "pipeline.fusion.k",
        "Input should be a finite number",
    ),
    "fusion weights nan": (
        "pipeline:\n  retrievers: [bm25, fts5]\n  fusion: {method: wsum, weights: [1, .nan]}\n",
        "pipeline.fusion.weights",
        "weights[1] = nan is not a finite number",
    ),
    "a custom task's protocol parameter infinite": (
        "model: bm25\ncustom_tasks:\n  - {name: mine, data_path: ., type: Retrieval, mine_param: .inf}\n",
        "custom_tasks[0]",
        "mine_param = inf is not a finite number",
    ),
}


@pytest.mark.parametrize("case", list(NON_FINITE))
def test_a_non_finite_number_is_refused_alike_by_every_command(case, tmp_path, capsys):
    text, key, message = NON_FINITE[case]
    config = _config(tmp_path, text)
    assert _every_command(capsys, config) == f"{config}: {key}: {message}"


def test_a_non_finite_stage_option_given_by_flag_names_the_flag(capsys):
    line = _run_and_print_settings(capsys, ["--model", "bm25:k1=inf", "--tasks", "LeeDocumentSimilarity"])
    assert line == "--model: bm25 stage option k1=inf: expected a finite number"
    line = _run_and_print_settings(capsys, ["--retriever", "bm25:b=nan", "--retriever", "fts5"])
    assert line == "--retriever: bm25 stage option b=nan: expected a finite number"
    line = _cli_error(capsys, ["screen", "--models", "fts5", "bm25:k1=inf"])
    assert line == "--models: bm25 stage option k1=inf: expected a finite number"


def test_a_non_finite_stage_option_given_to_evaluate_names_the_keyword():
    with pytest.raises(ConfigError, match=r"^model: bm25 stage option k1=inf: expected a finite number$"):
        embedscope.evaluate(model="bm25:k1=inf", tasks=["LeeDocumentSimilarity"])


def test_finite_stage_options_stay_allowed(tmp_path):
    settings = _allowed(tmp_path, 'models: ["bm25:k1=1.2,b=0.5", "bm25:k1=0,b=1,delta=0.5", {model: "bm25:k1=2"}]\n')
    assert [r.model for r in settings.model_runs()] == ["bm25:k1=1.2,b=0.5", "bm25:k1=0,b=1,delta=0.5", "bm25:k1=2"]
    settings = _allowed(
        tmp_path, "pipeline:\n  retrievers: [bm25, fts5]\n  fusion: {method: wsum, weights: [1, 0.5]}\n"
    )
    assert settings.pipeline is not None and settings.pipeline.fusion is not None
    assert _allowed(tmp_path, 'model: "bm25:stopwords=en,stemmer=none"\n').model == "bm25:stopwords=en,stemmer=none"
    check_stage("bm25:k1=1.2,b=0.75")  # the stage check itself
    with pytest.raises(ConfigError, match="stopwords=inf: expected a finite number"):
        check_stage("bm25:stopwords=inf")


# -- 2. a key given twice in a key=value,… spec ------------------------------------------------------------------------

TWICE = {
    "an index option twice": (
        'model: static-64\nindex: "hnsw:M=32,M=4"\n',
        "index",
        "index 'hnsw:M=32,M=4': M is given twice: give it once",
    ),
    "a stage option twice in a model spec": (
        'model: "bm25:k1=1.2,k1=2"\n',
        "model",
        "stage 'bm25:k1=1.2,k1=2': k1 is given twice: give it once",
    ),
    "a stage's model given twice (as text and as model=)": (
        'pipeline:\n  retrievers: ["colbert:minilm,model=other", fts5]\n',
        "pipeline.retrievers",
        "stage 'colbert:minilm,model=other': model is given twice: give it once",
    ),
}


@pytest.mark.parametrize("case", list(TWICE))
def test_a_key_given_twice_in_a_spec_is_refused_alike_by_every_command(case, tmp_path, capsys):
    text, key, message = TWICE[case]
    config = _config(tmp_path, text)
    assert _every_command(capsys, config) == f"{config}: {key}: {message}"


def test_a_key_given_twice_by_flag_names_the_flag(capsys):
    argv = ["--model", "static-64", "--tasks", "LeeDocumentSimilarity", "--index", "hnsw:M=32,M=4"]
    assert _run_and_print_settings(capsys, argv) == "--index: index 'hnsw:M=32,M=4': M is given twice: give it once"
    argv = ["--retriever", "bm25:b=0.5,k1=1,b=0.7", "--retriever", "fts5"]
    line = _run_and_print_settings(capsys, argv)
    assert line == "--retriever: stage 'bm25:b=0.5,k1=1,b=0.7': b is given twice: give it once"
    argv = ["--task-param", "samples_per_label=8", "--task-param", "samples_per_label=16"]
    line = _run_and_print_settings(capsys, ["--model", "bm25", *argv])
    assert line == "--task-param 'samples_per_label=16': samples_per_label is given twice: give it once"
    line = _cli_error(capsys, ["sweep", "--set", "top_k=10", "--set", "top_k=20", "--axis", "limits=5,10"])
    assert line == "--set top_k: given twice: give it once"


def test_the_other_key_value_parsers_refuse_a_key_twice():
    with pytest.raises(ConfigError, match="score_column is given twice"):
        parse_column_mapping(["score_column=a", "score_column=b"])
    with pytest.raises(ConfigError, match="nlist is given twice"):
        parse_index("ivfpq: nlist=8, nlist =16")


def test_each_key_once_stays_allowed(tmp_path):
    assert parse_index("hnsw:M=32,ef_search=64").model_dump() == {
        "type": "hnsw",
        "M": 32,
        "ef_construction": 40,
        "ef_search": 64,
    }
    assert parse_index("ivfpq:m=8,nlist=16").model_dump()["m"] == 8  # m and nlist are different keys (as M and m)
    assert parse_stage("bm25:k1=1.2,b=0.5") == {"type": "bm25", "k1": 1.2, "b": 0.5}
    assert parse_stage("colbert:minilm,query_length=32")["model"] == "minilm"
    assert parse_task_params(["samples_per_label=8", "n_experiments=2"]) == {
        "samples_per_label": "8",
        "n_experiments": "2",
    }
    assert parse_column_mapping(["score_column=a", "input_column_1=b"])["score_column"] == "a"
    settings = _allowed(tmp_path, 'model: static-64\nindex: "hnsw:M=32,ef_search=64"\n')
    assert settings.index == {"type": "hnsw", "M": 32, "ef_construction": 40, "ef_search": 64}
    # a config file's task_params and a flag's: the later layer wins, as for every setting
    settings = _allowed(tmp_path, "task_params: {samples_per_label: 8}\n", {"task_params": {"samples_per_label": "16"}})
    assert settings.task_params == {"samples_per_label": "16"}


# -- 3. the same model listed twice ---------------------------------------------------------------------------------

DUPLICATES = {
    "a name twice": ("models: [static-64, static-64]\n", "models", "'static-64' is given twice with the same options"),
    "a name and a mapping of no options": (
        "models: [static-64, {model: static-64}]\n",
        "models",
        "'static-64' is given twice with the same options",
    ),
    "a mapping twice": (
        "models: [minilm, {model: static-64, pooling: mean}, {model: static-64, pooling: mean}]\n",
        "models",
        "'static-64' is given twice with the same options",
    ),
    "model and models": (
        "model: bm25\nmodels: [fts5, bm25]\n",
        "models",
        "'bm25' is given twice with the same options",
    ),
    "a pipeline twice": (
        "pipelines:\n  - {retrievers: [bm25, fts5]}\n  - {retrievers: [bm25, fts5]}\n",
        "pipelines",
        "the pipeline 'bm25+fts5' is given twice with the same options",
    ),
}


@pytest.mark.parametrize("case", list(DUPLICATES))
def test_the_same_model_twice_is_refused_alike_by_every_command(case, tmp_path, capsys):
    text, key, message = DUPLICATES[case]
    config = _config(tmp_path, text)
    assert _every_command(capsys, config) == f"{config}: {key}: {message} (it would run twice): give it once"


def test_the_same_model_twice_by_flag_or_keyword(capsys):
    line = _cli_error(capsys, ["screen", "--models", "static-64", "static-64", "--tasks", "LeeDocumentSimilarity"])
    assert line == "--models: 'static-64' is given twice with the same options (it would run twice): give it once"
    expected = r"^models: 'static-64' is given twice with the same options \(it would run twice\): give it once$"
    with pytest.raises(ConfigError, match=expected.replace("^", "^config: ")):  # a mapping given as the config
        embedscope.evaluate_config({"models": ["static-64", "static-64"], "tasks": ["LeeDocumentSimilarity"]})
    with pytest.raises(ConfigError, match=expected):
        embedscope.evaluate(models=["static-64", "static-64"], tasks=["LeeDocumentSimilarity"])


def test_a_run_wide_option_given_later_can_make_two_entries_the_same(tmp_path):
    text = "models: [{model: static-64, pooling: mean}, {model: static-64, pooling: cls}]\n"
    assert len(_allowed(tmp_path, text).model_runs()) == 2
    with pytest.raises(ConfigError, match=r": models: 'static-64' is given twice with the same options"):
        _allowed(tmp_path, text, {"model_options": {"pooling": "mean"}})


def test_the_same_model_with_other_options_or_tasks_stays_allowed(tmp_path):
    text = (
        "models:\n  - static-64\n  - {model: static-64, pooling: cls}\n  - {model: static-64, backend: sentence-transformers}\n"
        "  - {model: static-64, tasks: [LeeDocumentSimilarity]}\n  - {model: static-64, batch_size: 8}\n"
        "pipelines:\n  - {retrievers: [bm25, fts5]}\n  - {retrievers: [bm25, fts5], fusion: wsum}\n"
    )
    runs = _allowed(tmp_path, text).model_runs()
    assert len(runs) == 7 and all(r.model == "static-64" for r in runs[:5])
    model = object()  # evaluate(): two different model objects are two models
    assert len(build_settings([Layer("evaluate()", {"models": [model, object()]})]).model_runs()) == 2
    with pytest.raises(ConfigError, match="is given twice"):
        build_settings([Layer("evaluate()", {"models": [model, model]})])
