"""The FastAPI app of ``embedscope serve``: server-rendered pages (Jinja2, autoescaped) and the same data as JSON
under ``/api``.

- ``/`` and ``/api/leaderboard``: models × tasks (each model's newest run per task), means, cost; query parameters
  ``task_type``, ``model`` (a substring of the name), ``tag`` (repeatable), ``sort``;
- ``/task/NAME`` and ``/api/task/NAME``: each model's score, its interval and its per-item distribution;
- ``/model/NAME`` and ``/api/model/NAME``: the model's runs and its score over time per task;
- ``/compare?a=RUN&b=RUN`` and ``/api/compare?a=RUN&b=RUN``: two runs side by side (``run:ID``, an id prefix or
  ``tag:NAME``);
- ``/openapi.json``: the API's schema (``/docs`` and ``/redoc``, which load their assets from a CDN, are off).

Every page works offline: inline styles and SVG, no script (the Content-Security-Policy allows none), nothing
fetched. The app only reads (:func:`embedscope.history.queries.reading`). A task, model or run the store does not
hold is a 404 with one line; a store that cannot be read a 503; nothing shows a traceback.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import urllib.parse
from collections.abc import Sequence
from typing import Annotated, Any

import jinja2
from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from embedscope.compare.core import CompareOptions
from embedscope.errors import EmbedscopeError
from embedscope.history import queries
from embedscope.history.gate import GATE_OPTIONS, TEST_NAMES
from embedscope.history.queries import LeaderFilter, NotFound
from embedscope.history.store import Store, StoreError
from embedscope.history.web import charts
from embedscope.messages import clip_text
from embedscope.version import __version__

logger = logging.getLogger(__name__)

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
Tags = Annotated[list[str] | None, Query(description="only runs carrying this tag (repeat for more)")]


def num(value: float | None, digits: int = 4) -> str:
    """A score as the pages show it (``–`` when missing)."""
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def quoted(value: str) -> str:
    """``value`` as one URL path segment."""
    return urllib.parse.quote(value, safe="")


def shade(value: float | None, low: float, high: float) -> str:
    """A cell's background: stronger blue the nearer ``value`` is to the column's best (``high``)."""
    if value is None or high <= low:
        return "transparent"
    return f"rgba(59,110,168,{0.06 + 0.32 * (value - low) / (high - low):.3f})"


def board_url(where: LeaderFilter, sort: str, api: bool = False) -> str:
    """The leaderboard's URL with ``where`` and ``sort``."""
    pairs = [("task_type", where.task_type), ("model", where.model), *(("tag", t) for t in where.tags)]
    pairs.append(("sort", None if sort == "mean" else sort))
    query = urllib.parse.urlencode([(k, v) for k, v in pairs if v])
    return ("/api/leaderboard" if api else "/") + (f"?{query}" if query else "")


def environment() -> jinja2.Environment:
    """The pages' templates (package data), autoescaped, with the helpers they use."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("embedscope.history.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=num, q=quoted, when=lambda t: t.strftime("%Y-%m-%d %H:%M UTC"))
    env.globals.update(
        test_names=TEST_NAMES,
        charts=charts,
        shade=shade,
        board_url=board_url,
        compare_url=lambda a, b: "/compare?" + urllib.parse.urlencode({"a": a, "b": b}),
    )
    return env


def _leader_filter(task_type: str | None, model: str | None, tags: Sequence[str] | None) -> LeaderFilter:
    """The filter of the query parameters (empty ones ignored; a ``tag`` may list several, space-separated)."""
    names = tuple(dict.fromkeys(n for t in tags or () for n in t.split()))
    return LeaderFilter(task_type or None, (model or "").strip() or None, names)


def _label(model: str, experiment: str | None) -> str:
    """A model's label in a chart: its name, and its experiment's when it has one."""
    return f"{model} · exp {experiment[:8]}" if experiment else model


def _columns(board: queries.Leaderboard) -> dict[str, tuple[float, float]]:
    """Each task's lowest and highest score (the cells' shading)."""
    out = {}
    for task in board.tasks:
        scores = [c.score for r in board.rows if (c := r.cells.get(task.name)) and c.score is not None]
        out[task.name] = (min(scores), max(scores)) if scores else (0.0, 0.0)
    return out


def _history_series(history: queries.ModelHistory) -> dict[str, dict[str, list[Any]]]:
    """Per task, per experiment (``""``: the model's own settings), its ``(time, score, run id)`` points."""
    out: dict[str, dict[str, list[Any]]] = {}
    for task, points in history.series.items():
        for p in points:
            out.setdefault(task, {}).setdefault(p.experiment or "", []).append((p.recorded_at, p.score, p.run_id))
    return out


def _previous_runs(history: queries.ModelHistory) -> dict[str, str]:
    """Each run's previous run of the same experiment (what its "compare" link compares it with)."""
    last: dict[str | None, str] = {}
    out = {}
    for run in history.runs:
        if run.experiment in last:
            out[run.id] = last[run.experiment]
        last[run.experiment] = run.id
    return out


def create_app(store: Store, options: CompareOptions = GATE_OPTIONS) -> FastAPI:
    """The web app over ``store`` (read only); ``options`` set the intervals and the paired tests."""
    app = FastAPI(
        title="embedscope results store",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        description="A read-only view of an embedscope results store: the pages and their data as JSON.",
    )
    env = environment()
    memo = queries.Memo()

    def page(template: str, code: int = 200, **context: Any) -> HTMLResponse:
        text = env.get_template(template).render(store_url=store.url, **context)
        return HTMLResponse(text, status_code=code)

    def failure(request: Request, status: int, message: str) -> Response:
        line = clip_text(" ".join(str(message).split()), 600)
        if request.url.path.startswith("/api/") or request.url.path == "/openapi.json":
            return JSONResponse({"detail": line}, status_code=status)
        return page("error.html", status, title=f"{status}", status=status, message=line, api_url="")

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "no-referrer")
        return response

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> Response:
        return failure(request, 404, str(exc))

    @app.exception_handler(StoreError)
    async def unavailable(request: Request, exc: StoreError) -> Response:
        return failure(request, 503, str(exc))

    @app.exception_handler(EmbedscopeError)
    async def refused(request: Request, exc: EmbedscopeError) -> Response:
        return failure(request, 500, str(exc))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        return failure(request, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        parts = [f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg', '')}" for e in exc.errors()]
        return failure(request, 422, "; ".join(parts) or "invalid request")

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> Response:
        logger.exception("embedscope serve: %s failed", request.url.path)
        return failure(request, 500, f"internal error ({type(exc).__name__}); the server's log has the details")

    @app.get("/", response_class=HTMLResponse, summary="The leaderboard page")
    def leaderboard_page(
        task_type: str | None = None, model: str | None = None, tag: Tags = None, sort: str = "mean"
    ) -> HTMLResponse:
        where = _leader_filter(task_type, model, tag)
        board = queries.leaderboard(store, where, sort)
        costs = any(r.usage is not None for r in board.rows)
        return page(
            "leaderboard.html",
            title="Leaderboard",
            board=board,
            where=where,
            costs=costs,
            columns=_columns(board),
            choices=queries.choices(store),
            api_url=board_url(where, sort, True),
        )

    @app.get("/api/leaderboard", summary="Models × tasks: each model's newest result per task, means and cost")
    def leaderboard_api(
        task_type: str | None = None, model: str | None = None, tag: Tags = None, sort: str = "mean"
    ) -> JSONResponse:
        return JSONResponse(queries.leaderboard(store, _leader_filter(task_type, model, tag), sort).to_dict())

    @app.get("/task/{name:path}", response_class=HTMLResponse, summary="One task across models")
    def task_page(name: str) -> HTMLResponse:
        view = queries.task_view(store, name, options=options, memo=memo)
        intervals = [(_label(e.model, e.experiment), e.score, e.ci_low, e.ci_high) for e in view.entries]
        return page("task.html", title=name, view=view, intervals=intervals, api_url=f"/api/task/{quoted(name)}")

    @app.get("/api/task/{name:path}", summary="One task: each model's score, its interval, per-item histogram")
    def task_api(name: str) -> JSONResponse:
        return JSONResponse(queries.task_view(store, name, options=options, memo=memo).to_dict())

    @app.get("/model/{name:path}", response_class=HTMLResponse, summary="One model's runs and score over time")
    def model_page(name: str) -> HTMLResponse:
        history = queries.model_history(store, name)
        return page(
            "model.html",
            title=name,
            history=history,
            series=_history_series(history),
            previous=_previous_runs(history),
            api_url=f"/api/model/{quoted(name)}",
        )

    @app.get("/api/model/{name:path}", summary="One model's runs and its score per task in each")
    def model_api(name: str) -> JSONResponse:
        return JSONResponse(queries.model_history(store, name).to_dict())

    @app.get("/compare", response_class=HTMLResponse, summary="Two runs side by side")
    def compare_page(a: str = "", b: str = "") -> HTMLResponse:
        comparison = queries.compare_runs(store, a, b, options) if a and b else None
        api = "/api/compare?" + urllib.parse.urlencode({"a": a, "b": b}) if comparison else ""
        tasks = comparison.tasks if comparison else []
        return page(
            "compare.html",
            title="Compare runs",
            a=a,
            b=b,
            comparison=comparison,
            api_url=api,
            tags=queries.choices(store)["tags"],
            scatters=[t for t in tasks if len(t.xs)],
            unplotted=[t.task for t in tasks if t.n and not len(t.xs)],
        )

    @app.get("/api/compare", summary="Run b against run a: per shared task Δ, CI and p-value (Holm across tasks)")
    def compare_api(a: str, b: str) -> JSONResponse:
        return JSONResponse(queries.compare_runs(store, a, b, options).to_dict())

    return app


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def serve(store: Store, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve the app over ``store`` with uvicorn at ``host``:``port`` until interrupted."""
    import uvicorn

    if not _loopback(host):
        logger.warning("embedscope serve: listening on %s: anyone who reaches it can read every run in the store", host)
    uvicorn.run(create_app(store), host=host, port=port, log_level="info")
