"""``embedscope serve`` on a big store: the leaderboard query and the ``/`` page against the 1 s goal.

Builds a store of 1,000 runs × 50 tasks (100 models of 10 runs each, five task types, API use on a fifth of the
models), written straight into the tables with SQLAlchemy Core inserts, then times the leaderboard query
(:func:`embedscope.history.queries.leaderboard`) and the whole ``/`` page through FastAPI's TestClient, 5 times
each after one warm-up, and prints the medians and their ratio to the goal. ``--store URL`` times a PostgreSQL
store (or any other): an empty one is filled first, one holding runs is timed as it is.

    .venv/bin/python bench/bench_store_web.py [--store postgresql://USER:PASSWORD@HOST/DB] [--runs 1000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _util import median_time  # noqa: E402

GOAL_S = 1.0
TYPES = (
    ("Retrieval", "ndcg_at_10"),
    ("Reranking", "map_at_1000"),
    ("STS", "cosine_spearman"),
    ("Classification", "accuracy"),
    ("Clustering", "v_measure"),
)


def task_files(task: str, values: np.ndarray) -> dict[str, bytes]:
    """A Retrieval result file and its per-item rows (``values`` as each query's nDCG@10), as a run records them."""
    from embedscope.results.per_item import encode_rows, item_rows
    from embedscope.results.schema import TaskResult, score_entry

    score = float(values.mean())
    extra = {"task_type": "Retrieval", "main_metric": "ndcg_at_10", "run_settings": {"model": {}, "top_k": 100},
             "task_settings": {}, "data": {"location": None, "fingerprint": "d0"}}  # fmt: skip
    entry = score_entry({"ndcg_at_10": score}, "ndcg_at_10", "default", ("eng-Latn",))
    result = TaskResult(task, "r", {"test": [entry]}, evaluation_time=1.0, extra=extra)
    ids = [f"q{i}" for i in range(len(values))]
    rows = item_rows("test", "default", {"id": ids, "ndcg_at_10": [float(v) for v in values]})
    return {f"{task}.json": json.dumps(result.to_dict()).encode(), f"{task}.per_item.jsonl.gz": encode_rows(rows)}


def fill(store, runs: int, tasks: int, models: int, seed: int = 0, queries: int = 1000) -> None:
    """``runs`` runs of ``models`` models (round robin, an hour apart), each with a result on every one of ``tasks``
    tasks, inserted in one transaction; the first task (a Retrieval one) with its files and ``queries`` per-query
    rows, as a recorded run has them (the task, model and compare pages read them)."""
    from sqlalchemy import insert

    from embedscope.history import tables

    file_rows = []

    rng = np.random.default_rng(seed)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    skill = rng.uniform(0.3, 0.8, models)
    run_rows, result_rows = [], []
    for n in range(runs):
        run_id, m = uuid.uuid4().hex, n % models
        when = start + dt.timedelta(hours=n)
        run_rows.append(
            {
                "id": run_id,
                "content_key": uuid.uuid4().hex * 2,
                "model": f"org/model-{m:03d}",
                "revision": f"r{n // models}",
                "experiment": None,
                "fingerprint": f"fp-{m}",
                "source": "run",
                "recorded_at": when,
                "evaluated_at": when.isoformat(),
                "embedscope_version": "bench",
                "system": json.dumps({"model": {"name": f"org/model-{m:03d}"}}),
                "host": None,
            }
        )
        for j in range(tasks):
            task_type, metric = TYPES[j % len(TYPES)]
            cost: dict = {"phases": {"encode": float(rng.uniform(1, 5)), "search": float(rng.uniform(0, 1))}}
            if m % 5 == 0:
                cost["api_usage"] = {
                    "requests": 10,
                    "tokens": int(rng.integers(1000, 5000)),
                    "avoided_requests": 0,
                    "avoided_tokens": 0,
                    "latency_p50_ms": 40.0,
                    "latency_p95_ms": 90.0,
                    "cost": float(rng.uniform(0.001, 0.01)),
                }
            score = float(np.clip(skill[m] + rng.normal(0, 0.05), 0, 1))
            if j == 0:
                values = np.clip(score + rng.normal(0, 0.2, queries), 0, 1)
                score = float(values.mean())
                files = task_files(f"Task{j:02d}", values)
                file_rows += [{"run_id": run_id, "path": p, "content": c} for p, c in files.items()]
            result_rows.append(
                {
                    "run_id": run_id,
                    "task": f"Task{j:02d}",
                    "task_type": task_type,
                    "metric": metric,
                    "main_score": score,
                    "evaluation": json.dumps({"data": f"d{j}"}),
                    "seconds": float(sum(cost["phases"].values())),
                    "cost": json.dumps(cost),
                    "items": queries if j == 0 else 0,
                    "path": f"Task{j:02d}.json",
                }
            )
    with store._engine.begin() as connection:
        connection.execute(insert(tables.runs), run_rows)
        for start_row in range(0, len(result_rows), 10_000):
            connection.execute(insert(tables.results), result_rows[start_row : start_row + 10_000])
        for start_row in range(0, len(file_rows), 500):
            connection.execute(insert(tables.files), file_rows[start_row : start_row + 500])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="the store to time (default: a new SQLite file in a temporary folder)")
    parser.add_argument("--runs", type=int, default=1000, help="runs to record into an empty store (default 1000)")
    parser.add_argument("--tasks", type=int, default=50, help="tasks per run (default 50)")
    parser.add_argument("--models", type=int, default=100, help="models the runs are of (default 100)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repeats (default 5)")
    args = parser.parse_args()

    from fastapi.testclient import TestClient

    from embedscope.history.queries import leaderboard
    from embedscope.history.store import Store
    from embedscope.history.web.app import create_app

    url = args.store or f"sqlite:///{tempfile.mkdtemp(prefix='bench-store-web-')}/store.db"
    store = Store(url)
    if store.runs():
        print(f"store {store.url}: timing it as it is")
    else:
        started = dt.datetime.now()
        fill(store, args.runs, args.tasks, args.models)
        print(
            f"store {store.url}: filled with {args.runs} runs × {args.tasks} tasks "
            f"({args.models} models) in {(dt.datetime.now() - started).total_seconds():.1f} s"
        )
    t_query, board = median_time(lambda: leaderboard(store), repeats=args.repeats, warmup=1)
    with TestClient(create_app(store)) as client:
        t_page, page = median_time(lambda: client.get("/"), repeats=args.repeats, warmup=1)
    assert page.status_code == 200, page.text[:300]
    runs = store.runs()
    pages = {
        "task page (100 models' intervals and histograms)": "/task/Task00",
        "model page (10 runs over 50 tasks)": "/model/org%2Fmodel-000",
        "compare page (two runs, 50 tasks)": f"/compare?a=run:{runs[0].id}&b=run:{runs[100].id}",
    }
    timed = {}
    for label, path in pages.items():  # a new app each time: nothing served from its memo of intervals

        def cold(path: str = path) -> Any:
            with TestClient(create_app(store)) as fresh:
                return fresh.get(path)

        timed[label], answer = median_time(cold, repeats=args.repeats, warmup=1)
        assert answer.status_code == 200, (path, answer.text[:300])
    cells = sum(len(r.cells) for r in board.rows)
    print(f"leaderboard: {len(board.rows)} models × {len(board.tasks)} tasks ({cells:,} cells)")
    print(
        f"leaderboard query: median {t_query * 1000:.0f} ms of {args.repeats} ({t_query / GOAL_S:.2f} × the 1 s goal)"
    )
    print(
        f"'/' page:          median {t_page * 1000:.0f} ms of {args.repeats} ({t_page / GOAL_S:.2f} × the 1 s goal), "
        f"{len(page.content) / 1e6:.2f} MB of HTML"
    )
    for label, seconds in timed.items():
        print(f"{label}: median {seconds * 1000:.0f} ms of {args.repeats} ({seconds / GOAL_S:.2f} × the 1 s goal)")
    store.dispose()


if __name__ == "__main__":
    main()
