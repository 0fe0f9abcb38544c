"""Warm runs load no model: a stored identity stands in until a text is missing from the cache."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

import embedscope
from embedscope.models import specs
from embedscope.models.lazy import IdentityStore, LazyEncoder, identity_key
from embedscope.testing.tiny import tiny_retrieval_task

pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
]


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "tiny-st")


@pytest.fixture
def loads(monkeypatch):
    calls: list[str] = []
    real = specs.load_encoder

    def counting(spec, *args, **kwargs):
        calls.append(spec)
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(specs, "load_encoder", counting)
    return calls


def _run(model, out, cache, **kwargs):
    return embedscope.evaluate(
        model, [tiny_retrieval_task()], output_folder=out, cache=cache, show_progress=False, device="cpu", **kwargs
    )


def _scores(report) -> str:
    return json.dumps(report.outcomes[0].result.scores, sort_keys=True)


@pytest.mark.slow
def test_a_fully_cached_run_loads_no_model(tiny_st, tmp_path, loads):
    cold = _run(str(tiny_st), tmp_path / "cold", tmp_path / "cache")
    assert loads == [str(tiny_st)] and cold.cache.encoded > 0
    warm = _run(str(tiny_st), tmp_path / "warm", tmp_path / "cache")
    assert loads == [str(tiny_st)]  # not loaded again
    assert warm.cache.encoded == 0 and _scores(warm) == _scores(cold)
    assert (warm.model_name, warm.revision) == (cold.model_name, cold.revision)
    meta = [json.loads(p.read_text()) for p in (tmp_path / "warm").rglob("model_meta.json")]
    cold_meta = [json.loads(p.read_text()) for p in (tmp_path / "cold").rglob("model_meta.json")]
    assert meta[0]["fingerprint"] == cold_meta[0]["fingerprint"] and meta[0]["backend"] == "sentence-transformers"


@pytest.mark.slow
def test_a_missing_text_loads_the_model_and_checks_its_fingerprint(tiny_st, tmp_path, loads):
    _run(str(tiny_st), tmp_path / "cold", tmp_path / "cache")
    other = tiny_retrieval_task("TinyRetrieval2")
    report = embedscope.evaluate(
        str(tiny_st),
        [other],
        output_folder=tmp_path / "b",
        cache=tmp_path / "cache",
        show_progress=False,
        device="cpu",
        model_options={"query_prompt": "find: "},
    )
    assert len(loads) == 2 and report.cache.encoded > 0  # another prompt: other query texts, other identity
    store = IdentityStore(tmp_path / "cache")
    key = identity_key(str(tiny_st), {}, "cpu")
    info = store.get(key)
    lazy = LazyEncoder(
        {**info, "fingerprint": "not-the-real-one"}, lambda: specs.load_encoder(str(tiny_st), device="cpu")
    )
    with pytest.raises(RuntimeError, match="fingerprint differs"):
        lazy.encode(["never cached"], role="query")


@pytest.mark.slow
def test_the_key_follows_files_and_options(tiny_st, tmp_path):
    import shutil

    base = identity_key(str(tiny_st), {}, "cpu")
    assert base == identity_key(str(tiny_st), {}, "cpu")
    assert base != identity_key(str(tiny_st), {"pooling": "cls"}, "cpu")
    assert base != identity_key(str(tiny_st), {}, "cuda:0")
    copy = shutil.copytree(tiny_st, tmp_path / "copy")
    (copy / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    assert identity_key(str(copy), {}, "cpu") != identity_key(str(tiny_st), {}, "cpu")
    assert identity_key("org/some-hub-model", {}, "cpu") is None  # a hub id may move: never lazy


@pytest.mark.slow
def test_warm_process_imports_no_model_library(tiny_st, tmp_path):
    code = f"""
import json, sys
import embedscope
from embedscope.testing.tiny import tiny_retrieval_task
r = embedscope.evaluate({str(tiny_st)!r}, [tiny_retrieval_task()], output_folder={str(tmp_path / "o")!r} + sys.argv[1],
                        cache={str(tmp_path / "cache")!r}, show_progress=False, device="cpu")
print(json.dumps({{"encoded": r.cache.encoded, "st": "sentence_transformers" in sys.modules,
                   "transformers": "transformers" in sys.modules}}))
"""
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", code, tag], capture_output=True, text=True, check=True, timeout=300)
            .stdout.strip()
            .splitlines()[-1]
        )
        for tag in ("1", "2")
    ]
    assert runs[0]["encoded"] > 0 and runs[0]["st"]
    assert runs[1] == {"encoded": 0, "st": False, "transformers": False}
