"""Store kinds, one record each: the URL scheme, the SQLAlchemy driver and the extra that installs it.

A store URL is ``sqlite:///FILE`` (embedded, no server) or ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (a team's
shared server; a password may also come from libpq's ``PGPASSWORD`` or ``~/.pgpass``). Every URL embedscope prints
or writes is :func:`masked`: its password never appears.

>>> kind, url = parse_store_url("postgresql://ci:secret@127.0.0.1:5432/results")
>>> kind.name, url.drivername, mask_text("postgresql://ci:secret@127.0.0.1:5432/results")
('postgresql', 'postgresql+psycopg', 'postgresql://ci:***@127.0.0.1:5432/results')
>>> parse_store_url("sqlite:///runs.db")[0].name
'sqlite'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from embedscope.errors import ConfigError
from embedscope.registry import Registry

STORE_ENV = "EMBEDSCOPE_STORE"
"""The environment variable naming the store when neither ``--store`` nor the config key does."""


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: its URL schemes, the SQLAlchemy driver it connects with, the extra it needs, and how it
    behaves: where an embedded store's file is, what each connection sets up, how schema changes and readers are
    kept apart from writers."""

    name: str
    schemes: tuple[str, ...]
    driver: str  # the SQLAlchemy dialect+driver the URL is rewritten to
    extra: str  # pip install 'embedscope[EXTRA]'
    module: str  # the driver's module, imported to check it is installed
    engine_options: Callable[[Any], dict[str, Any]]  # create_engine keywords for a URL
    example: str
    file: Callable[[Any], Path | None] = lambda url: None  # an embedded store's file (None: a server)
    prepare: Callable[[Any], None] = lambda engine: None  # event listeners on a new engine
    lock_schema: Callable[[Any], None] = lambda connection: None  # one process at a time changes the schema
    read_only: Callable[[Any], AbstractContextManager[Any]] = lambda connection: nullcontext(connection)


STORE_KINDS: Registry[StoreKind] = Registry("store URL scheme", "Use sqlite:///FILE or postgresql://USER@HOST/DB.")


def register_store_kind(kind: StoreKind) -> StoreKind:
    """Add a store kind (each of its schemes names it)."""
    for scheme in kind.schemes:
        STORE_KINDS.add(scheme, kind)
    return kind


def unregister_store_kind(name: str) -> None:
    """Remove a store kind and its schemes (a plugin's or a test's)."""
    for scheme in [s for s in STORE_KINDS.names() if STORE_KINDS.get(s).name == name]:
        del STORE_KINDS._entries[scheme]


# -- SQLite: a file, WAL, writers queued on its lock ---------------------------------------------------------------


def _sqlite_file(url: Any) -> Path:
    return Path(url.database).expanduser()


def _sqlite_prepare(engine: Any) -> None:
    from sqlalchemy import event

    @event.listens_for(engine, "connect")
    def _pragmas(connection: Any, _: Any) -> None:  # WAL: readers never wait; writers queue on the lock
        connection.isolation_level = None  # transactions begin as the "begin" event says (DDL included)
        cursor = connection.cursor()
        cursor.execute("PRAGMA busy_timeout=60000")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:  # a write takes the lock first, waiting its turn (busy_timeout)
        writes = connection.get_execution_options().get("embedscope_write")
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


@contextmanager
def _sqlite_read_only(connection: Any) -> Iterator[Any]:
    connection.exec_driver_sql("PRAGMA query_only = ON")
    try:
        yield connection
    finally:  # the pooled connection may serve the same Store's writer next
        connection.rollback()
        connection.exec_driver_sql("PRAGMA query_only = OFF")
        connection.commit()


register_store_kind(
    StoreKind(
        "sqlite",
        ("sqlite",),
        "sqlite+pysqlite",
        "store",
        "sqlite3",
        lambda url: {"connect_args": {"timeout": 60.0}},
        "sqlite:///embedscope.db",
        file=_sqlite_file,
        prepare=_sqlite_prepare,
        read_only=_sqlite_read_only,
    )
)


# -- PostgreSQL: a server; schema changes under an advisory lock -----------------------------------------------------


def _postgresql_lock(connection: Any) -> None:
    from sqlalchemy import text

    connection.execute(text("SELECT pg_advisory_xact_lock(4242001)"))


@contextmanager
def _postgresql_read_only(connection: Any) -> Iterator[Any]:
    connection.exec_driver_sql("SET TRANSACTION READ ONLY")
    yield connection


register_store_kind(
    StoreKind(
        "postgresql",
        ("postgresql", "postgres", "postgresql+psycopg"),
        "postgresql+psycopg",
        "store",
        "psycopg",
        lambda url: {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}},
        "postgresql://USER@HOST:5432/DB",
        lock_schema=_postgresql_lock,
        read_only=_postgresql_read_only,
    )
)


def parse_store_url(text: str) -> tuple[StoreKind, Any]:
    """The kind and the SQLAlchemy URL (rewritten to the kind's driver) of a store URL; one line when unknown."""
    try:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError
    except ImportError:
        raise ConfigError("store: a results store needs SQLAlchemy: pip install 'embedscope[store]'") from None
    if not isinstance(text, str) or "://" not in text:
        raise ConfigError(
            f"{mask_text(str(text))!r} is not a store URL; use sqlite:///FILE or postgresql://USER@HOST/DB"
        )
    scheme = text.split("://", 1)[0].lower()
    if scheme not in STORE_KINDS:
        raise ConfigError(
            f"unknown store scheme {scheme!r} in {mask_text(text)!r}; use sqlite:///FILE or postgresql://USER@HOST/DB"
        )
    kind = STORE_KINDS.get(scheme)
    try:
        url = make_url(text)
    except ArgumentError as e:
        raise ConfigError(f"{mask_text(text)!r} is not a store URL ({e})") from None
    url = url.set(drivername=kind.driver)
    if kind.file(url) is not None and url.database in (None, "", ":memory:"):
        raise ConfigError(f"{scheme}:/// needs a file ({scheme}:///results.db); an in-memory store keeps nothing")
    return kind, url


def mask_text(text: str) -> str:
    """``text`` with the password of any ``scheme://user:password@`` in it replaced by ``***``.

    >>> mask_text("could not reach postgresql://u:s3cret@h/db")
    'could not reach postgresql://u:***@h/db'
    """
    import re

    return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)


def scrub(text: str, url: Any) -> str:
    """``text`` with the URL's password (and libpq's ``PGPASSWORD``) removed wherever it occurs."""
    out = mask_text(text)
    for secret in (getattr(url, "password", None), os.environ.get("PGPASSWORD")):
        if secret:
            out = out.replace(str(secret), "***")
    return out


def store_url_from(setting: str | None) -> str | None:
    """The store a command uses: the setting (flag or config key), else ``$EMBEDSCOPE_STORE``, else None."""
    if setting:
        return setting
    env = os.environ.get(STORE_ENV, "").strip()
    return env or None
