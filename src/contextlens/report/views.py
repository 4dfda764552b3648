"""What the report's template shows, as view models built from a run or a comparison."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from markupsafe import Markup

from contextlens.engine.accounting import Counts
from contextlens.report.cases import Worst
from contextlens.report.format import (
    DASH,
    as_dict,
    ci_text,
    finite,
    first,
    fmt_cost,
    fmt_count,
    fmt_diff,
    fmt_prob,
    fmt_score,
    fmt_seconds,
    get,
    values,
)
from contextlens.report.plots import diff_histogram, interval_bar, score_histogram

__all__ = [
    "Collected",
    "ComparisonMetricView",
    "ComparisonView",
    "MetricView",
    "Row",
    "Stat",
    "accounting_stats",
    "collect_item",
    "comparison_view",
    "metric_view",
]


@dataclass
class Stat:
    """One labelled number of a metric or comparison (``field`` is its data-field)."""

    label: str
    text: str
    field: str
    raw: Any = None
    tone: str = ""
    hint: str = ""

    @property
    def raw_text(self) -> str:
        number = finite(self.raw)
        if number is None:
            return "" if self.raw is None else str(self.raw)
        return repr(int(number)) if number == int(number) and abs(number) < 1e15 else repr(number)


@dataclass
class Row:
    """One item as a metric's list of failures shows it."""

    case_id: str
    score: float | None
    score_text: str
    failed: bool
    success: bool | None
    reason: str
    spread: str = ""
    raw_reply: str = ""  # the judge's last reply, for a failed item whose reply was unusable


@dataclass
class MetricView:
    """Everything the template shows of one metric."""

    name: str
    anchor: str
    judge: str
    mean_text: str
    ci_text: str
    ci_label: str
    mean: float | None
    ci_low: float | None
    ci_high: float | None
    stats: list[Stat]
    histogram: Markup
    interval: Markup
    n_items: int = 0
    failures: list[Row] = field(default_factory=list)
    n_failures: int = 0
    worst: list[Worst] = field(default_factory=list)
    lowest: list[Worst] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    column: int = 0  # its column in the case table

    @property
    def stat(self) -> dict[str, Stat]:
        return {s.field: s for s in self.stats}

    @property
    def n_below(self) -> int:
        return self.counts.get("below", 0)


@dataclass
class ComparisonMetricView:
    """Everything the template shows of one metric of a comparison."""

    name: str
    anchor: str
    verdict: str
    tone: str
    ci_label: str
    headline: list[Stat]
    counts: list[tuple[str, list[Stat]]]
    plot: Markup
    notes: list[str] = field(default_factory=list)

    @property
    def stat(self) -> dict[str, Stat]:
        flat = [s for _, group in self.counts for s in group]
        return {s.field: s for s in self.headline + flat}


@dataclass
class ComparisonView:
    label_a: str
    label_b: str
    metrics: list[ComparisonMetricView]

    @property
    def sides(self) -> str:
        """``A = before (1a2b3c), B = after (4d5e6f)``: which run is which."""
        return f"A = {self.label_a}, B = {self.label_b}"


def _anchor(prefix: str, name: str, index: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "metric"
    return f"{prefix}-{index}-{slug}"


@dataclass
class Collected:
    scores: list[float] = field(default_factory=list)
    failures: list[Row] = field(default_factory=list)
    n_items: int = 0
    n_failures: int = 0


def _row(item: Any) -> Row:
    error = get(item, "error")
    score = finite(get(item, "score"))
    not_applicable = get(item, "not_applicable")
    not_run = get(item, "not_run")
    failed = error is not None or (score is None and not (not_applicable or not_run))
    spread = finite(get(item, "spread"))
    reason = error if error is not None else (not_applicable or not_run or get(item, "reason"))
    return Row(
        case_id=str(get(item, "case_id", "")),
        score=None if failed else score,
        score_text=DASH if failed or score is None else fmt_score(score),
        failed=failed,
        success=get(item, "success"),
        reason=str(reason or ""),
        spread=f"± {spread:.3f}" if spread is not None else "",
        raw_reply=_raw_reply(get(item, "details") or {}),
    )


def _raw_reply(details: Any) -> str:
    """The judge's last unusable reply in an item's details (a session's: that of its first
    interaction that has one, with its ``qa_id``)."""
    for interaction in get(details, "interactions") or []:
        raw = get(interaction, "raw_reply")
        if raw:
            return f"{get(interaction, 'qa_id', '')}: {raw}"
    raw = get(details, "raw_reply")
    return str(raw) if raw else ""


def collect_item(out: dict[str, Collected], item: Any) -> None:
    """Add ``item`` to its metric's :class:`Collected` in ``out``."""
    bucket = out.setdefault(str(get(item, "metric", "")), Collected())
    bucket.n_items += 1
    row = _row(item)
    if row.score is not None:
        bucket.scores.append(row.score)
    if row.failed:
        bucket.n_failures += 1
        if len(bucket.failures) < 50:
            bucket.failures.append(row)


def breakdown_stats(breakdown: Any) -> list[Stat]:
    """A metric's breakdown (the summary's): the items of each cell of a cross with, for
    sufficient context's 2x2, the answers given on insufficient context among the
    insufficient ones; and the mean of each share (the diagnostics')."""
    if not breakdown:
        return []
    cells = get(breakdown, "cells") or {}
    counted = get(breakdown, "n_means") or {}
    means = [
        Stat(
            name[0].upper() + name[1:].replace("_", " "),
            fmt_score(mean),
            f"share:{name}",
            mean,
            hint=f"mean of {fmt_count(counted.get(name, 0))} items",
        )
        for name, mean in (get(breakdown, "means") or {}).items()
    ]
    return cell_stats(cells) + means


def cell_stats(cells: dict[str, int]) -> list[Stat]:
    """The items of each cell of a cross, and the answers given on insufficient context
    among the insufficient ones (sufficient context's 2x2)."""
    stats = [
        Stat(cell[0].upper() + cell[1:], fmt_count(n), f"cell:{cell}", n)
        for cell, n in sorted(cells.items())
    ]
    answered = cells.get("insufficient, answered", 0)
    insufficient = answered + cells.get("insufficient, abstained", 0)
    if insufficient:
        stats.append(
            Stat(
                "Answered on insufficient context",
                f"{answered} of {insufficient} ({answered / insufficient:.0%})",
                "answered_on_insufficient",
                answered,
                tone="bad" if answered else "",
            )
        )
    return stats


def as_counts(value: Any) -> Counts | None:
    """Accounting as :class:`Counts` (a run read back from JSON holds plain dicts); None for
    none recorded."""
    if value is None or isinstance(value, Counts):
        return value
    return Counts.model_validate(value) if value else None


def accounting_stats(recorded: Any) -> list[Stat]:
    """Judge work as the report's figures: calls, tokens, cost, cache hits and, when any was
    recorded, judge time."""
    acc = as_counts(recorded) or Counts()
    tokens = acc.total_tokens
    stats = [
        Stat("Judge calls", fmt_count(acc.calls), "calls", acc.calls),
        Stat(
            "Tokens",
            fmt_count(tokens),
            "tokens",
            tokens,
            hint=(
                f"{fmt_count(acc.prompt_tokens)} prompt · "
                f"{fmt_count(acc.completion_tokens)} completion"
                if tokens
                else ""
            ),
        ),
        Stat(
            "Cost",
            fmt_cost(acc.cost, acc.unpriced_calls, acc.calls),
            "cost",
            acc.cost,
            hint="estimate" if acc.calls else "",
        ),
    ]
    if acc.cache_hits:
        stats.append(Stat("Cache hits", fmt_count(acc.cache_hits), "cache_hits", acc.cache_hits))
    if recorded:
        stats.append(Stat("Judge time", fmt_seconds(acc.seconds), "seconds", acc.seconds))
    return stats


def triage_stats(triage: Any) -> list[Stat]:
    """A triage run's figures of one metric: its band, the items decided offline and
    judged, and what the offline decisions saved."""
    if not triage:
        return []
    band = get(triage, "band")
    if not band:
        return [Stat("Triage", f"no band: {get(triage, 'note')}", "triage", None)]
    low, high = get(band, "lower"), get(band, "upper")
    offline, judged = get(triage, "n_offline", 0), get(triage, "n_judged", 0)
    saved = get(triage, "saved_cost")
    out = [
        Stat("Triage band", f"[{low:g}, {high:g}]", "triage_band", None),
        Stat("Decided offline", fmt_count(offline), "triage_offline", offline),
        Stat("Judged", fmt_count(judged), "triage_judged", judged),
        Stat("Calls saved", fmt_count(get(triage, "saved_calls", 0)), "saved_calls", None),
    ]
    if saved is not None:
        out.append(Stat("Cost saved", f"${saved:.4f}", "saved_cost", saved))
    return out


def metric_view(name: str, summary: Any, bucket: Collected, index: int) -> MetricView:
    mean, low, high = (finite(get(summary, k)) for k in ("mean", "ci_low", "ci_high"))
    level = get(summary, "ci_level")
    n = get(summary, "n", bucket.n_items)
    n_failed = get(summary, "n_failed", bucket.n_failures)
    n_scored = get(summary, "n_scored", len(bucket.scores))
    stats = [
        Stat("Mean", fmt_score(mean), "mean", mean),
        Stat("Interval low", fmt_score(low), "ci_low", low),
        Stat("Interval high", fmt_score(high), "ci_high", high),
        Stat("Items", fmt_count(n), "n", n),
        Stat("Scored", fmt_count(n_scored), "n_scored", n_scored),
        Stat("Failed", fmt_count(n_failed), "n_failed", n_failed, tone="bad" if n_failed else ""),
    ]
    n_na = get(summary, "n_not_applicable")
    if n_na:
        stats.append(Stat("Not applicable", fmt_count(n_na), "n_not_applicable", n_na))
    n_nr = get(summary, "n_not_run")
    if n_nr:
        stats.append(Stat("Not run", fmt_count(n_nr), "n_not_run", n_nr, tone="warn"))
    n_ne = get(summary, "n_not_english")
    if n_ne:
        stats.append(Stat("Not in English", fmt_count(n_ne), "n_not_english", n_ne, tone="warn"))
    rate = finite(get(summary, "pass_rate"))
    if rate is not None:
        mark, p_low, p_high = (
            finite(get(summary, k)) for k in ("threshold", "pass_low", "pass_high")
        )
        stats.append(
            Stat(
                f"Pass rate (≥ {mark:g})" if mark is not None else "Pass rate",
                f"{rate:.0%}",
                "pass_rate",
                rate,
            )
        )
        if p_low is not None and p_high is not None:
            stats.append(
                Stat("Pass rate interval", f"{p_low:.0%} – {p_high:.0%}", "pass_low", p_low)
            )
    spread = finite(get(summary, "judge_spread"))
    if spread is not None:
        stats.append(Stat("Judge spread", fmt_score(spread), "judge_spread", spread))
    stats += breakdown_stats(get(summary, "breakdown"))
    stats += accounting_stats(get(summary, "accounting"))
    stats += triage_stats(get(summary, "triage"))
    return MetricView(
        name=name,
        anchor=_anchor("metric", name, index),
        judge=str(get(summary, "judge") or ""),
        mean_text=fmt_score(mean),
        ci_text=(
            f"{fmt_score(low)} – {fmt_score(high)}" if low is not None and high is not None else ""
        ),
        ci_label=ci_text(level),
        mean=mean,
        ci_low=low,
        ci_high=high,
        stats=stats,
        histogram=score_histogram(
            bucket.scores, mean=mean, ci_low=low, ci_high=high, ci_level=finite(level)
        ),
        interval=interval_bar(mean, low, high),
        n_items=bucket.n_items,
        failures=bucket.failures,
        n_failures=bucket.n_failures,
    )


_COUNT_GROUPS: list[tuple[str, tuple[str, ...]]] = [
    ("Paired items", ("n_paired",)),
    ("Items A / B", ("n_a", "n_b")),
    ("Unpaired A / B", ("n_unpaired_a", "n_unpaired_b")),
    ("Failed A / B", ("n_failed_a", "n_failed_b")),
    ("Only in A / B", ("n_only_a", "n_only_b")),
    ("Duplicate ids A / B", ("n_duplicate_a", "n_duplicate_b")),
    ("Unpaired", ("n_unpaired",)),
    ("Failed", ("n_failed",)),
]
"""Counts shown for a compared metric, in this order; other ``n_*`` counts follow."""


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        return None
    return int(value)


def _comparison_counts(mc: Any) -> list[tuple[str, list[Stat]]]:
    """The ``n_*`` counts of a compared metric as (label, stats) groups; duplicates only
    when there are some."""
    known = {key for _, keys in _COUNT_GROUPS for key in keys}
    fields = getattr(type(mc), "model_fields", None) or as_dict(mc)
    groups = _COUNT_GROUPS + [
        (k.removeprefix("n_").replace("_", " ").capitalize(), (k,))
        for k in fields
        if k.startswith("n_") and k not in known
    ]
    out = []
    for label, keys in groups:
        stats = []
        for key in keys:
            value = _count(get(mc, key))
            if value is not None:
                tone = "bad" if key.startswith(("n_failed", "n_unpaired")) and value else ""
                stats.append(Stat(label, fmt_count(value), key, value, tone=tone))
        if stats and not (label.startswith("Duplicate") and not any(s.raw for s in stats)):
            out.append((label, stats))
    return out


def _pair_diff(pair: Any) -> float | None:
    diff = finite(get(pair, "diff"))
    if diff is not None:
        return diff
    a, b = finite(get(pair, "a")), finite(get(pair, "b"))
    return None if a is None or b is None else b - a


def _tone(verdict: str, low: float | None, high: float | None) -> str:
    """``good`` when B is better, ``bad`` when worse, else ``neutral``."""
    text = verdict.lower()
    if "better" in text and "no clear" not in text:
        return "good"
    if "worse" in text:
        return "bad"
    if verdict:
        return "neutral"
    if low is not None and low > 0:
        return "good"
    if high is not None and high < 0:
        return "bad"
    return "neutral"


def _comparison_metric(mc: Any, index: int) -> ComparisonMetricView:
    name = str(get(mc, "metric", f"metric {index}"))
    verdict = str(get(mc, "verdict") or "")
    diff, low, high = (finite(get(mc, k)) for k in ("mean_diff", "ci_low", "ci_high"))
    mean_a, mean_b = finite(get(mc, "mean_a")), finite(get(mc, "mean_b"))
    p = finite(get(mc, "p_b_better"))
    tone = _tone(verdict, low, high)
    headline = [
        Stat("Mean A (paired)", fmt_score(mean_a), "mean_a", mean_a),
        Stat("Mean B (paired)", fmt_score(mean_b), "mean_b", mean_b),
        Stat("Difference B − A", fmt_diff(diff), "mean_diff", diff, tone=tone),
        Stat("Interval low", fmt_diff(low), "ci_low", low),
        Stat("Interval high", fmt_diff(high), "ci_high", high),
        Stat("P(B better)", fmt_prob(p), "p_b_better", p),
    ]
    for side in ("a", "b"):
        rate = finite(get(mc, f"pass_rate_{side}"))
        if rate is not None:
            label = f"Pass rate {side.upper()}"
            headline.append(Stat(label, f"{rate:.0%}", f"pass_rate_{side}", rate))
    pairs = first(mc, ("pairs", "differences", "diffs", "paired")) or []
    diffs = [d for d in (_pair_diff(pair) for pair in values(pairs)) if d is not None]
    notes = get(mc, "notes") or []
    return ComparisonMetricView(
        name=name,
        anchor=_anchor("compare", name, index),
        verdict=verdict,
        tone=tone,
        ci_label=ci_text(get(mc, "ci_level")),
        headline=headline,
        counts=_comparison_counts(mc),
        plot=diff_histogram(diffs, mean_diff=diff, ci_low=low, ci_high=high),
        notes=[str(n) for n in (notes if isinstance(notes, (list, tuple)) else [notes])],
    )


def _label(comparison: Any, side: str) -> str:
    """A run of a comparison as ``name (run id)``, its name or its id."""
    run_id = get(comparison, f"run_{side}")
    name = first(comparison, (f"label_{side}", f"name_{side}"))
    if isinstance(run_id, str) and run_id:
        return f"{name} ({run_id})" if name and name != run_id else run_id
    value = name if name is not None else first(comparison, (f"run_id_{side}", f"run_{side}"))
    if value is None:
        return side.upper()
    found = get(value, "run_id")
    return str(found if found is not None else value)


def comparison_view(comparison: Any) -> ComparisonView:
    per_metric = first(comparison, ("metrics", "comparisons", "per_metric", "by_metric"))
    if per_metric is None and isinstance(comparison, (list, tuple)):
        per_metric = comparison
    return ComparisonView(
        label_a=_label(comparison, "a"),
        label_b=_label(comparison, "b"),
        metrics=[_comparison_metric(mc, i) for i, mc in enumerate(values(per_metric))],
    )
