"""Store kinds, one record each: the URL scheme, the SQLAlchemy driver and the extra that installs it.

A store URL is ``sqlite:///FILE`` (embedded, no server) or ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (a team's
shared server; a password may also come from libpq's ``PGPASSWORD`` or ``~/.pgpass``). Every URL embedscope prints
or writes is :func:`masked`: its password never appears.

>>> kind, url = parse_store_url("postgresql://ci:secret@127.0.0.1:5432/results")
>>> kind.name, masked(url)
('postgresql', 'postgresql://ci:***@127.0.0.1:5432/results')
>>> parse_store_url("sqlite:///runs.db")[0].name
'sqlite'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from embedscope.errors import ConfigError
from embedscope.registry import Registry

STORE_ENV = "EMBEDSCOPE_STORE"
"""The environment variable naming the store when neither ``--store`` nor the config key does."""


@dataclass(frozen=True)
class StoreKind:
    """One kind of store: its URL schemes, the SQLAlchemy driver it connects with, and the extra it needs."""

    name: str
    schemes: tuple[str, ...]
    driver: str  # the SQLAlchemy dialect+driver the URL is rewritten to
    extra: str  # pip install 'embedscope[EXTRA]'
    module: str  # the driver's module, imported to check it is installed
    engine_options: Callable[[Any], dict[str, Any]]  # create_engine keywords for a URL
    example: str


STORE_KINDS: Registry[StoreKind] = Registry("store URL scheme", "Use sqlite:///FILE or postgresql://USER@HOST/DB.")


def register_store_kind(kind: StoreKind) -> StoreKind:
    """Add a store kind (each of its schemes names it)."""
    for scheme in kind.schemes:
        STORE_KINDS.add(scheme, kind)
    return kind


def _sqlite_options(url: Any) -> dict[str, Any]:
    return {"connect_args": {"timeout": 60.0}}


def _postgresql_options(url: Any) -> dict[str, Any]:
    return {"pool_pre_ping": True, "connect_args": {"connect_timeout": 10}}


register_store_kind(
    StoreKind("sqlite", ("sqlite",), "sqlite+pysqlite", "store", "sqlite3", _sqlite_options, "sqlite:///embedscope.db")
)
register_store_kind(
    StoreKind(
        "postgresql",
        ("postgresql", "postgres", "postgresql+psycopg"),
        "postgresql+psycopg",
        "store",
        "psycopg",
        _postgresql_options,
        "postgresql://USER@HOST:5432/DB",
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
    if kind.name == "sqlite" and not url.database:
        raise ConfigError("sqlite:/// needs a file (sqlite:///results.db); an in-memory store keeps nothing")
    return kind, url


def masked(url: Any) -> str:
    """The URL as text with its password shown as ``***`` (and the plain scheme, not the driver's)."""
    text = url.render_as_string(hide_password=True)
    return text.replace("+psycopg://", "://").replace("+pysqlite://", "://")


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
