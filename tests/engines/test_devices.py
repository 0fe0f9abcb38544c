"""Several devices on one machine: planned batches shared out over replicas give the one-device
vectors bit for bit, in a deterministic order (proved with two CPU replicas)."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from embedscope.engines import build_encoder
from embedscope.engines.devices import DeviceShards
from embedscope.engines.local import LocalEngine
from embedscope.engines.ray_cluster import RayEngine
from embedscope.errors import ConfigError
from embedscope.models.planned import LocalPlanned
from embedscope.settings import Layer, build_settings
from embedscope.testing.fakes import KeywordEncoder

pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning"),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed"),
]

TEXTS = [("word " * (i % 23 + 1)) + f"text {i}" for i in range(150)] + ["", "x"]


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "tiny-st")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sentence-transformers", "transformers"])
def test_two_replicas_give_the_single_device_vectors(tiny_st, backend):
    from embedscope.models.specs import load_encoder

    single = load_encoder(str(tiny_st), backend=backend, device="cpu")
    sharded = build_encoder(str(tiny_st), {"backend": backend}, LocalEngine(), ["cpu", "cpu"])
    assert isinstance(sharded, DeviceShards) and len(sharded.replicas) == 2
    assert sharded.device == "cpu,cpu" and sharded.fingerprint == single.fingerprint
    for role in ("query", "document"):
        expected = single.encode(TEXTS, role=role, batch_size=8)
        assert sharded.encode(TEXTS, role=role, batch_size=8).tobytes() == expected.tobytes()
        assert LocalPlanned(single).encode(TEXTS, role=role, batch_size=8).tobytes() == expected.tobytes()


def test_stream_comes_back_in_plan_order():
    enc = DeviceShards([KeywordEncoder(["word"]), KeywordEncoder(["word"]), KeywordEncoder(["word"])])
    parts = list(enc.encode_stream(TEXTS, role="document", batch_size=7))
    plan = KeywordEncoder(["word"]).batch_plan([len(t) for t in TEXTS], 7)
    assert [idx for idx, _ in parts] == plan
    assert sorted(i for idx, _ in parts for i in idx) == list(range(len(TEXTS)))


def test_a_failing_replica_raises_and_stops():
    import time

    class Slow(KeywordEncoder):
        def _encode(self, texts, role, batch_size, show_progress):
            time.sleep(0.01)  # so that the broken replica surely takes a batch
            return super()._encode(texts, role, batch_size, show_progress)

    class Broken(KeywordEncoder):
        def _encode(self, texts, role, batch_size, show_progress):
            raise RuntimeError("device lost")

    enc = DeviceShards([Slow(["w"]), Broken(["w"])])
    with pytest.raises(RuntimeError, match="device lost"):
        enc.encode(TEXTS, role="query", batch_size=2)


def test_replicas_must_agree():
    with pytest.raises(ConfigError, match="replicas differ"):
        DeviceShards([KeywordEncoder(["a"]), KeywordEncoder(["b"])])


@pytest.mark.slow
def test_evaluate_on_two_devices_equals_one(tiny_st, tmp_path):
    import embedscope
    from embedscope.testing.tiny import tiny_retrieval_task

    one = embedscope.evaluate(
        str(tiny_st),
        [tiny_retrieval_task()],
        output_folder=tmp_path / "one",
        cache=False,
        show_progress=False,
        device="cpu",
    )
    two = embedscope.evaluate(
        str(tiny_st),
        [tiny_retrieval_task()],
        output_folder=tmp_path / "two",
        cache=False,
        show_progress=False,
        device="cpu,cpu",
        batch_size=2,
    )
    one_scores = one.outcomes[0].result.scores
    assert json.dumps(two.outcomes[0].result.scores, sort_keys=True) == json.dumps(one_scores, sort_keys=True)
    assert two.outcomes[0].result.extra["engine"] == "devices"
    meta = json.loads(
        (tmp_path / "two" / two.outcomes[0].path.parent.relative_to(tmp_path / "two") / "model_meta.json").read_text()
    )
    assert meta["device"] == "cpu,cpu" and meta["dtype"] == "fp32"


def test_engine_options_are_checked_up_front():
    with pytest.raises(ConfigError, match="engine 'spark'"):
        build_settings([Layer("evaluate()", {"engine": "spark"})])
    with pytest.raises(ConfigError, match="ray-gpus-per-worker"):
        RayEngine().devices("cuda:0,cuda:1")
    assert np.array_equal(LocalEngine().devices("cpu"), ["cpu"])


def test_pipeline_model_meta_records_each_stage_placement(tmp_path):
    import embedscope
    from embedscope.retrieval.dense import DenseRetriever
    from embedscope.retrieval.pipeline import Pipeline
    from embedscope.testing.tiny import tiny_retrieval_task

    pipeline = Pipeline(
        [
            DenseRetriever(KeywordEncoder(["cat", "dog", "fish"])),
            DenseRetriever(KeywordEncoder(["cat", "dog"], name="fake/two")),
        ]
    )  # fused by RRF
    report = embedscope.evaluate(
        pipeline, [tiny_retrieval_task()], output_folder=tmp_path, cache=False, show_progress=False
    )
    meta = json.loads(next(tmp_path.rglob("model_meta.json")).read_text())
    assert meta["stages"] == [{"device": "cpu", "dtype": "fp32", "engine": "local"}] * 2
    assert report.outcomes[0].result.extra["stages"] == meta["stages"]
