"""An in-process ``/rerank`` service (Cohere/Jina/TEI/infinity shape) on 127.0.0.1 with deterministic scores and
faults on demand, for the API reranker's tests.

Scores are :func:`overlap_score` (the share of a document's distinct words that occur in the query), so a test
computes the expected scores directly. ``faults`` is a list the server consumes one per request: ``429`` (with
``Retry-After: 0``), ``500``, ``drop`` (the connection closed without an answer), ``slow`` (answers after
``slow_s``), ``truncated`` (half a JSON body), ``count`` (one score missing), ``nan`` (a NaN score), ``401``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def overlap_score(query: str, document: str) -> float:
    """|words(query) ∩ words(document)| / (1 + |words(document)|), words lower-cased ``\\w+``."""
    q = set(re.findall(r"\w+", query.lower()))
    d = set(re.findall(r"\w+", document.lower()))
    return len(q & d) / (1 + len(d))


@dataclass
class RerankService:
    """What the server saw and what it will do next."""

    url: str = ""
    faults: list[str] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    with_usage: bool = True
    slow_s: float = 1.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_fault(self) -> str | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None


def _handler(service: RerankService) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            if not self.path.endswith("/rerank"):
                self._send(404, b'{"error": "not found"}')
                return
            fault = service.next_fault()
            with service.lock:
                service.requests.append({**body, "fault": fault})
                service.headers.append(dict(self.headers))
            if fault == "429":
                self._send(429, b'{"error": "slow down"}', {"Retry-After": "0"})
                return
            if fault in ("500", "401"):
                self._send(int(fault), b'{"error": "injected"}')
                return
            if fault == "drop":
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if fault == "slow":
                time.sleep(service.slow_s)
            docs = body["documents"]
            results = [{"index": i, "relevance_score": overlap_score(body["query"], d)} for i, d in enumerate(docs)]
            results.sort(key=lambda r: -r["relevance_score"])  # services answer best first
            results = results[: body.get("top_n") or len(results)]
            if fault == "count":
                results = results[:-1]
            if fault == "nan":
                results[0]["relevance_score"] = float("nan")
            answer: dict[str, Any] = {"results": results, "model": body["model"]}
            if service.with_usage:
                words = sum(len(t.split()) for t in [body["query"], *docs])
                answer["usage"] = {"prompt_tokens": 2 * words, "total_tokens": 2 * words}
            data = json.dumps(answer).encode()
            self._send(200, data[: len(data) // 2] if fault == "truncated" else data)

    return Handler


@contextmanager
def rerank_server() -> Iterator[RerankService]:
    """A running fake ``/rerank`` service; its base URL is ``service.url`` (``http://127.0.0.1:PORT/v1``)."""
    service = RerankService()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(service))
    server.daemon_threads = True
    service.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
