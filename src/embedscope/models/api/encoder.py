"""An embedding model behind an API: texts go to a service, vectors come back, checked, as they arrive.

:class:`ApiEncoder` is an :class:`~embedscope.models.base.Encoder` whose vector of a text does not depend on the
texts sent with it (``vectors_per_text``), so the embedding cache keeps each text's vector on its own and asks the
encoder only for the texts it lacks (:meth:`ApiEncoder.encode_into`), storing each answer as it arrives: a run
killed at any point loses no text the service answered, and a second run sends no request.

Requests carry at most ``texts_per_request`` texts (else the run's batch size: EvalScope's
``encode_kwargs.batch_size``) and ``tokens_per_request`` estimated tokens; at most ``max_concurrency`` are in flight,
within ``requests_per_minute`` / ``tokens_per_minute``; each times out after ``request_timeout`` seconds, and
throttling (429), the service's failures (5xx), timeouts, dropped connections and unreadable answers are retried
``max_retries`` times with exponential backoff or the wait ``Retry-After`` asks for (the ``openai`` client's own
retries are off). When retries run out, one line says which task, how many texts were answered and that they are kept.
Every answer is checked (one vector per text, one dimension throughout, ``dimensions`` when asked, finite values)
before it is used or cached.

Usage (:meth:`ApiEncoder.api_usage`): requests sent, tokens billed (the service's ``usage``, else estimated), the
requests and tokens the cache spared, request latency p50/p95 and the cost at ``price_per_mtok``.

A ``budget`` (:func:`parse_budget`: tokens, or a spend ``$X`` at ``price_per_mtok``) caps the tokens paid since the
encoder was built. The service counts a request's tokens only once it answers, so before each request the encoder
adds that request's *estimated* tokens (:func:`estimate_tokens`, the count it uses where a service reports none) and
those of the requests in flight to the tokens paid; when the sum would pass the cap it sends nothing more, hands on
the answers in flight and stops with one line (a :class:`~embedscope.errors.SettingError` on ``budget``). The cap is
thus kept as far as the estimate matches the service's count. Texts the cache serves are never sent, so never count.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from embedscope.errors import EmbedscopeError, MissingDependencyError, SettingError
from embedscope.models.api.keys import check_base_url, is_private_host, resolve_key, scrub
from embedscope.models.api.providers import Answer, Provider
from embedscope.models.api.throttle import ApiFailure, RateLimiter, Refused, Transient, classify
from embedscope.models.base import BaseEncoder, prompted_texts
from embedscope.types import Role

logger = logging.getLogger(__name__)

DEFAULT_TEXTS_PER_REQUEST = 32


@dataclass(frozen=True)
class Budget:
    """A cap on what a model behind an API may pay: ``amount`` tokens, or US dollars when ``spend``."""

    amount: float
    spend: bool

    def __str__(self) -> str:
        return f"${self.amount:g}" if self.spend else f"{int(self.amount)} tokens"

    def tokens(self, price_per_mtok: float | None) -> float:
        """The cap in tokens (a spend at ``price_per_mtok``; a price of 0 caps nothing)."""
        if not self.spend:
            return self.amount
        assert price_per_mtok is not None
        return self.amount / price_per_mtok * 1e6 if price_per_mtok > 0 else math.inf


def parse_budget(value: Any) -> Budget:
    """``50000`` (tokens, a whole number) or ``"$0.50"`` (a spend in US dollars); positive and finite, else a
    ValueError.

    >>> parse_budget("50,000"), parse_budget("$0.50"), str(parse_budget(" $0.50 "))
    (Budget(amount=50000.0, spend=False), Budget(amount=0.5, spend=True), '$0.5')
    >>> parse_budget("nan")
    Traceback (most recent call last):
    ...
    ValueError: 'nan': a budget is a positive, finite number of tokens (50000) or a spend in US dollars ('$0.50')
    """
    text = str(value).strip()
    spend = text.startswith("$")
    number = text.removeprefix("$").strip().replace(",", "").replace("_", "")
    problem = ValueError(
        f"{value!r}: a budget is a positive, finite number of tokens (50000) or a spend in US dollars ('$0.50')"
    )
    if isinstance(value, bool) or not number:
        raise problem
    try:
        amount = float(number)
    except ValueError:
        raise problem from None
    if not math.isfinite(amount) or amount <= 0:
        raise problem
    if not spend and not amount.is_integer():
        raise ValueError(f"{value!r}: a budget in tokens is a whole number (a spend starts with $: '$0.50')")
    return Budget(amount, spend)


class ApiError(EmbedscopeError, RuntimeError):
    """An API model's request failed for good (retries ran out, or the service refused it); one line."""


@dataclass(frozen=True)
class ApiOptions:
    """How an API model is reached and paced (the ``model_options`` of the same names)."""

    api_base: str | None = None
    api_key: Any = None  # a str or pydantic SecretStr: never recorded
    api_key_env: str | None = None
    api_key_file: str | None = None
    dimensions: int | None = None
    price_per_mtok: float | None = None
    max_concurrency: int = 4
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    texts_per_request: int | None = None
    tokens_per_request: int | None = None
    request_timeout: float = 60.0
    max_retries: int = 6
    tls_verify: bool = True
    budget: str | None = None  # the run option: tokens or a spend ($X) this model may pay (parse_budget)


API_OPTIONS: tuple[str, ...] = tuple(ApiOptions.__dataclass_fields__)
# options that change neither a vector nor the service asked (the fingerprint has base URL, model and dimensions)
TRANSPORT_OPTIONS: tuple[str, ...] = tuple(o for o in API_OPTIONS if o != "dimensions")


def estimate_tokens(text: str) -> int:
    """A text's tokens where the service reports none: one per 4 bytes of UTF-8, at least 1 (OpenAI's rule of thumb).

    >>> estimate_tokens("hello world!"), estimate_tokens("")
    (3, 1)
    """
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


def request_groups(tokens: Sequence[int], texts_per_request: int, tokens_per_request: int | None) -> list[list[int]]:
    """Consecutive texts grouped into requests of at most ``texts_per_request`` texts and ``tokens_per_request``
    tokens (a text over the token limit goes alone).

    >>> request_groups([5, 5, 5, 20, 1], 3, 12)
    [[0, 1], [2], [3], [4]]
    """
    groups: list[list[int]] = []
    current: list[int] = []
    used = 0
    for i, n in enumerate(tokens):
        full = len(current) >= texts_per_request or (tokens_per_request is not None and used + n > tokens_per_request)
        if current and full:
            groups.append(current)
            current, used = [], 0
        current.append(i)
        used += n
    if current:
        groups.append(current)
    return groups


class Usage:
    """What the service was asked and spared, thread-safe (see :meth:`ApiEncoder.api_usage`)."""

    def __init__(self) -> None:
        self.requests = 0
        self.tokens = 0
        self.avoided_requests = 0
        self.avoided_tokens = 0
        self.latencies_ms: list[float] = []
        self.lock = threading.Lock()

    def record(self, price_per_mtok: float | None) -> dict[str, Any]:
        with self.lock:
            latencies = np.asarray(self.latencies_ms, dtype=np.float64)
            p50, p95 = (float(np.percentile(latencies, q)) for q in (50, 95)) if len(latencies) else (None, None)
            return {
                "requests": self.requests,
                "tokens": self.tokens,
                "avoided_requests": self.avoided_requests,
                "avoided_tokens": self.avoided_tokens,
                "latency_p50_ms": p50,
                "latency_p95_ms": p95,
                "cost": self.tokens / 1e6 * price_per_mtok if price_per_mtok is not None else None,
            }


class ApiEncoder(BaseEncoder):
    """``provider``'s model ``model`` as an encoder (see the module docstring)."""

    backend = "api"
    vectors_per_text = True  # the embedding cache keeps each text's vector alone (embedscope.models.cache)
    supported_dtypes = ("float32",)
    backoff = 0.5  # seconds before the first retry; doubled each time (with jitter), up to max_backoff
    max_backoff = 60.0

    def __init__(
        self,
        provider: Provider,
        model: str,
        options: ApiOptions,
        *,
        prompts: dict[str, str] | None = None,
        query_prompt: str | None = None,
        revision: str | None = None,
    ) -> None:
        if not model:
            raise SettingError("model", f"{provider.name}: give the model name, e.g. {{model}} {provider.name}:NAME")
        self.provider = provider
        self.backend = f"{provider.name}-api"
        self.model = model
        self.options = options
        self.base_url = check_base_url(options.api_base or provider.base_url)
        host = urlsplit(self.base_url).hostname or "api"
        self._key = resolve_key(options.api_key, options.api_key_file, options.api_key_env, provider.key_env)
        if self._key is None and not is_private_host(host):
            raise SettingError(
                "model_options.api_key_env",
                f"{provider.name}:{model}: no API key: set ${provider.key_env}, or name another variable with "
                "{model_options.api_key_env} or a file with {model_options.api_key_file}",
            )
        self.name = f"{provider.name}/{model.strip('/').replace('/', '__')}"
        self.revision = revision or host
        self.source = f"{provider.name} API at {self.base_url}"
        self.prompts = dict(prompts or {})
        if query_prompt:
            self.prompts["query"] = query_prompt
        self.embed_dim = options.dimensions
        self._place("cpu", None)
        self.usage = Usage()
        self.limiter = RateLimiter(options.requests_per_minute, options.tokens_per_minute)
        self.budget = parse_budget(options.budget) if options.budget is not None else None
        if self.budget is not None and self.budget.spend and options.price_per_mtok is None:
            raise SettingError(
                "budget",
                f"{{budget}} {self.budget} is a spend: give {{model_options.price_per_mtok}} too (none is built in), "
                "or a budget in tokens",
            )
        self._client: Any = None
        self._client_lock = threading.Lock()

    # -- identity -----------------------------------------------------------------------------------

    def thread_budget(self) -> dict[str, Any]:
        """No runtime of its own: its compute threads are a service's, which it cannot see."""
        return {}

    def settings(self) -> dict[str, Any]:
        """What decides a vector: provider, base URL, model, dimensions, the input types roles map to (never the key)."""
        return {
            "backend": "api",
            "provider": self.provider.name,
            "base_url": self.base_url,
            "model": self.model,
            "dimensions": self.options.dimensions,
            "input_types": dict(self.provider.input_types),
        }

    def __repr__(self) -> str:
        return f"ApiEncoder(name={self.name!r}, base_url={self.base_url!r})"

    def api_usage(self) -> dict[str, Any]:
        """``requests`` sent (retries included), ``tokens`` billed (the service's count, else estimated),
        ``avoided_requests`` / ``avoided_tokens`` (estimated) that the embedding cache spared, ``latency_p50_ms`` /
        ``latency_p95_ms`` of the answered requests (None before any), ``cost`` = tokens / 1e6 × ``price_per_mtok``
        (None without a price)."""
        return self.usage.record(self.options.price_per_mtok)

    # -- the client -----------------------------------------------------------------------------------

    def client(self) -> Any:
        """The ``openai`` client for this base URL (made on first use: a warm run makes none): its own retries off,
        redirects not followed, TLS verified unless ``tls_verify`` is off, proxies from the environment only for
        public hosts."""
        with self._client_lock:
            if self._client is None:
                try:
                    import openai
                except ImportError:
                    raise MissingDependencyError("openai", "An API model (pip install 'embedscope[api]')") from None
                private = is_private_host(urlsplit(self.base_url).hostname or "")
                http = openai.DefaultHttpxClient(
                    verify=self.options.tls_verify, follow_redirects=False, trust_env=not private
                )
                self._client = openai.OpenAI(
                    api_key=self._key or "none",
                    base_url=self.base_url,
                    max_retries=0,
                    timeout=self.options.request_timeout,
                    http_client=http,
                )
            return self._client

    # -- encoding -------------------------------------------------------------------------------------

    def _encode(self, texts: list[str], role: Role, batch_size: int, show_progress: bool) -> np.ndarray:
        """Without the cache: every distinct text requested once, the vectors in the texts' order."""
        unique = list(dict.fromkeys(texts))
        out: list[np.ndarray | None] = [None] * len(unique)

        def keep(idx: Sequence[int], vectors: np.ndarray) -> None:
            for i, v in zip(idx, vectors):
                out[i] = v

        self.encode_into(unique, role=role, sink=keep, batch_size=batch_size, show_progress=show_progress)
        where = {t: i for i, t in enumerate(unique)}
        return np.stack([out[where[t]] for t in texts])  # type: ignore[misc]

    def note_cached(self, texts: Sequence[str], *, role: Role, batch_size: int | None = None) -> None:
        """Count the requests and tokens that ``texts``, served by the cache, would have cost."""
        if not texts:
            return
        tokens = [estimate_tokens(t) for t in prompted_texts(texts, role, self.prompts)]
        groups = request_groups(tokens, self._texts_per_request(batch_size), self.options.tokens_per_request)
        with self.usage.lock:
            self.usage.avoided_requests += len(groups)
            self.usage.avoided_tokens += sum(tokens)

    def _texts_per_request(self, batch_size: int | None) -> int:
        return self.options.texts_per_request or batch_size or DEFAULT_TEXTS_PER_REQUEST

    def encode_into(
        self,
        texts: Sequence[str],
        *,
        role: Role,
        sink: Callable[[Sequence[int], np.ndarray], None],
        batch_size: int | None = None,
        show_progress: bool = False,
        kept: bool = False,
    ) -> None:
        """Request the vectors of ``texts`` (distinct) and hand each answer to ``sink(indices, vectors)`` in this
        thread as it arrives. When a request fails for good, the requests in flight are still awaited and handed
        on, then :class:`ApiError` says how many texts were answered (``kept``: and stored by the caller)."""
        from embedscope.progress import bar_label

        prompted = prompted_texts(texts, role, self.prompts)
        tokens = [estimate_tokens(t) for t in prompted]
        groups = request_groups(tokens, self._texts_per_request(batch_size), self.options.tokens_per_request)
        bar = self._bar(bar_label(role, len(texts))) if show_progress else None
        if bar is not None:
            bar.reset(total=len(texts))
        pending = iter(groups)
        inflight: dict[Future[Answer], list[int]] = {}
        reserved: dict[Future[Answer], int] = {}  # the estimated tokens of each request in flight
        failure: ApiFailure | None = None
        stopped = False  # the budget would be passed by the next request
        done = 0
        with ThreadPoolExecutor(self.options.max_concurrency, thread_name_prefix="embedscope-api") as pool:

            def submit() -> None:
                nonlocal stopped
                while len(inflight) < self.options.max_concurrency:
                    group = next(pending, None)
                    if group is None:
                        return
                    estimate = sum(tokens[i] for i in group)
                    if self._over_budget(estimate + sum(reserved.values())):
                        stopped = True
                        return
                    batch = [prompted[i] for i in group]
                    future = pool.submit(self._request, batch, role, estimate)
                    inflight[future], reserved[future] = group, estimate

            submit()
            while inflight:
                finished, _ = wait(list(inflight), return_when=FIRST_COMPLETED)
                for future in finished:
                    group = inflight.pop(future)
                    reserved.pop(future, None)
                    try:
                        vectors = self._checked(future.result(), len(group))
                    except ApiFailure as e:
                        failure = failure or e
                        continue
                    sink(group, vectors)
                    done += len(group)
                    if bar is not None:
                        self._show(bar, len(group))
                if failure is None and not stopped:
                    submit()
        if bar is not None:
            bar.close()
        if failure is not None:
            raise self._error(failure, bar_label(role, len(texts)), done, len(texts), kept) from None
        if stopped:
            raise self._budget_reached(kept)

    def _over_budget(self, tokens: int) -> bool:
        """Whether paying ``tokens`` more (estimated) could pass the budget."""
        if self.budget is None:
            return False
        with self.usage.lock:
            paid = self.usage.tokens
        return paid + tokens > self.budget.tokens(self.options.price_per_mtok)

    def _budget_reached(self, kept: bool) -> SettingError:
        usage = self.api_usage()
        paid = f"{usage['tokens']:,} tokens paid in this run ({usage['requests']:,} requests)"
        if self.budget is not None and self.budget.spend:
            paid = f"${usage['cost']:.4f} paid in this run ({usage['tokens']:,} tokens, {usage['requests']:,} requests)"
        if kept:
            fate = "the cache keeps them, so a rerun with a higher {budget} pays only for the rest"
        else:
            fate = "the embedding cache is off, so a rerun pays for them again"
        return SettingError("budget", f"{{budget}} {self.budget} reached: {paid}; {fate}")

    def _bar(self, label: str) -> Any:
        from tqdm.auto import tqdm

        return tqdm(desc=f"{label} [{self.provider.name} API]", unit="text")

    def _show(self, bar: Any, n: int) -> None:
        usage = self.api_usage()
        cost = f", ${usage['cost']:.4f}" if usage["cost"] is not None else ""
        bar.set_postfix_str(f"{usage['tokens']:,} tokens{cost}", refresh=False)
        bar.update(n)

    def _error(self, failure: ApiFailure, label: str, done: int, total: int, kept: bool) -> ApiError:
        what = "after its retries ran out" if isinstance(failure, Transient) else "refused, not retried"
        if not done:
            fate = f"none of the {total:,} texts was answered"
        elif kept:
            fate = (
                f"{done:,} of {total:,} texts were answered, kept in the embedding cache: a re-run requests only the "
                f"{total - done:,} others"
            )
        else:
            fate = f"{done:,} of {total:,} texts were answered, not kept (the embedding cache is off)"
        return ApiError(scrub(f"{label}: {self.name} at {self.base_url}: {failure.reason}, {what}; {fate}", self._key))

    # -- one request ----------------------------------------------------------------------------------

    def _request(self, texts: list[str], role: Role, tokens: int) -> Answer:
        """One request, retried (in a worker thread)."""
        for attempt in range(self.options.max_retries + 1):
            self.limiter.acquire(tokens)
            with self.usage.lock:
                self.usage.requests += 1
            client = self.client()
            started = time.perf_counter()
            try:
                answer = self.provider.call(client, self.model, texts, role, self.options.dimensions)
            except Exception as e:
                failure = classify(e, lambda text: scrub(text, self._key))
                if isinstance(failure, Refused) or attempt == self.options.max_retries:
                    raise failure from None
                wait_s = self._wait(failure, attempt)
                logger.info("%s: %s; retrying in %.1f s", self.name, failure.reason, wait_s)
                time.sleep(wait_s)
                continue
            with self.usage.lock:
                self.usage.latencies_ms.append((time.perf_counter() - started) * 1000)
                self.usage.tokens += answer.tokens if answer.tokens is not None else tokens
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait(self, failure: ApiFailure, attempt: int) -> float:
        """``Retry-After`` when the service gave one, else exponential backoff with jitter."""
        if failure.retry_after is not None:
            return min(failure.retry_after, 600.0)
        return min(self.max_backoff, self.backoff * 2**attempt) * random.uniform(0.75, 1.25)

    def _checked(self, answer: Answer, count: int) -> np.ndarray:
        """The answer's vectors as float32 ``[count, dim]``, or :class:`Refused`: a vector per text, one dimension
        (``dimensions`` when asked, else the first answer's), every value finite."""
        if len(answer.vectors) != count:
            raise Refused(f"the service answered {len(answer.vectors)} vectors for {count} texts")
        try:
            vectors = np.asarray(answer.vectors, dtype=np.float32)
        except (ValueError, TypeError):
            raise Refused("the service answered vectors of different lengths in one answer") from None
        if vectors.ndim != 2 or vectors.shape[1] == 0:
            raise Refused(f"the service answered an array of shape {vectors.shape}, not one vector per text")
        expected = self.options.dimensions or self.embed_dim
        if expected is not None and vectors.shape[1] != expected:
            asked = "asked for" if self.options.dimensions else "of its earlier answers"
            raise Refused(f"the service answered {vectors.shape[1]}-d vectors, not the {expected} {asked}")
        if not np.isfinite(vectors).all():
            raise Refused("the service answered a vector with NaN or infinity")
        self.embed_dim = vectors.shape[1]
        return vectors
