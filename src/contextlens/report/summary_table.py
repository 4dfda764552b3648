"""A run's summary as a terminal table, one row per metric: what ``contextlens run`` prints,
and the pytest plugin at the end of a session.

A column that carries nothing for the run is left out: the judge, calls, tokens and cost
when no metric asked a judge (an offline run, whose judge the legend names), the interval
when no metric has one, the pass rate when no metric has a pass mark; a judge every metric
shares is said once, under the table. The legend explains only what the table shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text

from contextlens.report.format import fmt_seconds, items_text, pass_text
from contextlens.terminal import FitTable, line, table

__all__ = ["summary_table"]

RED = "red"
OFFLINE = "offline"


def _calls(s: Any) -> str:
    acc = s.accounting
    if acc is None:
        return "0"
    return f"{acc.calls}" + (f" ({acc.retries} retried)" if acc.retries else "")


def _tokens(s: Any) -> str:
    acc = s.accounting
    return "0/0" if acc is None else f"{acc.prompt_tokens:,}/{acc.completion_tokens:,}"


def _cost(s: Any) -> str:
    acc = s.accounting
    if acc is None or not acc.calls:
        return "-"
    return "unpriced" if acc.unpriced_calls else f"${acc.cost:.4f}"


def _interval(s: Any) -> str:
    if s.ci_low is None or s.ci_high is None:
        return "-"
    return f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"


#: Each column: its header, its cell, and whether the run's summaries give it anything to show.
_COLUMNS: list[tuple[str, Callable[[Any], Any], Callable[[Sequence[Any]], bool]]] = [
    ("metric", lambda s: s.metric, lambda ss: True),
    ("judge", lambda s: s.judge or "-", lambda ss: any(_judged(s) for s in ss)),
    ("mean", lambda s: f"{s.mean:.3f}" if s.mean is not None else "-", lambda ss: True),
    ("interval", _interval, lambda ss: any(s.ci_low is not None for s in ss)),
    (
        "pass",
        lambda s: pass_text(s, missing="-"),
        lambda ss: any(s.pass_rate is not None for s in ss),
    ),
    ("n", items_text, lambda ss: True),
    (
        "failed",
        lambda s: Text(str(s.n_failed), style=RED) if s.n_failed else "0",
        lambda ss: True,
    ),
    ("calls", _calls, lambda ss: any(s.accounting is not None for s in ss)),
    ("tokens", _tokens, lambda ss: any(s.accounting is not None for s in ss)),
    ("cost", _cost, lambda ss: any(s.accounting is not None for s in ss)),
    ("time", lambda s: fmt_seconds(s.seconds), lambda ss: True),
]


def _judged(summary: Any) -> bool:
    """Whether the metric asked a judge other than the offline reader."""
    return summary.accounting is not None or summary.judge not in (None, OFFLINE)


def summary_table(run: Any, *, title: str | None = None, duration: str | None = None) -> FitTable:
    """Per metric: mean, interval, pass rate, items, failures, wall time; judge, calls (and
    retries), tokens and cost when some metric asked a judge. ``title`` defaults to the run's
    id; ``duration`` (the legend's first words) to the run's wall time."""
    summaries = list(run.summaries.values())
    columns = [(h, cell) for h, cell, shown in _COLUMNS if shown(summaries)]
    headers = [h for h, _ in columns]
    rows = [[cell(s) for _, cell in columns] for s in summaries]
    legend = [duration or f"run {fmt_seconds(run.duration_s)} wall time"]
    if "judge" not in headers:
        legend.append(f"judge {run.judge or OFFLINE}")
    hits = run.accounting.total.cache_hits
    if "calls" in headers or hits:
        legend.append(f"cache hits {hits}")
    if "pass" in headers:
        legend.append(
            "pass: the share of scored items at or above the pass mark, with its interval"
        )
    if any(s.n_not_applicable for s in summaries):
        legend.append(
            "n/a: items the metric does not apply to (not in the mean; an answer that abstains, "
            "a case the offline reader cannot decide)"
        )
    if any(s.n_not_run for s in summaries):
        legend.append("not run: items the run stopped before")
    if any(s.n_not_english for s in summaries):
        legend.append(
            "not English: items whose case has a text in another language (each reason says which)"
        )
    if "tokens" in headers:
        legend.append("tokens in/out")
    legend += [f"{s.metric}: {s.triage.line()}" for s in summaries if s.triage is not None]
    legend += [f"{s.metric}: {s.breakdown.line()}" for s in summaries if s.breakdown is not None]
    legend.append(
        "time: the metric's wall time, while any of its items was being scored (the metrics "
        "of a case are scored at once, so their times overlap)"
    )
    return table(
        title if title is not None else f"contextlens run {run.run_id}",
        headers,
        rows,
        numeric=headers[2:] if "judge" in headers else headers[1:],
        shared=["judge"] if "judge" in headers else [],
        caption=line("; ".join(legend)),
    )
