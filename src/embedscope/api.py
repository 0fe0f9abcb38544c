"""The verbs of embedscope's Python API, one per command, over the same library calls the commands make.

The return convention, the same for every verb: one object (never a bare list or ``None``) whose ``table()`` is the
text the matching command prints and whose ``to_dict()`` is plain data for JSON (what its ``--json`` prints). Settings
are keyword arguments named as :class:`~embedscope.settings.RunSettings` keys (a config file's keys, the flags'
long names with ``_`` for ``-``), checked once, as the command line's are.

=================  ===========================  ============================================
verb               command                      returns
=================  ===========================  ============================================
``evaluate``       ``embedscope run``           :class:`EvaluationReport`
``evaluate_config````embedscope run --config``  :class:`EvaluationReports` (one per model)
``screen``         ``embedscope screen``        :class:`~embedscope.screen.run.ScreenReport`
``sweep``          ``embedscope sweep``         :class:`~embedscope.sweep.report.SweepReport`
``compare``        ``embedscope compare``       :class:`~embedscope.compare.core.Comparison`
``score_run``      ``embedscope score``         :class:`Scores`
``report``         ``embedscope report``        :class:`~embedscope.results.report.ReportTables`
``inspect``        ``embedscope inspect``       :class:`~embedscope.evaluation.inspect.Inspection`
``gate``           ``embedscope gate``          :class:`~embedscope.history.gate.GateResult`
=================  ===========================  ============================================

The results store is :class:`~embedscope.history.store.Store` (``embedscope results``): ``import_folders``,
``runs(RunFilter(...))``, ``tag``, ``export``; ``evaluate(..., store=URL, tag=NAME)`` records as it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from embedscope.compare.core import CompareOptions, Comparison
from embedscope.evaluation.inspect import Inspection
from embedscope.evaluation.runner import EvaluationReport
from embedscope.results.report import ReportTables
from embedscope.sweep.report import SweepReport

__all__ = ["EvaluationReports", "Scores", "evaluate_config", "score_run", "sweep", "compare", "report", "inspect"]


class EvaluationReports(list[EvaluationReport]):
    """One :class:`~embedscope.evaluation.runner.EvaluationReport` per model of a config, in its order (a list, with
    the verbs' ``table()`` and ``to_dict()``).

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> config = {"models": [KeywordEncoder(["cat"], name="kw/cat"), KeywordEncoder(["dog"], name="kw/dog")],
        ...           "tasks": [tiny_retrieval_task()]}
        >>> reports = embedscope.evaluate_config(config, output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> [m["model"] for m in reports.to_dict()["models"]]
        ['kw/cat', 'kw/dog']
    """

    def table(self) -> str:
        """Each model's summary table, as ``embedscope run --config`` prints them."""
        return "\n\n".join(r.table() for r in self)

    def to_dict(self) -> dict[str, Any]:
        """``{"models": [each report's to_dict()]}``."""
        return {"models": [r.to_dict() for r in self]}


class Scores(dict[str, float]):
    """Metrics of a run under their MTEB key names (``ndcg_at_10`` …): a dict, with the verbs' ``table()`` and
    ``to_dict()``.

    Examples:
        >>> import embedscope
        >>> scores = embedscope.score_run({"q1": {"d1": 1}}, {"q1": {"d2": 0.9, "d1": 0.5}}, k_values=[1, 10])
        >>> scores["mrr_at_10"], scores.to_dict() == dict(scores)
        (0.5, True)
    """

    def table(self) -> str:
        """The ranking metrics at each cutoff, as ``embedscope score`` prints them."""
        from embedscope.results.table import markdown_table

        families = ("ndcg", "map", "recall", "precision", "hit_rate", "mrr")
        ks = sorted({int(k.rsplit("_", 1)[1]) for k in self if k.startswith("ndcg_at_")})
        rows = [[f, *[f"{self[f'{f}_at_{k}']:.5f}" for k in ks]] for f in families]
        return markdown_table(["metric", *[f"@{k}" for k in ks]], rows)

    def to_dict(self) -> dict[str, float]:
        """A plain dict (what ``embedscope score --json`` prints)."""
        return dict(self)


def evaluate_config(config: str | Path | dict[str, Any], **overrides: Any) -> EvaluationReports:
    """Run a YAML/JSON config file or mapping (embedscope's schema or EvalScope's ``eval_config``), as
    ``embedscope run --config FILE`` does; ``overrides`` (any ``RunSettings`` key) win over the file's values.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> config = {"model": KeywordEncoder(["cat", "dog", "fish"]), "tasks": [tiny_retrieval_task()]}
        >>> reports = embedscope.evaluate_config(config, output_folder=tempfile.mkdtemp(), cache=False, show_progress=False)
        >>> len(reports), reports[0].outcomes[0].result.main_score()
        (1, 1.0)
    """
    from embedscope.evaluation.runner import evaluate_config as run_config

    return EvaluationReports(run_config(config, **overrides))


def score_run(
    qrels: str | Path | dict,
    run: str | Path | dict,
    *,
    k_values: Sequence[int] | None = None,
    ignore_identical_ids: bool = False,
) -> Scores:
    """Metrics of a precomputed run against qrels, no model involved (``embedscope score``): files (TREC, BEIR tsv,
    ``qrels.jsonl``, JSON, ``run --save-predictions``' predictions) or dicts ``{query: {doc: score}}``.

    Examples:
        >>> import embedscope
        >>> scores = embedscope.score_run({"q1": {"d1": 1}}, {"q1": {"d1": 0.9, "d2": 0.1}}, k_values=[1, 10])
        >>> scores["ndcg_at_1"], scores["recall_at_10"]
        (1.0, 1.0)
        >>> print(scores.table().splitlines()[0])
        | metric | @1 | @10 |
    """
    from embedscope.evaluation.runner import score_run as score

    return Scores(score(qrels, run, k_values=k_values, ignore_identical_ids=ignore_identical_ids))


def sweep(
    axes: Mapping[str, Sequence[Any]],
    *,
    grids: Sequence[Mapping[str, Sequence[Any]]] = (),
    compare_options: CompareOptions = CompareOptions(),
    tune_folds: int | None = None,
    log: TextIO | None = None,
    **settings: Any,
) -> SweepReport:
    """Run the grid ``axes`` (each a ``RunSettings`` key or path into one, ``model_options.pooling``, with its values)
    × each of ``grids`` (sub-grids, as a sweep file's ``grids:``) on ``settings``, and compare the points task by
    task (``embedscope sweep``). A manifest in ``output_folder/sweeps/`` lets ``report(…, html=…)`` draw it; stored
    results of the same settings are reused, so an interrupted sweep resumes. ``log``: a line per point (e.g.
    ``sys.stderr``).

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> result = embedscope.sweep(
        ...     {"truncate_dim": [1, 3]}, model=KeywordEncoder(["cat", "dog", "fish"]),
        ...     tasks=[tiny_retrieval_task()], output_folder=tempfile.mkdtemp(), cache=False, show_progress=False,
        ...     compare_options=embedscope.CompareOptions(rounds=200))
        >>> [(row.label, round(row.score, 4), row.best) for row in result.rows]
        [('truncate_dim=1', 0.7103, False), ('truncate_dim=3', 1.0, True)]
        >>> result.table().startswith("### TinyRetrieval")
        True
    """
    from embedscope.compare.core import check_options
    from embedscope.settings import Layer
    from embedscope.sweep.grid import SweepGrid, run_sweep
    from embedscope.sweep.manifest import SweepManifest
    from embedscope.sweep.report import sweep_report

    check_options(compare_options)
    layers = [Layer("sweep()", dict(settings), "api")] if settings else []
    grid = SweepGrid(
        layers, [(k, list(v)) for k, v in axes.items()], [[(k, list(v)) for k, v in g.items()] for g in grids]
    )
    grid.points()  # every point valid before any runs
    manifest = SweepManifest.for_grid(grid)
    manifest.write()
    outcomes = run_sweep(grid, log, on_point=manifest.add)
    return sweep_report(outcomes, grid.axis_keys, compare_options, tune_folds)


def compare(
    folders: Sequence[str | Path] = (),
    *,
    models: Sequence[str] | None = None,
    tasks: Sequence[str] | None = None,
    options: CompareOptions = CompareOptions(),
    fidelity: bool = False,
    output_folder: str | Path = "results",
    cache: bool | str = True,
    limits: int | None = None,
    store: Any = None,
) -> Comparison:
    """Significance of score differences (``embedscope compare``): result ``folders`` (one model each, the first the
    reference; a run in a results ``store`` as ``tag:NAME`` or ``run:ID``), or ``models`` evaluated on ``tasks`` into
    ``output_folder`` (with per-text embedding agreement). ``fidelity`` adds ranking and similarity agreement with
    the first folder.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> out = tempfile.mkdtemp()
        >>> for keywords in (["cat", "dog", "fish"], ["cat"]):
        ...     r = embedscope.evaluate(KeywordEncoder(keywords, name="kw/" + "-".join(keywords)), [tiny_retrieval_task()],
        ...                             output_folder=f"{out}/{len(keywords)}", cache=False, show_progress=False)
        >>> comparison = embedscope.compare([f"{out}/3", f"{out}/1"], options=embedscope.CompareOptions(rounds=500))
        >>> comparison.models, comparison.rows[0].delta < 0
        (['kw/cat-dog-fish', 'kw/cat'], True)
    """
    from embedscope.compare.core import check_options, compare_folders

    check_options(options)
    if models:
        from embedscope.errors import ConfigError
        from embedscope.evaluation.agreement import compare_model_runs

        if folders:
            raise ConfigError("give result folders or models, not both")
        return compare_model_runs(
            list(models), list(tasks or []), str(output_folder), options, cache=cache, limits=limits
        )
    from embedscope.history.sides import side_kind

    if store is not None or any(side_kind(str(f)) == "store" for f in folders):
        from embedscope.compare.core import compare_models
        from embedscope.compare.fidelity import agreement
        from embedscope.history.sides import compared_models

        models_read = compared_models([str(f) for f in folders], store)
        return compare_models(models_read, options, tasks, agreement if fidelity else None)
    return compare_folders(list(folders), options, tasks, fidelity=fidelity)


def report(
    folders: Sequence[str | Path],
    *,
    benchmark: str | None = None,
    digits: int = 3,
    html: str | Path | None = None,
    baseline: str | None = None,
    options: CompareOptions = CompareOptions(),
    store: Any = None,
) -> ReportTables:
    """Per task, per task type and overall means over result folders (and runs in a results ``store``, ``tag:NAME``
    or ``run:ID``), models side by side (``embedscope report``);
    ``benchmark`` keeps one of mteb's benchmarks' tasks and ranks by Borda count; ``html`` also writes the offline
    HTML report (leaderboard, per-task charts with intervals and significance against ``baseline``, and every sweep
    recorded in the folders) to that file.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import tiny_retrieval_task
        >>> out = tempfile.mkdtemp()
        >>> _ = embedscope.evaluate(KeywordEncoder(["cat", "dog", "fish"]), [tiny_retrieval_task()],
        ...                         output_folder=out, cache=False, show_progress=False)
        >>> tables = embedscope.report([out])
        >>> tables.per_task[1][:2]
        ['TinyRetrieval', 'Retrieval']
    """
    from embedscope.errors import ConfigError
    from embedscope.history.sides import report_rows, side_kind
    from embedscope.results.report import build_report, restrict_to_benchmark

    if not 0 <= digits <= 10:
        raise ConfigError(f"digits must be a whole number from 0 to 10, not {digits}")
    if html is not None and any(side_kind(str(f)) == "store" for f in folders):
        raise ConfigError("html: the HTML report reads result folders; write the runs out with 'results export' first")
    rows = report_rows([str(f) for f in folders], store)
    if benchmark:
        rows = restrict_to_benchmark(rows, benchmark)
    tables = build_report(rows, digits=digits, borda=bool(benchmark))
    if html is not None:
        write_report_html(list(folders), Path(html), baseline, options)
    return tables


def inspect(
    folder: str | Path,
    *,
    task: str | None = None,
    worst: int = 10,
    group: str | None = None,
    parquet: str | Path | None = None,
    data_dir: str | Path | None = None,
) -> Inspection:
    """The mistakes of one ranking result, readable (``embedscope inspect``): the ``worst`` queries (0: every one) of
    ``task`` in one model's result ``folder`` by the task's main metric, each with its text, the documents judged
    relevant (with their ranks), the top 10 retrieved (ranks, scores when predictions were saved, texts) and a
    pipeline's failure class; ``group`` keeps one query group (``group_by``); ``parquet`` also writes the flat rows
    (:meth:`~embedscope.evaluation.inspect.Inspection.rows`) to that file. ``data_dir``: local copies of catalog data.

    Examples:
        >>> import tempfile, embedscope
        >>> from embedscope.testing.fakes import KeywordEncoder
        >>> from embedscope.testing.tiny import write_tiny_beir
        >>> root = tempfile.mkdtemp()
        >>> data = write_tiny_beir(f"{root}/tiny")
        >>> _ = embedscope.evaluate(KeywordEncoder(["cat"]), [str(data)], output_folder=f"{root}/out", cache=False,
        ...                         show_progress=False)
        >>> found = embedscope.inspect(f"{root}/out", worst=2)
        >>> [(q.id, round(q.value, 3)) for q in found.queries], found.notes[0].startswith("no predictions saved")
        ([('q2', 0.5), ('q3', 0.631)], True)
    """
    from embedscope.evaluation.inspect import inspect_result

    found = inspect_result(folder, task, worst=worst, group=group, data_dir=data_dir)
    if parquet is not None:
        found.write_parquet(parquet)
    return found


def write_report_html(folders: list[str | Path], path: Path, baseline: str | None, options: CompareOptions) -> None:
    """The offline HTML report of ``embedscope report --html`` to ``path``: leaderboard, per-task charts, and each sweep
    recorded in the folders (a ``sweeps/*.json`` manifest that ``embedscope sweep`` writes) over its points so far."""
    from embedscope.compare.core import check_options
    from embedscope.compare.html import build_html
    from embedscope.files import atomic_write_text
    from embedscope.sweep.html import SweepView, with_sweeps
    from embedscope.sweep.manifest import find_manifests, read_manifest
    from embedscope.sweep.report import sweep_report

    check_options(options)
    views = []
    for folder in folders:
        for manifest in find_manifests(folder):
            recorded = read_manifest(manifest, folder)  # only results inside the folder given
            done = sweep_report(recorded.outcomes, recorded.axes, options)
            views.append(SweepView(str(manifest), done, len(recorded.outcomes), recorded.total))
    atomic_write_text(path, with_sweeps(build_html([str(f) for f in folders], baseline, options), views))
