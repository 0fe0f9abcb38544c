"""An embedding service on 127.0.0.1 that injects faults: the test double of OpenAI, Cohere and Voyage.

:class:`ApiServer` runs an HTTP server in a thread (``http.server``) with the routes the API models call:

* ``POST /v1/embeddings`` — OpenAI's shape (``input``, ``model``, ``dimensions``, ``encoding_format`` float or
  base64; ``usage.prompt_tokens``), and Voyage's when the body has ``input_type`` (``output_dimension``);
* ``POST /v2/embed`` — Cohere's (``texts``, ``input_type``, ``embedding_types``, ``output_dimension``;
  ``meta.billed_units.input_tokens``);
* ``GET /v1/models``.

A vector is a deterministic function of the model, the input type and the text (:func:`fake_vector`), so a test
can check what came back without any model; with ``vectors`` set, OpenAI's route answers with the vectors it
gives for the model named (a real or keyword model served as an API, so scores mean something). Faults are queued (:meth:`ApiServer.fail`) and hit the next requests:
``429`` (with ``Retry-After``), ``500``, ``timeout`` (no answer until the client gave up), ``truncated`` (a JSON body
cut short), ``wrong_count``, ``wrong_dim``, ``nan``, ``drop`` (the connection closed mid-response), ``redirect`` (a
307 to :attr:`ApiServer.redirect_to`), ``401`` (a body that echoes the key, as some services do).

The server records every request (path, texts, headers) and every text it answered, so tests count what was paid
for. ``on_request(n)`` is called as request ``n`` (1-based) arrives, before it is answered (a test kills its client
there); when it returns True the request is dropped unanswered.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("429", "500", "timeout", "truncated", "wrong_count", "wrong_dim", "nan", "drop", "redirect", "401")


def fake_vector(text: str, dim: int, model: str = "", input_type: str = "") -> list[float]:
    """``dim`` floats in [-1, 1) from sha256 of the model, input type and text (float32-exact values)."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        digest = hashlib.sha256(f"{model}\0{input_type}\0{text}\0{counter}".encode()).digest()
        out += [(b - 128) / 128 for b in digest]
        counter += 1
    return out[:dim]


def fake_tokens(text: str) -> int:
    """The tokens the server bills for a text: its words (at least 1)."""
    return max(1, len(text.split()))


@dataclass
class Received:
    """One request as the server read it."""

    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]
    texts: list[str]


@dataclass
class ApiServer:
    """The fault-injecting embedding service (see the module docstring); a context manager that starts and stops it."""

    dim: int = 8
    retry_after: str | None = "0"  # the Retry-After header of a 429 (None: none sent)
    stall: float = 2.0  # how long a ``timeout`` fault keeps the client waiting
    usage: bool = True  # report token usage (else the client must count)
    delay: float = 0.0  # every answer waits this long (throughput tests)
    redirect_to: str = "http://127.0.0.1:9/v1/embeddings"
    on_request: Callable[[int], bool | None] | None = None  # True: drop that request unanswered
    vectors: Callable[[str, list[str]], Any] | None = None  # (model, texts) → real vectors (default: fake_vector's)
    requests: list[Received] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)  # texts answered with vectors, in order
    most_at_once: int = 0  # the most requests the server was answering at one time
    _at_once: int = 0
    _faults: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # -- control ------------------------------------------------------------------------------------

    def fail(self, fault: str, times: int = 1) -> ApiServer:
        """The next ``times`` requests get ``fault`` (after those queued before)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {FAULTS}")
        with self._lock:
            self._faults += [fault] * times
        return self

    @property
    def url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"{self.root}/v1"

    @property
    def root(self) -> str:
        assert self._server is not None, "the server is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def requested(self) -> list[str]:
        """Every text of every request, in order (answered or not)."""
        return [t for r in self.requests for t in r.texts]

    def start(self) -> ApiServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering ----------------------------------------------------------------------------------

    def _next(self, received: Received) -> tuple[int, str | None]:
        with self._lock:
            self.requests.append(received)
            n = len(self.requests)
            fault = self._faults.pop(0) if self._faults else None
        return n, fault

    def answer(self, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The JSON answer of a request and its texts (no fault)."""
        model = str(body.get("model", ""))
        if path.endswith("/embed"):  # Cohere
            texts = list(body["texts"])
            dim = int(body.get("output_dimension") or self.dim)
            vectors = [fake_vector(t, dim, model, str(body.get("input_type", ""))) for t in texts]
            tokens = sum(fake_tokens(t) for t in texts)
            meta = {"billed_units": {"input_tokens": tokens}} if self.usage else {}
            return {"id": "fake", "embeddings": {"float": vectors}, "texts": texts, "meta": meta}, texts
        texts = [body["input"]] if isinstance(body["input"], str) else list(body["input"])
        dim = int(body.get("dimensions") or body.get("output_dimension") or self.dim)
        if self.vectors is not None:
            vectors = [[float(x) for x in row] for row in self.vectors(model, texts)]
        else:
            vectors = [fake_vector(t, dim, model, str(body.get("input_type", ""))) for t in texts]
        b64 = body.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i, "embedding": _b64(v) if b64 else v} for i, v in enumerate(vectors)]
        answer: dict[str, Any] = {"object": "list", "data": data, "model": model}
        if self.usage:
            tokens = sum(fake_tokens(t) for t in texts)
            answer["usage"] = {"prompt_tokens": tokens, "total_tokens": tokens}
        return answer, texts


def _b64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def _texts(path: str, body: dict[str, Any]) -> list[str]:
    raw = body.get("texts") if path.endswith("/embed") else body.get("input")
    return [raw] if isinstance(raw, str) else [str(t) for t in raw or []]


def _spoil(answer: dict[str, Any], fault: str) -> dict[str, Any]:
    """The answer with a content fault: one vector fewer, one dimension more, or a NaN."""
    cohere = "embeddings" in answer
    rows = answer["embeddings"]["float"] if cohere else answer["data"]
    if fault == "wrong_count":
        rows.pop()
        return answer
    for n, row in enumerate(rows):
        vector = row if cohere else row["embedding"]
        if isinstance(vector, str):
            vector = list(struct.unpack(f"<{len(base64.b64decode(vector)) // 4}f", base64.b64decode(vector)))
        vector = vector + [0.5] if fault == "wrong_dim" else [float("nan")] + vector[1:]
        if cohere:
            rows[n] = vector
        else:
            row["embedding"] = _b64(vector) if isinstance(row["embedding"], str) else vector
    return answer


def _handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # headers and body leave in one write (flushed after each request)

        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def _send(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            self._send(200, json.dumps({"object": "list", "data": [{"id": "fake", "object": "model"}]}).encode())

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                self._send(400, b'{"error": {"message": "not JSON"}}')
                return
            received = Received(
                self.path, {k.lower(): v for k, v in self.headers.items()}, body, _texts(self.path, body)
            )
            n, fault = server._next(received)
            with server._lock:
                server._at_once += 1
                server.most_at_once = max(server.most_at_once, server._at_once)
            try:
                self._answer(n, fault, body)
            finally:
                with server._lock:
                    server._at_once -= 1

        def _answer(self, n: int, fault: str | None, body: dict[str, Any]) -> None:
            if server.on_request is not None and server.on_request(n):
                self.close_connection = True  # dropped unanswered
                return
            if server.delay:
                time.sleep(server.delay)
            if fault == "429":
                after = {"Retry-After": server.retry_after} if server.retry_after is not None else {}
                self._send(429, b'{"error": {"message": "Rate limit reached"}}', after)
            elif fault == "500":
                self._send(500, b'{"error": {"message": "internal error"}}')
            elif fault == "401":
                key = self.headers.get("authorization", "").removeprefix("Bearer ")
                self._send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {key}"}}).encode())
            elif fault == "redirect":
                self._send(307, b"", {"Location": server.redirect_to})
            elif fault == "timeout":
                time.sleep(server.stall)
                self.close_connection = True
            elif fault == "drop":
                payload = json.dumps(server.answer(self.path, body)[0]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 3])
                self.wfile.flush()
                self.close_connection = True
            else:
                answer, texts = server.answer(self.path, body)
                payload = json.dumps(_spoil(answer, fault) if fault else answer).encode()
                if fault == "truncated":
                    payload = payload[: len(payload) // 2]
                if fault is None:
                    with server._lock:
                        server.answered.extend(texts)
                self._send(200, payload)

    return Handler
