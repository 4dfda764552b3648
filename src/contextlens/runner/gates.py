"""The gates a run is held to, and how they came out.

Pass marks (``--fail-under METRIC=VALUE``) are checked against the run's own metrics before
its first judge call, so a misspelt metric or a value out of range never costs a run, and a
gate never checks a metric the user did not name. :func:`check_run` gives every gate's
outcome on a finished run (its pass marks, ``--max-failures``, its cost cap), the one source
of the exit status, the JUnit file and the Markdown summary. :class:`RegressionGate` holds a
run B to a baseline A (``compare --fail-on-regression``). Numbers are printed with the digits
that make them order as the decision does (:func:`ordered`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from contextlens.metrics.registry import match
from contextlens.results import EvalRun
from contextlens.schemas import MetricKey
from contextlens.stats import BayesianMode, bayesian_bootstrap_means, equal_tailed

__all__ = [
    "REGRESSION_RULE",
    "Gate",
    "GateKind",
    "GateMode",
    "GateOutcome",
    "GateStatus",
    "RegressionGate",
    "RegressionOutcome",
    "check_run",
    "failure_outcomes",
    "mark_text",
    "ordered",
    "parse_gates",
    "parse_max_failures",
    "parse_pass_marks",
    "parse_regression_gates",
    "parse_value",
    "pass_marks_for",
]

GateMode = Literal["point", "interval"]
GateKind = Literal["fail-under", "max-failures", "cost cap"]
#: ``met``, ``missed``, or ``not checked`` (a run its cost cap stopped: its other gates
#: would judge part of the data).
GateStatus = Literal["met", "missed", "not checked"]


def mark_text(mark: float) -> str:
    """A mark as given: its shortest text that reads back as the same number (``0.2``,
    ``1``, ``0.123456789``); ``0`` for either zero."""
    if mark == 0:
        return "0"
    short = f"{mark:g}"
    return short if float(short) == mark else repr(float(mark))


def ordered(
    value: float, mark: float, *, below: bool, least: int = 3, signed: bool = False
) -> tuple[str, str]:
    """``value`` and ``mark`` as texts that order as the decision does: ``below`` (the
    value is under the mark) prints the value strictly under the printed mark, else at or
    over it. The value takes ``least`` decimals, more when fewer would contradict the
    decision (0.19975 under 0.2 prints ``0.1998``, never ``0.200``); the mark is
    :func:`mark_text`. ``signed``: a sign on both (differences)."""
    shown = mark_text(mark)
    if signed and mark != 0:
        shown = f"{mark:+g}" if float(f"{mark:g}") == mark else f"{float(mark):+}"
    bar = float(shown)
    sign = "+" if signed else ""
    for digits in range(least, 18):
        text = f"{value:{sign}.{digits}f}"
        if (float(text) < bar) == below:
            return text, shown
    return (f"{value:+}" if signed else repr(float(value))), shown


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

    def outcome(self, run: EvalRun) -> GateOutcome:
        """How ``run`` comes out of the gate: its mean (or the interval's upper bound)
        against the value, printed so that they order as the decision does."""
        summary = run.summaries[self.key]
        got = summary.mean if self.mode == "point" else summary.ci_high
        met = got is not None and got >= self.value
        what = "mean" if self.mode == "point" else "upper bound of the interval"
        if got is None:
            shown, bar = "no score", mark_text(self.value)
        else:
            shown, bar = ordered(got, self.value, below=not met)
        said = f"{self.key}: {what} {shown} {'>=' if met else '<'} {bar}"
        return GateOutcome(
            kind="fail-under",
            name=f"fail-under {self.key}",
            metric=str(self.key),
            status="met" if met else "missed",
            found=f"{what} {shown}",
            mark=f">= {bar}",
            said=said,
        )

    def missed(self, run: EvalRun) -> str | None:
        """Why ``run`` misses the gate, or None when it passes."""
        result = self.outcome(run)
        return result.said if result.missed else None


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


@dataclass(frozen=True)
class GateOutcome:
    """One gate on a finished run: its ``kind``, its ``name`` (``fail-under faithfulness``,
    ``max-failures faithfulness``, ``cost cap``), its metric (None for the cost cap),
    whether the run met it (``status``), what the run shows (``found``: ``mean 0.812``)
    against what the gate asks (``mark``: ``>= 0.7``), and the sentence that says both
    (``said``)."""

    kind: GateKind
    name: str
    metric: str | None
    status: GateStatus
    found: str
    mark: str
    said: str

    @property
    def missed(self) -> bool:
        """The run missed this gate (a run its cost cap stopped misses the cost cap)."""
        return self.status == "missed"


def parse_max_failures(value: str) -> tuple[float, bool]:
    """``"5"`` -> (5, False): at most 5 items; ``"2%"`` -> (2, True): at most 2% of them;
    ValueError for anything else."""
    text = value.strip()
    share = text.endswith("%")
    try:
        bound = float(text[:-1] if share else text)
    except ValueError:
        bound = -1.0
    if not bound >= 0 or (share and bound > 100):
        raise ValueError(f"--max-failures expects N or P% (P <= 100), got {value!r}")
    return bound, share


def failure_outcomes(run: EvalRun, max_failures: str = "0") -> list[GateOutcome]:
    """Per metric, its failed items against ``max_failures`` (``N`` or ``P%``)."""
    bound, share = parse_max_failures(max_failures)
    found = []
    for key, s in run.summaries.items():
        applicable = s.n - s.n_not_applicable - s.n_not_run
        allowed = bound * applicable / 100 if share else bound
        found.append(
            GateOutcome(
                kind="max-failures",
                name=f"max-failures {key}",
                metric=str(key),
                status="missed" if s.n_failed > allowed else "met",
                found=f"{s.n_failed} of {applicable} failed",
                mark=f"at most {max_failures.strip()}",
                said=f"{s.metric}: {s.n_failed} of {applicable} items failed "
                f"(allowed {max_failures})",
            )
        )
    return found


def _cost_cap(run: EvalRun) -> GateOutcome | None:
    """The run against its cost cap: missed when the cap stopped it (None: no cap)."""
    cap = run.config.max_cost
    if run.stopped is None and cap is None:
        return None
    spent = run.accounting.total.cost or 0.0
    mark = "every case run" + ("" if cap is None else f" within ${cap:g}")
    status: GateStatus
    if run.stopped is None:
        status, found = "met", f"every case run, ${spent:.4f} spent"
        said = f"every case run within the cost cap (${spent:.4f} spent)"
    else:
        not_run = max((s.n_not_run for s in run.summaries.values()), default=0)
        status, found = "missed", f"stopped, {not_run:,} cases not run"
        said = f"stopped: {run.stopped}; ${spent:.4f} spent, {not_run:,} cases not run"
    return GateOutcome(
        kind="cost cap",
        name="cost cap",
        metric=None,
        status=status,
        found=found,
        mark=mark,
        said=said,
    )


def check_run(
    run: EvalRun, gates: Sequence[Gate] = (), max_failures: str = "0"
) -> list[GateOutcome]:
    """Every gate ``run`` is held to, as ``contextlens run`` holds it (by default: no
    failed item, and its cost cap when it had one): each ``--fail-under`` gate, each
    metric's failed items against ``max_failures``, then the cost cap. A run its cost cap
    stopped misses the cost cap; its other gates are ``not checked`` (they would judge part
    of the data). The run exits 0 exactly when none is missed."""
    found = [g.outcome(run) for g in gates] + failure_outcomes(run, max_failures)
    cap = _cost_cap(run)
    if cap is not None and cap.missed:
        found = [
            GateOutcome(
                kind=o.kind,
                name=o.name,
                metric=o.metric,
                status="not checked",
                found=o.found,
                mark=o.mark,
                said=f"not checked: the run stopped before its end ({o.said})",
            )
            for o in found
        ]
    return found + ([cap] if cap is not None else [])


REGRESSION_RULE = (
    "B regressed on a metric when the upper end of the {level} credible interval of the "
    "paired mean difference B - A (a Bayesian bootstrap over the cases both runs scored) is "
    "below -TOLERANCE; fewer than 2 such cases cannot be checked and count as regressed"
)
"""The rule of ``compare --fail-on-regression``, said in its help and its output."""


@dataclass(frozen=True)
class RegressionOutcome:
    """A regression gate on two runs: the ``pairs`` (cases both scored), the means of A and
    B over them, the paired mean difference ``diff`` (B - A) with its credible interval, and
    whether B regressed (``status`` ``missed``) or not (``met``); ``said`` says why."""

    metric: str
    tolerance: float
    pairs: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    ci_level: float
    status: Literal["met", "missed"]
    said: str

    @property
    def missed(self) -> bool:
        """B is credibly worse than A by more than the tolerance (or it cannot be told)."""
        return self.status == "missed"


@dataclass(frozen=True)
class RegressionGate:
    """``--fail-on-regression METRIC[=TOLERANCE]``: run B fails when it is credibly worse
    than run A on ``metric`` (:data:`REGRESSION_RULE`)."""

    metric: str
    tolerance: float = 0.0

    def check(
        self, a: Sequence[float], b: Sequence[float], mode: BayesianMode
    ) -> RegressionOutcome:
        """The gate on the paired scores ``a[i]``, ``b[i]`` of the cases both runs scored.

        The interval is the ``mode``'s (its draws, its level) of the Bayesian bootstrap of
        the mean of ``b - a``, from the stream ``compare/METRIC``: the one
        :func:`contextlens.compare.compare` draws for the metric with the same seed.
        """
        av, bv = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if av.shape != bv.shape or av.ndim != 1:
            raise ValueError(f"a and b must be paired: got {av.shape} and {bv.shape} scores")
        n = int(av.size)
        tol = mark_text(self.tolerance)
        level = f"{100 * mode.ci_level:g}%"
        if n < 2:
            return RegressionOutcome(
                metric=self.metric,
                tolerance=self.tolerance,
                pairs=n,
                mean_a=float(av.mean()) if n else None,
                mean_b=float(bv.mean()) if n else None,
                diff=float((bv - av).mean()) if n else None,
                ci_low=None,
                ci_high=None,
                ci_level=mode.ci_level,
                status="missed",
                said=f"{self.metric}: cannot be checked on {n} paired case(s) (2 or more "
                "needed): counted as regressed",
            )
        d = bv - av
        draws = bayesian_bootstrap_means(
            d, np.full(n, 1.0 / n), mode.mc_samples, mode.seed_sequence(f"compare/{self.metric}")
        )
        low, high = equal_tailed(draws, mode.ci_level)
        regressed = high < -self.tolerance
        upper, bar = ordered(high, -self.tolerance, below=regressed, signed=True)
        diff = float(d.mean())
        said = (
            f"{self.metric}: B - A {diff:+.3f}, {level} interval [{low:+.3f}, {upper}] over "
            f"{n} pairs; upper end {upper} {'<' if regressed else '>='} {bar} "
            f"(tolerance {tol}): {'regressed' if regressed else 'no credible regression'}"
        )
        return RegressionOutcome(
            metric=self.metric,
            tolerance=self.tolerance,
            pairs=n,
            mean_a=float(av.mean()),
            mean_b=float(bv.mean()),
            diff=diff,
            ci_low=low,
            ci_high=high,
            ci_level=mode.ci_level,
            status="missed" if regressed else "met",
            said=said,
        )


def parse_regression_gates(
    items: Iterable[str], keys: Sequence[str], *, option: str = "--fail-on-regression"
) -> list[RegressionGate]:
    """``["faithfulness", "context-precision=0.02"]`` as regression gates on the compared
    metrics ``keys``, the tolerance 0 unless given; ValueError (a usage error) for a
    malformed item, a tolerance outside [0, 1], or a name that is none of the metrics."""
    gates = []
    for item in items:
        name, sep, value = item.rpartition("=") if "=" in item else (item, "", "")
        if not name.strip():
            raise ValueError(f"{option} expects METRIC or METRIC=TOLERANCE, got {item!r}")
        key = match(name.strip(), keys, what=option)
        tolerance = parse_value(value, option=option, item=item) if sep else 0.0
        gates.append(RegressionGate(str(key), tolerance))
    return gates
