"""Command-line options shared by several commands: retrieval pipelines and mteb benchmarks."""

from __future__ import annotations

import argparse
import sys

from embedscope.errors import ConfigError, EmbedscopeError


def add_pipeline_options(p: argparse.ArgumentParser, required: bool = False) -> None:
    """--retriever (repeatable), --fusion, --rrf-k, --weights, --reranker, --pipeline-name; see :func:`pipeline_spec`."""
    p.add_argument(
        "--retriever",
        action="append",
        default=None,
        metavar="SPEC",
        required=required,
        help="first-stage retriever (repeat to fuse several): bm25[:k1=..,b=..,method=..], "
        "fts5[:match=all], MODEL or dense:MODEL, colbert:MODEL",
    )
    p.add_argument(
        "--fusion",
        default=None,
        help="how to fuse several retrievers: rrf (default), wsum-min-max, wsum-zmuv, wsum-none",
    )
    p.add_argument("--rrf-k", type=int, default=None, help="RRF constant k (default 60)")
    p.add_argument("--weights", type=float, nargs="+", default=None, help="wsum weights, one per retriever (finite)")
    p.add_argument(
        "--reranker",
        action="append",
        default=None,
        metavar="SPEC",
        help="rerank the top --top-k candidates: a cross-encoder folder (or cross-encoder:PATH), "
        "colbert:MODEL, or an embedding model; repeat for more stages",
    )
    p.add_argument("--pipeline-name", default=None, help="name results are filed under (default: from the stages)")


def pipeline_spec(args: argparse.Namespace, model: str | None = None) -> dict | None:
    """The pipeline given by --retriever/--reranker/--fusion/--rrf-k/--weights/--pipeline-name (the keys of
    :class:`~embedscope.settings.run.PipelineConfig`), or None. With --reranker alone, ``model`` (--model) is the
    first stage."""
    get = lambda name: getattr(args, name, None)  # noqa: E731 - flags that were not given are absent
    if not (get("retriever") or get("reranker")):
        if get("fusion") or get("rrf_k") is not None or get("weights") or get("pipeline_name"):
            raise EmbedscopeError("--fusion/--rrf-k/--weights/--pipeline-name need --retriever (two or more to fuse)")
        return None
    if model and get("retriever"):
        raise EmbedscopeError("give the first stage with --model or with --retriever, not both")
    fusion = None
    if get("fusion") or get("rrf_k") is not None or get("weights"):
        from embedscope.retrieval.pipeline import parse_fusion

        parsed = parse_fusion(get("fusion") or "rrf")
        assert parsed is not None  # a fusion name always parses
        fusion = {"method": parsed.method, "k": parsed.k, "norm": parsed.norm}
        if get("rrf_k") is not None:
            fusion["k"] = get("rrf_k")
        if get("weights"):
            fusion["weights"] = list(get("weights") or ())
    return {
        "retrievers": get("retriever") or [model or "minilm"],
        "fusion": fusion,
        "rerankers": get("reranker") or [],
        "name": get("pipeline_name"),
    }


def benchmark_tasks(name: str | None) -> list[str]:
    """The catalog tasks of benchmark ``name`` (none for None); its tasks outside the text catalog are named."""
    if not name:
        return []
    from embedscope.tasks.catalog import benchmark_specs

    specs, missing = benchmark_specs(name)
    if missing:
        print(
            f"embedscope: {name}: {len(missing)} task(s) are not text tasks embedscope runs, left out: "
            f"{', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}",
            file=sys.stderr,
        )
    if not specs:
        raise ConfigError(f"{name}: none of its tasks is a text task embedscope runs")
    return specs
