"""Embedding models behind an API (OpenAI-compatible servers, Cohere, Voyage): the model form ``PROVIDER:NAME``.

``--model openai:text-embedding-3-small`` (the key from ``$OPENAI_API_KEY``), any OpenAI-compatible server by its
base URL (``--model openai:NAME --api-base http://127.0.0.1:8000/v1``; a name without a provider prefix with an
``api_base`` means the same), ``cohere:NAME`` and ``voyage:NAME`` (query and document roles mapped to their input
types). Modules: :mod:`.providers` (each service's request), :mod:`.encoder` (requests, checks, usage),
:mod:`.throttle` (rate limits, retries), :mod:`.keys` (the key and the base URL).

>>> is_api_model("openai:text-embedding-3-small", {}), is_api_model("minilm", {}), is_api_model("m", {"api_base": "x"})
(True, False, True)
"""

from __future__ import annotations

from typing import Any

from embedscope.errors import ConfigError
from embedscope.models.api.encoder import API_OPTIONS, TRANSPORT_OPTIONS, ApiEncoder, ApiError, ApiOptions
from embedscope.models.api.providers import PROVIDERS, provider_of

__all__ = [
    "API_OPTIONS",
    "TRANSPORT_OPTIONS",
    "ApiEncoder",
    "ApiError",
    "ApiOptions",
    "api_encoder",
    "is_api_model",
]

# load options that mean something for an API model (beside API_OPTIONS); any other is refused
_SHARED = ("prompts", "query_prompt", "revision", "device", "dtype")  # the device: the run's, unused


def is_api_model(spec: Any, options: dict[str, Any]) -> bool:
    """Whether ``spec`` (with these load options) is a model behind an API: ``PROVIDER:NAME``, or an ``api_base``."""
    return isinstance(spec, str) and (provider_of(spec) is not None or options.get("api_base") is not None)


def api_encoder(spec: str, **options: Any) -> ApiEncoder:
    """The :class:`ApiEncoder` of ``PROVIDER:NAME`` (``openai`` when ``spec`` has no prefix); ``options`` are the
    model options: :data:`API_OPTIONS`, ``prompts``, ``query_prompt``, ``revision``; a local model's option (pooling,
    a backend, a tokenizer …) cannot act on a service and is refused."""
    found = provider_of(spec)
    provider, model = found if found is not None else (PROVIDERS["openai"], spec.strip())
    given = {k: v for k, v in options.items() if v is not None}
    wrong = sorted(k for k in given if k not in API_OPTIONS and k not in _SHARED)
    if wrong:
        raise ConfigError(
            f"{spec}: {', '.join(wrong)} cannot act on a model behind an API (the service decides how it encodes)"
        )
    if given.get("dtype") not in (None, "fp32", "float32"):
        raise ConfigError(f"{spec}: dtype {given['dtype']!r}: the service sends float32 vectors")
    api = ApiOptions(**{k: v for k, v in given.items() if k in API_OPTIONS})
    return ApiEncoder(
        provider,
        model,
        api,
        prompts=given.get("prompts"),
        query_prompt=given.get("query_prompt"),
        revision=given.get("revision"),
    )
