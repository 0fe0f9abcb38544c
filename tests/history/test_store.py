"""The results store, on SQLite and on a real PostgreSQL server: round trips bit for bit, idempotent recording,
tags, schema checks, concurrent writers, a writer killed half-way, and one-line errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import embedscope
from embedscope.compare.items import load_model_results
from embedscope.errors import ConfigError, EmbedscopeError
from embedscope.history.store import RunFilter, Store, StoreError
from embedscope.testing.fakes import KeywordEncoder
from embedscope.testing.tiny import tiny_tasks_of_every_type
from support.made_up import retrieval_values, write_result

ROOT = Path(__file__).resolve().parents[2]


def every_file(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def every_type_run(tmp_path_factory) -> Path:
    """A real run of a fake encoder over a tiny task of every type: every kind of per-item row and score."""
    out = tmp_path_factory.mktemp("every-type")
    embedscope.evaluate(
        KeywordEncoder(["cat", "dog", "fish", "bird", "tree"], name="kw/every-type"),
        tiny_tasks_of_every_type(),
        output_folder=str(out),
        cache=False,
        show_progress=False,
    )
    return out


@pytest.mark.slow
def test_import_then_export_gives_back_every_file_bit_for_bit(store_url, every_type_run, tmp_path) -> None:
    store = Store(store_url)
    ((run_id, new),) = store.import_folders([every_type_run])
    assert new
    written = store.export(tmp_path / "exported")
    assert len(written) == 1
    original = every_file(every_type_run)
    exported = every_file(tmp_path / "exported")
    assert exported == {k: v for k, v in original.items() if "/predictions/" not in k}
    # main scores and per-item rows as compare reads them, from the export and from the folder
    a, b = load_model_results(every_type_run), load_model_results(tmp_path / "exported")
    assert a.tasks.keys() == b.tasks.keys() and len(a.tasks) >= 8
    for task, items in a.tasks.items():
        assert items.score == b.tasks[task].score
        assert items.keys == b.tasks[task].keys
        assert np.array_equal(items.values, b.tasks[task].values)
        assert {k: v.tobytes() for k, v in items.columns.items()} == {
            k: v.tobytes() for k, v in b.tasks[task].columns.items()
        }
    info = store.run_info(run_id)
    assert info.scores == {t: i.score for t, i in a.tasks.items()}


def test_importing_twice_records_once_and_a_run_records_as_it_lands(store_url, tmp_path) -> None:
    out = tmp_path / "out"
    report = embedscope.evaluate(
        KeywordEncoder(["cat", "dog"], name="kw/a"), tiny_tasks_of_every_type()[:2], output_folder=str(out),
        cache=False, show_progress=False, store=store_url, tag="baseline",
    )  # fmt: skip
    assert report.recorded is not None and report.recorded.new and report.recorded.error is None
    store = Store(store_url)
    assert [new for _, new in store.import_folders([out])] == [False]
    assert [new for _, new in store.import_folders([out])] == [False]
    (run,) = store.runs()
    assert run.id == report.recorded.run_id and run.tags == ("baseline",) and run.source == "run"
    assert set(run.tasks) == {o.task.name for o in report.outcomes}
    assert store.resolve_run("tag:baseline") == run.id == store.resolve_run(f"run:{run.id[:8]}")


def test_tags_move_only_when_asked_and_filters_select_runs(store_url, tmp_path) -> None:
    store = Store(store_url)
    for n, model in enumerate(("org/a", "org/b", "org/a")):
        write_result(tmp_path / str(n), model, "T1", retrieval_values(20, 0.5 + n / 10, n), revision=f"r{n}")
    ids = [store.import_folders([tmp_path / str(n)])[0][0] for n in range(3)]
    store.tag("baseline", ids[0])
    with pytest.raises(StoreError, match="names run .* already; move it with --move"):
        store.tag("baseline", ids[1])
    assert store.tag("baseline", ids[1], move=True) == ids[0]
    assert [r.id for r in store.runs(RunFilter(tag="baseline"))] == [ids[1]]
    assert [r.id for r in store.runs(RunFilter(model="org/a"))] == [ids[0], ids[2]]
    assert [r.id for r in store.runs(RunFilter(latest=True))] == [ids[1], ids[2]]
    assert [r.id for r in store.runs(RunFilter(task="T2"))] == []
    with pytest.raises(EmbedscopeError, match="Unknown tag .* 'nope'.* Known: baseline"):
        store.resolve_run("tag:nope")
    with pytest.raises(ConfigError, match="without spaces"):
        store.tag("a b", ids[0])


def test_export_refuses_two_runs_of_one_folder_and_other_content(store_url, tmp_path) -> None:
    store = Store(store_url)
    write_result(tmp_path / "one", "org/a", "T1", [0.5, 0.6, 0.7])
    write_result(tmp_path / "two", "org/a", "T1", [0.5, 0.6, 0.8])
    store.import_folders([tmp_path / "one", tmp_path / "two"])
    with pytest.raises(StoreError, match="one folder holds one; export the newest of each model with --latest"):
        store.export(tmp_path / "x")
    (folder,) = store.export(tmp_path / "x", RunFilter(latest=True))
    assert (folder / "T1.json").read_bytes() == (tmp_path / "two/org__a/r1/T1.json").read_bytes()
    (folder / "T1.json").write_text("{}")
    with pytest.raises(StoreError, match="exists with other content"):
        store.export(tmp_path / "x", RunFilter(latest=True))


def test_a_store_of_another_schema_is_refused_never_misread(store_url, tmp_path) -> None:
    from sqlalchemy import create_engine, text

    store = Store(store_url)
    engine = create_engine(store._url)
    with engine.begin() as c:
        c.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(StoreError, match=r"written by a newer embedscope \(schema 9999; this one reads 0001\)"):
        Store(store_url)
    with engine.begin() as c:
        c.execute(text("DROP TABLE alembic_version"))
    with pytest.raises(StoreError, match="has tables but no schema revision"):
        Store(store_url)


def test_the_migrations_build_exactly_the_declared_schema(store_url) -> None:
    """A schema change must be a migration: the tables the migrations build equal tables.py's."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from embedscope.history.tables import metadata

    store = Store(store_url)
    with store._engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), metadata)
    assert differences == []


def test_an_unreachable_store_and_an_unknown_scheme_are_one_line(tmp_path) -> None:
    with pytest.raises(StoreError) as caught:
        Store("postgresql://someone:hunter2-secret@127.0.0.1:9/none")
    message = str(caught.value)
    assert "\n" not in message and "hunter2-secret" not in message and "cannot be reached" in message
    assert "postgresql://someone:***@127.0.0.1:9/none" in message
    with pytest.raises(ConfigError, match="unknown store scheme 'mysql'"):
        Store("mysql://u:p@h/db")


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from embedscope.history.store import Store
    url, folder, ready = sys.argv[1], sys.argv[2], sys.argv[3]
    import embedscope.history.store as module
    if ready != "-":
        original = module._result_row
        def slow(result, run_id):  # inside the write transaction, after the run's row went in
            Path(ready).write_text("in the transaction")
            time.sleep(60)
            return original(result, run_id)
        module._result_row = slow
    print(Store(url).import_folders([folder]))
    """
)


def _writer(url: str, folder: Path, ready: str = "-") -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, url, str(folder), ready], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


@pytest.mark.slow
def test_four_processes_recording_at_once_lose_nothing(store_url, tmp_path) -> None:
    Store(store_url).dispose()  # the schema exists; the writers race on the runs
    folders = []
    for n in range(4):
        folders.append(write_result(tmp_path / f"m{n}", f"org/m{n}", "T1", retrieval_values(500, 0.5, n)).parents[1])
    writers = [_writer(store_url, f) for f in folders] + [_writer(store_url, folders[0])]  # one folder twice
    for w in writers:
        out, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode()
    runs = Store(store_url).runs()
    assert sorted(r.model for r in runs) == [f"org/m{n}" for n in range(4)]
    for r, n in zip(sorted(runs, key=lambda r: r.model), range(4)):
        assert r.scores["T1"] == float(retrieval_values(500, 0.5, n).mean())


@pytest.mark.slow
def test_a_writer_killed_mid_transaction_leaves_no_half_run(store_url, tmp_path) -> None:
    folder = write_result(tmp_path / "m", "org/m", "T1", retrieval_values(200, 0.5, 1)).parents[1]
    Store(store_url).dispose()
    ready = tmp_path / "ready"
    writer = _writer(store_url, folder, str(ready))
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert writer.poll() is None, writer.stderr.read().decode() if writer.stderr else ""
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    store = Store(store_url)
    from sqlalchemy import func, select

    from embedscope.history import tables

    with store._engine.connect() as c:
        counts = [
            c.execute(select(func.count()).select_from(t)).scalar() for t in (tables.runs, tables.results, tables.files)
        ]
    assert counts == [0, 0, 0]
    ((run_id, new),) = store.import_folders([folder])  # the next recording goes through
    assert new and store.run_info(run_id).scores["T1"] == float(retrieval_values(200, 0.5, 1).mean())


def test_a_store_of_an_older_schema_is_refused_with_the_command_that_upgrades_it(
    store_url, monkeypatch, capsys
) -> None:
    from embedscope.cli.main import main
    from embedscope.history import store as store_module
    from embedscope.history import tables

    Store(store_url).dispose()  # at 0001; pretend this embedscope reads a later revision 0002
    monkeypatch.setattr(tables, "SCHEMA_REVISION", "0002")
    monkeypatch.setattr(store_module, "known_revisions", lambda: ["0001", "0002"])
    with pytest.raises(StoreError, match=r"written by an older embedscope \(schema 0001, this one reads 0002\); "
                       r"upgrade it with: embedscope results upgrade --store "):  # fmt: skip
        Store(store_url)
    assert main(["results", "list", "--store", store_url]) == 2
    assert "embedscope results upgrade --store" in capsys.readouterr().err


def test_results_upgrade_creates_a_store_and_then_says_it_is_current(tmp_path, capsys) -> None:
    from embedscope.cli.main import main

    url = f"sqlite:///{tmp_path}/new.db"
    assert main(["results", "upgrade", "--store", url]) == 0
    assert capsys.readouterr().out.strip().endswith("schema (none) → 0001")
    assert main(["results", "upgrade", "--store", url]) == 0
    assert capsys.readouterr().out.strip().endswith("at 0001")


@pytest.mark.slow
def test_mteb_and_report_read_an_export_unchanged(every_type_run, tmp_path) -> None:
    import mteb

    from embedscope.results.report import collect_results

    store = Store(f"sqlite:///{tmp_path}/h.db")
    store.import_folders([every_type_run])
    (folder,) = store.export(tmp_path / "exported")
    for path in sorted(folder.glob("*.json")):
        if path.name != "model_meta.json":
            loaded = mteb.TaskResult.from_disk(path)
            assert loaded.task_name == path.stem
    ours = {(r.task, r.score) for r in collect_results([every_type_run])}
    assert {(r.task, r.score) for r in collect_results([tmp_path / "exported"])} == ours
