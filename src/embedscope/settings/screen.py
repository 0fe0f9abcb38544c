"""The screen's options, declared once: which way it screens, how many it confirms, when two models tie.

Each field is an :func:`~embedscope.settings.options.option` of group ``screen`` (flags, help and reference generated
as the run options' are); the rules between them are checked here, once, in settings keys, for the command line and
the Python API alike (``embedscope.screen(models, proxy=[0.05], audit=True)``). The statistics the screen tests with
are :class:`~embedscope.settings.statistics.StatisticsSettings`.

>>> ScreenSettings(proxy=[0.05, 0.2]).margin
0.005
>>> from embedscope.settings.sources import Layer, build_declared
>>> build_declared(ScreenSettings, [Layer("flags", {"tie_margin": 0.01}, "flag", {"tie_margin": "--tie-margin"})])
Traceback (most recent call last):
...
embedscope.errors.ConfigError: --tie-margin applies to a screen with --proxy: give --proxy too, or drop it
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from embedscope.errors import ConfigError, SettingError
from embedscope.settings.options import option, register_family
from embedscope.tasks.proxy import ProxySpec

DEFAULT_MARGIN = 0.005  # main-score points within which two models count as tied: below what any test here resolves
DEFAULT_CONFIRM = 2
GROUP = "screen"
_WITH_PROXY = ("tie_margin", "audit")  # act in a screen with proxy rounds only


@register_family
class ScreenSettings(BaseModel):
    """How a screen screens (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    fast: str | None = option(
        None,
        group=GROUP,
        help="screen on a fast pass on this path (auto: the fastest one that runs here); with none of fast, confirm, "
        "proxy or no-fidelity, the screen's plan chooses proxy rounds or exact runs",
        metavar="PATH",
    )
    confirm: int | None = option(
        None,
        group=GROUP,
        help=f"models to confirm exact, besides those whose CI overlaps (default {DEFAULT_CONFIRM}; not with proxy "
        "rounds, whose survivors are confirmed)",
        ge=1,
        metavar="N",
    )
    proxy: list[int | float] | None = option(
        None,
        group=GROUP,
        help="successive halving on proxy tasks instead of a fast pass: the size of each round's proxies (a count "
        "of queries or rows, or a fraction in (0, 1)), growing; the survivors run exact",
        nargs="+",
        metavar="SIZE",
    )
    tie_margin: float | None = option(
        None,
        group=GROUP,
        help=f"with proxy rounds: models equivalent within this many main-score points (TOST) are tied, and only the "
        f"cheapest of each tie goes on (default {DEFAULT_MARGIN})",
        ge=0,
        metavar="POINTS",
    )
    audit: bool = option(
        False,
        group=GROUP,
        help="with proxy rounds: also run every candidate exact and say whether the screen's claim held",
        action="store_true",
    )
    audit_seeds: int = option(
        0,
        group=GROUP,
        help="with the audit: replay the screen at N more seeds (their own proxies, the same exact runs) and say how "
        "often its claim held beside the probability it stated, and how tau spreads",
        ge=0,
        metavar="N",
    )
    fidelity: bool | None = option(
        None,
        group=GROUP,
        flags=("--no-fidelity",),
        help="leave out the per-text cosines of a fast-pass screen (read from the vectors both passes cached, never "
        "encoded again); a screen with proxy rounds measures none",
        action="store_false",
    )

    @property
    def mode(self) -> str | None:
        """The way to screen the options name: ``proxy`` (proxy rounds), ``fast`` (a fast pass: ``fast``,
        ``confirm`` or ``fidelity`` given), or None: the screen's plan chooses
        (:mod:`embedscope.screen.plan`)."""
        if self.proxy is not None:
            return "proxy"
        if self.fast is not None or self.confirm is not None or self.fidelity is not None:
            return "fast"
        return None

    @field_validator("proxy", mode="before")
    @classmethod
    def _sizes_as_numbers(cls, value: Any) -> Any:
        """Sizes as written on a command line (``10``, ``0.05``): a count when whole, else a fraction."""
        if not isinstance(value, (list, tuple)):
            return value
        return [_number(v) if isinstance(v, str) else v for v in value]

    @property
    def margin(self) -> float:
        """The tie margin in main-score points (:data:`DEFAULT_MARGIN` unless given)."""
        return DEFAULT_MARGIN if self.tie_margin is None else self.tie_margin

    @model_validator(mode="after")
    def _options_act(self) -> ScreenSettings:
        if self.proxy is None:
            for key in _WITH_PROXY:
                if getattr(self, key) not in (None, False):
                    raise SettingError(
                        key, f"{{{key}}} applies to a screen with {{proxy}}: give {{proxy}} too, or drop it"
                    )
        else:
            _check_sizes(self.proxy)
            if self.confirm is not None:
                raise SettingError(
                    "confirm", "{confirm}: with {proxy} the rounds decide which models to confirm; drop it"
                )
            if self.fidelity is not None:
                raise SettingError("fidelity", "{fidelity}: a screen with {proxy} measures no fidelity; drop it")
        if self.audit_seeds and not self.audit:
            raise SettingError(
                "audit_seeds", "{audit_seeds}: give {audit} too (each replay is judged against the exact runs)"
            )
        return self


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise SettingError(
            "proxy", f"{{proxy}} {text}: give a count (an integer ≥ 1) or a fraction in (0, 1)"
        ) from None


def _check_sizes(sizes: list[int | float]) -> None:
    """Each round's size a count ≥ 1 or a fraction in (0, 1); growing, all counts or all fractions."""
    try:
        specs = [ProxySpec(size=s) for s in sizes]
    except ConfigError as e:
        raise SettingError("proxy", f"{{proxy}} {' '.join(map(str, sizes))}: {e}") from None
    if not specs:
        raise SettingError("proxy", "{proxy}: give the size of each round (a count ≥ 1 or a fraction in (0, 1))")
    if len({type(s.size) for s in specs}) > 1 or any(b.size <= a.size for a, b in zip(specs, specs[1:])):
        raise SettingError(
            "proxy", f"{{proxy}} {' '.join(map(str, sizes))}: give growing sizes, all counts or all fractions"
        )


def screen_values(**given: Any) -> dict[str, Any]:
    """The keyword arguments of ``embedscope.screen()`` that are screen settings (the rest are run settings)."""
    return {k: v for k, v in given.items() if k in ScreenSettings.model_fields}
