"""Encoding on a Ray cluster: a pool of actors that each hold the model, fed planned batches.

``--engine ray [--ray-address ADDR] [--ray-workers N] [--ray-gpus-per-worker F] [--ray-temp-dir DIR]``
(the fields of :class:`RayEngine`):

- Ray's own ``ActorPool`` schedules the batches (no home-made scheduler): each actor loads the
  model once and keeps it across every encode call of the run. Ray Data was the other candidate;
  it builds a new actor pool for each dataset execution, so the model would be loaded again for
  every corpus chunk.
- Fault tolerance is Ray's: actors are created with ``max_restarts=-1`` and
  ``max_task_retries=-1``, so a worker that dies is restarted (reloading the model) and its
  batches are retried. A batch is deterministic, so the result is unchanged.
- The driver ships only the texts of each batch (the embedding cache already removed what it
  holds) and gets vectors back in plan order as they finish; :class:`~embedscope.models.cache.
  CachedEncoder` writes them to the cache as they arrive, so driver memory does not grow with
  the corpus.
- Workers run the in-process batch plan, so the vectors are the in-process vectors (same kind of
  device). A worker asks for a GPU with ``--ray-gpus-per-worker`` (then it encodes on ``cuda``).

embedscope must be importable on the cluster's nodes (installed there, or shipped with Ray's
``runtime_env``); the driver connects with ``ray.init(address=ADDR)`` (``auto`` finds a running
cluster; ``ray://host:10001`` goes through the Ray Client, ``pip install 'ray[client]'``; none starts a
local one). A local cluster keeps its session files and logs in the temporary folder the run names
(``--ray-temp-dir``; by default ``ray/`` in the embedding cache folder), never in ``/tmp/ray`` or ``~/.ray``:
its authentication token is made for the process and passed in the environment, and Ray's banners go
to the log.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import secrets
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field, FiniteFloat, PositiveInt

from embedscope.engines.base import EngineSettings, register_engine
from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.base import encoder_identity
from embedscope.models.device import parse_devices
from embedscope.models.planned import PlannedEncoder
from embedscope.types import Role

logger = logging.getLogger(__name__)


class _EncoderWorker:
    """The actor: loads the encoder once, then encodes planned batches."""

    def __init__(self, spec: Any, options: dict[str, Any]) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.encoder: Any  # a backend (BaseEncoder): batch_plan and encode_batch, as LocalPlanned's
        if isinstance(spec, str):
            from embedscope.models.specs import load_encoder

            self.encoder = load_encoder(spec, **options)
        else:
            from embedscope.models.wrap import as_encoder

            self.encoder = as_encoder(spec)

    def info(self) -> dict[str, Any]:
        return {**encoder_identity(self.encoder), "pid": os.getpid()}

    def plan(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        return self.encoder.batch_plan(lengths, batch_size)

    def encode_batch(self, texts: list[str], role: str) -> tuple[int, np.ndarray]:
        return os.getpid(), self.encoder.encode_batch(texts, role=role)


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise MissingDependencyError("ray", "--engine ray (pip install 'embedscope[ray]')") from e
    return ray


_SOCKET_ROOM = 107 - 64  # Ray's sockets are <temp>/session_<date>_<pid>/sockets/<name>; unix paths: 107 bytes at most


def _local_cluster_environment() -> dict[str, str]:
    """What a new local cluster needs so that it writes nothing to ``~/.ray`` and prints no banner: a token made for
    this process, passed in the environment (Ray would otherwise write ``~/.ray/auth_token`` and warn that it enabled
    token authentication). Variables the user set are kept."""
    if any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        return {}
    return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}


def _socket_safe(folder: Path) -> Path:
    """``folder``, or a short link to it when its path is too long for Ray's sockets: the link (in the system's
    temporary folder, removed when this process exits) shortens the socket paths, the files stay in ``folder``."""
    if len(str(folder)) <= _SOCKET_ROOM:
        return folder
    for base in (tempfile.gettempdir(), "/tmp"):
        link = Path(base) / f"embedscope-ray-{os.getpid()}"
        if len(str(link)) <= _SOCKET_ROOM and os.access(base, os.W_OK):
            link.unlink(missing_ok=True)
            link.symlink_to(folder, target_is_directory=True)
            atexit.register(link.unlink, missing_ok=True)
            return link
    raise ConfigError(f"--ray-temp-dir {folder}: the path is too long for Ray's sockets; give a shorter folder")


def connect(address: str | None = None, temp_dir: str | Path | None = None) -> Any:
    """``ray`` connected to the cluster at ``address`` (a running one for ``auto``; ``ray://`` through the Ray
    Client; a new local one for ``None``, its files in ``temp_dir``), or the cluster this process is already
    connected to."""
    if address is not None and address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
        raise MissingDependencyError("ray[client]", f"--ray-address {address} (the Ray Client)")
    already = "ray" in sys.modules and sys.modules["ray"].is_initialized()
    kwargs: dict[str, Any] = {}
    if address is None and temp_dir is not None and not already:
        folder = Path(temp_dir).expanduser().resolve()
        folder.mkdir(parents=True, exist_ok=True)
        if "ray" not in sys.modules:  # Ray reads them once, when imported; a token set later would lock it out
            os.environ.update(_local_cluster_environment())
        kwargs["_temp_dir"] = str(_socket_safe(folder))
    ray = _ray()
    if ray.is_initialized():
        return ray
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            logging_level=logging.WARNING,
            **kwargs,
        )
    except ConnectionError as e:
        raise ConfigError(f"--ray-address {address}: no Ray cluster answers there ({e})") from e
    return ray


class RayEncoder(PlannedEncoder):
    """An encoder whose batches run on a pool of Ray actors.

    Args:
        spec: a model name or path (each actor loads it with ``model_options``), or a picklable model object.
        model_options: options of :func:`~embedscope.models.specs.load_encoder` (device, dtype, pooling, …).
        address: Ray cluster address (``auto``, ``ray://host:10001``, …); ``None`` starts a local cluster
            unless this process is already connected.
        workers: number of actors (default: one per ``gpus_per_worker`` of the cluster's GPUs, else one
            per ``cpus_per_worker`` of its CPUs).
        gpus_per_worker / cpus_per_worker: resources each actor asks for.
        temp_dir: where a new local cluster keeps its session files and logs.
    """

    engine = "ray"

    def __init__(
        self,
        spec: Any,
        model_options: dict[str, Any] | None = None,
        *,
        address: str | None = None,
        workers: int | None = None,
        gpus_per_worker: float | None = None,
        cpus_per_worker: float | None = None,
        temp_dir: str | Path | None = None,
    ) -> None:
        ray = connect(address, temp_dir)
        from ray.util import ActorPool

        gpus = float(gpus_per_worker or 0.0)
        cpus = float(cpus_per_worker if cpus_per_worker is not None else 1.0)
        if gpus < 0 or cpus < 0:
            raise ConfigError("--ray-gpus-per-worker and cpus per worker must be >= 0")
        options = dict(model_options or {})
        if options.get("device") in (None, "auto"):
            options["device"] = "cuda" if gpus > 0 else "cpu"  # what Ray gives the actor, not what the driver has
        resources = ray.cluster_resources()
        if workers is None:
            workers = int(resources.get("GPU", 0) // gpus) if gpus > 0 else int(resources.get("CPU", 1) // max(cpus, 1))
        if workers < 1:
            raise ConfigError(
                f"the Ray cluster ({resources.get('CPU', 0):g} CPUs, {resources.get('GPU', 0):g} GPUs) "
                f"has room for no worker of {cpus:g} CPUs and {gpus:g} GPUs"
            )
        actor_class = ray.remote(num_cpus=cpus, num_gpus=gpus, max_restarts=-1, max_task_retries=-1)(_EncoderWorker)
        self.actors = [actor_class.remote(spec, options) for _ in range(workers)]
        try:
            infos = ray.get([a.info.remote() for a in self.actors])
        except Exception as e:  # a worker could not load the model: say why, in one line
            cause = getattr(e, "cause", None) or e
            raise ConfigError(f"a Ray worker could not load {spec!r}: {cause}") from e
        if len({i["fingerprint"] for i in infos}) > 1:
            raise ConfigError(
                "the Ray workers' models differ (devices "
                + ", ".join(i["device"] for i in infos)
                + "): give every worker the same kind of device"
            )
        super().__init__(infos[0])
        self._ray = ray
        self._pool = ActorPool(self.actors)
        self.pids_seen: set[int] = {i["pid"] for i in infos}
        self.on_batch: Callable[[int], None] | None = None  # called after each batch arrives (progress hooks)
        self.batches_done = 0
        self.texts_sent = 0

    def _plan(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        return self._ray.get(self.actors[0].plan.remote(lengths, batch_size))

    def _run(self, batches: list[list[str]], role: Role) -> Iterator[np.ndarray]:
        self.texts_sent += sum(len(b) for b in batches)
        results = self._pool.map(lambda actor, batch: actor.encode_batch.remote(batch, role), batches)
        for pid, vectors in results:
            self.pids_seen.add(pid)
            self.batches_done += 1
            if self.on_batch is not None:
                self.on_batch(self.batches_done)
            yield vectors

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []


class RayEngine(EngineSettings):
    """Encode on a Ray cluster: a pool of actors that each hold the model (``pip install 'embedscope[ray]'``)."""

    name: Literal["ray"] = "ray"
    address: str | None = Field(
        None, description="Ray cluster to use: auto (a running one), ray://host:10001, … (default: a new local cluster)"
    )
    workers: PositiveInt | None = Field(
        None, description="Ray actors holding the model (default: one per GPU share, else one per CPU)"
    )
    gpus_per_worker: FiniteFloat | None = Field(
        None,
        ge=0,
        description="GPUs each Ray actor asks for (e.g. 1, or 0.5 to pack two per GPU); workers encode on cuda",
    )
    temp_dir: str | None = Field(
        None,
        description="where a new local Ray cluster keeps its session files and logs (default: ray/ in the cache folder)",
    )

    def devices(self, spec: str | None) -> list[str]:
        """The device named for the workers (not looked for here: it is theirs)."""
        devices = parse_devices(spec)
        if len(devices) > 1:
            raise ConfigError(
                "with --engine ray, each worker uses one device: give --ray-gpus-per-worker instead of several devices"
            )
        return devices

    def build(self, spec: Any, options: dict[str, Any], devices: list[str], cache_dir: Path | None) -> Any:
        from embedscope.models.cache import default_cache_dir

        temp = self.temp_dir or (cache_dir or default_cache_dir()) / "ray"
        return RayEncoder(
            spec,
            {**options, "device": devices[0]},
            address=self.address,
            workers=self.workers,
            gpus_per_worker=self.gpus_per_worker,
            temp_dir=temp,
        )


register_engine(RayEngine)
