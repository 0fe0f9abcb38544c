"""Fixtures of the API model tests (``test_api_backend``, ``test_api_runs``): a fake provider and quick retries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.api_server import ApiServer


@pytest.fixture
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait a millisecond."""
    from embedscope.models.api import ApiEncoder

    monkeypatch.setattr(ApiEncoder, "backoff", 0.001)


@pytest.fixture
def server(quick_backoff: None) -> Iterator[ApiServer]:
    """A fake provider on 127.0.0.1 (retries against it wait a millisecond), stopped after the test."""
    with ApiServer() as s:
        yield s
