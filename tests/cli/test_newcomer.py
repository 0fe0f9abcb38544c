"""What a newcomer hit running the README's own commands (issue 12, item 8; item 7's first bullet)."""

from __future__ import annotations

import json
import time

import pytest

from embedscope import hub
from embedscope.cli.main import main
from embedscope.errors import ConfigError, DataFormatError, EmbedscopeError, UnknownNameError
from embedscope.evaluation.runner import evaluate
from embedscope.evaluation.scoring import rank_run
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_data, tiny_retrieval_task


def _kw():
    return KeywordEncoder(["cat", "dog", "fish"])


# -- score reads run --save-predictions' file; messages stay short ------------------------------------------


def test_score_reads_the_predictions_file_that_run_writes(tmp_path, capsys):
    report = evaluate(
        _kw(), [tiny_retrieval_task()], output_folder=tmp_path, cache=False, save_predictions=True, show_progress=False
    )
    predictions = report.outcomes[0].path.parent / "predictions" / "TinyRetrieval_predictions.json"
    qrels = tmp_path / "qrels.json"
    qrels.write_text(json.dumps(tiny_retrieval_data("test").qrels))
    assert main(["score", "--qrels", str(qrels), "--run", str(predictions), "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["ndcg_at_10"] == report.outcomes[0].result.main_score() == 1.0


@pytest.mark.slow
def test_a_predictions_file_with_several_runs_is_one_short_line(tmp_path):
    run = {f"q{i}": {f"d{j}": float(j) for j in range(50)} for i in range(2_000)}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"default": {"test": run, "dev": run}}))
    (tmp_path / "qrels.json").write_text(json.dumps({"q0": {"d1": 1}}))
    with pytest.raises(DataFormatError) as err:
        rank_run(tmp_path / "qrels.json", path)
    assert "2 runs" in str(err.value) and len(str(err.value)) < 300


def test_a_huge_bad_score_is_clipped_in_the_message(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"q1": {"d1": "x" * 1_000_000}}))
    (tmp_path / "qrels.json").write_text(json.dumps({"q1": {"d1": 1}}))
    with pytest.raises(DataFormatError) as err:
        rank_run(tmp_path / "qrels.json", path)
    assert "is not a number" in str(err.value) and len(str(err.value)) < 400


def test_unknown_names_list_at_most_a_few_known_ones():
    err = UnknownNameError("thing", "zzz", [f"name{i}" for i in range(1_000)])
    assert "and 980 more" in str(err) and len(str(err)) < 400


def test_the_cli_caps_any_message(capsys, monkeypatch):
    import embedscope.cli.catalog as cli

    def boom(args):
        raise EmbedscopeError("x" * 3_000_000)

    monkeypatch.setattr(cli, "_cmd_models", boom)
    assert main(["models"]) == 2
    assert len(capsys.readouterr().err) < 2_500


# -- tasks are resolved before any model loads; unknown tasks show close matches only ---------------------


class _Exploding:
    def __getattr__(self, name):  # noqa: D105 - any use of the model fails the test
        raise AssertionError("the model was touched before the tasks were checked")


@pytest.mark.parametrize("model", ["minilm", "./no-such-model-folder"])
def test_a_misspelled_task_is_reported_before_the_model_loads(tmp_path, monkeypatch, model):
    import embedscope.evaluation.runner as runner

    monkeypatch.setattr(runner, "build_model", lambda *a, **k: pytest.fail("model loaded before tasks resolved"))
    with pytest.raises(UnknownNameError) as err:
        evaluate(model, ["BBCNewsRetreival"], output_folder=tmp_path)
    message = str(err.value)
    assert "Did you mean 'BBCNewsRetrieval'" in message and "embedscope tasks --name" in message
    assert "TYPE:PATH" in message and "Known:" not in message and len(message) < 600


def test_a_folder_without_a_dataset_is_reported_before_the_model_loads(tmp_path, monkeypatch):
    import embedscope.evaluation.runner as runner

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    monkeypatch.setattr(runner, "build_model", lambda *a, **k: pytest.fail("model loaded before tasks resolved"))
    with pytest.raises(DataFormatError, match="not a retrieval dataset folder"):
        evaluate("minilm", [str(tmp_path / "notes")], output_folder=tmp_path / "out")


@pytest.mark.parametrize("spec", ["./missing_beir", "data/missing", "missing.jsonl", "~/nope"])
def test_a_path_that_does_not_exist_says_so(tmp_path, spec, capsys):
    assert main(["run", "--model", "static-64", "--tasks", spec, "--output-folder", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no such file or folder" in err and "Unknown task" not in err


# -- offline: fail at once, naming --data-dir and the <dir>/<Task> layout ------------------------------------


def _unreachable_hub(monkeypatch):
    """The hub endpoint points at a closed local port: the connection is refused at once."""
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")


def test_catalog_task_without_network_fails_in_under_2_s(tmp_path, monkeypatch, no_offline_flags):
    _unreachable_hub(monkeypatch)
    started = time.perf_counter()
    with pytest.raises(ConfigError) as err:
        evaluate("static-64", ["SciFact"], output_folder=tmp_path, cache=False, data_dir=tmp_path)
    assert time.perf_counter() - started < 2.0
    message = str(err.value)
    assert (
        "data_dir DIR" in message
        and "--" not in message.split("download")[0]
        and "DIR/SciFact" in message
        and "no network" in message
    )
    assert "\n" not in message


def test_the_probe_is_cached_per_process(monkeypatch, no_offline_flags):
    calls = []
    monkeypatch.setattr(hub, "_connect", lambda host, port, out: (calls.append(host), out.append("OSError: no")))
    assert hub.hub_offline() and hub.hub_offline()
    assert len(calls) == 1


@pytest.mark.slow
def test_a_stalled_network_is_given_up_on_after_the_timeout(monkeypatch, no_offline_flags):
    monkeypatch.setattr(hub, "_connect", lambda host, port, out: time.sleep(10))
    started = time.perf_counter()
    assert hub.hub_offline()
    assert time.perf_counter() - started < hub.PROBE_TIMEOUT_S + 0.5
    assert "did not answer" in hub.offline_reason()


def test_a_reachable_hub_is_online(monkeypatch, no_offline_flags):
    monkeypatch.setattr(hub, "_connect", lambda host, port, out: out.append(""))
    assert not hub.hub_offline()


def test_hub_model_id_without_network_fails_in_under_2_s(tmp_path, monkeypatch, no_offline_flags):
    _unreachable_hub(monkeypatch)
    from embedscope.models.specs import load_encoder

    started = time.perf_counter()
    with pytest.raises(EmbedscopeError, match="not in the local Hugging Face cache"):
        load_encoder("someone/no-such-model-here")
    assert time.perf_counter() - started < 2.0


def test_hub_dataset_id_without_network_fails_at_once(monkeypatch, no_offline_flags):
    _unreachable_hub(monkeypatch)
    from embedscope.data.hf import load_hub_retrieval

    started = time.perf_counter()
    with pytest.raises(DataFormatError, match="no network"):
        load_hub_retrieval("someone/no-such-dataset")
    assert time.perf_counter() - started < 2.0


# -- a missing local cross-encoder path ------------------------------------------------------------------


def test_missing_cross_encoder_path_in_a_config_says_no_such_file(tmp_path):
    from embedscope.evaluation.runner import evaluate_config

    config = tmp_path / "eval.yaml"
    config.write_text(
        "pipeline:\n  retrievers: [bm25]\n  rerankers: [{type: cross-encoder, model: ./no-such-reranker}]\n"
        f"tasks: [BBCNewsRetrieval]\noutput_folder: {tmp_path / 'out'}\n"
    )
    with pytest.raises(ConfigError) as err:
        evaluate_config(config)
    assert "no such file or folder" in str(err.value) and "alphanumeric" not in str(err.value)


# -- help texts ---------------------------------------------------------------------------------------------


def _options_without_help(parser, name="embedscope"):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _options_without_help(sub, f"{name} {sub_name}")
        elif not action.help and not isinstance(action, argparse._HelpAction):
            yield f"{name} {'/'.join(action.option_strings) or action.dest}"


def test_every_option_of_every_command_has_help():
    from embedscope.cli.main import build_parser

    assert list(_options_without_help(build_parser())) == []


def test_run_help_says_the_default_is_the_four_built_in_tasks(capsys):
    from embedscope.cli.main import build_parser
    from embedscope.tasks.registry import DEFAULT_TASKS

    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "4 built-in tasks" in text and all(t in text for t in DEFAULT_TASKS)


# -- progress bars stay out of piped output -----------------------------------------------------------------


class _RecordingEncoder(KeywordEncoder):
    def __init__(self):
        super().__init__(["cat", "dog", "fish"])
        self.progress: list[bool] = []

    def encode(self, texts, *, role, batch_size=None, show_progress=False):
        self.progress.append(show_progress)
        return super().encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)


@pytest.fixture
def restore_hub_bars():
    from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    yield
    if not was_disabled:
        enable_progress_bars()


def test_python_evaluate_draws_no_bars_into_a_pipe(tmp_path, restore_hub_bars):
    from huggingface_hub.utils import are_progress_bars_disabled

    encoder = _RecordingEncoder()
    evaluate(encoder, [tiny_retrieval_task()], output_folder=tmp_path, cache=False)  # show_progress defaults to True
    assert encoder.progress and not any(encoder.progress)
    assert are_progress_bars_disabled()  # "Loading weights" and download bars too


def test_bars_are_drawn_on_a_terminal(tmp_path, monkeypatch, restore_hub_bars):
    import embedscope.progress as progress

    monkeypatch.setattr(progress, "on_terminal", lambda: True)
    encoder = _RecordingEncoder()
    evaluate(encoder, [tiny_retrieval_task()], output_folder=tmp_path, cache=False)
    assert encoder.progress and all(encoder.progress)


class _LabelRecorder(KeywordEncoder):
    def __init__(self):
        super().__init__(["cat", "dog", "fish"])
        self.labels: list[str] = []

    def encode(self, texts, *, role, batch_size=None, show_progress=False):
        from embedscope.progress import bar_label

        self.labels.append(bar_label(role, len(texts)))
        return super().encode(texts, role=role, batch_size=batch_size, show_progress=show_progress)


def test_bars_are_labelled_with_task_role_and_count(tmp_path, capsys):
    import numpy as np

    from embedscope.models.batching import encode_sorted
    from embedscope.progress import encoding_label, task_progress

    encoder = _LabelRecorder()
    evaluate(encoder, [tiny_retrieval_task()], output_folder=tmp_path, cache=False, show_progress=False)
    assert sorted(encoder.labels) == ["TinyRetrieval: corpus (4 texts)", "TinyRetrieval: queries (3 texts)"]
    with task_progress("BBCNewsRetrieval", "corpus"), encoding_label("document", 2_225):
        encode_sorted(["a", "bb"], lambda b: np.ones((len(b), 2)), show_progress=True)
    assert "BBCNewsRetrieval: corpus (2,225 texts)" in capsys.readouterr().err
