"""A self-contained HTML report of an evaluation run (and optionally a comparison of two).

The page loads nothing from anywhere: CSS and JavaScript are inline, plots are SVG drawn
here. Everything that comes from the evaluated system (case ids, reasons, errors, metric
names) is escaped by Jinja2's autoescape; the SVG built here escapes its text with
:func:`markupsafe.escape`; data for scripts goes through a ``<script type="application/json">``
block with ``<``, ``>`` and ``&`` escaped. A Content-Security-Policy allows only the page's
own script (by hash) and no network at all, as a second line of defence.

Numbers carry stable attributes for tools and tests: ``data-metric`` / ``data-field`` (and the
raw value in ``data-value``) in the metric sections, ``data-comparison`` / ``data-field`` in
the comparison section.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape

from contextlens.metrics.base import OFFLINE_SCALE_NOTE

__all__ = [
    "MAX_ROWS",
    "fmt_cost",
    "fmt_count",
    "fmt_diff",
    "fmt_prob",
    "fmt_score",
    "render_report",
    "write_report",
]

MAX_ROWS = 5000
"""Rows of the per-item table shown per metric; the histogram always uses every item."""

_DASH = "—"


# --------------------------------------------------------------------------- formatting


def _finite(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, not a number or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def fmt_score(value: Any) -> str:
    """A score as shown on the page: three decimals (``0.944``), a dash when missing."""
    number = _finite(value)
    return _DASH if number is None else f"{number:.3f}"


def fmt_diff(value: Any) -> str:
    """A signed difference: ``+0.120`` / ``-0.045``."""
    number = _finite(value)
    return _DASH if number is None else f"{number:+.3f}"


def fmt_prob(value: Any) -> str:
    """A probability as a percentage with one decimal: ``97.3%``."""
    number = _finite(value)
    return _DASH if number is None else f"{100 * number:.1f}%"


def fmt_count(value: Any) -> str:
    """An integer count with thousands separators: ``12,345``."""
    number = _finite(value)
    return _DASH if number is None else f"{round(number):,}"


def fmt_cost(cost: Any, unpriced_calls: Any = 0, calls: Any = 0) -> str:
    """Estimated USD; ``unknown`` when no call was priced, ``≥ $x`` when only some were."""
    number = _finite(cost) or 0.0
    unpriced = int(_finite(unpriced_calls) or 0)
    if unpriced and not number:
        return "unknown"
    text = f"${number:.4f}" if number < 1 else f"${number:,.2f}"
    if not (_finite(calls) or number):
        return "$0"
    return f"≥ {text}" if unpriced else text


def fmt_seconds(value: Any) -> str:
    """A duration: ``0.84 s``, ``12.3 s``, ``4 min 05 s``, ``1 h 02 min``."""
    number = _finite(value)
    if number is None:
        return _DASH
    if number < 10:
        return f"{number:.2f} s"
    if number < 60:
        return f"{number:.1f} s"
    minutes, seconds = divmod(round(number), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _ci_text(level: Any) -> str:
    number = _finite(level)
    return "interval" if number is None else f"{100 * number:g}% interval"


# --------------------------------------------------------------------------- duck typing


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """Attribute ``name`` of ``obj`` (or its key, for a mapping)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _first(obj: Any, names: Sequence[str], default: Any = None) -> Any:
    for name in names:
        value = _get(obj, name)
        if value is not None:
            return value
    return default


def _as_dict(obj: Any) -> dict[str, Any]:
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "model_dump"):
        return dict(obj.model_dump())
    return dict(vars(obj)) if hasattr(obj, "__dict__") else {}


def _values(collection: Any) -> list[Any]:
    if collection is None:
        return []
    if isinstance(collection, Mapping):
        return list(collection.values())
    return list(collection)


def _iter_results(run: Any) -> Iterable[Any]:
    if hasattr(run, "iter_results"):
        return run.iter_results()
    return _get(run, "results") or []


# --------------------------------------------------------------------------- SVG plots


@dataclass(frozen=True)
class _Frame:
    """Geometry of a plot: value range ``lo..hi`` mapped onto the inner box."""

    lo: float
    hi: float
    width: int = 640
    height: int = 220
    left: int = 40
    right: int = 16
    top: int = 36
    bottom: int = 30

    @property
    def inner_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def inner_h(self) -> float:
        return self.height - self.top - self.bottom

    @property
    def base(self) -> float:
        return self.height - self.bottom

    def x(self, value: float) -> float:
        return self.left + (value - self.lo) / (self.hi - self.lo) * self.inner_w


def _n(value: float) -> str:
    """A coordinate for SVG: at most two decimals."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _tick(value: float) -> str:
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _histogram_svg(
    values: np.ndarray,
    frame: _Frame,
    *,
    bins: int,
    label: str,
    ticks: Sequence[float],
    mean: float | None,
    ci: tuple[float | None, float | None],
    mean_label: str,
    signed: bool = False,
    empty_text: str = "no scored items",
) -> Markup:
    """An SVG histogram of ``values`` with the mean (a line) and its interval (a band)."""
    parts: list[str] = [
        f'<svg class="plot" viewBox="0 0 {frame.width} {frame.height}" role="img" '
        f'aria-label="{escape(label)}">',
        f"<title>{escape(label)}</title>",
    ]
    counts, edges = (
        np.histogram(values, bins=bins, range=(frame.lo, frame.hi))
        if values.size
        else (np.zeros(bins, dtype=int), np.linspace(frame.lo, frame.hi, bins + 1))
    )
    peak = int(counts.max()) if counts.size else 0
    # grid and y labels
    for fraction in (0.0, 0.5, 1.0):
        y = frame.base - fraction * frame.inner_h
        parts.append(
            f'<line class="grid" x1="{frame.left}" x2="{frame.width - frame.right}" '
            f'y1="{_n(y)}" y2="{_n(y)}"/>'
        )
        if peak and fraction:
            count = peak * fraction
            text = f"{count:g}" if count == int(count) else ""
            if text:
                parts.append(
                    f'<text class="axis" x="{frame.left - 6}" y="{_n(y + 4)}" '
                    f'text-anchor="end">{text}</text>'
                )
    parts.append(
        f'<text class="axis" x="{frame.left - 6}" y="{_n(frame.base + 4)}" '
        'text-anchor="end">0</text>'
    )
    # interval band under the bars
    low, high = ci
    if low is not None and high is not None:
        x0, x1 = frame.x(max(low, frame.lo)), frame.x(min(high, frame.hi))
        parts.append(
            f'<rect class="ci" x="{_n(x0)}" y="{frame.top}" width="{_n(max(x1 - x0, 1.5))}" '
            f'height="{_n(frame.inner_h)}" rx="3"><title>{escape(mean_label)}</title></rect>'
        )
    # bars
    step = (frame.hi - frame.lo) / bins
    for i, count in enumerate(counts):
        if not count:
            continue
        a, b = float(edges[i]), float(edges[i + 1])
        x0, x1 = frame.x(a) + 1, frame.x(b) - 1
        h = max(count / peak * frame.inner_h, 1.5)
        centre = (a + b) / 2
        css = "bar"
        if signed:
            css += " neg" if centre < -step / 2 else " pos" if centre > step / 2 else " zero"
        noun = "item" if count == 1 else "items"
        parts.append(
            f'<rect class="{css}" x="{_n(x0)}" y="{_n(frame.base - h)}" '
            f'width="{_n(max(x1 - x0, 1))}" height="{_n(h)}" rx="2">'
            f"<title>{_tick(a)} to {_tick(b)}: {int(count):,} {noun}</title></rect>"
        )
    if signed:
        xz = frame.x(0.0)
        parts.append(
            f'<line class="zero" x1="{_n(xz)}" x2="{_n(xz)}" y1="{frame.top - 4}" '
            f'y2="{_n(frame.base)}"/>'
        )
    # x axis
    parts.append(
        f'<line class="axis-line" x1="{frame.left}" x2="{frame.width - frame.right}" '
        f'y1="{_n(frame.base)}" y2="{_n(frame.base)}"/>'
    )
    for value in ticks:
        x = frame.x(value)
        parts.append(
            f'<line class="tick" x1="{_n(x)}" x2="{_n(x)}" y1="{_n(frame.base)}" '
            f'y2="{_n(frame.base + 4)}"/>'
            f'<text class="axis" x="{_n(x)}" y="{_n(frame.base + 18)}" '
            f'text-anchor="middle">{_tick(value)}</text>'
        )
    # interval whisker above the bars, mean marker
    if low is not None and high is not None:
        x0, x1 = frame.x(max(low, frame.lo)), frame.x(min(high, frame.hi))
        y = frame.top - 10
        parts.append(
            f'<g class="whisker"><line x1="{_n(x0)}" x2="{_n(x1)}" y1="{y}" y2="{y}"/>'
            f'<line x1="{_n(x0)}" x2="{_n(x0)}" y1="{y - 4}" y2="{y + 4}"/>'
            f'<line x1="{_n(x1)}" x2="{_n(x1)}" y1="{y - 4}" y2="{y + 4}"/></g>'
        )
    if mean is not None:
        xm = frame.x(min(max(mean, frame.lo), frame.hi))
        anchor = "end" if xm > frame.width - 120 else "start"
        dx = -7 if anchor == "end" else 7
        parts.append(
            f'<line class="mean" x1="{_n(xm)}" x2="{_n(xm)}" y1="{frame.top - 10}" '
            f'y2="{_n(frame.base)}"/>'
            f'<circle class="mean-dot" cx="{_n(xm)}" cy="{frame.top - 10}" r="3.5"/>'
            f'<text class="mean-label" x="{_n(xm + dx)}" y="{frame.top - 18}" '
            f'text-anchor="{anchor}">{escape(mean_label)}</text>'
        )
    if not values.size:
        parts.append(
            f'<text class="empty" x="{_n(frame.left + frame.inner_w / 2)}" '
            f'y="{_n(frame.top + frame.inner_h * 0.3)}" text-anchor="middle">'
            f"{escape(empty_text)}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def score_histogram(
    scores: Sequence[float] | np.ndarray,
    *,
    mean: float | None = None,
    ci_low: float | None = None,
    ci_high: float | None = None,
    ci_level: float | None = None,
    bins: int = 20,
) -> Markup:
    """SVG histogram of item scores on 0..1 (wider if a score lies outside)."""
    values = np.asarray([v for v in scores if _finite(v) is not None], dtype=float)
    lo = min(0.0, float(values.min())) if values.size else 0.0
    hi = max(1.0, float(values.max())) if values.size else 1.0
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0] if (lo, hi) == (0.0, 1.0) else list(np.linspace(lo, hi, 5))
    label = f"mean {fmt_score(mean)}"
    if ci_low is not None and ci_high is not None:
        label += f", {_ci_text(ci_level)} {fmt_score(ci_low)} to {fmt_score(ci_high)}"
    return _histogram_svg(
        values,
        _Frame(lo, hi),
        bins=bins,
        label=f"Distribution of {values.size:,} item scores; {label}",
        ticks=ticks,
        mean=_finite(mean),
        ci=(_finite(ci_low), _finite(ci_high)),
        mean_label=f"mean {fmt_score(mean)}",
    )


def _nice_half_range(extent: float) -> float:
    for step in (0.1, 0.25, 0.5, 1.0):
        if extent <= step:
            return step
    return float(math.ceil(extent))


def diff_histogram(
    diffs: Sequence[float] | np.ndarray,
    *,
    mean_diff: float | None = None,
    ci_low: float | None = None,
    ci_high: float | None = None,
    bins: int = 21,
) -> Markup:
    """SVG histogram of paired differences (B - A), symmetric around 0, ties in the middle."""
    values = np.asarray([v for v in diffs if _finite(v) is not None], dtype=float)
    extent = max(
        [abs(v) for v in (mean_diff, ci_low, ci_high) if _finite(v) is not None]
        + ([float(np.abs(values).max())] if values.size else [])
        + [0.05]
    )
    half = _nice_half_range(extent)
    ticks = [-half, -half / 2, 0.0, half / 2, half]
    return _histogram_svg(
        values,
        _Frame(-half, half, height=200),
        bins=bins,
        label=f"Distribution of {values.size:,} paired differences (B - A); "
        f"mean {fmt_diff(mean_diff)}",
        ticks=ticks,
        mean=_finite(mean_diff),
        ci=(_finite(ci_low), _finite(ci_high)),
        mean_label=f"mean {fmt_diff(mean_diff)}",
        signed=True,
        empty_text="no paired items",
    )


def interval_bar(
    mean: float | None, low: float | None, high: float | None, lo: float = 0.0, hi: float = 1.0
) -> Markup:
    """A small 0..1 track with the interval as a band and the mean as a dot."""
    m, a, b = _finite(mean), _finite(low), _finite(high)
    if m is None:
        return Markup("")
    lo, hi = min(lo, m, a if a is not None else m), max(hi, m, b if b is not None else m)

    def pct(v: float) -> float:
        return 100 * (v - lo) / (hi - lo)

    parts = [
        '<svg class="ibar" viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">',
        '<rect class="track" x="0" y="4" width="100" height="2" rx="1"/>',
    ]
    if a is not None and b is not None:
        parts.append(
            f'<rect class="band" x="{_n(pct(a))}" y="2" '
            f'width="{_n(max(pct(b) - pct(a), 0.8))}" height="6" rx="3"/>'
        )
    parts.append(f'<rect class="dot" x="{_n(pct(m) - 0.6)}" y="0" width="1.2" height="10"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


# --------------------------------------------------------------------------- view models


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
        number = _finite(self.raw)
        if number is None:
            return "" if self.raw is None else str(self.raw)
        return repr(int(number)) if number == int(number) and abs(number) < 1e15 else repr(number)


@dataclass
class Row:
    """One row of the per-item table."""

    case_id: str
    score: float | None
    score_text: str
    failed: bool
    success: bool | None
    reason: str
    spread: str = ""
    raw_reply: str = ""  # the judge's last reply, for a failed item whose reply was unusable

    @property
    def bar_pct(self) -> str | None:
        """Width of the small score bar, 0..100 (scores outside 0..1 are clipped)."""
        if self.score is None:
            return None
        return _n(100 * min(max(self.score, 0.0), 1.0))

    @property
    def status(self) -> str:
        if self.failed:
            return "failed"
        if self.success is True:
            return "pass"
        if self.success is False:
            return "below threshold"
        return "scored"

    @property
    def status_tone(self) -> str:
        return {"failed": "bad", "pass": "good", "below threshold": "warn"}.get(self.status, "")

    @property
    def status_key(self) -> str:
        order = {"failed": 0, "below threshold": 1, "pass": 2, "scored": 3}
        return f"{order[self.status]}-{self.status}"


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
    rows: list[Row] = field(default_factory=list)
    n_items: int = 0
    failures: list[Row] = field(default_factory=list)
    n_failures: int = 0

    @property
    def truncated(self) -> bool:
        return self.n_items > len(self.rows)

    @property
    def stat(self) -> dict[str, Stat]:
        return {s.field: s for s in self.stats}


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


def _anchor(prefix: str, name: str, index: int) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-")[:40] or "metric"
    return f"{prefix}-{index}-{slug}"


@dataclass
class _Collected:
    scores: list[float] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    failures: list[Row] = field(default_factory=list)
    n_items: int = 0
    n_failures: int = 0


def _row(item: Any) -> Row:
    error = _get(item, "error")
    score = _finite(_get(item, "score"))
    failed = error is not None or score is None
    spread = _finite(_get(item, "spread"))
    return Row(
        case_id=str(_get(item, "case_id", "")),
        score=None if failed else score,
        score_text=_DASH if failed else fmt_score(score),
        failed=failed,
        success=_get(item, "success"),
        reason=str(error if error is not None else (_get(item, "reason") or "")),
        spread=f"± {spread:.3f}" if spread is not None else "",
        raw_reply=_raw_reply(_get(item, "details") or {}),
    )


def _raw_reply(details: Any) -> str:
    """The judge's last unusable reply in an item's details (or its first interaction's)."""
    if not isinstance(details, dict):
        return ""
    raw = details.get("raw_reply")
    if raw:
        return str(raw)
    for interaction in details.get("interactions") or []:
        if isinstance(interaction, dict) and interaction.get("raw_reply"):
            return f"{interaction.get('qa_id', '')}: {interaction['raw_reply']}"
    return ""


def _collect(run: Any, max_rows: int) -> dict[str, _Collected]:
    out: dict[str, _Collected] = {}
    for item in _iter_results(run):
        bucket = out.setdefault(str(_get(item, "metric", "")), _Collected())
        bucket.n_items += 1
        row = _row(item)
        if row.score is not None:
            bucket.scores.append(row.score)
        if len(bucket.rows) < max_rows:
            bucket.rows.append(row)
        if row.failed:
            bucket.n_failures += 1
            if len(bucket.failures) < 50:
                bucket.failures.append(row)
    return out


def _accounting_stats(acc: Mapping[str, Any]) -> list[Stat]:
    calls = _finite(acc.get("calls"))
    tokens = sum(_finite(acc.get(k)) or 0 for k in ("prompt_tokens", "completion_tokens"))
    stats = [
        Stat("Judge calls", fmt_count(calls or 0), "calls", calls or 0),
        Stat(
            "Tokens",
            fmt_count(tokens),
            "tokens",
            tokens,
            hint=(
                f"{fmt_count(acc.get('prompt_tokens', 0))} prompt · "
                f"{fmt_count(acc.get('completion_tokens', 0))} completion"
                if tokens
                else ""
            ),
        ),
        Stat(
            "Cost",
            fmt_cost(acc.get("cost"), acc.get("unpriced_calls"), calls),
            "cost",
            _finite(acc.get("cost")) or 0.0,
            hint="estimate" if calls else "",
        ),
    ]
    hits = _finite(acc.get("cache_hits"))
    if hits:
        stats.append(Stat("Cache hits", fmt_count(hits), "cache_hits", hits))
    seconds = _first(acc, ("seconds", "time_s", "elapsed_s", "latency_s", "duration_s"))
    if _finite(seconds) is not None:
        stats.append(Stat("Judge time", fmt_seconds(seconds), "seconds", seconds))
    return stats


def _metric_view(name: str, summary: Any, bucket: _Collected, index: int) -> MetricView:
    mean, low, high = (_finite(_get(summary, k)) for k in ("mean", "ci_low", "ci_high"))
    level = _get(summary, "ci_level")
    n = _get(summary, "n", bucket.n_items)
    n_failed = _get(summary, "n_failed", bucket.n_failures)
    n_scored = _get(summary, "n_scored", len(bucket.scores))
    stats = [
        Stat("Mean", fmt_score(mean), "mean", mean),
        Stat("Interval low", fmt_score(low), "ci_low", low),
        Stat("Interval high", fmt_score(high), "ci_high", high),
        Stat("Items", fmt_count(n), "n", n),
        Stat("Scored", fmt_count(n_scored), "n_scored", n_scored),
        Stat("Failed", fmt_count(n_failed), "n_failed", n_failed, tone="bad" if n_failed else ""),
    ]
    spread = _finite(_get(summary, "judge_spread"))
    if spread is not None:
        stats.append(Stat("Judge spread", fmt_score(spread), "judge_spread", spread))
    stats += _accounting_stats(_get(summary, "accounting") or {})
    return MetricView(
        name=name,
        anchor=_anchor("metric", name, index),
        judge=str(_get(summary, "judge") or ""),
        mean_text=fmt_score(mean),
        ci_text=(
            f"{fmt_score(low)} – {fmt_score(high)}" if low is not None and high is not None else ""
        ),
        ci_label=_ci_text(level),
        mean=mean,
        ci_low=low,
        ci_high=high,
        stats=stats,
        histogram=score_histogram(
            bucket.scores, mean=mean, ci_low=low, ci_high=high, ci_level=_finite(level)
        ),
        interval=interval_bar(mean, low, high),
        rows=bucket.rows,
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
    fields = getattr(type(mc), "model_fields", None) or _as_dict(mc)
    groups = _COUNT_GROUPS + [
        (k.removeprefix("n_").replace("_", " ").capitalize(), (k,))
        for k in fields
        if k.startswith("n_") and k not in known
    ]
    out = []
    for label, keys in groups:
        stats = []
        for key in keys:
            value = _count(_get(mc, key))
            if value is not None:
                tone = "bad" if key.startswith(("n_failed", "n_unpaired")) and value else ""
                stats.append(Stat(label, fmt_count(value), key, value, tone=tone))
        if stats and not (label.startswith("Duplicate") and not any(s.raw for s in stats)):
            out.append((label, stats))
    return out


def _pair_diff(pair: Any) -> float | None:
    diff = _finite(_get(pair, "diff"))
    if diff is not None:
        return diff
    a, b = _finite(_get(pair, "a")), _finite(_get(pair, "b"))
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
    name = str(_get(mc, "metric", f"metric {index}"))
    verdict = str(_get(mc, "verdict") or "")
    diff, low, high = (_finite(_get(mc, k)) for k in ("mean_diff", "ci_low", "ci_high"))
    mean_a, mean_b = _finite(_get(mc, "mean_a")), _finite(_get(mc, "mean_b"))
    p = _finite(_get(mc, "p_b_better"))
    tone = _tone(verdict, low, high)
    headline = [
        Stat("Mean A (paired)", fmt_score(mean_a), "mean_a", mean_a),
        Stat("Mean B (paired)", fmt_score(mean_b), "mean_b", mean_b),
        Stat("Difference B − A", fmt_diff(diff), "mean_diff", diff, tone=tone),
        Stat("Interval low", fmt_diff(low), "ci_low", low),
        Stat("Interval high", fmt_diff(high), "ci_high", high),
        Stat("P(B better)", fmt_prob(p), "p_b_better", p),
    ]
    pairs = _first(mc, ("pairs", "differences", "diffs", "paired")) or []
    diffs = [d for d in (_pair_diff(pair) for pair in _values(pairs)) if d is not None]
    notes = _get(mc, "notes") or []
    return ComparisonMetricView(
        name=name,
        anchor=_anchor("compare", name, index),
        verdict=verdict,
        tone=tone,
        ci_label=_ci_text(_get(mc, "ci_level")),
        headline=headline,
        counts=_comparison_counts(mc),
        plot=diff_histogram(diffs, mean_diff=diff, ci_low=low, ci_high=high),
        notes=[str(n) for n in (notes if isinstance(notes, (list, tuple)) else [notes])],
    )


def _label(comparison: Any, side: str) -> str:
    value = _first(comparison, (f"label_{side}", f"name_{side}", f"run_id_{side}", f"run_{side}"))
    if value is None:
        return side.upper()
    run_id = _get(value, "run_id")
    return str(run_id if run_id is not None else value)


def _comparison_view(comparison: Any) -> ComparisonView:
    per_metric = _first(comparison, ("metrics", "comparisons", "per_metric", "by_metric"))
    if per_metric is None and isinstance(comparison, (list, tuple)):
        per_metric = comparison
    return ComparisonView(
        label_a=_label(comparison, "a"),
        label_b=_label(comparison, "b"),
        metrics=[_comparison_metric(mc, i) for i, mc in enumerate(_values(per_metric))],
    )


# --------------------------------------------------------------------------- page


def _json_for_script(data: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&``."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, default=str)
    for char, code in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, code)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Markup(text)


def _clean(value: Any) -> Any:
    """``value`` with non-finite floats as None, for strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


@cache
def _asset(name: str) -> str:
    return resources.files("contextlens.report").joinpath("templates", name).read_text("utf-8")


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("contextlens.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = fmt_score
    env.filters["count"] = fmt_count
    return env


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "sha256-" + base64.b64encode(digest).decode("ascii")


def render_report(
    run: Any,
    *,
    comparison: Any = None,
    title: str | None = None,
    max_rows: int = MAX_ROWS,
) -> str:
    """The report page as a string; see :func:`write_report`."""
    summaries = _get(run, "summaries") or {}
    collected = _collect(run, max_rows)
    names = list(summaries) + [m for m in collected if m not in summaries]
    metrics = [
        _metric_view(name, summaries.get(name, {}), collected.get(name, _Collected()), i)
        for i, name in enumerate(names)
    ]
    accounting = _get(run, "accounting") or {}
    total = accounting.get("total", {}) if isinstance(accounting, Mapping) else {}
    run_id = str(_get(run, "run_id", "") or "")
    out_dir = _get(run, "out_dir")
    script = _asset("report.js")
    data = _clean(
        {
            "run_id": run_id,
            "started_at": _get(run, "started_at"),
            "duration_s": _get(run, "duration_s"),
            "judge": _get(run, "judge"),
            "summaries": {
                name: _as_dict(summaries[name]) if name in summaries else {} for name in names
            },
        }
    )
    context = {
        "title": title or "contextlens report",
        "run_id": run_id,
        "started_at": _get(run, "started_at") or "",
        "duration": fmt_seconds(_get(run, "duration_s")),
        "judge": _get(run, "judge") or "",
        "embedder": _get(run, "embedder") or "",
        "repeats": _get(run, "repeats") or 1,
        "out_dir": str(out_dir) if out_dir else "",
        "totals": _accounting_stats(total),
        "metrics": metrics,
        "comparison": _comparison_view(comparison) if comparison is not None else None,
        "max_rows": max_rows,
        "offline_note": OFFLINE_SCALE_NOTE,
        "results_path": str(Path(out_dir) / "results.jsonl") if out_dir else "results.jsonl",
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "version": _version(),
        "data_json": _json_for_script(data),
        "script": Markup(script),
        "styles": Markup(_asset("report.css")),
        "csp": f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src '{_csp_hash(script)}'; base-uri 'none'; form-action 'none'",
    }
    return _environment().get_template("report.html.j2").render(**context)


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("contextlens")
    except metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return ""


def write_report(
    run: Any,
    path: str | Path,
    *,
    comparison: Any = None,
    title: str | None = None,
    max_rows: int = MAX_ROWS,
) -> Path:
    """Write one self-contained HTML page for ``run`` (an :class:`~contextlens.runner.EvalRun`
    or anything with ``summaries`` and ``iter_results()``) and return its path.

    ``comparison``: a :class:`~contextlens.compare.Comparison` (read by attribute) adds a
    section with each metric's paired difference. ``max_rows`` caps the per-item table of
    each metric; the histograms use every item. A folder ``path`` gets ``report.html``.
    """
    target = Path(path)
    if target.is_dir():
        target = target / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    html = render_report(run, comparison=comparison, title=title, max_rows=max_rows)
    target.write_text(html, encoding="utf-8")
    return target
