"""The page of a trend: each metric over the runs, and what changed from the first run to
the last."""

from __future__ import annotations

from pathlib import Path

from contextlens.report.comparison import SCRIPTS
from contextlens.report.format import fmt_score
from contextlens.report.page import render_page, script_json, write_page
from contextlens.report.plots import trend_plot
from contextlens.trend import MetricPoint, Trend

__all__ = ["render_trend", "write_trend"]


def _cell(point: MetricPoint | None) -> str:
    """``0.812 [0.790, 0.833] · pass 83%``: a metric's mean, interval and pass rate."""
    if point is None:
        return fmt_score(None)
    text = fmt_score(point.mean)
    if point.ci_low is not None:
        text += f" [{fmt_score(point.ci_low)}, {fmt_score(point.ci_high)}]"
    if point.pass_rate is not None:
        text += f" · pass {point.pass_rate:.0%}"
    return text


def render_trend(result: Trend, *, title: str | None = None) -> str:
    """The trend page as a string; see :func:`write_trend`."""
    labels = [r.started_at[:16].replace("T", " ") or r.run_id for r in result.runs]
    plots = {}
    for metric in result.metrics:
        series = [
            (p.mean, p.ci_low, p.ci_high) if p is not None else (None, None, None)
            for p in result.series(metric)
        ]
        plots[metric] = trend_plot(labels, series)
    rows = [
        {
            "run_id": r.run_id,
            "started_at": r.started_at,
            "name": r.name or "",
            "tags": " ".join(f"{k}={v}" for k, v in r.tags.items()),
            "cells": [_cell(r.metrics.get(m)) for m in result.metrics],
        }
        for r in result.runs
    ]
    last = result.first_to_last
    changes: list[list[object]] = []
    if last is not None:
        ordered = sorted(
            ((at, c) for at, m in enumerate(last.metrics) for c in m.changes),
            key=lambda pair: pair[1].order(),
        )
        changes = [[at, c.case_id, c.a, c.b, c.diff, c.change, c.regression] for at, c in ordered]
    name = next((r.name for r in result.runs if r.name), None)
    return render_page(
        "trend.html.j2",
        scripts=SCRIPTS,
        title=title or f"contextlens trend{': ' + name if name else ''}",
        metrics=result.metrics,
        plots=plots,
        rows=rows,
        first=result.runs[0].run_id,
        last=result.runs[-1].run_id,
        warnings=last.warnings if last is not None else [],
        changes_metrics=[m.metric for m in last.metrics] if last is not None else [],
        changes_json=script_json(
            {"metrics": [m.metric for m in last.metrics] if last else [], "rows": changes}
        ),
    )


def write_trend(result: Trend, path: str | Path, *, title: str | None = None) -> Path:
    """Write the trend page to ``path`` (a folder gets ``trend-FIRST-LAST.html``)."""
    name = f"trend-{result.runs[0].run_id}-{result.runs[-1].run_id}.html"
    return write_page(render_trend(result, title=title), path, name)
