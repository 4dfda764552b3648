"""The page of a trend: the runs, each named by its number, name, tags, date and time (to
the second when two runs share a minute); each metric as a small chart in a grid (its mean
and pass rate per run, each with its interval); and what changed from the first run (A) to
the last (B), each changed case opening A and B side by side as on the comparison page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from contextlens.report.comparison import SCRIPTS, changes_context, report_href
from contextlens.report.format import fmt_score
from contextlens.report.page import render_page, write_page
from contextlens.report.plots import trend_plot
from contextlens.report.views import comparison_view
from contextlens.trend import MetricPoint, RunPoint, Trend

__all__ = ["RunLabel", "default_folder", "render_trend", "run_labels", "write_trend"]

#: The folder, beside the runs' folders, that the trend pages go to unless told.
TRENDS = "trends"


@dataclass(frozen=True)
class RunLabel:
    """How the page names one run: its number in the trend, its start in UTC (as precise
    as telling the runs apart needs), the shorter text under each chart, its name and tags."""

    number: int
    when: str
    axis: str
    name: str
    tags: str
    run_id: str
    tag_items: tuple[str, ...] = ()

    @property
    def full(self) -> str:
        """``#2 nightly · branch=main · 2026-03-01 14:05:09 UTC · run 1a2b3c``."""
        said = [f"#{self.number}", self.name, self.tags, f"{self.when} UTC" if self.when else ""]
        return " · ".join(p for p in said if p) + f" · run {self.run_id}"


def _started(text: str) -> datetime | None:
    try:
        then = datetime.fromisoformat(text)
    except ValueError:
        return None
    return then.astimezone(timezone.utc) if then.tzinfo is not None else then


def run_labels(runs: Sequence[RunPoint]) -> list[RunLabel]:
    """Each run's label: its start to the minute, to the second when two runs share a
    minute; under the charts, the time alone when every run started on one day, else the
    date and time (the year too when they span years)."""
    times = [_started(r.started_at) for r in runs]
    known = [t for t in times if t is not None]
    to_minute = len({t.strftime("%Y-%m-%d %H:%M") for t in known}) == len(known)
    clock = "%H:%M" if to_minute else "%H:%M:%S"
    if len({t.date() for t in known}) <= 1:
        axis = clock
    elif len({t.year for t in known}) == 1:
        axis = f"%m-%d {clock}"
    else:
        axis = f"%Y-%m-%d {clock}"
    labels = []
    for i, (run, then) in enumerate(zip(runs, times, strict=True), 1):
        labels.append(
            RunLabel(
                number=i,
                when=then.strftime(f"%Y-%m-%d {clock}") if then else run.started_at,
                axis=then.strftime(axis) if then else run.run_id[:8],
                name=run.name or "",
                tags=" ".join(f"{k}={v}" for k, v in run.tags.items()),
                run_id=run.run_id,
                tag_items=tuple(f"{k}={v}" for k, v in run.tags.items()),
            )
        )
    return labels


def _cell(point: MetricPoint | None) -> str:
    """``0.812 [0.790, 0.833] · pass 83% [78%, 88%]``: a metric's mean and pass rate."""
    if point is None:
        return fmt_score(None)
    text = fmt_score(point.mean)
    if point.ci_low is not None:
        text += f" [{fmt_score(point.ci_low)}, {fmt_score(point.ci_high)}]"
    if point.pass_rate is not None:
        text += f" · pass {point.pass_rate:.0%}"
        if point.pass_low is not None and point.pass_high is not None:
            text += f" [{point.pass_low:.0%}, {point.pass_high:.0%}]"
    return text


def default_folder(result: Trend) -> Path:
    """Where the page goes unless told: the ``trends/`` folder of the last run's out folder
    (beside the runs), else of the newest run that has a folder;
    ``contextlens-out/trends/`` when none has."""
    folders = [Path(r.folder).parent for r in reversed(result.runs) if r.folder]
    return (folders[0] if folders else Path("contextlens-out")) / TRENDS


def render_trend(result: Trend, *, title: str | None = None, page: Path | None = None) -> str:
    """The trend page as a string; ``page``: where it will be written, which its links to
    the runs' reports are relative to (see :func:`write_trend`)."""
    labels = run_labels(result.runs)
    charts = []
    for metric in result.metrics:
        series = result.series(metric)
        newest = next((p for p in reversed(series) if p is not None), None)
        mark = next((p.threshold for p in reversed(series) if p and p.threshold is not None), None)
        charts.append(
            {
                "metric": metric,
                "last": _cell(newest),
                "mark": f"{mark:g}" if mark is not None else "",
                "plot": trend_plot(
                    [label.axis for label in labels],
                    [(p.mean, p.ci_low, p.ci_high) if p else (None, None, None) for p in series],
                    rates=[
                        (p.pass_rate, p.pass_low, p.pass_high) if p else (None, None, None)
                        for p in series
                    ],
                    titles=[label.full for label in labels],
                    runs=[r.run_id for r in result.runs],
                ),
            }
        )
    rows = [
        {
            "label": label,
            "report": report_href(r.folder, page),
            "cells": [_cell(r.metrics.get(m)) for m in result.metrics],
        }
        for r, label in zip(result.runs, labels, strict=True)
    ]
    pair = result.first_to_last
    context = changes_context(pair, page) if pair is not None else {}
    name = next((r.name for r in result.runs if r.name), None)
    return render_page(
        "trend.html.j2",
        scripts=SCRIPTS,
        wide=True,
        title=title or f"contextlens trend{': ' + name if name else ''}",
        metrics=result.metrics,
        charts=charts,
        rows=rows,
        first=labels[0],
        final=labels[-1],
        one_day=len({label.when[:10] for label in labels}) == 1,
        warnings=pair.warnings if pair is not None else [],
        comparison=comparison_view(pair) if pair is not None else None,
        **context,
    )


def write_trend(result: Trend, path: str | Path, *, title: str | None = None) -> Path:
    """Write the trend page to ``path`` (a folder gets ``trend-FIRST-LAST.html``); its links
    to the runs' reports are relative to where it is written."""
    name = f"trend-{result.runs[0].run_id}-{result.runs[-1].run_id}.html"
    target = Path(path)
    page = target / name if target.is_dir() and not target.is_symlink() else target
    return write_page(render_trend(result, title=title, page=page), page, name)
