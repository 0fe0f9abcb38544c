"""The Ray engine on a local cluster: exactly the in-process numbers, a killed worker changes
nothing, only what the cache lacks is sent, and vectors reach the cache as they arrive."""

from __future__ import annotations

import json

import numpy as np
import pytest

from support.lazy import lazy_module

ray = lazy_module("ray")  # imported by the first test that uses it: collection imports nothing heavy
pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"),
]

TEXTS = [("token " * (i % 29 + 1)) + f"text number {i}" for i in range(240)]


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory):
    from support.tiny_models import build_tiny_sentence_transformer

    return build_tiny_sentence_transformer(tmp_path_factory.mktemp("tiny") / "tiny-st")


@pytest.mark.long  # the real model on a whole built-in task in-process and on two Ray workers: minutes on 2 cores
def test_lee_through_ray_equals_in_process(cluster, tmp_path):
    import embedscope

    local = embedscope.evaluate(
        "minilm",
        ["LeeDocumentSimilarity"],
        output_folder=tmp_path / "local",
        cache=False,
        show_progress=False,
        device="cpu",
    )
    remote = embedscope.evaluate(
        "minilm",
        ["LeeDocumentSimilarity"],
        output_folder=tmp_path / "ray",
        cache=False,
        show_progress=False,
        engine="ray",
        ray_workers=2,
    )
    a, b = local.outcomes[0].result.scores["test"][0], remote.outcomes[0].result.scores["test"][0]
    assert round(a["cosine_spearman"], 5) == round(b["cosine_spearman"], 5) == 0.50827
    numeric = [k for k, v in a.items() if isinstance(v, float)]
    assert numeric and all(abs(a[k] - b[k]) <= 1e-12 for k in numeric), {k: (a[k], b[k]) for k in numeric}
    assert remote.outcomes[0].result.extra["engine"] == "ray"
    assert remote.model_name == local.model_name and remote.revision == local.revision


def test_a_killed_worker_is_restarted_and_the_result_is_unchanged(cluster, tiny_st):
    from embedscope.engines.ray_cluster import RayEncoder
    from embedscope.models.specs import load_encoder

    enc = RayEncoder(str(tiny_st), {"device": "cpu"}, workers=2)
    first_pids = set(enc.pids_seen)
    killed = []

    def kill_once(done: int) -> None:
        if done == 2 and not killed:
            ray.kill(enc.actors[0], no_restart=False)  # dies now; Ray restarts it and retries its batch
            killed.append(done)

    enc.on_batch = kill_once
    got = enc.encode(TEXTS, role="document", batch_size=4)
    expected = load_encoder(str(tiny_st), device="cpu").encode(TEXTS, role="document", batch_size=4)
    assert killed and got.tobytes() == expected.tobytes()
    assert len(enc.pids_seen - first_pids) >= 1  # a restarted worker process did part of the work
    enc.close()


def test_only_cache_misses_are_sent_and_vectors_stream_into_the_cache(cluster, tiny_st, tmp_path, monkeypatch):
    from embedscope.engines.ray_cluster import RayEncoder
    from embedscope.models import cache as cache_module
    from embedscope.models.cache import CachedEncoder, EmbeddingCache
    from embedscope.models.planned import LocalPlanned
    from embedscope.models.specs import load_encoder

    monkeypatch.setattr(cache_module, "FLUSH_EVERY", 1)
    store = EmbeddingCache(tmp_path / "cache")

    class Interrupted(LocalPlanned):  # an in-process run of the same call, stopped after 12 batches of 8
        def _run(self, batches, role):
            for n, vectors in enumerate(super()._run(batches, role)):
                if n == 12:
                    raise KeyboardInterrupt
                yield vectors

    with pytest.raises(KeyboardInterrupt):
        CachedEncoder(Interrupted(load_encoder(str(tiny_st), device="cpu")), store).encode(
            TEXTS, role="document", batch_size=8
        )
    assert store.count(load_encoder(str(tiny_st), device="cpu").fingerprint) == 96

    enc = RayEncoder(str(tiny_st), {"device": "cpu"}, workers=2)
    cached = CachedEncoder(enc, store)
    stored_while_running = []
    enc.on_batch = lambda done: stored_while_running.append(store.count(enc.fingerprint))
    got = cached.encode(TEXTS, role="document", batch_size=8)
    assert enc.texts_sent == 144 and cached.stats.hits == 96  # the call resumed with its stored batches
    assert stored_while_running[1] > 96  # batches reached the cache before the call ended
    assert store.count(enc.fingerprint) == len(TEXTS)
    assert (
        got.tobytes() == load_encoder(str(tiny_st), device="cpu").encode(TEXTS, role="document", batch_size=8).tobytes()
    )
    enc.close()


def test_cli_engine_ray_runs_and_records_it(cluster, tiny_st, tmp_path):
    from embedscope.cli.main import main
    from embedscope.testing.tiny import TINY_CORPUS, TINY_QRELS, TINY_QUERIES

    task_dir = tmp_path / "task"
    (task_dir / "qrels").mkdir(parents=True)
    (task_dir / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in TINY_CORPUS.items())
    )
    (task_dir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in TINY_QUERIES.items())
    )
    (task_dir / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{d}\t{r}\n" for q, docs in TINY_QRELS.items() for d, r in docs.items())
    )
    code = main(
        [
            "run",
            "--model",
            str(tiny_st),
            "--tasks",
            str(task_dir),
            "--engine",
            "ray",
            "--ray-workers",
            "1",
            "--no-cache",
            "--output-folder",
            str(tmp_path / "out"),
            "--json",
        ]
    )
    assert code == 0
    meta = json.loads(next((tmp_path / "out").rglob("model_meta.json")).read_text())
    assert meta["engine"] == "ray" and meta["device"] == "cpu"
    assert np.isfinite(meta.get("embed_dim", 32))
