"""``embedscope serve``: its JSON API against independent computation (the stored main scores, numpy's means,
``compare_folders``' p-values), hostile labels escaped on every page, one-line 404s, nothing written, no CDN; and,
marked slow, the app served by uvicorn and opened in Chromium (only 127.0.0.1 reached, no dialog, no console error).
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.stats import spearmanr

from embedscope.compare.core import CompareOptions, compare_folders
from embedscope.history.queries import LeaderFilter, leaderboard, reading
from embedscope.history.store import Store
from embedscope.history.web.app import create_app
from embedscope.results.per_item import item_rows
from embedscope.results.schema import TaskResult, score_entry
from embedscope.results.store import ResultStore

HOSTILE = "<script>alert(1)</script>"
HOSTILE_TASK = "<b>Tricky&Task"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
ESCAPED_TASK = "&lt;b&gt;Tricky&amp;Task"
HOSTILE_TAG = "<i>evil</i>"  # a tag may hold any character but space and ':'
ESCAPED_TAG = "&lt;i&gt;evil&lt;/i&gt;"
OPTIONS = CompareOptions(rounds=2000)  # fewer resamples than the default: the fast tier stays fast
TYPES = {"RetA": "Retrieval", "RetB": "Retrieval", HOSTILE_TASK: "Retrieval", "Rerank": "Reranking", "Sim": "STS"}
METRICS = {"Retrieval": "ndcg_at_10", "Reranking": "map_at_1000", "STS": "cosine_spearman"}


def _values(n: int, mean: float, seed: int) -> np.ndarray:
    return np.clip(mean + 0.2 * np.random.default_rng(seed).standard_normal(n), 0.0, 1.0)


def write_task(store: ResultStore, task: str, mean: float, seed: int, usage: dict[str, Any] | None = None) -> float:
    """One made-up result with per-item rows whose statistic is its main score; returns that score."""
    task_type = TYPES[task]
    metric = METRICS[task_type]
    ids = [f"q{i}" for i in range(40)]
    if task_type == "STS":
        gold = np.random.default_rng(seed).random(40)
        cosine = np.clip(gold * mean + 0.3 * np.random.default_rng(seed + 1).random(40), 0, 1)
        score = float(spearmanr(cosine, gold).statistic)
        columns: dict[str, list[Any]] = {"id": ids, "cosine": list(map(float, cosine)), "gold": list(map(float, gold))}
    else:
        values = _values(40, mean, seed)
        score = float(np.mean(values))
        columns = {"id": ids, metric: list(map(float, values))}
    extra: dict[str, Any] = {
        "task_type": task_type,
        "main_metric": metric,
        "run_settings": {"model": {"fingerprint": "fp"}, "top_k": 100, "limits": None, "corpus_chunk_size": 50000},
        "task_settings": {},
        "data": {"location": None, "fingerprint": "abc"},
    }
    if usage:
        extra["api_usage"] = usage
    entry = score_entry({metric: score}, metric, "default", ("eng-Latn",))
    store.save_per_item(task, item_rows("test", "default", columns))
    store.save(TaskResult(task, "d1", {"test": [entry]}, evaluation_time=2.5, date="2026-01-01T00:00:00", extra=extra))
    return score


def write_run(
    out: Path,
    model: str,
    means: dict[str, float],
    seed: int,
    experiment: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, float]:
    """One model's run in ``out``: a result per task of ``means``; its main scores by task."""
    store = ResultStore(out, model, "rev1", experiment)
    store.save_model_meta({"name": model, "revision": "rev1"})
    return {t: write_task(store, t, m, seed + i, usage) for i, (t, m) in enumerate(means.items())}


@dataclass
class Made:
    """The store the tests read, and what was written into it."""

    url: str
    folders: dict[str, Path]
    scores: dict[tuple[str, str | None], dict[str, float]] = field(default_factory=dict)  # the newest run's
    runs: dict[str, dict[str, float]] = field(default_factory=dict)  # each run's
    tags: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)


USAGE = {
    "requests": 3,
    "tokens": 1200,
    "avoided_requests": 0,
    "avoided_tokens": 0,
    "latency_p50_ms": 5.0,
    "latency_p95_ms": 9.0,
    "cost": 0.0024,
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    """alpha: two runs (tagged baseline, candidate) and an experiment; beta (behind an API); a hostile model."""
    root = tmp_path_factory.mktemp("web")
    made = Made(f"sqlite:///{root}/h.db", {})
    store = Store(made.url)
    runs = [
        ("alpha-v1", "org/alpha", {"RetA": 0.5, "RetB": 0.6, "Rerank": 0.4, "Sim": 0.5}, None, None, "baseline"),
        ("alpha-v2", "org/alpha", {"RetA": 0.6, "RetB": 0.6, "Rerank": 0.45, "Sim": 0.8}, None, None, "candidate"),
        ("alpha-exp", "org/alpha", {"RetA": 0.3, "RetB": 0.2, "Rerank": 0.3, "Sim": 0.3}, "exp123", None, None),
        ("beta", "org/beta", {"RetA": 0.7, "RetB": 0.5, "Rerank": 0.6, "Sim": 0.6}, None, USAGE, None),
        ("hostile", HOSTILE, {"RetA": 0.4, HOSTILE_TASK: 0.5}, None, None, HOSTILE_TAG),
    ]
    for n, (name, model, means, experiment, usage, tag) in enumerate(runs):
        out = root / name
        scores = write_run(out, model, means, 10 * n, experiment, usage)
        made.folders[name] = next(p.parent for p in out.rglob("model_meta.json"))
        made.scores[(model, experiment)] = made.runs[name] = scores  # a later run of a model replaces the earlier
        ((run_id, _),) = store.import_folders([out], tags=[tag] if tag else [])
        made.ids[name] = run_id
        if tag:
            made.tags[name] = tag
        time.sleep(0.002)  # distinct recording times
    store.dispose()
    return made


@pytest.fixture(scope="module")
def client(made: Made) -> Iterator[TestClient]:
    store = Store(made.url)
    with TestClient(create_app(store, OPTIONS)) as c:
        yield c
    store.dispose()


def test_the_leaderboards_scores_are_the_stored_ones_and_its_means_numpys(client: TestClient, made: Made) -> None:
    body = client.get("/api/leaderboard").json()
    rows = {(r["model"], r["experiment"]): r for r in body["rows"]}
    assert set(rows) == set(made.scores)
    columns = {t["name"]: t for t in body["tasks"]}
    assert set(columns) == set(TYPES)
    assert {t: c["task_type"] for t, c in columns.items()} == TYPES
    for key, scores in made.scores.items():
        row = rows[key]
        assert {t: c["score"] for t, c in row["cells"].items()} == scores
        complete = set(scores) == set(TYPES)
        assert row["mean_task"] == (pytest.approx(np.mean([scores[t] for t in TYPES]), abs=0) if complete else None)
        for task_type in set(TYPES.values()):
            mine = [scores.get(t) for t, k in TYPES.items() if k == task_type]
            expected = None if None in mine else pytest.approx(np.mean(mine), abs=0)
            assert row["type_means"][task_type] == expected
        if complete:
            type_means = [
                np.mean([scores[t] for t, k in TYPES.items() if k == x]) for x in dict.fromkeys(TYPES.values())
            ]
            assert row["mean_type"] == pytest.approx(np.mean(type_means), rel=1e-12)
        assert row["seconds"] == pytest.approx(2.5 * len(scores))
    assert rows[("org/alpha", None)]["runs"] == 2  # v1 and v2; the experiment is a row of its own
    assert rows[("org/beta", None)]["usage"]["tokens"] == 4 * USAGE["tokens"]
    assert rows[("org/beta", None)]["usage"]["cost"] == pytest.approx(4 * USAGE["cost"])
    assert rows[("org/alpha", None)]["usage"] is None
    means = [r["mean_task"] for r in body["rows"] if r["mean_task"] is not None]
    assert means == sorted(means, reverse=True)


def test_the_leaderboards_filters(client: TestClient, made: Made) -> None:
    by_type = client.get("/api/leaderboard", params={"task_type": "Reranking"}).json()
    assert [t["name"] for t in by_type["tasks"]] == ["Rerank"]
    assert {r["model"] for r in by_type["rows"]} == {"org/alpha", "org/beta"}
    by_model = client.get("/api/leaderboard", params={"model": "ALPHA"}).json()
    assert {(r["model"], r["experiment"]) for r in by_model["rows"]} == {("org/alpha", None), ("org/alpha", "exp123")}
    by_tag = client.get("/api/leaderboard", params=[("tag", "baseline"), ("tag", HOSTILE_TAG)]).json()
    assert {r["model"] for r in by_tag["rows"]} == {"org/alpha", HOSTILE}
    alpha = next(r for r in by_tag["rows"] if r["model"] == "org/alpha")
    assert alpha["cells"]["RetA"]["run_id"] == made.ids["alpha-v1"]  # the tagged run, not the newest
    page = client.get("/", params={"task_type": "Reranking", "model": "beta"}).text
    assert "org/beta" in page and "org/alpha" not in page.split("<tbody>")[1]
    assert client.get("/api/leaderboard", params={"model": "nobody"}).json()["rows"] == []
    assert "No result in the store matches" in client.get("/", params={"model": "nobody"}).text


def test_the_compare_endpoints_p_values_are_compare_folders(client: TestClient, made: Made) -> None:
    body = client.get("/api/compare", params={"a": "tag:baseline", "b": f"run:{made.ids['alpha-v2'][:8]}"}).json()
    assert (body["a"]["id"], body["b"]["id"]) == (made.ids["alpha-v1"], made.ids["alpha-v2"])
    reference = compare_folders([made.folders["alpha-v1"], made.folders["alpha-v2"]], OPTIONS)
    expected = {r.task: r for r in reference.rows}
    assert [t["task"] for t in body["tasks"]] == [r.task for r in reference.rows]
    for row in body["tasks"]:
        ref = expected[row["task"]]
        assert (row["score_a"], row["score_b"], row["delta"]) == (ref.score_a, ref.score_b, ref.delta)
        assert (row["p_value"], row["p_adjusted"], row["ci_low"], row["ci_high"]) == (
            ref.p_value,
            ref.p_adjusted,
            ref.ci_low,
            ref.ci_high,
        )
        assert row["test"] == ref.test and row["n"] == ref.n == 40
    sim = next(t for t in body["tasks"] if t["task"] == "Sim")
    assert sim["test"] == "bootstrap-pairs"
    page = client.get("/compare", params={"a": "tag:baseline", "b": "tag:candidate"}).text
    assert page.count("<svg") >= 3 and "per-item ndcg_at_10, run a (x) against run b (y)" in page


def test_the_task_page_shows_each_models_interval_and_distribution(client: TestClient, made: Made) -> None:
    body = client.get("/api/task/RetA").json()
    entries = {(e["model"], e["experiment"]): e for e in body["entries"]}
    assert set(entries) == {k for k, s in made.scores.items() if "RetA" in s}
    from scipy.stats import t as student_t

    from embedscope.compare.items import load_model_results

    for key, e in entries.items():
        assert e["score"] == made.scores[key]["RetA"]
        assert e["ci_low"] < e["score"] < e["ci_high"] and e["n"] == 40 and sum(e["histogram"]) == 40
    checked = 0
    for folder in made.folders.values():  # the newest runs' t interval of the mean, as scipy gives it
        items = load_model_results(folder).tasks.get("RetA")
        shown = [e for e in entries.values() if items is not None and e["score"] == items.score]
        for e in shown:
            v = items.values
            low, high = student_t.interval(0.95, len(v) - 1, loc=v.mean(), scale=v.std(ddof=1) / np.sqrt(len(v)))
            assert (e["ci_low"], e["ci_high"]) == pytest.approx((low, high), rel=1e-12)
            checked += 1
    assert checked >= 1
    assert body["edges"][0] == 0.0 and body["edges"][-1] == 1.0
    sim = client.get("/api/task/Sim").json()["entries"]
    assert all(e["kind"] == "pairs" and e["histogram"] == [] and e["ci_low"] is not None and e["n"] == 40 for e in sim)
    page = client.get("/task/RetA").text
    assert 'aria-label="ndcg_at_10 of each model with its interval"' in page.replace("'", '"')
    assert page.count("class='chart histogram'") == len(entries)


def test_the_model_page_lists_runs_and_draws_history(client: TestClient, made: Made) -> None:
    body = client.get("/api/model/org/alpha").json()
    assert [r["id"] for r in body["runs"]] == [made.ids[n] for n in ("alpha-v1", "alpha-v2", "alpha-exp")]
    assert body["runs"][0]["tags"] == ["baseline"] and body["runs"][2]["experiment"] == "exp123"
    for task in TYPES.keys() - {HOSTILE_TASK}:
        assert [p["score"] for p in body["series"][task]] == [
            made.runs[n][task] for n in ("alpha-v1", "alpha-v2", "alpha-exp")
        ]
    page = client.get("/model/org/alpha").text
    assert page.count("class='chart history'") == 4 and "compare with previous" in page
    assert made.ids["alpha-v2"][:12] in page


def test_hostile_labels_render_as_text_on_every_page(client: TestClient, made: Made) -> None:
    pages = [  # path, query, shows the hostile task, shows the hostile tag
        ("/", {}, True, True),
        ("/task/RetA", {}, False, False),
        (f"/task/{quote(HOSTILE_TASK, safe='')}", {}, True, False),
        (f"/model/{quote(HOSTILE, safe='')}", {}, True, True),
        ("/compare", {"a": f"tag:{HOSTILE_TAG}", "b": f"run:{made.ids['alpha-v1']}"}, True, True),  # "only in a"
    ]
    for path, query, task, tag in pages:
        response = client.get(path, params=query)
        assert response.status_code == 200, path
        text = response.text
        assert HOSTILE not in text and ESCAPED in text, path
        assert "<b>" not in text and "<i>" not in text, path
        assert (ESCAPED_TASK in text) == task and (ESCAPED_TAG in text) == tag, path
    missing = client.get("/model/<script>alert(2)</script>")
    assert (
        missing.status_code == 404
        and "<script>alert(2)" not in missing.text
        and "&lt;script&gt;alert(2)" in missing.text
    )
    assert client.get("/").headers["content-security-policy"].startswith("default-src 'none'")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/task/NoSuchTask", "no task 'NoSuchTask' in the store"),
        ("/task/RetX", "no task 'RetX' in the store; did you mean 'RetB' or 'RetA'?"),
        ("/model/org/gamma", "no model 'org/gamma'"),
        ("/compare?a=tag:nope&b=tag:baseline", "no tag 'nope'"),
        ("/compare?a=run:abc&b=tag:baseline", "at least 6 hex digits"),
        ("/compare?a=run:ffffffffff&b=tag:baseline", "no run has that id"),
        ("/no/such/page", "Not Found"),
    ],
)
def test_what_the_store_does_not_hold_is_a_one_line_404(client: TestClient, url: str, says: str) -> None:
    page = client.get(url)
    assert page.status_code == 404 and says.replace("'", "&#39;") in page.text and "Traceback" not in page.text
    api = client.get("/api" + url)
    assert api.status_code == 404
    assert says in api.json()["detail"] and "\n" not in api.json()["detail"]


def test_pages_need_no_network_and_the_api_has_its_schema(client: TestClient) -> None:
    assert client.get("/docs").status_code == 404 and client.get("/redoc").status_code == 404
    schema = client.get("/openapi.json").json()
    assert {"/api/leaderboard", "/api/task/{name}", "/api/model/{name}", "/api/compare"} <= set(schema["paths"])
    for url in ("/", "/task/RetA", "/model/org/beta", "/compare?a=tag:baseline&b=tag:candidate", "/compare"):
        text = client.get(url).text
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text, url
        assert "<script" not in text, url
    missing = client.get("/api/compare", params={"a": "tag:baseline"})
    assert missing.status_code == 422 and missing.json()["detail"] == "query.b: Field required"


def test_the_app_reads_only(made: Made, tmp_path: Path) -> None:
    import shutil

    from sqlalchemy import insert

    from embedscope.history import tables
    from embedscope.history.store import StoreError

    shutil.copy(made.url.removeprefix("sqlite:///"), tmp_path / "copy.db")
    store = Store(f"sqlite:///{tmp_path}/copy.db")
    now = dt.datetime.now(dt.timezone.utc)
    with pytest.raises(StoreError, match="readonly"), reading(store, "writing") as connection:
        connection.execute(insert(tables.tags).values(name="x", run_id=made.ids["beta"], tagged_at=now))
    store.tag("writable-again", made.ids["beta"])  # the pooled connection is writable after it
    board = leaderboard(store, LeaderFilter(tags=("writable-again",)))
    assert [r.model for r in board.rows] == ["org/beta"]
    store.dispose()


def test_serve_runs_uvicorn_on_the_address_given(made: Made, monkeypatch: pytest.MonkeyPatch) -> None:
    import uvicorn

    from embedscope.cli.main import main

    called: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: called.update(app=app, **kw))
    assert main(["serve", "--store", made.url, "--port", "8765"]) == 0
    assert (called["host"], called["port"]) == ("127.0.0.1", 8765)
    assert TestClient(called["app"]).get("/api/leaderboard").status_code == 200


@pytest.mark.slow
def test_postgresql_gives_the_same_pages_and_refuses_writes(made: Made, client: TestClient, postgres_url: str) -> None:
    from sqlalchemy import insert

    from embedscope.history import tables
    from embedscope.history.store import StoreError
    from support.postgres import fresh_database

    store = Store(fresh_database(postgres_url, "web_pages"))
    for name, folder in made.folders.items():
        store.import_folders([folder], tags=[made.tags[name]] if name in made.tags else [])
    served = TestClient(create_app(store, OPTIONS))

    def same(url: str) -> Any:
        body = served.get(url).json()
        assert _without_ids(body) == _without_ids(client.get(url).json()), url
        return body

    board = same("/api/leaderboard")
    assert {(r["model"], r["experiment"]) for r in board["rows"]} == set(made.scores)
    same("/api/leaderboard?task_type=Retrieval&model=alpha")
    same("/api/task/RetA")
    same("/api/compare?a=tag:baseline&b=tag:candidate")
    assert served.get("/task/RetA").status_code == 200 and served.get("/model/org/gamma").status_code == 404
    run_id, now = board["rows"][0]["cells"]["RetA"]["run_id"], dt.datetime.now(dt.timezone.utc)
    with pytest.raises(StoreError, match="read-only"), reading(store, "writing") as connection:
        connection.execute(insert(tables.tags).values(name="x", run_id=run_id, tagged_at=now))
    store.dispose()


def _without_ids(value: Any) -> Any:
    """``value`` less what differs between two stores holding the same runs: run ids and recording times."""
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k not in ("id", "run_id", "recorded_at", "newest")}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


# -- served by uvicorn, opened in Chromium -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(made: Made) -> Iterator[str]:
    """The app on a free port of 127.0.0.1, served by uvicorn in a thread; its address."""
    import uvicorn

    store = Store(made.url)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)
    sock.close()
    store.dispose()


@pytest.mark.slow
def test_uvicorn_serves_the_api(served: str, made: Made) -> None:
    with urllib.request.urlopen(f"{served}/api/leaderboard") as answer:
        body = json.loads(answer.read())
    assert {(r["model"], r["experiment"]) for r in body["rows"]} == set(made.scores)


class _Address:
    """An http address where ``support.browser.headless_page`` expects a file (it opens ``as_uri()``)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def as_uri(self) -> str:
        return self.url


@pytest.mark.slow
def test_the_pages_in_chromium(served: str, made: Made) -> None:
    from support.browser import headless_page

    dialogs: list[str] = []
    elsewhere: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(served + "/"):
            r.continue_()
        else:
            elsewhere.append(r.request.url)
            r.abort()

    with headless_page(_Address(served + "/")) as opened:  # type: ignore[arg-type]
        page = opened.page
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.route("**/*", route)
        for path in (
            "/",
            "/task/RetA",
            f"/task/{HOSTILE_TASK.replace('&', '%26')}",
            "/model/org/alpha",
            "/compare?a=tag:baseline&b=tag:candidate",
        ):
            page.goto(served + path)
            page.wait_for_load_state("load")
            if path == "/":
                shown = page.locator("#leaderboard tbody td.name a").all_inner_texts()
                assert set(shown) == {m for m, _ in made.scores}
                assert HOSTILE in shown
                opened.screenshot("web-leaderboard.png")
        assert page.evaluate("document.title").endswith("embedscope")
        assert not dialogs and not elsewhere and not opened.errors
        assert opened.requests and all(u.startswith(served + "/") for u in opened.requests)
