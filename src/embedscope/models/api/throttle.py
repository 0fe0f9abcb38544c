"""Throughput without abuse: a rate limit in requests and tokens per minute, and retries that honour ``Retry-After``.

What a request can end in is one of two failures: :class:`Transient` (429, 5xx, 408/409, a timeout, a dropped
connection, an unreadable body: retried with backoff, or after the ``Retry-After`` the service gave) or
:class:`Refused` (any other status, an answer with the wrong count, dimension or a NaN: not retried, since the same
request would get the same answer and be paid for again).

>>> limiter = RateLimiter(requests_per_minute=2, tokens_per_minute=None)
>>> limiter.wait_time(10, now=0.0), limiter.take(10, now=0.0), limiter.take(10, now=1.0)
(0.0, None, None)
>>> limiter.wait_time(10, now=2.0)
58.0
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any


class ApiFailure(Exception):
    """A request that did not give vectors; ``reason`` is one line (no key in it)."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class Transient(ApiFailure):
    """Worth retrying: throttled, the service's own failure, a timeout, a dropped connection, an unreadable body."""


class Refused(ApiFailure):
    """Not worth retrying: the same request gets the same answer."""


RETRIED_STATUS = (408, 409, 429)


def retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``; None when absent.

    >>> retry_after({"retry-after": "2"}), retry_after({"retry-after-ms": "250"}), retry_after({})
    (2.0, 0.25, None)
    """
    if headers is None:
        return None
    get = getattr(headers, "get", None)
    if get is None:
        return None
    millis = get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, parsed.timestamp() - time.time()) if parsed is not None else None


def classify(error: BaseException, scrub: Any) -> ApiFailure:
    """An exception of the ``openai`` client (or of reading a body) as :class:`Transient` or :class:`Refused`;
    ``scrub`` takes the key out of the service's message."""
    import openai

    if isinstance(error, ApiFailure):
        return error
    if isinstance(error, openai.APITimeoutError):
        return Transient("the request timed out")
    if isinstance(error, openai.APIConnectionError):
        return Transient(f"the connection failed ({type(error.__cause__ or error).__name__})")
    if isinstance(error, openai.APIStatusError):
        status = error.status_code
        if status in (401, 403):  # services echo (part of) the key: say nothing of the body
            return Refused(f"HTTP {status}: the service refused the key (check api_key_env / api_key_file)")
        if 300 <= status < 400:
            return Refused(f"HTTP {status}: a redirect, not followed (the key goes to the configured base URL only)")
        body = error.body if isinstance(error.body, dict) else {}
        message = scrub(" ".join(str(body.get("message") or error.message or "").split()))[:200]
        failure = Transient if status in RETRIED_STATUS or status >= 500 else Refused
        return failure(f"HTTP {status} ({message})", retry_after(getattr(error.response, "headers", None)))
    if isinstance(error, (ValueError, KeyError, TypeError, IndexError)):  # a truncated or malformed body
        return Transient(f"an unreadable answer ({type(error).__name__})")
    raise error


class RateLimiter:
    """At most ``requests_per_minute`` requests and ``tokens_per_minute`` tokens in any 60 seconds (a sliding
    window); a request bigger than the token limit goes alone. Thread-safe."""

    WINDOW = 60.0

    def __init__(
        self,
        requests_per_minute: int | None,
        tokens_per_minute: int | None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rpm = requests_per_minute
        self.tpm = tokens_per_minute
        self.clock, self.sleep = clock, sleep
        self._sent: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def wait_time(self, tokens: int, now: float) -> float:
        """Seconds until a request of ``tokens`` may go (0: now)."""
        while self._sent and self._sent[0][0] <= now - self.WINDOW:
            self._sent.popleft()
        if not self._sent:
            return 0.0
        waits = [0.0]
        if self.rpm is not None and len(self._sent) >= self.rpm:
            waits.append(self._sent[len(self._sent) - self.rpm][0] + self.WINDOW - now)
        if self.tpm is not None:
            used = sum(t for _, t in self._sent)
            freed = 0
            for sent, t in self._sent:  # the oldest go first: wait until enough has left the window
                if used - freed + tokens <= self.tpm:
                    break
                freed += t
                waits.append(sent + self.WINDOW - now)
        return max(waits)

    def take(self, tokens: int, now: float) -> None:
        self._sent.append((now, tokens))

    def acquire(self, tokens: int) -> None:
        """Block until a request of ``tokens`` may go, and count it."""
        if self.rpm is None and self.tpm is None:
            return
        while True:
            with self._lock:
                now = self.clock()
                wait = self.wait_time(tokens, now)
                if wait <= 0:
                    self.take(tokens, now)
                    return
            self.sleep(min(wait, 5.0))
