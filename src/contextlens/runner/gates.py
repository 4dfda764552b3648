"""Pass marks a run is held to (``--fail-under METRIC=VALUE``), checked against the run's own
metrics before its first judge call, so a misspelt metric or a value out of range never
costs a run, and a gate never checks a metric the user did not name."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from contextlens.metrics.registry import match
from contextlens.results import EvalRun
from contextlens.schemas import MetricKey

__all__ = ["Gate", "GateMode", "parse_gates", "parse_pass_marks", "parse_value", "pass_marks_for"]

GateMode = Literal["point", "interval"]


def parse_value(text: str, *, option: str, item: str) -> float:
    """``text`` as a pass mark: a number in [0, 1] (ValueError naming ``option`` else)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0.0 <= value <= 1.0):
        raise ValueError(f"{option} {item!r}: expected a value in [0, 1], got {text.strip()!r}")
    return value


@dataclass(frozen=True)
class Gate:
    """A run fails this gate when its metric ``key`` is below ``value``: its mean
    (``point``), or the upper bound of its interval (``interval``: the data show with the
    interval's credibility that the metric is under the bar)."""

    key: MetricKey
    value: float
    mode: GateMode = "point"

    def missed(self, run: EvalRun) -> str | None:
        """Why ``run`` misses the gate, or None when it passes."""
        summary = run.summaries[self.key]
        got = summary.mean if self.mode == "point" else summary.ci_high
        if got is not None and got >= self.value:
            return None
        shown = "no score" if got is None else f"{got:.3f}"
        what = "mean" if self.mode == "point" else "upper bound of the interval"
        return f"{self.key}: {what} {shown} < {self.value:g}"


def parse_gates(
    items: Iterable[str],
    keys: Sequence[str],
    *,
    mode: GateMode = "point",
    option: str = "--fail-under",
) -> list[Gate]:
    """``["context-precision=0.7"]`` as gates on the run's metric ``keys``; ValueError (a
    usage error) for a malformed item, a value outside [0, 1], or a name that is not one of
    the run's metrics (never a prefix match)."""
    gates: list[Gate] = []
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name.strip():
            raise ValueError(f"{option} expects METRIC=VALUE, got {item!r}")
        key = match(name.strip(), keys, what=option)
        gates.append(Gate(key, parse_value(value, option=option, item=item), mode))
    return gates


def parse_pass_marks(
    items: Iterable[str], keys: Sequence[str], *, option: str = "--threshold"
) -> dict[MetricKey, float]:
    """``["context-precision=0.7"]`` as each named metric's pass mark: an item passes at a
    score of the value or more. The same checks as :func:`parse_gates`."""
    marks: dict[MetricKey, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name.strip():
            raise ValueError(f"{option} expects METRIC=VALUE, got {item!r}")
        marks[match(name.strip(), keys, what=option)] = parse_value(value, option=option, item=item)
    return marks


def pass_marks_for(thresholds: Mapping[str, float], keys: Sequence[str]) -> dict[MetricKey, float]:
    """``thresholds`` (any name of a metric -> value) by the run's metric keys; an error for a
    name that is none of them or a value outside [0, 1]."""
    return parse_pass_marks((f"{k}={v}" for k, v in thresholds.items()), keys, option="thresholds")
