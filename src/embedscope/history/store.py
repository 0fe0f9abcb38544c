"""The results store: one database (SQLite or PostgreSQL) of every run recorded, with tags.

Opening a store checks its schema: an empty database is created at this embedscope's schema; a store of an older
schema is refused with the command that upgrades it (``embedscope results upgrade``); one of a newer schema (a newer
embedscope wrote it) is refused, never misread. A run is recorded in one transaction (a process killed half-way
leaves nothing), and recording is idempotent: the same files record once, whoever records them and how often.

Examples:
    >>> import tempfile, embedscope
    >>> from embedscope.testing.fakes import KeywordEncoder
    >>> from embedscope.testing.tiny import tiny_retrieval_task
    >>> out = tempfile.mkdtemp()
    >>> _ = embedscope.evaluate(KeywordEncoder(["cat", "dog"]), [tiny_retrieval_task()], output_folder=out,
    ...                         cache=False, show_progress=False)
    >>> store = Store(f"sqlite:///{out}/history.db")
    >>> [new for _, new in store.import_folders([out])], [new for _, new in store.import_folders([out])]
    ([True], [False])
    >>> [(r.model, r.tasks) for r in store.runs()]
    [('fake/keyword-encoder', ('TinyRetrieval',))]
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError, EmbedscopeError
from embedscope.history import tables
from embedscope.history.folders import RunRecord, read_run, run_folders, write_run
from embedscope.history.kinds import StoreKind, mask_text, parse_store_url, scrub

logger = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
ID_PREFIX = 6  # the shortest run id prefix a command accepts


class StoreError(EmbedscopeError):
    """The store cannot be used: unreachable, of another schema, or asked for what it does not hold."""


def _filter(help: str, **kwargs: Any) -> Any:
    """A :class:`RunFilter` field: its help (the CLI's flag is ``--NAME``, with ``kwargs`` for argparse)."""
    return field(default=kwargs.pop("default", None), metadata={"help": help, "argparse": kwargs})


@dataclass(frozen=True)
class RunFilter:
    """Which runs a listing, an export or a leaderboard takes (every field optional; all must hold). Each field is
    declared once here: ``results list`` and ``results export`` derive their flags from it.

    Examples:
        >>> RunFilter(model="org/a", tag="baseline", latest=True).tag
        'baseline'
    """

    model: str | None = _filter("only runs of this model (its name as 'results list' shows it)")
    task: str | None = _filter("only runs with a result of this task")
    tag: str | None = _filter("only the run this tag names", metavar="NAME")
    runs: tuple[str, ...] = _filter(
        "only this run (an id prefix; repeat for more)", default=(), flag="--run", action="append", metavar="ID"
    )
    since: dt.datetime | None = _filter(
        "only runs recorded at or after this ISO time (UTC unless given)", metavar="TIME"
    )
    until: dt.datetime | None = _filter("only runs recorded at or before this ISO time", metavar="TIME")
    latest: bool = _filter("only the newest run of each model (and experiment)", default=False, action="store_true")


@dataclass(frozen=True)
class RunInfo:
    """One recorded run, as ``results list`` shows it."""

    id: str
    model: str
    revision: str
    experiment: str | None
    source: str
    recorded_at: dt.datetime
    evaluated_at: str | None
    tasks: tuple[str, ...]
    scores: dict[str, float | None]
    tags: tuple[str, ...] = ()
    system: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "model": self.model,
            "revision": self.revision,
            "experiment": self.experiment,
            "source": self.source,
            "recorded_at": self.recorded_at.isoformat(),
            "evaluated_at": self.evaluated_at,
            "tags": list(self.tags),
            "scores": self.scores,
        }


def as_utc(value: dt.datetime) -> dt.datetime:
    """A stored time as an aware UTC time (SQLite gives naive ones back)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)


class Store:
    """A results store at ``url`` (``sqlite:///FILE`` or ``postgresql://…``); see the module docstring.

    Examples:
        >>> import tempfile
        >>> folder = tempfile.mkdtemp()
        >>> store = Store(f"sqlite:///{folder}/history.db")
        >>> store.url.endswith("/history.db"), store.schema_revision(), store.runs()
        (True, '0001', [])
    """

    def __init__(self, url: str, *, check: bool = True, create: bool = True) -> None:
        """Open the store at ``url``; ``create`` False (the readers: ``results list``, ``gate``, ``serve``) refuses a
        store that does not exist yet rather than creating it."""
        self.kind: StoreKind
        self.kind, self._url = parse_store_url(url)
        self.url = mask_text(url)
        self.create = create
        file = self.kind.file(self._url)
        if file is not None and not create and not file.is_file():
            raise StoreError(f"store {self.url}: no such file; record a run into it first (run --store URL)")
        self._engine = self._connect()
        if check:
            self._check_schema()

    # -- opening ---------------------------------------------------------------------------------------------
    def _connect(self) -> Any:
        try:
            import importlib

            importlib.import_module(self.kind.module)
            from sqlalchemy import create_engine
        except ImportError:
            raise ConfigError(
                f"store: a {self.kind.name} store needs its driver: pip install 'embedscope[{self.kind.extra}]'"
            ) from None
        file = self.kind.file(self._url)
        if file is not None and self.create:
            file.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(self._url, **self.kind.engine_options(self._url))
        self.kind.prepare(engine)
        return engine

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Database errors as one line naming the store (its password masked) and what was being done."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield
        except SQLAlchemyError as e:
            reason = str(getattr(e, "orig", None) or e).strip().splitlines()
            line = reason[0] if reason else type(e).__name__
            raise StoreError(scrub(f"store {self.url}: {doing}: {line}", self._url)) from None

    def schema_revision(self) -> str | None:
        """The Alembic revision the store is at (None: no embedscope schema yet)."""
        from sqlalchemy import inspect, text

        with self._errors("cannot be reached"), self._engine.connect() as connection:
            names = set(inspect(connection).get_table_names())
            if "alembic_version" not in names:
                if names & {"runs", "results", "files", "tags"}:
                    raise StoreError(
                        f"store {self.url}: has tables but no schema revision: not a store embedscope wrote"
                    )
                return None
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()

    def _check_schema(self) -> None:
        revision = self.schema_revision()
        if revision == tables.SCHEMA_REVISION:
            return
        if revision is None:
            if not self.create:
                raise StoreError(
                    f"store {self.url}: holds no results yet; record a run into it first (run --store URL)"
                )
            self.upgrade()
            return
        if revision in known_revisions():
            raise StoreError(
                f"store {self.url}: written by an older embedscope (schema {revision}, this one reads "
                f"{tables.SCHEMA_REVISION}); upgrade it with: embedscope results upgrade --store {self.url}"
            )
        raise StoreError(
            f"store {self.url}: written by a newer embedscope (schema {revision}; this one reads "
            f"{tables.SCHEMA_REVISION}); upgrade embedscope to use it"
        )

    def upgrade(self) -> tuple[str | None, str]:
        """Bring the store's schema to this embedscope's (Alembic's ``upgrade head``): (from, to)."""
        from alembic import command
        from alembic.config import Config

        before = self.schema_revision()
        if before == tables.SCHEMA_REVISION:
            return before, before
        if before is not None and before not in known_revisions():
            raise StoreError(
                f"store {self.url}: at schema {before}, which this embedscope does not know; upgrade embedscope"
            )
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with self._errors("upgrading its schema"), self._write() as connection:
            self.kind.lock_schema(connection)  # one process at a time (SQLite's write lock already is)
            if self._revision_on(connection) != tables.SCHEMA_REVISION:  # another process may have just done it
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
        return before, tables.SCHEMA_REVISION

    def _write(self) -> Any:
        """A write transaction: on SQLite it holds the write lock from its start (queued, never failing mid-way)."""
        return self._engine.execution_options(embedscope_write=True).begin()

    def _revision_on(self, connection: Any) -> str | None:
        from sqlalchemy import inspect, text

        if "alembic_version" not in inspect(connection).get_table_names():
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()

    def dispose(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    # -- recording -------------------------------------------------------------------------------------------
    def record(self, run: RunRecord) -> tuple[str, bool]:
        """Record ``run`` in one transaction: (its id, True) — or (the id it has, False) when the same files were
        recorded before, by this process or another. Its tags then name it."""
        from sqlalchemy import insert
        from sqlalchemy.exc import IntegrityError

        key = run.content_key
        run_id = self._run_with_key(key)
        new = run_id is None
        if run_id is None:
            run_id = uuid.uuid4().hex
            now = dt.datetime.now(dt.timezone.utc)
            with self._errors("recording a run"):
                try:
                    with self._write() as connection:
                        connection.execute(insert(tables.runs).values(**_run_row(run, run_id, key, now)))
                        connection.execute(insert(tables.results), [_result_row(r, run_id) for r in run.results])
                        files = [{"run_id": run_id, "path": p, "content": c} for p, c in run.files.items()]
                        connection.execute(insert(tables.files), files)
                except IntegrityError:
                    found = self._run_with_key(key)  # another process recorded the same files meanwhile
                    if found is None:
                        raise
                    run_id, new = found, False
        for name in run.tags:
            self.tag(name, run_id, move=True)
        return run_id, new

    def _run_with_key(self, key: str) -> str | None:
        from sqlalchemy import select

        with self._errors("reading runs"), self._engine.connect() as connection:
            return connection.execute(select(tables.runs.c.id).where(tables.runs.c.content_key == key)).scalar()

    def import_folders(
        self, paths: Iterable[str | Path], tags: Sequence[str] = (), source: str = "import"
    ) -> list[tuple[str, bool]]:
        """Record every run under ``paths`` (result folders, as ``run`` writes them): (id, newly recorded) each."""
        out = []
        for folder in run_folders(paths):
            record = read_run(folder, source=source)
            out.append(self.record(_with_tags(record, tags)))
        return out

    # -- tags --------------------------------------------------------------------------------------------------
    def tag(self, name: str, run: str, move: bool = False) -> str | None:
        """Name run ``run`` (an id or unique prefix) ``name``; the run it named before (None), or a StoreError when
        it names another run and ``move`` is False."""
        from sqlalchemy import delete, insert, select

        check_tag(name)
        run_id = self.resolve_run(run)
        with self._errors("tagging a run"), self._write() as connection:
            before = connection.execute(select(tables.tags.c.run_id).where(tables.tags.c.name == name)).scalar()
            if before == run_id:
                return before
            if before is not None and not move:
                raise StoreError(
                    f"tag {name!r} names run {before[:12]} already; move it with --move (or name this run otherwise)"
                )
            connection.execute(delete(tables.tags).where(tables.tags.c.name == name))
            now = dt.datetime.now(dt.timezone.utc)
            connection.execute(insert(tables.tags).values(name=name, run_id=run_id, tagged_at=now))
        return before

    def resolve_run(self, spec: str) -> str:
        """The id of the run ``spec`` names: ``tag:NAME``, ``run:ID``, or an id (or a unique prefix of one)."""
        from sqlalchemy import select

        if spec.startswith("tag:"):
            name = spec[4:]
            with self._errors("reading tags"), self._engine.connect() as connection:
                found = connection.execute(select(tables.tags.c.run_id).where(tables.tags.c.name == name)).scalar()
                known = [] if found else list(connection.execute(select(tables.tags.c.name)).scalars())
            if found is None:
                from embedscope.errors import UnknownNameError

                raise UnknownNameError(f"tag in store {self.url}:", name, known)
            return str(found)
        prefix = spec.removeprefix("run:")
        if len(prefix) < ID_PREFIX or not all(c in "0123456789abcdef" for c in prefix):
            raise StoreError(f"{spec!r}: name a run by tag:NAME or run:ID (at least {ID_PREFIX} hex digits of its id)")
        with self._errors("reading runs"), self._engine.connect() as connection:
            ids = list(
                connection.execute(select(tables.runs.c.id).where(tables.runs.c.id.startswith(prefix))).scalars()
            )
        if len(ids) != 1:
            raise StoreError(
                f"run {prefix!r}: {'no run' if not ids else f'{len(ids)} runs'} in store {self.url} "
                f"{'has that id' if not ids else 'share that prefix; give more of it'} (see: embedscope results list)"
            )
        return str(ids[0])

    # -- reading ---------------------------------------------------------------------------------------------
    def runs(self, where: RunFilter = RunFilter()) -> list[RunInfo]:
        """The runs ``where`` selects, oldest first, with their tasks, main scores and tags."""
        from sqlalchemy import select

        r, res, t = tables.runs, tables.results, tables.tags
        query = select(r.c.id, r.c.model, r.c.revision, r.c.experiment, r.c.source, r.c.recorded_at,
                       r.c.evaluated_at, r.c.system).order_by(r.c.recorded_at, r.c.id)  # fmt: skip
        if where.model:
            query = query.where(r.c.model == where.model)
        if where.tag:
            query = query.where(r.c.id == select(t.c.run_id).where(t.c.name == where.tag).scalar_subquery())
        if where.runs:
            query = query.where(r.c.id.in_([self.resolve_run(x) for x in where.runs]))
        if where.since:
            query = query.where(r.c.recorded_at >= where.since)
        if where.until:
            query = query.where(r.c.recorded_at <= where.until)
        if where.task:
            query = query.where(r.c.id.in_(select(res.c.run_id).where(res.c.task == where.task)))
        with self._errors("reading runs"), self._engine.connect() as connection:
            rows = list(connection.execute(query))
            ids = [row.id for row in rows]
            scores: dict[str, dict[str, float | None]] = {i: {} for i in ids}
            labels: dict[str, list[str]] = {i: [] for i in ids}
            for chunk in _chunks(ids, 500):
                for run_id, task, score in connection.execute(
                    select(res.c.run_id, res.c.task, res.c.main_score).where(res.c.run_id.in_(chunk)).order_by(res.c.id)
                ):
                    scores[run_id][task] = score
                for name, run_id in connection.execute(select(t.c.name, t.c.run_id).where(t.c.run_id.in_(chunk))):
                    labels[run_id].append(name)
        infos = [
            RunInfo(
                row.id,
                row.model,
                row.revision,
                row.experiment,
                row.source,
                as_utc(row.recorded_at),
                row.evaluated_at,
                tuple(scores[row.id]),
                scores[row.id],
                tuple(sorted(labels[row.id])),
                json.loads(row.system),
            )  # fmt: skip
            for row in rows
        ]
        if where.latest:
            newest: dict[tuple[str, str | None], RunInfo] = {}
            for info in infos:
                newest[(info.model, info.experiment)] = info
            infos = [i for i in infos if newest[(i.model, i.experiment)] is i]
        return infos

    def files(self, run_id: str) -> dict[str, bytes]:
        """Every file recorded with a run, by its path inside the run's folder."""
        from sqlalchemy import select

        f = tables.files
        with self._errors("reading a run's files"), self._engine.connect() as connection:
            rows = connection.execute(select(f.c.path, f.c.content).where(f.c.run_id == run_id).order_by(f.c.path))
            return {path: bytes(content) for path, content in rows}

    def run_info(self, run_id: str) -> RunInfo:
        (info,) = self.runs(RunFilter(runs=(run_id,)))
        return info

    def export(self, output: str | Path, where: RunFilter = RunFilter()) -> list[Path]:
        """Write the runs ``where`` selects under ``output`` in the MTEB layout (per-item files included), so that
        mteb, ``compare`` and ``report`` read them unchanged; the folders written."""
        output = Path(output)
        chosen = self.runs(where)
        if not chosen:
            raise StoreError(f"store {self.url}: no run matches {describe(where)}")
        by_folder: dict[tuple[str, str, str | None], RunInfo] = {}
        for info in chosen:
            key = (info.model, info.revision, info.experiment)
            if key in by_folder:
                raise StoreError(
                    f"runs {by_folder[key].id[:12]} and {info.id[:12]} are both {info.model} ({info.revision}"
                    f"{', experiment ' + info.experiment if info.experiment else ''}): one folder holds one; export "
                    "the newest of each model with --latest, or one with --run ID"
                )
            by_folder[key] = info
        written = []
        for info in chosen:
            files = self.files(info.id)
            if where.task:
                files = {p: c for p, c in files.items() if _belongs_to(p, where.task)}
            _refuse_other_content(output, info, files)
            written.append(write_run(output, info.model, info.revision, info.experiment, files))
        return written


def _belongs_to(path: str, task: str) -> bool:
    from embedscope.results.per_item import SUFFIX

    name = Path(path).name
    return name in (f"{task}.json", f"{task}{SUFFIX}", "model_meta.json")


def _refuse_other_content(output: Path, info: RunInfo, files: dict[str, bytes]) -> None:
    from embedscope.history.folders import run_folder_name

    folder = output / run_folder_name(info.model, info.revision, info.experiment)
    for name, content in files.items():
        target = folder / name
        if target.is_file() and target.read_bytes() != content:
            raise StoreError(f"{target} exists with other content; export into an empty folder")


def describe(where: RunFilter) -> str:
    """The filter in words, for a message."""
    parts = [f"{k} {v}" for k, v in (("model", where.model), ("task", where.task), ("tag", where.tag)) if v]
    parts += [f"run {', '.join(where.runs)}"] if where.runs else []
    parts += [f"since {where.since.isoformat()}"] if where.since else []
    parts += [f"until {where.until.isoformat()}"] if where.until else []
    return ", ".join(parts) or "(no filter)"


def check_tag(name: str) -> str:
    """A tag name: 1–200 characters, no whitespace, no ``:`` (``tag:NAME`` must read back)."""
    if not name or len(name) > 200 or any(c.isspace() for c in name) or ":" in name:
        raise ConfigError(f"tag {name!r}: use 1 to 200 characters without spaces or ':' (e.g. baseline, v1.3)")
    return name


def known_revisions() -> list[str]:
    """Every schema revision this embedscope's migrations know, oldest first."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return [s.revision for s in reversed(list(ScriptDirectory.from_config(config).walk_revisions()))]


def _with_tags(record: RunRecord, tags: Sequence[str]) -> RunRecord:
    import dataclasses

    return dataclasses.replace(record, tags=tuple(record.tags) + tuple(check_tag(t) for t in tags))


def _run_row(run: RunRecord, run_id: str, key: str, now: dt.datetime) -> dict[str, Any]:
    return {
        "id": run_id,
        "content_key": key,
        "model": run.model,
        "revision": run.revision,
        "experiment": run.experiment,
        "fingerprint": run.fingerprint,
        "source": run.source,
        "recorded_at": now,
        "evaluated_at": run.evaluated_at,
        "embedscope_version": run.embedscope_version,
        "system": json.dumps(run.system, sort_keys=True, default=str),
        "host": json.dumps(run.host, sort_keys=True) if run.host is not None else None,
    }


def _result_row(result: Any, run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "task": result.task,
        "task_type": result.task_type,
        "metric": result.metric,
        "main_score": result.main_score,
        "evaluation": json.dumps(result.evaluation, sort_keys=True, default=str),
        "seconds": result.seconds,
        "cost": json.dumps(result.cost, sort_keys=True, default=str) if result.cost else None,
        "items": result.items,
        "path": result.path,
    }


def _chunks(values: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]
