"""The embedding services an API model can name, and each one's request and answer.

``openai:NAME`` — OpenAI's ``POST {base}/embeddings`` (``dimensions``), which every OpenAI-compatible server has
(Azure OpenAI's v1 route, vLLM, text-embeddings-inference, infinity, Ollama, LM Studio), through the ``openai``
client. ``cohere:NAME`` — Cohere's ``POST {base}/embed`` (v2: ``input_type`` ``search_query`` / ``search_document``,
``output_dimension``). ``voyage:NAME`` — Voyage's ``POST {base}/embeddings`` (``input_type`` ``query`` /
``document``, ``output_dimension``). Cohere's and Voyage's go through the same client's documented custom requests,
so every provider shares one transport: its timeouts, TLS settings and errors.

>>> PROVIDERS["cohere"].input_types["query"], PROVIDERS["voyage"].input_types["document"]
('search_query', 'document')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from embedscope.models.api.throttle import Transient
from embedscope.types import Role


@dataclass(frozen=True)
class Answer:
    """What one request gave: a vector per text (as the service sent them) and the tokens billed (None: not said)."""

    vectors: list[Any]
    tokens: int | None


@dataclass(frozen=True)
class Provider:
    """An embedding service: its base URL, key variable, how roles map to its input types, and its request."""

    name: str
    base_url: str
    key_env: str
    call: Callable[[Any, str, list[str], Role, int | None], Answer]
    input_types: dict[str, str] = field(default_factory=dict)


def _openai(client: Any, model: str, texts: list[str], role: Role, dimensions: int | None) -> Answer:
    extra = {"dimensions": dimensions} if dimensions is not None else {}
    response = client.embeddings.create(model=model, input=texts, **extra)
    rows = sorted(response.data, key=lambda row: row.index)
    if [row.index for row in rows] != list(range(len(rows))):
        raise Transient("an answer whose indices are not 0..n-1")
    usage = getattr(response, "usage", None)
    tokens = getattr(usage, "prompt_tokens", None) if usage is not None else None
    return Answer([row.embedding for row in rows], int(tokens) if tokens is not None else None)


def _post(client: Any, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A custom request through the ``openai`` client (its documented ``client.post``), its JSON answer."""
    data = client.post(path, body=body, cast_to=object)
    if not isinstance(data, dict):
        raise Transient("an answer that is not a JSON object")
    return data


def _cohere(client: Any, model: str, texts: list[str], role: Role, dimensions: int | None) -> Answer:
    body: dict[str, Any] = {
        "model": model,
        "texts": texts,
        "input_type": PROVIDERS["cohere"].input_types[role],
        "embedding_types": ["float"],
    }
    if dimensions is not None:
        body["output_dimension"] = dimensions
    data = _post(client, "/embed", body)
    embeddings = data["embeddings"]
    vectors = embeddings["float"] if isinstance(embeddings, dict) else embeddings
    billed = (data.get("meta") or {}).get("billed_units") or {}
    tokens = billed.get("input_tokens")
    return Answer(list(vectors), int(tokens) if tokens is not None else None)


def _voyage(client: Any, model: str, texts: list[str], role: Role, dimensions: int | None) -> Answer:
    body: dict[str, Any] = {"model": model, "input": texts, "input_type": PROVIDERS["voyage"].input_types[role]}
    if dimensions is not None:
        body["output_dimension"] = dimensions
    data = _post(client, "/embeddings", body)
    rows = sorted(data["data"], key=lambda row: row["index"])
    tokens = (data.get("usage") or {}).get("total_tokens")
    return Answer([row["embedding"] for row in rows], int(tokens) if tokens is not None else None)


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("openai", "https://api.openai.com/v1", "OPENAI_API_KEY", _openai),
    "cohere": Provider(
        "cohere",
        "https://api.cohere.com/v2",
        "CO_API_KEY",
        _cohere,
        {"query": "search_query", "document": "search_document"},
    ),
    "voyage": Provider(
        "voyage", "https://api.voyageai.com/v1", "VOYAGE_API_KEY", _voyage, {"query": "query", "document": "document"}
    ),
}


def provider_of(spec: str) -> tuple[Provider, str] | None:
    """``(provider, model name)`` of ``PROVIDER:NAME``, or None for a spec without a provider prefix.

    >>> provider, name = provider_of("openai:text-embedding-3-small")
    >>> provider.name, name
    ('openai', 'text-embedding-3-small')
    >>> provider_of("minilm") is None
    True
    """
    prefix, sep, name = spec.partition(":")
    if not sep or prefix.strip().lower() not in PROVIDERS:
        return None
    return PROVIDERS[prefix.strip().lower()], name.strip()


def provider_names() -> Sequence[str]:
    return tuple(PROVIDERS)
