"""Where an API model's key comes from, where it may go, and keeping it out of every message.

The key is read from the key given as it is (EvalScope's ``api_key``, ``evaluate(model_options={"api_key": …})``),
else a file (``api_key_file``), else an environment variable (``api_key_env``, by default the provider's own, e.g.
``OPENAI_API_KEY``). A base URL is checked before anything is sent: ``http`` or ``https``, no user or password and
no query string in it (a key there would be recorded with the URL); plain ``http`` to a host other than a loopback or
private address is warned about, once per host.

>>> check_base_url("http://127.0.0.1:8000/v1/")
'http://127.0.0.1:8000/v1'
>>> is_private_host("localhost"), is_private_host("10.1.2.3"), is_private_host("api.openai.com")
(True, True, False)
>>> scrub("bad key sk-123 here", "sk-123")
'bad key *** here'
"""

from __future__ import annotations

import ipaddress
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from embedscope.errors import ConfigError

logger = logging.getLogger(__name__)
_WARNED: set[str] = set()


def secret_value(key: Any) -> str | None:
    """The text of a key given as a string or a pydantic ``SecretStr`` (None when none)."""
    if key is None:
        return None
    getter = getattr(key, "get_secret_value", None)
    value = str(getter() if getter is not None else key).strip()
    return value or None


def resolve_key(given: Any, key_file: str | None, key_env: str | None, default_env: str) -> str | None:
    """The key: as given, else the first line of ``key_file``, else ``$key_env`` (default ``$default_env``)."""
    value = secret_value(given)
    if value is not None:
        if set(value) == {"*"}:
            raise ConfigError("api_key is masked ('****'): give the key itself, or api_key_env / api_key_file")
        return value
    if key_file is not None:
        path = Path(key_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"api_key_file {key_file}: cannot be read ({type(e).__name__})") from None
        lines = text.strip().splitlines()
        if not lines or not lines[0].strip():
            raise ConfigError(f"api_key_file {key_file}: is empty (write the key on its first line)")
        return lines[0].strip()
    name = key_env or default_env
    value = os.environ.get(name, "").strip()
    if not value and key_env is not None:
        raise ConfigError(f"api_key_env {key_env}: the environment variable is not set")
    return value or None


def is_private_host(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback, private or link-local address."""
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def check_base_url(url: str) -> str:
    """``url`` without its trailing slash, when it can carry a key safely (see the module docstring)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"api_base {url!r}: give an http:// or https:// URL (e.g. http://127.0.0.1:8000/v1)")
    if parts.username or parts.password:
        raise ConfigError("api_base: a user or password in the URL would be recorded with it; use api_key_env")
    if parts.query or parts.fragment:
        raise ConfigError("api_base: no query string or fragment (a key there would be recorded with the URL)")
    if parts.scheme == "http" and not is_private_host(parts.hostname) and parts.hostname not in _WARNED:
        _WARNED.add(parts.hostname)
        logger.warning(
            "api_base %s is plain http to a public host: the key and the texts travel unencrypted; use https",
            parts.hostname,
        )
    return url.strip().rstrip("/")


def scrub(message: str, key: str | None) -> str:
    """``message`` with the key (and its last 8 characters, which services echo) replaced by ``***``."""
    if not key:
        return message
    message = message.replace(key, "***")
    return message.replace(key[-8:], "***") if len(key) >= 12 else message
