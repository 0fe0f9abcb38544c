"""Rerankers behind an API: a service's ``/rerank`` route (Cohere, Jina, Hugging Face TEI, infinity) scores
(query, document) pairs as a cross-encoder does.

A request is ``POST {api_base}/rerank`` with ``{"model", "query", "documents": [...], "top_n", "return_documents":
false}``; the answer is ``{"results": [{"index", "relevance_score"}, ...]}`` (one per document, any order) and, where
the service gives it, ``usage.total_tokens`` (Jina, infinity) — else the tokens are estimated as one per 4 bytes of
UTF-8 of the query and each document sent (OpenAI's rule of thumb). Each query's candidates go in requests of at most
``texts_per_request`` documents, ``max_concurrency`` requests at a time. 429 and 5xx answers, timeouts and dropped connections are retried with
exponential backoff (``Retry-After`` honoured); when the retries run out, one error says which request failed and how
many queries were scored. The key is read from the environment variable ``api_key_env`` (or given as is); it is sent
only to ``api_base`` (redirects are not followed) and appears in no name, fingerprint or record.

>>> r = ApiReranker("rerank-v1", "http://127.0.0.1:9/v1")
>>> r.name, r.api_usage()["requests"]
('rerank-v1', 0)
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from embedscope.errors import ConfigError, MissingDependencyError
from embedscope.models.api.encoder import estimate_tokens  # the API encoder's count where a service gives none
from embedscope.models.api.keys import is_private_host  # the API encoder's rule: plain http only to these
from embedscope.models.api.throttle import retry_after
from embedscope.models.base import ModelBase
from embedscope.retrieval.base import SearchOptions
from embedscope.types import Corpus, Queries, RankedRun

logger = logging.getLogger(__name__)

RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class ApiRerankError(ConfigError):
    """A ``/rerank`` request failed for good, or its answer cannot be used (one line: which, where, what was done)."""


def check_base_url(api_base: str, what: str) -> str:
    """``api_base`` without a trailing slash; a ConfigError unless it is an http(s) URL with a host; a warning for
    plain http to a public host (the key and the texts would travel unencrypted)."""
    parts = urlsplit(api_base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{what}: api_base {api_base!r} is not an http:// or https:// URL with a host")
    if parts.scheme == "http" and not is_private_host(parts.hostname):
        logger.warning(
            "%s: api_base %s is plain http to a public host: the key and texts are not encrypted", what, api_base
        )
    return api_base.rstrip("/")


def _secret(value: Any) -> str:
    """The key itself, from a str or pydantic's ``SecretStr`` (EvalScope's ``api_key`` as given)."""
    while callable(getattr(value, "get_secret_value", None)):
        value = value.get_secret_value()
    return str(value)


class ApiReranker(ModelBase):
    """Scores (query, document) pairs with a service's ``/rerank`` route.

    Args:
        model: the service's model name.
        api_base: the base URL (``https://api.example.com/v1``); requests go to ``{api_base}/rerank``.
        api_key_env: the environment variable holding the key (none: no key is sent).
        api_key_file: a file holding the key (its first line).
        api_key: the key itself (EvalScope's ``api_key`` as given); ``api_key_env`` or ``api_key_file`` is preferred.
        name: what results are filed under (default: the model name's last part).
        texts_per_request: documents per request (default 100).
        max_concurrency: requests in flight at once (default 4).
        request_timeout: seconds for one request (default 60).
        max_retries: retries of a request after a 429, 5xx, timeout or dropped connection (default 6).
        price_per_mtok: the price of a million tokens (the spend is reported when given).
        tls_verify: TLS certificate verification (default on; turn it off explicitly only).
    """

    backend = "api-rerank"

    def __init__(
        self,
        model: str,
        api_base: str,
        *,
        api_key_env: str | None = None,
        api_key_file: str | None = None,
        api_key: Any = None,
        name: str | None = None,
        texts_per_request: int = 100,
        max_concurrency: int = 4,
        request_timeout: float = 60.0,
        max_retries: int = 6,
        price_per_mtok: float | None = None,
        tls_verify: bool = True,
        backoff_s: float = 0.5,
    ) -> None:
        what = f"api-rerank {model}"
        self.model = str(model)
        self.api_base = check_base_url(str(api_base), what)
        key = None if api_key is None else _secret(api_key)
        if api_key_env:
            key = os.environ.get(str(api_key_env))
            if not key:
                raise ConfigError(f"{what}: api_key_env: the environment variable {api_key_env} is not set")
        if api_key_file:
            try:
                key = Path(api_key_file).expanduser().read_text(encoding="utf-8").strip().splitlines()[0].strip()
            except (OSError, IndexError, UnicodeDecodeError):
                raise ConfigError(f"{what}: api_key_file {api_key_file}: cannot read a key from it") from None
        self._key = key
        self.name = name or self.model.rstrip("/").rsplit("/", 1)[-1]
        self.revision = "api"
        self.texts_per_request, self.max_concurrency = int(texts_per_request), int(max_concurrency)
        self.request_timeout, self.max_retries = float(request_timeout), int(max_retries)
        self.backoff_s, self.tls_verify = float(backoff_s), bool(tls_verify)
        self.price_per_mtok = None if price_per_mtok is None else float(price_per_mtok)
        self._lock = threading.Lock()
        self._requests = 0
        self._tokens = 0
        self._latencies_ms: list[float] = []

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "api_base": self.api_base}

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "api_base": self.api_base, "engine": "api"}

    # -- use ------------------------------------------------------------------------------------

    def api_usage(self) -> dict[str, Any]:
        """Requests, tokens, request latency (p50/p95 ms, ``numpy.percentile``) and spend since it was built
        (nothing is cached: ``avoided_*`` are 0)."""
        with self._lock:
            latencies, requests, tokens = list(self._latencies_ms), self._requests, self._tokens
        p50, p95 = (float(np.percentile(latencies, q)) for q in (50, 95)) if latencies else (None, None)
        cost = None if self.price_per_mtok is None else tokens * self.price_per_mtok / 1e6
        return {
            "requests": requests,
            "tokens": tokens,
            "avoided_requests": 0,
            "avoided_tokens": 0,
            "latency_p50_ms": p50,
            "latency_p95_ms": p95,
            "cost": cost,
        }

    # -- scoring --------------------------------------------------------------------------------

    def _client(self) -> Any:
        try:
            import httpx
        except ImportError as e:  # pragma: no cover - httpx comes with the api extra (openai depends on it)
            raise MissingDependencyError("httpx", "api-rerank stages") from e
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        return httpx.Client(
            headers=headers,
            timeout=self.request_timeout,
            verify=self.tls_verify,
            follow_redirects=False,
            trust_env=False,
        )

    def _post(self, client: Any, query: str, documents: list[str], where: str) -> np.ndarray:
        """One request's scores, in the order of ``documents``; retried as the module docstring says."""
        import httpx

        body = {"model": self.model, "query": query, "documents": documents, "top_n": len(documents)}
        body["return_documents"] = False
        problem = ""
        for attempt in range(self.max_retries + 1):
            wait = self.backoff_s * 2**attempt
            started = time.perf_counter()
            try:
                response = client.post(f"{self.api_base}/rerank", json=body)
            except httpx.TimeoutException:
                problem = f"no answer within {self.request_timeout:g} s"
            except httpx.TransportError as e:
                problem = f"connection failed ({type(e).__name__})"
            else:
                elapsed = 1000 * (time.perf_counter() - started)
                if response.status_code in RETRIED_STATUS:
                    problem = f"HTTP {response.status_code}"
                    wait = max(wait, retry_after(response.headers) or 0.0)
                elif response.status_code >= 400:
                    raise ApiRerankError(f"{where}: HTTP {response.status_code} {_brief(response.text)}")
                else:
                    scores, tokens = self._parse(response, query, documents, where)
                    with self._lock:
                        self._requests += 1
                        self._tokens += tokens
                        self._latencies_ms.append(elapsed)
                    return scores
            if attempt < self.max_retries:
                logger.info("%s: %s; retrying in %.1f s", where, problem, wait)
                time.sleep(wait)
        raise ApiRerankError(f"{where}: {problem} after {self.max_retries + 1} attempts")

    def _parse(self, response: Any, query: str, documents: list[str], where: str) -> tuple[np.ndarray, int]:
        try:
            data = response.json()
            results = data["results"]
            scores = np.full(len(documents), np.nan)
            for item in results:
                scores[int(item["index"])] = float(item["relevance_score"])
        except (ValueError, KeyError, TypeError, IndexError) as e:
            raise ApiRerankError(f"{where}: the answer is not a /rerank answer ({type(e).__name__}: {e})") from None
        if len(results) != len(documents) or not np.isfinite(scores).all():
            raise ApiRerankError(
                f"{where}: {len(documents)} documents sent, {len(results)} scores returned "
                f"({int(np.isfinite(scores).sum())} finite, one per document needed)"
            )
        usage = data.get("usage") if isinstance(data, dict) else None
        tokens = usage.get("total_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int):
            tokens = sum(estimate_tokens(t) for t in [query, *documents])
        return scores, tokens

    def score_queries(self, pairs: Sequence[tuple[str, list[str]]], show_progress: bool = False) -> list[np.ndarray]:
        """Each query's scores for its documents (float64, in order)."""
        jobs = [
            (q, start, docs[start : start + self.texts_per_request])
            for q, (_, docs) in enumerate(pairs)
            for start in range(0, len(docs), self.texts_per_request)
        ]
        out = [np.zeros(len(docs)) for _, docs in pairs]
        done = [0]

        def one(job: tuple[int, int, list[str]]) -> None:
            q, start, docs = job
            where = f"{self.name} at {self.api_base}/rerank, query {q + 1} of {len(pairs)}"
            try:
                out[q][start : start + len(docs)] = self._post(client, pairs[q][0], docs, where)
            except ApiRerankError as e:
                raise ApiRerankError(f"{e} ({done[0]} of {len(jobs)} requests had been answered)") from None
            with self._lock:
                done[0] += 1

        with self._client() as client, ThreadPoolExecutor(max(1, self.max_concurrency)) as pool:
            for future in [pool.submit(one, job) for job in jobs]:
                future.result()
        return out

    def score_candidates(
        self, queries: Queries, corpus: Corpus, candidates: RankedRun, options: SearchOptions
    ) -> np.ndarray:
        out = np.full(candidates.doc_index.shape, -np.inf)
        rows = [np.nonzero(candidates.doc_index[r] >= 0)[0] for r in range(len(queries))]
        pairs = [
            (queries.texts[r], [corpus.texts[i] for i in candidates.doc_index[r, cols]]) for r, cols in enumerate(rows)
        ]
        for r, (cols, scores) in enumerate(zip(rows, self.score_queries(pairs, options.show_progress))):
            out[r, cols] = scores
        return out


def _brief(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "…"


def reranker_from_spec(options: Mapping[str, Any]) -> ApiReranker:
    """An :class:`ApiReranker` from a stage's options: ``model`` as ``MODEL@BASE_URL`` or with ``api_base``."""
    options = dict(options)
    model = str(options.pop("model", "") or "")
    if "@" in model and "api_base" not in options:
        model, _, options["api_base"] = model.partition("@")
    if not model or not options.get("api_base"):
        raise ConfigError(
            "api-rerank stage needs a model and a base URL (api-rerank:MODEL@BASE_URL or "
            "{type: api-rerank, model: MODEL, api_base: URL, api_key_env: VAR})"
        )
    return ApiReranker(model, **options)
