"""Confidence scores and nAUC, the normalized area under the abstention curve (arXiv:2402.12997), as mteb computes them.

For a confidence vector ``c`` and a per-query metric ``m`` (both over the same queries), the abstention
curve at rate ``r`` is the mean of ``m`` over the queries kept after dropping the ``round(r · n)`` least
confident ones (stable order; at least one query is kept)::

    curve_c(r) = mean(m[order_c[min(round(r n), n - 1):]])        r in 0, 0.1, …, 0.9
    nAUC       = (AUC(curve_c) - AUC_flat) / (AUC(curve_m) - AUC_flat)
    AUC_flat   = curve_m(0) · (0.9 - 0)

with trapezoid AUCs over the rates; ``curve_m`` (queries ordered by the metric itself) is the oracle. nAUC is
``nan`` when the oracle is flat. mteb 2.x averages ``m`` over runs of equal confidence first
(:func:`nauc`); mteb 1.x (the legacy reranking protocol) does not (:func:`legacy_nauc`).

>>> conf, metric = np.array([0.9, 0.1, 0.5, 0.7]), np.array([1.0, 0.0, 0.5, 0.0])
>>> round(nauc(conf, metric), 6), round(legacy_nauc(conf, metric), 6)
(0.744681, 0.744681)
>>> confidence_scores([0.2, 0.9, 0.5])["diff1"]
0.4
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

CONFIDENCE_FUNCTIONS: tuple[str, ...] = ("max", "std", "diff1")
"""MTEB's per-query confidence functions used for nAUC."""

ABSTENTION_RATES = np.linspace(0, 1, 11)[:-1]
"""The abstention rates mteb evaluates: 0, 0.1, …, 0.9."""


def confidence_scores(scores: Sequence[float]) -> dict[str, float]:
    """One query's confidence: ``max`` = top score, ``std`` = ``np.std(scores)``, ``diff1`` = top-1 − top-2 (0 if one)."""
    ordered = sorted(scores)[::-1]
    return {
        "max": ordered[0],
        "std": float(np.std(scores)),
        "diff1": ordered[0] - ordered[1] if len(ordered) > 1 else 0.0,
    }


class TieGroups:
    """A confidence vector's stable sort order and its runs of equal values (computed once for several metrics)."""

    def __init__(self, conf: np.ndarray) -> None:
        self.order = np.argsort(conf, stable=True)
        sorted_conf = conf[self.order]
        self.start = np.flatnonzero(np.r_[True, sorted_conf[1:] != sorted_conf[:-1]]) if conf.size else None
        self.size = np.diff(np.r_[self.start, len(sorted_conf)]) if conf.size else None


def abstention_curve(
    conf: np.ndarray,
    metric: np.ndarray,
    rates: np.ndarray,
    groups: TieGroups | None = None,
    *,
    average_ties: bool = True,
) -> np.ndarray:
    """``curve_c(r)`` for each rate (see the module docstring); ``average_ties`` as mteb 2.x, off as mteb 1.x."""
    if conf.size == 0:
        return np.full(len(rates), np.nan)
    if average_ties:
        groups = groups or TieGroups(conf)
        assert groups.start is not None and groups.size is not None  # set for a non-empty conf
        order = groups.order
        group_mean = np.add.reduceat(metric[order], groups.start) / groups.size
        sorted_metric = np.repeat(group_mean, groups.size)
    else:
        order = np.argsort(conf, kind="stable")
        sorted_metric = metric[order]
    curve = np.zeros(len(rates))
    for i, rate in enumerate(rates):
        skipped = min(round(rate * order.shape[0]), len(conf) - 1)
        curve[i] = sorted_metric[skipped:].mean()
    return curve


def nauc(
    conf: np.ndarray,
    metric: np.ndarray,
    rates: np.ndarray = ABSTENTION_RATES,
    *,
    groups: TieGroups | None = None,
    oracle: np.ndarray | None = None,
    average_ties: bool = True,
) -> float:
    """Normalized area under the abstention curve, exactly as mteb computes it (formula: module docstring).

    ``np.trapezoid`` is the same sum as the ``scipy.integrate.trapezoid`` mteb 2.x calls and the
    ``sklearn.metrics.auc`` mteb 1.x calls (bit for bit), and spares importing either. ``groups`` (of
    ``conf``) and ``oracle`` (the metric's own curve) may be given when computed once for several calls.
    """
    raw = abstention_curve(conf, metric, rates, groups, average_ties=average_ties)
    if oracle is None:
        oracle = abstention_curve(metric, metric, rates, average_ties=average_ties)
    raw_auc = float(np.trapezoid(raw, rates))
    oracle_auc = float(np.trapezoid(oracle, rates))
    flat_auc = oracle[0] * (rates[-1] - rates[0])
    if oracle_auc == flat_auc:
        return float("nan")
    return float((raw_auc - flat_auc) / (oracle_auc - flat_auc))


def legacy_nauc(conf: np.ndarray, metric: np.ndarray, rates: np.ndarray = ABSTENTION_RATES) -> float:
    """mteb 1.x ``nAUC``: abstention curves with a stable argsort and no tie handling (nan if degenerate)."""
    return nauc(conf, metric, rates, average_ties=False)
