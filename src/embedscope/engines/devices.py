"""Several devices on one machine: one model replica per device, planned batches shared out.

Each replica runs in its own thread (torch releases the GIL while a device computes); a worker
takes the next planned batch as soon as it is free, and vectors come back in plan order. The
batches are the single-device batches, so the vectors are the single-device vectors (on the
same hardware).

>>> from embedscope.testing.fakes import KeywordEncoder
>>> enc = DeviceShards([KeywordEncoder(["cat"]), KeywordEncoder(["cat"])])
>>> enc.encode(["cat", "a cat cat", "dog"], role="query", batch_size=1).ravel().tolist()
[1.0, 2.0, 0.0]
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from embedscope.errors import ConfigError
from embedscope.models.base import encoder_identity
from embedscope.models.planned import PlannedEncoder
from embedscope.types import Role


class DeviceShards(PlannedEncoder):
    """Encode calls spread over model replicas on several devices (``--device cuda:0,cuda:1``)."""

    engine = "devices"

    def __init__(self, replicas: Sequence[Any]) -> None:
        if not replicas:
            raise ConfigError("several devices need at least one model replica")
        infos = [encoder_identity(r) for r in replicas]
        if len({i["fingerprint"] for i in infos}) > 1:
            raise ConfigError(
                "the replicas differ ("
                + ", ".join(f"{i['device']}" for i in infos)
                + "): several devices must be of one kind and hold the same model"
            )
        super().__init__(infos[0])
        self.replicas = list(replicas)
        self.device = ",".join(i["device"] for i in infos)

    def _plan(self, lengths: list[int], batch_size: int) -> list[list[int]]:
        return self.replicas[0].batch_plan(lengths, batch_size)

    def _run(self, batches: list[list[str]], role: Role) -> Iterator[np.ndarray]:
        results: list[Future] = [Future() for _ in batches]
        next_batch = iter(range(len(batches)))
        lock = threading.Lock()
        stop = threading.Event()

        def work(replica: Any) -> None:
            while not stop.is_set():
                with lock:
                    b = next(next_batch, None)
                if b is None:
                    return
                try:
                    results[b].set_result(replica.encode_batch(batches[b], role=role))
                except BaseException as e:  # handed to the consumer, which re-raises it
                    results[b].set_exception(e)
                    stop.set()

        threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in self.replicas]
        for t in threads:
            t.start()
        try:
            for future in results:
                yield future.result()
        finally:
            stop.set()
            for future in results:
                future.cancel()
            for t in threads:
                t.join()
