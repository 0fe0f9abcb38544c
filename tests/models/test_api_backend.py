"""Models behind an API against the fault-injecting test service (tests/support/api_server.py): the vectors are the
service's, requests are sized, bounded and retried, every answer is cached as it arrives, and the key stays put."""

from __future__ import annotations

import time

import numpy as np
import pytest

from embedscope.errors import ConfigError
from embedscope.models.api import ApiEncoder, ApiError, api_encoder
from embedscope.models.api.throttle import RateLimiter
from embedscope.models.cache import CachedEncoder, EmbeddingCache
from embedscope.models.specs import load_encoder
from support.api_server import ApiServer, fake_vector

pytestmark = pytest.mark.usefixtures("quick_backoff")
KEY = "sk-test-0123456789abcdef"


def _openai(server: ApiServer, **options) -> ApiEncoder:
    encoder = load_encoder("openai:fake", api_base=server.url, api_key=KEY, **options)
    assert isinstance(encoder, ApiEncoder)
    return encoder


@pytest.mark.slow
def test_the_vectors_are_the_services_with_prompts_and_each_distinct_text_requested_once(server):
    enc = _openai(server, prompts={"query": "query: "})
    vectors = enc.encode(["a b", "c", "a b"], role="query")
    expected = [fake_vector(t, 8, "fake") for t in ("query: a b", "query: c", "query: a b")]
    np.testing.assert_array_equal(vectors, np.asarray(expected, dtype=np.float32))
    assert server.requested == ["query: a b", "query: c"]
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    usage = enc.api_usage()
    assert (usage["requests"], usage["tokens"], usage["cost"]) == (1, 5, None)  # the service's usage: 3 + 2 words


@pytest.mark.slow
@pytest.mark.parametrize(
    ("provider", "route", "query_type", "document_type", "dimension_key"),
    [
        ("cohere", "/v2/embed", "search_query", "search_document", "output_dimension"),
        ("voyage", "/v1/embeddings", "query", "document", "output_dimension"),
        ("openai", "/v1/embeddings", None, None, "dimensions"),
    ],
)
def test_roles_map_to_each_providers_input_types_and_dimensions_go_with_the_request(
    server, provider, route, query_type, document_type, dimension_key
):
    base = server.root + ("/v2" if provider == "cohere" else "/v1")
    enc = load_encoder(f"{provider}:m", api_base=base, api_key=KEY, dimensions=4)
    query, document = enc.encode(["hello"], role="query"), enc.encode(["hello"], role="document")
    assert [r.path for r in server.requests] == [route, route]
    assert [r.body.get("input_type") for r in server.requests] == [query_type, document_type]
    assert all(r.body[dimension_key] == 4 for r in server.requests)
    np.testing.assert_array_equal(query[0], np.float32(fake_vector("hello", 4, "m", query_type or "")))
    np.testing.assert_array_equal(document[0], np.float32(fake_vector("hello", 4, "m", document_type or "")))
    assert (query_type is None) == np.array_equal(query, document)  # OpenAI has one vector per text


@pytest.mark.slow
def test_requests_are_sized_by_texts_and_tokens_per_request(server):
    texts = [f"t{i}" for i in range(7)]
    _openai(server, texts_per_request=3).encode(texts, role="document")
    assert sorted(len(r.texts) for r in server.requests) == [1, 3, 3]  # requests run concurrently
    server.requests.clear()
    _openai(server).encode(texts, role="document", batch_size=5)  # EvalScope's batch_size: texts per request
    assert sorted(len(r.texts) for r in server.requests) == [2, 5]
    server.requests.clear()
    long = ["x" * 40, "y" * 40, "z" * 40]  # 10 estimated tokens each
    _openai(server, tokens_per_request=25).encode(long, role="document")
    assert sorted(len(r.texts) for r in server.requests) == [1, 2]


@pytest.mark.slow
def test_concurrency_is_bounded(server):
    server.delay = 0.15
    texts = [f"t{i}" for i in range(12)]
    _openai(server, texts_per_request=1, max_concurrency=3).encode(texts, role="document")
    assert server.most_at_once == 3
    assert sorted(server.answered) == sorted(texts)


def test_the_rate_limit_spaces_requests_and_tokens_over_a_minute():
    limiter = RateLimiter(requests_per_minute=None, tokens_per_minute=100)
    limiter.take(60, now=0.0)
    limiter.take(30, now=10.0)
    assert limiter.wait_time(10, now=20.0) == 0.0
    assert limiter.wait_time(20, now=20.0) == 40.0  # the first request's 60 tokens leave the window at 60 s
    assert limiter.wait_time(50, now=20.0) == 40.0
    assert limiter.wait_time(80, now=20.0) == 50.0  # both must leave
    assert limiter.wait_time(500, now=20.0) == 50.0  # bigger than the limit: alone, once the window is empty


@pytest.mark.slow
def test_requests_per_minute_are_enforced(server):
    slept: list[float] = []
    clock = [1000.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    enc = _openai(server, texts_per_request=1, max_concurrency=1, requests_per_minute=2)
    enc.limiter.clock, enc.limiter.sleep = (lambda: clock[0]), sleep
    enc.encode(["a", "b", "c"], role="document")
    assert len(server.requests) == 3 and sum(slept) == pytest.approx(60.0)  # the third waits for the first's minute


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["429", "500", "timeout", "truncated", "drop"])
def test_each_transient_fault_is_retried_and_the_answer_is_the_services(server, fault):
    server.stall = 1.0
    enc = _openai(server, request_timeout=0.3)
    server.fail(fault, times=2)
    vectors = enc.encode(["a", "b"], role="document")
    np.testing.assert_array_equal(vectors, np.float32([fake_vector(t, 8, "fake") for t in ("a", "b")]))
    assert len(server.requests) == 3
    assert enc.api_usage()["requests"] == 3


@pytest.mark.slow
def test_retry_after_is_honoured(server):
    server.retry_after = "1"
    server.fail("429")
    started = time.perf_counter()
    _openai(server).encode(["a"], role="document")
    assert time.perf_counter() - started >= 1.0
    assert len(server.requests) == 2


@pytest.mark.slow
def test_the_clients_own_retries_are_off(server):
    server.fail("500", times=5)
    with pytest.raises(ApiError):
        _openai(server, max_retries=0).encode(["a"], role="document")
    assert len(server.requests) == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("wrong_count", "answered 1 vectors for 2 texts"),
        ("wrong_dim", "answered 9-d vectors, not the 8 of its earlier answers"),
        ("nan", "a vector with NaN or infinity"),
    ],
)
def test_a_wrong_answer_is_one_line_never_cached_and_nothing_answered_is_requested_again(
    server, tmp_path, fault, reason
):
    enc = _openai(server, texts_per_request=2, max_concurrency=1)
    cached = CachedEncoder(enc, EmbeddingCache(tmp_path))
    texts = [f"t{i}" for i in range(6)]
    cached.encode(["warm"], role="document")  # the dimension is known from an earlier answer
    server.requests.clear()
    server.answered.clear()
    server.fail("500")  # a retried fault first, then the wrong answer on the second request
    _queue_after(server, 1, fault)
    with pytest.raises(ApiError) as error:
        cached.encode(texts, role="document")
    message = str(error.value)
    assert "\n" not in message and reason in message and "refused, not retried" in message
    assert "documents (6 texts)" in message or "corpus (6 texts)" in message
    assert "2 of 6 texts were answered, kept in the embedding cache: a re-run requests only the 4 others" in message
    first = list(server.answered)
    assert first == ["t0", "t1"]
    server.requests.clear()
    np.testing.assert_array_equal(
        cached.encode(texts, role="document"), np.float32([fake_vector(t, 8, "fake") for t in texts])
    )
    assert server.requested == texts[2:]  # the texts answered before were not paid for again


def _queue_after(server: ApiServer, n_ok: int, fault: str) -> None:
    """After the queued 500 (retried), ``n_ok`` good answers, then ``fault``."""
    original = server._next

    def next_request(received):
        n, queued = original(received)
        return n, (fault if n == 2 + n_ok else queued)

    server._next = next_request  # type: ignore[method-assign]


def test_retries_running_out_say_so_in_one_line(server):
    server.fail("500", times=10)
    with pytest.raises(ApiError) as error:
        _openai(server, max_retries=2).encode(["a", "b"], role="query")
    message = str(error.value)
    assert len(server.requests) == 3
    assert message.startswith("queries (2 texts): openai/fake at http://127.0.0.1:")
    assert message.endswith("HTTP 500 (internal error), after its retries ran out; none of the 2 texts was answered")


def test_a_second_call_sends_no_request_and_counts_what_the_cache_spared(server, tmp_path):
    enc = _openai(server, texts_per_request=2, price_per_mtok=0.5)
    cached = CachedEncoder(enc, EmbeddingCache(tmp_path))
    texts = ["one two", "three", "four", "five six", "seven"]
    first = cached.encode(texts, role="document")
    sent = len(server.requests)
    usage = enc.api_usage()
    assert (usage["requests"], usage["tokens"], usage["avoided_requests"]) == (3, 7, 0)
    assert usage["cost"] == pytest.approx(7 / 1e6 * 0.5)
    assert usage["latency_p50_ms"] > 0 and usage["latency_p95_ms"] >= usage["latency_p50_ms"]
    again = CachedEncoder(_openai(server, texts_per_request=2), EmbeddingCache(tmp_path))
    np.testing.assert_array_equal(again.encode(list(reversed(texts)), role="document"), first[::-1])
    assert len(server.requests) == sent
    spared = again.api_usage()
    assert (spared["requests"], spared["avoided_requests"], spared["avoided_tokens"]) == (
        0,
        3,
        9,
    )  # estimated: 2 + 2 + 1 + 2 + 2
    assert again._client is None  # not even a client was made
    assert again.stats.hits == 5 and again.stats.encoded == 0


@pytest.mark.slow
def test_the_key_comes_from_the_env_a_file_or_as_given_and_is_needed_for_a_public_service(
    server, tmp_path, monkeypatch
):
    monkeypatch.setenv("MY_KEY", "from-env")
    (tmp_path / "key").write_text("from-file\n")
    for options, expected in (
        ({"api_key_env": "MY_KEY"}, "from-env"),
        ({"api_key_file": str(tmp_path / "key")}, "from-file"),
        ({"api_key": "as-given", "api_key_env": "MY_KEY"}, "as-given"),
    ):
        load_encoder("openai:fake", api_base=server.url, **options).encode([str(options)], role="query")
        assert server.requests[-1].headers["authorization"] == f"Bearer {expected}"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"no API key: set \$OPENAI_API_KEY"):
        load_encoder("openai:text-embedding-3-small")
    with pytest.raises(ConfigError, match="api_key_env NOPE_NOT_SET: the environment variable is not set"):
        load_encoder("openai:fake", api_base=server.url, api_key_env="NOPE_NOT_SET")
    with pytest.raises(ConfigError, match="masked"):
        load_encoder("openai:fake", api_base=server.url, api_key="**********")


def test_base_urls_that_would_leak_a_key_are_refused_and_public_plain_http_is_warned(caplog):
    for url in ("http://user:pw@127.0.0.1/v1", "https://example.com/v1?api-key=x", "ftp://example.com"):
        with pytest.raises(ConfigError, match="api_base"):
            api_encoder("openai:m", api_base=url, api_key="k")
    with caplog.at_level("WARNING"):
        api_encoder("openai:m", api_base="http://10.0.0.5:8000/v1")
        assert not caplog.records
        api_encoder("openai:m", api_base="http://embeddings.example.org/v1", api_key="k")
    assert "plain http to a public host" in caplog.text and "k" not in caplog.records[0].args


@pytest.mark.slow
def test_redirects_are_not_followed_so_the_key_goes_nowhere_else(server):
    with ApiServer() as elsewhere:
        server.redirect_to = elsewhere.url + "/embeddings"
        server.fail("redirect")
        with pytest.raises(ApiError, match="HTTP 307: a redirect, not followed"):
            _openai(server).encode(["a"], role="query")
        assert elsewhere.requests == []


def test_a_refused_key_is_not_echoed(server):
    server.fail("401")
    with pytest.raises(ApiError) as error:
        _openai(server).encode(["a"], role="query")
    assert "HTTP 401: the service refused the key" in str(error.value)
    assert KEY not in str(error.value) and KEY[-8:] not in str(error.value)


def test_the_fingerprint_names_the_service_and_not_the_key(server):
    one, two = _openai(server), load_encoder("openai:fake", api_base=server.url, api_key="another-key-entirely")
    assert one.fingerprint == two.fingerprint
    assert one.fingerprint != _openai(server, dimensions=4).fingerprint
    assert one.fingerprint != load_encoder("openai:fake", api_base=server.root + "/v2", api_key=KEY).fingerprint
    assert one.fingerprint != load_encoder("openai:other", api_base=server.url, api_key=KEY).fingerprint
    assert (one.name, one.revision) == ("openai/fake", "127.0.0.1")


def test_options_that_cannot_act_are_refused():
    with pytest.raises(ConfigError, match="pooling cannot act on a model behind an API"):
        load_encoder("openai:m", api_base="http://127.0.0.1:1/v1", pooling="cls")
    with pytest.raises(ConfigError, match="dtype 'fp16'"):
        load_encoder("openai:m", api_base="http://127.0.0.1:1/v1", dtype="fp16")
    with pytest.raises(ConfigError, match="dimensions: for models behind an API only"):
        load_encoder("minilm", dimensions=8)


def test_tls_is_verified_unless_turned_off_and_redirects_and_local_proxies_are_off(monkeypatch):
    import openai

    made: list[dict] = []
    real = openai.DefaultHttpxClient

    def recording(**kwargs):
        made.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(openai, "DefaultHttpxClient", recording)
    api_encoder("openai:m", api_base="https://example.com/v1", api_key="k").client()
    api_encoder("openai:m", api_base="https://example.com/v1", api_key="k", tls_verify=False).client()
    api_encoder("openai:m", api_base="http://127.0.0.1:1/v1").client()
    assert [(m["verify"], m["follow_redirects"], m["trust_env"]) for m in made] == [
        (True, False, True),
        (False, False, True),
        (True, False, False),  # a local server: no proxy from the environment sees the key
    ]
