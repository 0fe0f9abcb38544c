"""Runs recorded as they land: a store that cannot be used fails the recording, never the results; a password given
in the store URL (or libpq's PGPASSWORD) appears in no file embedscope writes and no line it prints."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

import embedscope
from embedscope.cli.main import main
from embedscope.history.store import Store
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_retrieval_task
from support.postgres import PASSWORD

UNREACHABLE = "postgresql://someone:s3cret-unreachable@127.0.0.1:9/none"


def test_a_store_that_cannot_be_reached_fails_the_recording_not_the_results(tmp_path) -> None:
    out = tmp_path / "out"
    report = embedscope.evaluate(
        KeywordEncoder(["cat", "dog"]), [tiny_retrieval_task()], output_folder=str(out), cache=False,
        show_progress=False, store=UNREACHABLE,
    )  # fmt: skip
    assert report.outcomes[0].path.is_file() and report.outcomes[0].result.main_score() > 0
    error = report.recorded.error
    assert "\n" not in error and "s3cret-unreachable" not in error and "cannot be reached" in error
    assert f"embedscope results import {report.outcomes[0].path.parent}" in error
    url = f"sqlite:///{tmp_path}/h.db"  # recorded later, as the line says
    ((run_id, new),) = Store(url).import_folders([report.outcomes[0].path.parent])
    assert new and Store(url).run_info(run_id).scores == {"TinyRetrieval": report.outcomes[0].result.main_score()}


def test_a_tag_needs_a_store_and_one_model(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("EMBEDSCOPE_STORE", raising=False)
    with pytest.raises(embedscope.errors.ConfigError, match="tag names a run in a results store: give store"):
        embedscope.evaluate(KeywordEncoder(["cat"]), [tiny_retrieval_task()], output_folder=str(tmp_path), tag="x",
                            cache=False, show_progress=False)  # fmt: skip
    with pytest.raises(embedscope.errors.ConfigError, match="names one run, and this run evaluates 2 models"):
        embedscope.evaluate_config(
            {"models": [KeywordEncoder(["cat"], name="kw/a"), KeywordEncoder(["dog"], name="kw/b")],
             "tasks": [tiny_retrieval_task()]},
            output_folder=str(tmp_path), cache=False, show_progress=False, store=f"sqlite:///{tmp_path}/h.db", tag="x",
        )  # fmt: skip


def test_the_environment_names_the_store(tmp_path, monkeypatch) -> None:
    url = f"sqlite:///{tmp_path}/env.db"
    monkeypatch.setenv("EMBEDSCOPE_STORE", url)
    report = embedscope.evaluate(KeywordEncoder(["cat"]), [tiny_retrieval_task()], output_folder=str(tmp_path / "o"),
                                 cache=False, show_progress=False)  # fmt: skip
    assert report.recorded.new and [r.id for r in Store(url).runs()] == [report.recorded.run_id]


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "embedscope", *args], env=env, capture_output=True, timeout=300)


def _leaks(root: Path, secret: bytes) -> list[str]:
    """Files under ``root`` holding ``secret`` (gzip files decompressed too)."""
    found = []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        data = path.read_bytes()
        if path.suffix == ".gz":
            try:
                data += gzip.decompress(data)
            except OSError:
                pass
        if secret in data:
            found.append(str(path))
    return found


@pytest.mark.slow
def test_a_password_in_the_store_url_is_in_no_file_and_no_printed_line(tmp_path, postgres_url) -> None:
    home, tmp, cache, out = (tmp_path / n for n in ("home", "tmp", "cache", "out"))
    for folder in (home, tmp, cache):
        folder.mkdir()
    env = {**os.environ, "HOME": str(home), "TMPDIR": str(tmp), "EMBEDSCOPE_CACHE": str(cache)}
    env.pop("EMBEDSCOPE_STORE", None)
    run = ["run", "--model", "bm25", "--tasks", "BBCNewsRetrieval", "--limits", "30", "--output-folder", str(out)]
    outputs = [
        _cli([*run, "--store", postgres_url, "--tag", "baseline"], env),
        _cli([*run, "--store", postgres_url, "--print-settings"], env),
        _cli(["results", "list", "--store", postgres_url], env),
        _cli(
            [
                "gate",
                "tag:baseline",
                str(out),
                "--store",
                postgres_url,
                "--rounds",
                "100",
                "--markdown",
                str(out / "gate.md"),
                "--junit",
                str(out / "gate.xml"),
            ],
            env,
        ),  # fmt: skip
        _cli(["results", "export", "--store", postgres_url, "--output-folder", str(out / "export")], env),
        _cli([*run, "--store", postgres_url.replace("127.0.0.1:", "127.0.0.1:1"), "--overwrite"], env),  # no server
        _cli(["results", "list", "--store", postgres_url.replace(PASSWORD, "wrong-" + PASSWORD)], env),
    ]
    assert [p.returncode for p in outputs] == [0, 0, 0, 0, 0, 2, 2], [p.stderr.decode()[-500:] for p in outputs]
    assert b"recorded in postgresql://embedscope:***@127.0.0.1" in outputs[0].stderr
    assert b"postgresql://embedscope:***@" in outputs[1].stdout
    assert b"not recorded in the store" in outputs[5].stderr and b"password authentication failed" in outputs[6].stderr
    for p in outputs:
        assert PASSWORD.encode() not in p.stdout + p.stderr
    assert (out / "export").is_dir() and (out / "gate.md").is_file()
    assert _leaks(tmp_path, PASSWORD.encode()) == []
    # libpq's PGPASSWORD: the URL names no password, and still none is printed or written
    bare = postgres_url.replace(f":{PASSWORD}@", "@")
    listed = _cli(["results", "list", "--store", bare], {**env, "PGPASSWORD": PASSWORD})
    assert (
        listed.returncode == 0 and b"| bm25" in listed.stdout and PASSWORD.encode() not in listed.stdout + listed.stderr
    )
    assert _leaks(tmp_path, PASSWORD.encode()) == []


@pytest.mark.slow
def test_the_run_command_exits_2_when_its_recording_fails_and_keeps_the_results(tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["run", "--model", "bm25", "--tasks", "BBCNewsRetrieval", "--limits", "20", "--output-folder", str(out)]
    assert main([*argv, "--store", UNREACHABLE]) == 2
    captured = capsys.readouterr()
    assert "wrote " in captured.out and list(out.rglob("BBCNewsRetrieval.json"))
    (line,) = [x for x in captured.err.splitlines() if x.startswith("embedscope: error:")]
    assert "not recorded in the store" in line and "s3cret-unreachable" not in captured.err


@pytest.mark.slow
def test_a_screen_records_its_confirmed_candidates_only(tmp_path) -> None:
    from embedscope.screen.run import screen
    from support.tiny_models import build_tiny_sentence_transformer

    models = [str(build_tiny_sentence_transformer(tmp_path / f"m{seed}", seed=seed)) for seed in range(3)]
    url = f"sqlite:///{tmp_path}/h.db"
    report = screen(
        models, [tiny_retrieval_task()], fast="bf16", confirm=1, compare_options=embedscope.CompareOptions(rounds=300),
        output_folder=str(tmp_path / "out"), cache_dir=str(tmp_path / "cache"), show_progress=False, store=url,
    )  # fmt: skip
    runs = Store(url).runs()
    confirmed = [report.model(k) for k in report.confirmed]
    assert sorted(r.model for r in runs) == sorted(m.name for m in confirmed) and len(runs) < len(models) + 1
    for run in runs:
        meta = Store(url).files(run.id)["model_meta.json"]
        assert b'"bf16"' not in meta  # the exact pass, never the fast one
        assert run.scores["TinyRetrieval"] == next(m.exact.mean for m in confirmed if m.name == run.model)
