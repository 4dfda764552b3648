"""Paired comparison of two runs: is run B better than run A, and how sure are we?

For each metric, the items both runs *scored* are paired by ``case_id``; everything else
(items only in one run, failed items, case ids repeated within a run) is counted, never
silently dropped. On the pairs, ``d_i = b_i - a_i``; the mean difference gets an
equal-tailed credible interval from a paired Bayesian bootstrap (Dirichlet(1, ..., 1)
weights on the pairs), and ``p_b_better`` is the posterior share of draws of the mean
difference above 0 (draws exactly at 0 count half, so all-equal scores give 0.5).

Every metric scores "higher is better". Verdicts, with ``threshold`` (default 0.95):

- all paired differences exactly 0: ``"identical scores"``;
- ``p_b_better >= threshold``: ``"B is better (P=0.982)"``;
- ``p_b_better <= 1 - threshold``: ``"B is worse (P=0.018)"``;
- otherwise: ``"no clear difference (P=0.550)"``;
- fewer than 2 pairs: no interval, no P, ``"too few paired items (1)"`` (or why none).

Results are deterministic for a ``seed``: each metric has its own random stream derived
from the seed and the metric name, and pairs are taken in ``case_id`` order.

What changed, case by case, is in each metric's ``changes`` (regressions first, each kind
largest first: failed in B where A was scored, then the drops); ``unpaired`` counts each
case once. A case's score counts as regressed or improved only when it moved by more than
the metric's :class:`Tolerance`; one that moved less is ``unchanged`` (within noise). The
tolerance, unless given, is the measurement noise of one case's difference B - A, times the
normal quantile of ``ci_level`` (1.96 at 0.95):

- when a run judged each item more than once (``repeats``), the noise is read from the
  repeated judgements: per run, the mean over items of the variance of the item's mean
  score (its repeats' sample variance over their number); the difference's variance is the
  sum of A's and B's (a run without repeats counts one judgement, as noisy as one of the
  other run's);
- otherwise from the paired differences themselves: 1.4826 times their median absolute
  deviation from their median, a robust standard deviation that reads the scatter of the
  bulk of the cases and is not moved by up to half of them changing a lot (fewer than
  :data:`MIN_SPREAD_PAIRS` pairs say too little of it);
- never less than :data:`MIN_TOLERANCE`: a change the page's three decimals show as at most
  0.001 is no change (a deterministic metric, or more than half the cases alike, measures
  no noise at all).

``warnings`` say where the two runs are not alike: judges, metric settings, prompts, the
data, or the set of cases (:mod:`contextlens.comparability`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, Field, PrivateAttr

from contextlens.comparability import Difference, differences
from contextlens.results import EvalRun, ItemResult
from contextlens.stats import BayesianMode, bayesian_bootstrap_means, equal_tailed
from contextlens.stats.tolerance import (
    MIN_SPREAD_PAIRS,
    MIN_TOLERANCE,
    Given,
    Repeats,
    Tolerance,
    check_tolerance,
    given_for,
    tolerance_of,
)
from contextlens.store.open import open_run

__all__ = [
    "BETTER_AT",
    "MIN_SPREAD_PAIRS",
    "MIN_TOLERANCE",
    "CaseChange",
    "Change",
    "Comparison",
    "Difference",
    "MetricComparison",
    "PairedDiff",
    "Tolerance",
    "compare",
    "run_folder",
    "side_label",
    "tolerance_of",
]

Change = Literal[
    "newly failed",
    "regressed",
    "improved",
    "fixed",
    "unchanged",
    "failed in both",
    "only in A",
    "only in B",
]
"""What happened to a case between A and B; the first two are regressions. ``regressed`` and
``improved`` are moves beyond the metric's tolerance; ``unchanged`` is a move within it
(:attr:`CaseChange.within_noise` when the scores differ at all)."""

_ORDER: dict[str, int] = {kind: i for i, kind in enumerate(get_args(Change))}

BETTER_AT = 0.95
"""Default ``threshold``: P(B better) at or above it is "better", at or below 1 - it "worse"."""


class PairedDiff(BaseModel):
    """One paired item: its scores in A and B and ``diff = b - a``."""

    case_id: str
    a: float
    b: float
    diff: float


class CaseChange(BaseModel):
    """One case of a metric in A and B: its scores (None: failed or absent), ``diff = b - a``
    when both were scored, and what happened (:data:`Change`)."""

    case_id: str
    a: float | None
    b: float | None
    diff: float | None
    change: Change

    @property
    def regression(self) -> bool:
        """B scored lower than A beyond the tolerance, or failed where A was scored."""
        return self.change in ("regressed", "newly failed")

    @property
    def improvement(self) -> bool:
        """B scored higher than A beyond the tolerance, or was scored where A failed."""
        return self.change in ("improved", "fixed")

    @property
    def within_noise(self) -> bool:
        """The scores differ, by no more than the tolerance: counted unchanged."""
        return self.change == "unchanged" and bool(self.diff)

    def order(self) -> tuple[int, float, str]:
        """Sort key: regressions first, then improvements, each largest first."""
        return (_ORDER[self.change], -abs(self.diff or 0.0), self.case_id)


class MetricComparison(BaseModel):
    """The comparison of one metric between run A and run B.

    Counts: ``n_a``/``n_b`` items of the metric in each run; ``n_paired`` pairs used;
    ``n_only_a``/``n_only_b`` items whose case is absent from the other run;
    ``n_failed_a``/``n_failed_b`` failed items (wherever their case is);
    ``n_duplicate_a``/``n_duplicate_b`` items whose case id occurs more than once in the
    run (ambiguous, not paired). ``n_a - n_paired`` items of A are not paired, each for at
    least one of those reasons (or because its partner in B failed); ``n_unpaired`` counts
    the cases, in either run, that are not paired, each once. ``pass_rate_a`` /
    ``pass_rate_b``: each run's share of scored items at or above its pass mark.
    ``changes``: every case of the metric, regressions first, largest first;
    ``tolerance``: how far a case's score may move and count as unchanged.
    """

    metric: str
    n_a: int
    n_b: int
    n_paired: int
    n_only_a: int
    n_only_b: int
    n_failed_a: int
    n_failed_b: int
    n_duplicate_a: int = 0
    n_duplicate_b: int = 0
    mean_a: float | None
    mean_b: float | None
    mean_diff: float | None
    ci_low: float | None
    ci_high: float | None
    ci_level: float
    p_b_better: float | None
    verdict: str
    n_unpaired: int = 0
    pass_rate_a: float | None = None
    pass_rate_b: float | None = None
    notes: list[str] = Field(default_factory=list)
    pairs: list[PairedDiff] = Field(default_factory=list)
    changes: list[CaseChange] = Field(default_factory=list)
    tolerance: Tolerance | None = None

    @property
    def regressions(self) -> list[CaseChange]:
        return [c for c in self.changes if c.regression]

    @property
    def improvements(self) -> list[CaseChange]:
        return [c for c in self.changes if c.improvement]

    @property
    def n_within_noise(self) -> int:
        """Cases whose scores differ by no more than the tolerance."""
        return sum(c.within_noise for c in self.changes)

    @property
    def n_unpaired_a(self) -> int:
        return self.n_a - self.n_paired

    @property
    def n_unpaired_b(self) -> int:
        return self.n_b - self.n_paired


class Comparison(BaseModel):
    """What :func:`compare` returns: one :class:`MetricComparison` per metric, and the
    :class:`~contextlens.comparability.Difference` s that say where the runs are not alike.
    ``folder_a`` / ``folder_b``: each run's folder (None: it has none); :attr:`runs`: the
    two runs compared, while this object lives (not serialized)."""

    run_a: str
    run_b: str
    mc_samples: int
    ci_level: float
    seed: int | None
    threshold: float
    metrics: list[MetricComparison]
    warnings: list[Difference] = Field(default_factory=list)
    label_a: str | None = None
    label_b: str | None = None
    folder_a: str | None = None
    folder_b: str | None = None
    _runs: tuple[EvalRun, EvalRun] | None = PrivateAttr(default=None)

    @property
    def runs(self) -> tuple[EvalRun, EvalRun] | None:
        """Run A and run B, as compared (None for a comparison read back from JSON)."""
        return self._runs

    def __eq__(self, other: object) -> bool:
        """Alike in what they say (the runs they were drawn from aside)."""
        if not isinstance(other, Comparison):
            return NotImplemented
        return type(self) is type(other) and self.__dict__ == other.__dict__

    @property
    def sides(self) -> str:
        """``A = before (1a2b3c), B = after (4d5e6f)``: which run is which."""
        a, b = side_label(self.run_a, self.label_a), side_label(self.run_b, self.label_b)
        return f"A = {a}, B = {b}"

    def metric(self, name: str) -> MetricComparison:
        """The comparison of metric ``name``; ``KeyError`` naming the known ones."""
        for m in self.metrics:
            if m.metric == name:
                return m
        raise KeyError(f"no metric {name!r} in this comparison; have {self.names}")

    @property
    def names(self) -> list[str]:
        return [m.metric for m in self.metrics]

    @property
    def verdicts(self) -> dict[str, str]:
        """Metric name -> verdict text."""
        return {m.metric: m.verdict for m in self.metrics}


def side_label(run_id: str, name: str | None) -> str:
    """A run as the comparison names it: ``name (run id)``, or its id."""
    return f"{name} ({run_id})" if name and name != run_id else run_id


_Side = dict[str, dict[str, list[float | None]]]  # metric -> case_id -> scores (None: failed)


def _score(item: ItemResult) -> float | None:
    s = item.score
    if item.error is not None or s is None or not math.isfinite(s):
        return None
    return float(s)


def _collect(results: Iterable[ItemResult]) -> tuple[_Side, dict[str, Repeats]]:
    """Each metric's scores by case id, and its repeated judgements; items the metric does
    not apply to, or that the run stopped before, are left out (neither scored nor failed,
    so neither paired nor unpaired)."""
    side: _Side = {}
    repeats: dict[str, Repeats] = {}
    for item in results:
        if item.not_applicable is None and item.not_run is None:
            score = _score(item)
            side.setdefault(item.metric, {}).setdefault(item.case_id, []).append(score)
            judged = [float(v) for v in item.repeats or [] if v is not None and math.isfinite(v)]
            if score is not None and len(judged) > 1:
                found = repeats.setdefault(item.metric, Repeats([], []))
                found.variances.append(float(np.var(judged, ddof=1)))
                found.counts.append(len(judged))
    return side, repeats


def _pass_rate(run: EvalRun, name: str) -> float | None:
    summary = run.summaries.get(name)
    return None if summary is None else summary.pass_rate


def _load(run: Any, store: Any) -> Any:
    return open_run(run, store) if isinstance(run, (str, os.PathLike)) else run


def run_folder(run: EvalRun) -> str | None:
    """The run's folder, its links resolved (``OUT/latest`` as the run's own folder)."""
    if not run.out_dir:
        return None
    path = Path(run.out_dir)
    return str(path.resolve()) if path.is_dir() else str(path.absolute())


def compare(
    run_a: EvalRun | str,
    run_b: EvalRun | str,
    *,
    mc_samples: int = 5000,
    ci_level: float = 0.95,
    seed: int | None = 42,
    threshold: float = BETTER_AT,
    tolerance: Given = None,
    store: Any = None,
) -> Comparison:
    """Compare run B against run A (the baseline), metric by metric, on the items both
    scored: B - A.

    ``run_a``/``run_b``: :class:`EvalRun` objects (fresh or loaded from a store), run
    folders (``OUT/<run id>``, ``OUT/latest``, or ``OUT`` for its newest run) or run ids
    (full or a unique prefix) looked up in ``store`` (default: the active store, else the
    default store file). ``mc_samples`` bootstrap draws per metric; ``ci_level`` of the
    interval; ``seed`` for reproducible draws (``None``: fresh entropy); ``threshold`` for
    the verdicts; ``tolerance``: how far a case's score may move and count as unchanged, for
    every metric (a number) or per metric name (a mapping; ``"*"``: any other metric), the
    rest found from the runs' noise (see the module docstring).
    """
    if isinstance(mc_samples, bool) or not isinstance(mc_samples, (int, np.integer)):
        raise TypeError(f"mc_samples must be an int, got {type(mc_samples).__name__}")
    if mc_samples < 100:
        raise ValueError(f"mc_samples must be >= 100 for a usable interval, got {mc_samples}")
    if not 0.0 < ci_level < 1.0:
        raise ValueError(f"ci_level must be strictly between 0 and 1, got {ci_level!r}")
    if not 0.5 < threshold < 1.0:
        raise ValueError(f"threshold must be strictly between 0.5 and 1, got {threshold!r}")
    check_tolerance(tolerance)
    a_run, b_run = _load(run_a, store), _load(run_b, store)
    mode = BayesianMode(mc_samples=int(mc_samples), ci_level=ci_level, rng_seed=seed)
    (a_side, a_repeats), (b_side, b_repeats) = (
        _collect(a_run.iter_results()),
        _collect(b_run.iter_results()),
    )
    names = list(dict.fromkeys([*a_run.summaries, *a_side, *b_run.summaries, *b_side]).keys())
    if isinstance(tolerance, Mapping):
        unknown = sorted(set(tolerance) - set(names) - {"*"})
        if unknown:
            raise ValueError(f"a tolerance for no metric of the runs: {unknown}; have {names}")
    only_a = {c for m in a_side.values() for c in m} - {c for m in b_side.values() for c in m}
    only_b = {c for m in b_side.values() for c in m} - {c for m in a_side.values() for c in m}
    comparison = Comparison(
        run_a=a_run.run_id,
        run_b=b_run.run_id,
        label_a=a_run.name,
        label_b=b_run.name,
        folder_a=run_folder(a_run),
        folder_b=run_folder(b_run),
        warnings=differences(a_run, b_run, only_a=len(only_a), only_b=len(only_b)),
        mc_samples=int(mc_samples),
        ci_level=ci_level,
        seed=seed,
        threshold=threshold,
        metrics=[
            _compare_metric(
                name,
                a_side.get(name, {}),
                b_side.get(name, {}),
                mode,
                threshold,
                in_a=name in a_run.summaries or name in a_side,
                in_b=name in b_run.summaries or name in b_side,
                given=given_for(tolerance, name),
                repeats=(a_repeats.get(name), b_repeats.get(name)),
            ).model_copy(
                update={
                    "pass_rate_a": _pass_rate(a_run, name),
                    "pass_rate_b": _pass_rate(b_run, name),
                }
            )
            for name in names
        ],
    )
    comparison._runs = (a_run, b_run)
    return comparison


def _compare_metric(
    name: str,
    a: dict[str, list[float | None]],
    b: dict[str, list[float | None]],
    mode: BayesianMode,
    threshold: float,
    *,
    in_a: bool,
    in_b: bool,
    given: float | None = None,
    repeats: tuple[Repeats | None, Repeats | None] = (None, None),
) -> MetricComparison:
    dup_a = {c for c, v in a.items() if len(v) > 1}
    dup_b = {c for c, v in b.items() if len(v) > 1}
    pairs = []
    for case_id in sorted(set(a) & set(b) - dup_a - dup_b):
        sa, sb = a[case_id][0], b[case_id][0]
        if sa is not None and sb is not None:
            pairs.append(PairedDiff(case_id=case_id, a=sa, b=sb, diff=sb - sa))
    n_a = sum(len(v) for v in a.values())
    n_b = sum(len(v) for v in b.values())
    n = len(pairs)
    tolerance = tolerance_of(np.array([x.diff for x in pairs]), repeats, mode.ci_level, given=given)
    changes = sorted(
        (_change(c, a.get(c), b.get(c), tolerance.value) for c in set(a) | set(b)),
        key=CaseChange.order,
    )
    notes = []
    if n_a - n or n_b - n:
        notes.append(
            f"not paired: {n_a - n} of {n_a} items in A, {n_b - n} of {n_b} in B "
            "(see the n_only, n_failed and n_duplicate counts)"
        )
    if dup_a or dup_b:
        notes.append(
            f"case ids repeated within a run are ambiguous and not paired: "
            f"{len(dup_a)} in A, {len(dup_b)} in B"
        )
    moved = [x.diff for x in pairs if x.diff]
    if moved and tolerance.basis != "given" and max(map(abs, moved)) <= tolerance.value:
        notes.append(
            f"no case moved beyond the tolerance (±{tolerance.value:.3f}): no single case's "
            "move stands out of the noise, and the mean difference and its interval say how B "
            "differs; repeat the judgements (--repeats) to measure the noise, or give a "
            "tolerance (--tolerance)"
        )
    mean_a = mean_b = mean_diff = ci_low = ci_high = p = None
    d = np.zeros(0)
    if n:
        av = np.array([x.a for x in pairs])
        bv = np.array([x.b for x in pairs])
        d = bv - av
        mean_a, mean_b, mean_diff = float(av.mean()), float(bv.mean()), float(d.mean())
    if not in_a or not in_b:
        verdict = f"only in run {'A' if in_a else 'B'}"
    elif n == 0:
        verdict = "no paired items"
        notes.append("no item was scored in both runs: nothing to compare")
    elif n == 1:
        verdict = "too few paired items (1)"
        notes.append("one paired item gives no interval and no probability")
    else:
        draws = bayesian_bootstrap_means(
            d, np.full(n, 1.0 / n), mode.mc_samples, mode.seed_sequence(f"compare/{name}")
        )
        ci_low, ci_high = equal_tailed(draws, mode.ci_level)
        p = float(np.mean(draws > 0.0) + 0.5 * np.mean(draws == 0.0))
        verdict = _verdict(p, threshold, identical=not np.any(d))
    return MetricComparison(
        metric=name,
        n_a=n_a,
        n_b=n_b,
        n_paired=n,
        n_only_a=sum(len(v) for c, v in a.items() if c not in b),
        n_only_b=sum(len(v) for c, v in b.items() if c not in a),
        n_failed_a=sum(s is None for v in a.values() for s in v),
        n_failed_b=sum(s is None for v in b.values() for s in v),
        n_duplicate_a=sum(len(a[c]) for c in dup_a),
        n_duplicate_b=sum(len(b[c]) for c in dup_b),
        mean_a=mean_a,
        mean_b=mean_b,
        mean_diff=mean_diff,
        ci_low=ci_low,
        ci_high=ci_high,
        ci_level=mode.ci_level,
        p_b_better=p,
        verdict=verdict,
        n_unpaired=len(set(a) | set(b)) - n,
        notes=notes,
        pairs=pairs,
        changes=changes,
        tolerance=tolerance,
    )


def _change(
    case_id: str,
    a: list[float | None] | None,
    b: list[float | None] | None,
    tolerance: float = 0.0,
) -> CaseChange:
    """What happened to one case (a repeated id: its first item on each side): a move by
    more than ``tolerance`` regressed or improved it."""
    sa = a[0] if a else None
    sb = b[0] if b else None
    diff = sb - sa if sa is not None and sb is not None else None
    change: Change
    if a is None:
        change = "only in B"
    elif b is None:
        change = "only in A"
    elif sa is None and sb is None:
        change = "failed in both"
    elif sb is None:
        change = "newly failed"
    elif sa is None:
        change = "fixed"
    elif diff is None or abs(diff) <= tolerance:
        change = "unchanged"
    else:
        change = "regressed" if diff < 0 else "improved"
    return CaseChange(case_id=case_id, a=sa, b=sb, diff=diff, change=change)


def _verdict(p: float, threshold: float, *, identical: bool) -> str:
    if identical:
        return "identical scores"
    if p >= threshold:
        return f"B is better (P={p:.3f})"
    if p <= 1.0 - threshold:
        return f"B is worse (P={p:.3f})"
    return f"no clear difference (P={p:.3f})"
