"""A stored result belongs to its settings and its data; results stay inside the output folder (issue 12)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.data.builtin import bbc_news_retrieval
from embedscope.errors import ConfigError
from embedscope.files import write_json_atomic
from embedscope.results.store import ResultStore
from embedscope.settings.files import load_settings
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import TINY_CORPUS, TINY_QRELS, TINY_QUERIES


def _beir(folder: Path, corpus: dict, queries: dict, qrels: dict) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in corpus.items()))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()))
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{s}\n" for q, docs in qrels.items() for d, s in docs.items())
    )
    return folder


def _bbc_folder(folder: Path, n: int = 60) -> Path:
    data = bbc_news_retrieval(n)
    corpus = dict(zip(data.corpus.ids, data.corpus.texts))
    queries = dict(zip(data.queries.ids, data.queries.texts))
    return _beir(folder, corpus, queries, data.qrels)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.mark.slow
def test_other_pooling_and_prompt_get_their_own_result_and_score(tmp_path):
    from support.tiny_models import build_tiny_sentence_transformer

    model = build_tiny_sentence_transformer(tmp_path / "my-model")
    data = _bbc_folder(tmp_path / "bbc")
    out = tmp_path / "out"
    common = dict(output_folder=out, cache=False, show_progress=False, device="cpu")
    cls = embedscope.evaluate(
        str(model), [str(data)], model_options={"pooling": "cls", "query_prompt": "query: "}, **common
    ).outcomes[0]
    plain = embedscope.evaluate(str(model), [str(data)], **common).outcomes[0]
    assert not plain.reused and plain.path != cls.path
    assert plain.result.main_score() != cls.result.main_score()
    again = embedscope.evaluate(
        str(model), [str(data)], model_options={"pooling": "cls", "query_prompt": "query: "}, **common
    ).outcomes[0]
    assert again.reused and again.result.main_score() == cls.result.main_score()
    cls_meta = json.loads((cls.path.parent / "model_meta.json").read_text())
    plain_meta = json.loads((plain.path.parent / "model_meta.json").read_text())
    assert cls_meta["experiment_kwargs"] == {"pooling": "cls", "query_prompt": "query: "}
    assert cls_meta["pooling"] == "cls" and plain_meta["pooling"] == "mean" and "experiment_kwargs" not in plain_meta
    assert cls.path.parent.parent.name == "experiments" and plain.path.parent == cls.path.parent.parent.parent
    for outcome, meta in ((cls, cls_meta), (plain, plain_meta)):  # model_meta.json describes the results beside it
        assert json.loads(outcome.path.read_text())["run_settings"] == meta["run_settings"]


def test_a_stored_result_of_other_settings_is_run_again(tmp_path, caplog):
    task = embedscope.tasks.registry.custom_retrieval_task(
        _beir(tmp_path / "tiny", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    )
    first = embedscope.evaluate(
        KeywordEncoder(["cat", "dog", "fish"]), [task], output_folder=tmp_path / "o", cache=False
    ).outcomes[0]
    stored = json.loads(first.path.read_text())
    stored["run_settings"]["model"]["prompts"] = {"query": "query: "}  # as if written with another prompt
    first.path.write_text(json.dumps(stored))
    second = embedscope.evaluate(
        KeywordEncoder(["cat", "dog", "fish"]), [task], output_folder=tmp_path / "o", cache=False
    ).outcomes[0]
    assert not second.reused and "other settings" in caplog.text and "prompts" in caplog.text
    first.path.write_text(json.dumps(stored))
    with pytest.raises(ConfigError, match="other settings.*prompts"):
        embedscope.evaluate(
            KeywordEncoder(["cat", "dog", "fish"]), [task], output_folder=tmp_path / "o", cache=False, overwrite="never"
        )


def test_custom_folders_of_the_same_name_never_share_a_result(tmp_path):
    a = _beir(tmp_path / "a" / "base", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    b = _beir(tmp_path / "b" / "base", TINY_CORPUS, TINY_QUERIES, {"q1": {"d4": 1}, "q2": {"d4": 1}, "q3": {"d4": 1}})
    enc = KeywordEncoder(["cat", "dog", "fish"])
    first = embedscope.evaluate(enc, [str(a)], output_folder=tmp_path / "o", cache=False).outcomes[0]
    assert first.result.main_score() == 1.0
    with pytest.raises(ConfigError, match="other data"):
        embedscope.evaluate(enc, [str(b)], output_folder=tmp_path / "o", cache=False)
    with pytest.raises(ConfigError, match="two tasks are named 'base'"):
        embedscope.evaluate(enc, [str(a), str(b)], output_folder=tmp_path / "o2", cache=False)
    # changed data at the same place is run again, never served from the stored result
    (a / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td4\t1\n")
    os.utime(a / "qrels" / "test.tsv", ns=(1, 1))
    changed = embedscope.evaluate(enc, [str(a)], output_folder=tmp_path / "o", cache=False).outcomes[0]
    assert not changed.reused and changed.result.main_score() < 1.0


@pytest.mark.parametrize("name", ["../../x", "/abs/path", "..", "a/b", "a\\b"])
def test_task_names_that_leave_the_output_folder_are_refused(tmp_path, name):
    data = _beir(tmp_path / "data", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    native = {"model": "minilm", "custom_tasks": [{"name": name, "data_path": str(data)}]}
    evalscope = {
        "eval_config": {
            "models": [{"model_name_or_path": "minilm"}],
            "eval": {"custom_tasks": [{"name": name, "data_path": str(data)}]},
        }
    }
    for config in (native, evalscope):
        with pytest.raises(ConfigError, match=r"custom_tasks\[0\].name: task name .* cannot name a result file"):
            load_settings(config)
    task = embedscope.tasks.registry.custom_retrieval_task(data, name=name)
    before = _files(tmp_path)
    with pytest.raises(ConfigError, match="cannot name a result file"):
        embedscope.evaluate(KeywordEncoder(["cat"]), [task], output_folder=tmp_path / "out" / "deep", cache=False)
    assert _files(tmp_path) == before


def test_config_file_with_an_escaping_name_exits_2_and_writes_nothing(tmp_path, capsys):
    data = _beir(tmp_path / "data", TINY_CORPUS, TINY_QUERIES, TINY_QRELS)
    cfg = tmp_path / "c.json"
    cfg.write_text(
        json.dumps(
            {
                "model": "minilm",
                "output_folder": str(tmp_path / "out" / "o"),
                "custom_tasks": [{"name": "../../../x", "data_path": str(data)}],
            }
        )
    )
    before = _files(tmp_path)
    assert main(["run", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "custom_tasks[0].name" in err and "Traceback" not in err
    assert _files(tmp_path) == before


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b"])
def test_pipeline_name_with_a_path_is_refused(name, capsys):
    assert main(["run", "--retriever", "bm25", "--pipeline-name", name, "--tasks", "BBCNewsRetrieval"]) == 2
    assert "--pipeline-name" in capsys.readouterr().err


def test_model_names_and_revisions_stay_inside(tmp_path):
    for model, revision in (("..", "r"), ("../../x", "r"), ("m", ".."), ("m", "../x"), ("m", "/abs")):
        with pytest.raises(ConfigError, match="cannot name a result file"):
            ResultStore(tmp_path, model, revision)
    store = ResultStore(tmp_path / "out", "org/m", "r")
    store.folder = tmp_path / "elsewhere"  # e.g. a folder redirected out of the output folder
    with pytest.raises(ConfigError, match="outside the output folder"):
        store.save_model_meta({})
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("mask,mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_result_files_respect_the_umask(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        write_json_atomic(tmp_path / "r.json", {"a": 1})
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == mode
