"""The report's plots: SVG drawn here, their text masked and escaped."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import markupsafe
import numpy as np
from markupsafe import Markup

from contextlens.redact import redact
from contextlens.report.format import ci_text, finite, fmt_diff, fmt_score

__all__ = ["diff_histogram", "interval_bar", "num", "score_histogram", "trend_plot"]


def escape(value: object) -> Markup:
    """A plot's text (a metric's or a run's name, a number) for SVG: masked, then escaped."""
    return markupsafe.escape(redact(str(value)))


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


def num(value: float) -> str:
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
            f'y1="{num(y)}" y2="{num(y)}"/>'
        )
        if peak and fraction:
            count = peak * fraction
            text = f"{count:g}" if count == int(count) else ""
            if text:
                parts.append(
                    f'<text class="axis" x="{frame.left - 6}" y="{num(y + 4)}" '
                    f'text-anchor="end">{text}</text>'
                )
    parts.append(
        f'<text class="axis" x="{frame.left - 6}" y="{num(frame.base + 4)}" '
        'text-anchor="end">0</text>'
    )
    # interval band under the bars
    low, high = ci
    if low is not None and high is not None:
        x0, x1 = frame.x(max(low, frame.lo)), frame.x(min(high, frame.hi))
        parts.append(
            f'<rect class="ci" x="{num(x0)}" y="{frame.top}" width="{num(max(x1 - x0, 1.5))}" '
            f'height="{num(frame.inner_h)}" rx="3"><title>{escape(mean_label)}</title></rect>'
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
            f'<rect class="{css}" x="{num(x0)}" y="{num(frame.base - h)}" '
            f'width="{num(max(x1 - x0, 1))}" height="{num(h)}" rx="2">'
            f"<title>{_tick(a)} to {_tick(b)}: {int(count):,} {noun}</title></rect>"
        )
    if signed:
        xz = frame.x(0.0)
        parts.append(
            f'<line class="zero" x1="{num(xz)}" x2="{num(xz)}" y1="{frame.top - 4}" '
            f'y2="{num(frame.base)}"/>'
        )
    # x axis
    parts.append(
        f'<line class="axis-line" x1="{frame.left}" x2="{frame.width - frame.right}" '
        f'y1="{num(frame.base)}" y2="{num(frame.base)}"/>'
    )
    for value in ticks:
        x = frame.x(value)
        parts.append(
            f'<line class="tick" x1="{num(x)}" x2="{num(x)}" y1="{num(frame.base)}" '
            f'y2="{num(frame.base + 4)}"/>'
            f'<text class="axis" x="{num(x)}" y="{num(frame.base + 18)}" '
            f'text-anchor="middle">{_tick(value)}</text>'
        )
    # interval whisker above the bars, mean marker
    if low is not None and high is not None:
        x0, x1 = frame.x(max(low, frame.lo)), frame.x(min(high, frame.hi))
        y = frame.top - 10
        parts.append(
            f'<g class="whisker"><line x1="{num(x0)}" x2="{num(x1)}" y1="{y}" y2="{y}"/>'
            f'<line x1="{num(x0)}" x2="{num(x0)}" y1="{y - 4}" y2="{y + 4}"/>'
            f'<line x1="{num(x1)}" x2="{num(x1)}" y1="{y - 4}" y2="{y + 4}"/></g>'
        )
    if mean is not None:
        xm = frame.x(min(max(mean, frame.lo), frame.hi))
        anchor = "end" if xm > frame.width - 120 else "start"
        dx = -7 if anchor == "end" else 7
        parts.append(
            f'<line class="mean" x1="{num(xm)}" x2="{num(xm)}" y1="{frame.top - 10}" '
            f'y2="{num(frame.base)}"/>'
            f'<circle class="mean-dot" cx="{num(xm)}" cy="{frame.top - 10}" r="3.5"/>'
            f'<text class="mean-label" x="{num(xm + dx)}" y="{frame.top - 18}" '
            f'text-anchor="{anchor}">{escape(mean_label)}</text>'
        )
    if not values.size:
        parts.append(
            f'<text class="empty" x="{num(frame.left + frame.inner_w / 2)}" '
            f'y="{num(frame.top + frame.inner_h * 0.3)}" text-anchor="middle">'
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
    values = np.asarray([v for v in scores if finite(v) is not None], dtype=float)
    lo = min(0.0, float(values.min())) if values.size else 0.0
    hi = max(1.0, float(values.max())) if values.size else 1.0
    ticks = [0.0, 0.25, 0.5, 0.75, 1.0] if (lo, hi) == (0.0, 1.0) else list(np.linspace(lo, hi, 5))
    label = f"mean {fmt_score(mean)}"
    if ci_low is not None and ci_high is not None:
        label += f", {ci_text(ci_level)} {fmt_score(ci_low)} to {fmt_score(ci_high)}"
    return _histogram_svg(
        values,
        _Frame(lo, hi),
        bins=bins,
        label=f"Distribution of {values.size:,} item scores; {label}",
        ticks=ticks,
        mean=finite(mean),
        ci=(finite(ci_low), finite(ci_high)),
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
    values = np.asarray([v for v in diffs if finite(v) is not None], dtype=float)
    extent = max(
        [abs(f) for f in (finite(v) for v in (mean_diff, ci_low, ci_high)) if f is not None]
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
        mean=finite(mean_diff),
        ci=(finite(ci_low), finite(ci_high)),
        mean_label=f"mean {fmt_diff(mean_diff)}",
        signed=True,
        empty_text="no paired items",
    )


def interval_bar(
    mean: float | None, low: float | None, high: float | None, lo: float = 0.0, hi: float = 1.0
) -> Markup:
    """A small 0..1 track with the interval as a band and the mean as a dot."""
    m, a, b = finite(mean), finite(low), finite(high)
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
            f'<rect class="band" x="{num(pct(a))}" y="2" '
            f'width="{num(max(pct(b) - pct(a), 0.8))}" height="6" rx="3"/>'
        )
    parts.append(f'<rect class="dot" x="{num(pct(m) - 0.6)}" y="0" width="1.2" height="10"/>')
    parts.append("</svg>")
    return Markup("".join(parts))


Band = tuple[float | None, float | None, float | None]
"""A value and its interval (None where missing)."""


def _fits(labels: Sequence[str], width: float) -> bool:
    """Whether the labels fit side by side under ``width`` (about 6.2 units a character)."""
    return all(len(t) * 6.2 + 6 <= width for t in labels)


def trend_plot(
    labels: Sequence[str],
    points: Sequence[Band],
    *,
    rates: Sequence[Band] | None = None,
    titles: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    width: int = 400,
    height: int = 230,
) -> Markup:
    """A small SVG of a metric over runs, on the 0..1 scale: each run's mean (a line through
    dots, its interval a band and a whisker) and, when given, its pass rate (a dashed line
    through squares, with its interval); the runs in order along the x axis, each labelled
    ``#N`` over ``labels[i]`` (turned when they do not fit), ``titles[i]`` its tooltip and
    ``runs[i]`` its ``data-run``."""
    n = len(points)
    names = list(titles) if titles is not None else list(labels)
    ids = list(runs) if runs is not None else [""] * n
    pad = 26  # room for the first and the last run's label
    span_w = width - 36 - 14 - 2 * pad
    step = span_w / max(n - 1, 1) if n > 1 else span_w
    level = _fits(labels, step)
    frame = _Frame(0.0, 1.0, width=width, height=height, left=36, right=14, top=14,
                   bottom=44 if level else 80)  # fmt: skip
    span = max(n - 1, 1)

    def x(i: int) -> float:
        return frame.left + pad + (i / span if n > 1 else 0.5) * (frame.inner_w - 2 * pad)

    def y(v: float) -> float:
        return frame.base - min(max(v, 0.0), 1.0) * frame.inner_h

    title = f"Mean{' and pass rate' if rates else ''}, each with its interval, over {n} runs"
    parts = [
        f'<svg class="plot trend" viewBox="0 0 {frame.width} {frame.height}" role="img" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>'
    ]
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(
            f'<line class="grid" x1="{frame.left}" x2="{frame.width - frame.right}" '
            f'y1="{num(y(tick))}" y2="{num(y(tick))}"/>'
            f'<text class="axis" x="{frame.left - 6}" y="{num(y(tick) + 4)}" '
            f'text-anchor="end">{_tick(tick)}</text>'
        )

    def band(series: Sequence[Band], css: str) -> None:
        kept = [
            (i, lo, hi) for i, (_, lo, hi) in enumerate(series) if lo is not None and hi is not None
        ]
        if len(kept) > 1:
            outline = [f"{num(x(i))},{num(y(hi))}" for i, _, hi in kept if hi is not None]
            outline += [
                f"{num(x(i))},{num(y(lo))}" for i, lo, _ in reversed(kept) if lo is not None
            ]
            parts.append(f'<polygon class="{css}" points="{" ".join(outline)}"/>')

    def line(series: Sequence[Band], css: str) -> None:
        kept = [(i, v) for i, (v, _, _) in enumerate(series) if v is not None]
        if len(kept) > 1:
            path = " ".join(f"{num(x(i))},{num(y(v))}" for i, v in kept)
            parts.append(f'<polyline class="{css}" fill="none" points="{path}"/>')

    def interval(low: float | None, high: float | None) -> str:
        return (
            f" [{fmt_score(low)}, {fmt_score(high)}]"
            if low is not None and high is not None
            else ""
        )

    band(points, "ci")
    line(points, "mean")
    if rates:
        line(rates, "rate")
    for i, (mean, low, high) in enumerate(points):
        run = f' data-run="{escape(ids[i])}"' if ids[i] else ""
        if low is not None and high is not None:
            parts.append(
                f'<g class="whisker"><line x1="{num(x(i))}" x2="{num(x(i))}" '
                f'y1="{num(y(low))}" y2="{num(y(high))}"/></g>'
            )
        if mean is not None:
            shown = f"{names[i]}: mean {fmt_score(mean)}{interval(low, high)}"
            parts.append(
                f'<circle class="mean-dot" cx="{num(x(i))}" cy="{num(y(mean))}" r="3.5" '
                f'data-series="mean"{run}><title>{escape(shown)}</title></circle>'
            )
        rate = rates[i] if rates else (None, None, None)
        if rate[0] is not None:
            r_low, r_high = rate[1], rate[2]
            if r_low is not None and r_high is not None:
                parts.append(
                    f'<line class="rate-whisker" x1="{num(x(i) + 3)}" x2="{num(x(i) + 3)}" '
                    f'y1="{num(y(r_low))}" y2="{num(y(r_high))}"/>'
                )
            shown = f"{names[i]}: pass rate {rate[0]:.0%}"
            if r_low is not None and r_high is not None:
                shown += f" [{r_low:.0%}, {r_high:.0%}]"
            parts.append(
                f'<rect class="rate-dot" x="{num(x(i))}" y="{num(y(rate[0]) - 3)}" width="6" '
                f'height="6" data-series="pass"{run}><title>{escape(shown)}</title></rect>'
            )
        label = escape(labels[i])
        base = frame.base + 15
        parts.append(
            f'<text class="axis run-number" x="{num(x(i))}" y="{num(base)}" '
            f'text-anchor="middle"{run}>#{i + 1}</text>'
        )
        if level:
            parts.append(
                f'<text class="axis run-label" x="{num(x(i))}" y="{num(base + 14)}" '
                f'text-anchor="middle"{run}>{label}</text>'
            )
        else:
            parts.append(
                f'<text class="axis run-label" x="{num(x(i) + 4)}" y="{num(base + 10)}" '
                f'text-anchor="end" transform="rotate(-35 {num(x(i) + 4)} {num(base + 10)})"'
                f"{run}>{label}</text>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))
