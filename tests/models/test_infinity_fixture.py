"""The real-server fixture's rule (support/infinity.py): without .venv-infinity a test skips with the reason, except
in CI (CI=true), where the environment is part of the setup and its absence fails the test."""

from __future__ import annotations

import pytest

from support import infinity


def test_missing_venv_skips_outside_ci_and_fails_in_ci(monkeypatch, tmp_path):
    monkeypatch.setattr(infinity, "SERVER", tmp_path / "no-venv" / "bin" / "infinity_emb")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="setup_api_server.sh"):
        infinity.require_venv()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI: .*setup_api_server.sh"):
        infinity.require_venv()


def test_free_port_is_a_loopback_port_nothing_listens_on():
    import socket

    port = infinity.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # still free
