"""A fake encoder served "by an API": :class:`~embedscope.testing.fakes.KeywordEncoder`'s vectors, with the usage an
API encoder reports (``api_usage()``): one request per batch, a token per word, latencies from a fixed list, spend
from ``price_per_mtok``."""

from __future__ import annotations

from typing import Any

import numpy as np

from embedscope.testing.fakes import KeywordEncoder
from embedscope.types import Role


class MeteredEncoder(KeywordEncoder):
    """KeywordEncoder that counts what a service would bill; ``latencies_ms`` cycles as the requests' latencies."""

    def __init__(self, keywords: list[str], price_per_mtok: float | None = None, name: str = "api/metered") -> None:
        super().__init__(keywords, name=name)
        self.price_per_mtok = price_per_mtok
        self.requests = 0
        self.tokens = 0
        self.latencies: list[float] = []

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        for start in range(0, len(texts), batch_size):
            self.requests += 1
            self.tokens += sum(len(t.split()) for t in texts[start : start + batch_size])
            self.latencies.append(float(10 + len(self.latencies) % 7))
        return super()._encode(texts, role, batch_size, show_progress)

    def api_usage(self) -> dict[str, Any]:
        lat = self.latencies
        return {
            "requests": self.requests,
            "tokens": self.tokens,
            "avoided_requests": 0,
            "avoided_tokens": 0,
            "latency_p50_ms": float(np.percentile(lat, 50)) if lat else None,
            "latency_p95_ms": float(np.percentile(lat, 95)) if lat else None,
            "cost": None if self.price_per_mtok is None else self.tokens * self.price_per_mtok / 1e6,
        }
