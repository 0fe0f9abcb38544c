"""The statistics options, declared once: how ``compare``, ``gate``, ``report --html``, ``sweep`` and ``screen``
test differences and draw intervals, and how many decimals they show.

Each field is an :func:`~embedscope.settings.options.option` of group ``statistics``, so its flag, help text and
reference row are generated as the run options' are; its default is :class:`~embedscope.compare.core.CompareOptions`'
(a command with other defaults, as ``gate``'s paired t-test, passes them as its base). A command keeps only the
options that act in it (``sweep`` tests against its best point and draws no interval of its own).

>>> s = StatisticsSettings(rounds=2000)
>>> s.compare_options().rounds, s.compare_options().test
(2000, 'permutation')
>>> from embedscope.settings.sources import Layer, build_declared
>>> build_declared(StatisticsSettings, [Layer("flags", {"alpha": 1.5}, "flag", {"alpha": "--alpha"})])
Traceback (most recent call last):
...
embedscope.errors.ConfigError: --alpha: Input should be less than 1
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from embedscope.compare.core import MAX_ROUNDS, CompareOptions
from embedscope.settings.options import option, register_family

_D = CompareOptions()
MAX_DIGITS = 10
GROUP = "statistics"


@register_family
class StatisticsSettings(BaseModel):
    """The paired tests', intervals' and tables' options (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    test: Literal["permutation", "t-test", "bootstrap"] = option(
        _D.test,
        group=GROUP,
        help="paired test: permutation (Fisher's randomisation) | t-test | bootstrap; STS and pair classification "
        "always use a bootstrap over pairs",
        metavar="TEST",
    )
    rounds: int = option(
        _D.rounds, group=GROUP, help="randomisation / bootstrap rounds of the tests and intervals", ge=1, le=MAX_ROUNDS
    )
    seed: int = option(_D.seed, group=GROUP, help="random seed of the tests and intervals (and of sweep's folds)")
    correction: Literal["holm", "bonferroni", "none"] = option(
        _D.correction, group=GROUP, help="multiple-comparison correction: holm | bonferroni | none", metavar="NAME"
    )
    alpha: float = option(_D.alpha, group=GROUP, help="significance level", gt=0, lt=1)
    confidence: float = option(
        _D.confidence,
        group=GROUP,
        help="confidence level of the intervals; with screen --proxy also the stated probability at which confirming "
        "the survivors stops",
        gt=0,
        lt=1,
    )
    digits: int = option(4, group=GROUP, help="decimals shown", ge=0, le=MAX_DIGITS, metavar="N")

    def compare_options(self, **more: Any) -> CompareOptions:
        """The :class:`CompareOptions` these settings give (``more``: its other fields, e.g. ``allow_mismatch``)."""
        given = {f.name: getattr(self, f.name) for f in fields(CompareOptions) if f.name in type(self).model_fields}
        return CompareOptions(**given, **more)


def statistics_defaults(options: CompareOptions, **more: Any) -> dict[str, Any]:
    """A command's defaults as settings values: ``options``' tests and intervals, with ``more`` (``digits=3``)."""
    return {
        f.name: getattr(options, f.name) for f in fields(options) if f.name in StatisticsSettings.model_fields
    } | more
