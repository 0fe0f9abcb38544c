"""The results-store tests run over both kinds of store: SQLite (a file) and a real PostgreSQL server on
127.0.0.1 (one per test session, a fresh database per test)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from support.postgres import fresh_database, postgres_server

_numbers = itertools.count()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.slow)])
def store_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A new, empty store of each kind (the PostgreSQL server starts in a second or two: slow tier)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/history.db"
    server = request.getfixturevalue("postgres_url")
    return fresh_database(server, f"t{next(_numbers)}_{abs(hash(request.node.nodeid)) % 10**8}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test of a PostgreSQL store on one worker, so that one server serves them."""
    for item in items:
        if "postgres" in item.nodeid and "tests/history" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group("postgres"))
