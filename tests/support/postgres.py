"""A throwaway PostgreSQL server on 127.0.0.1 for the results-store tests (Debian's ``postgresql``, which
``.ci/run`` installs): its own cluster in a temporary folder, password authentication, stopped at the end.

When the tests run as root (CI), the server runs as the ``postgres`` user, as PostgreSQL requires. Without the
binaries the tests that need it skip, naming the package.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

USER = "embedscope"
PASSWORD = "pw-7Hq2-never-printed"  # a test looks for it in every file and line a run leaves


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl`` (PATH, else Debian's ``/usr/lib/postgresql/<version>/bin``)."""
    found = shutil.which("initdb") or shutil.which("pg_ctl")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_server_user(command: list[str]) -> list[str]:
    """``command`` run as ``postgres`` when this process is root (initdb and postgres refuse root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@contextmanager
def postgres_server() -> Iterator[str]:
    """A running server with database ``results``; yields its URL (with the password)."""
    bin_dir = binaries()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="embedscope-pg-"))
    data, pwfile = root / "data", root / "pw"
    pwfile.write_text(PASSWORD + "\n", encoding="utf-8")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(pwfile, "postgres")
    port = free_port()
    env = {**os.environ, "LC_ALL": "C.UTF-8", "LANG": "C.UTF-8"}
    run = {"check": True, "capture_output": True, "env": env, "cwd": root}
    try:
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "-A", "scram-sha-256", f"--pwfile={pwfile}"]
            ),
            **run,
        )
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=50"
        subprocess.run(
            _as_server_user(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start"]
            ),
            **run,
        )
        url = f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/postgres"
        _create_database(url, "results")
        yield f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{port}/results"
    except subprocess.CalledProcessError as e:
        pytest.skip(f"could not start PostgreSQL: {(e.stderr or b'').decode(errors='replace')[-300:]}")
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                **{**run, "check": False},
            )
        shutil.rmtree(root, ignore_errors=True)


def _create_database(url: str, name: str) -> None:
    import psycopg

    deadline = time.monotonic() + 20
    while True:
        try:
            with psycopg.connect(url.replace("postgresql://", "postgresql://", 1), autocommit=True) as c:
                c.execute(f"CREATE DATABASE {name}")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def fresh_database(url: str, name: str) -> str:
    """A new empty database on the server of ``url``; its URL."""
    base = url.rsplit("/", 1)[0]
    _create_database(f"{base}/postgres", name)
    return f"{base}/{name}"
