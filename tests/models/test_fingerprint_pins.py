"""Fingerprints (and so embedding-cache keys and stored results) are pinned: the values in
``fingerprint_pins.json`` were computed on main before encoder options became one object (issue 27), and any
change to how options reach a backend must leave them as they were."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from embedscope.models.fingerprint import hash_dict, short
from embedscope.models.specs import load_encoder

PINS = json.loads((Path(__file__).parent / "fingerprint_pins.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("pins") / "m", seed=0)


def _filled(value: Any, content: str) -> Any:
    """The pinned settings with the tiny model's content hash (and its short form, the revision) put back."""
    text = json.dumps(value).replace("<content>", content).replace("<revision>", short(content))
    return json.loads(text)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(PINS["tiny"]))
def test_a_tiny_models_fingerprint_is_what_main_computed(key: str, tiny_folder: Path) -> None:
    backend, options = key.split("|", 1)
    pinned = PINS["tiny"][key]
    if "error" in pinned:
        with pytest.raises(Exception, match="normalize=False would need a different model definition"):
            load_encoder(str(tiny_folder), backend=backend, device="cpu", **json.loads(options))
        return
    encoder = load_encoder(str(tiny_folder), backend=backend, device="cpu", **json.loads(options))
    content = encoder.settings()["content"]
    settings = _filled(pinned["settings"], content)
    assert encoder.settings() == settings
    assert (encoder.dtype, dict(encoder.prompts)) == (pinned["dtype"], pinned["prompts"])
    assert encoder.fingerprint == hash_dict({**settings, "dtype": pinned["dtype"], "device_kind": "cpu"})


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(PINS["alias"]))
def test_a_shipped_alias_fingerprint_is_what_main_computed(key: str) -> None:
    alias, backend, options = key.split("|", 2)
    encoder = load_encoder(alias, backend=None if backend == "None" else backend, device="cpu", **json.loads(options))
    assert encoder.fingerprint == PINS["alias"][key]
