"""The table a run prints: one row per metric."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from contextlens.cli.application import RED
from contextlens.terminal import line, table

__all__ = ["summary_table"]


def summary_table(run: Any) -> Table:
    """Per metric: judge, mean, interval, pass rate, n, failures, calls, retries, tokens,
    cost, time."""
    from contextlens.engine.accounting import Counts
    from contextlens.report.format import items_text, pass_text

    headers = ["metric", "judge", "mean", "interval", "pass", "n", "failed", "calls"]
    headers += ["tokens", "cost", "time"]
    rows = []
    for s in run.summaries.values():
        acc = s.accounting or Counts()
        priced = s.accounting is not None and not acc.unpriced_calls
        retries = acc.retries
        rows.append(
            [
                s.metric,
                s.judge or "-",
                f"{s.mean:.3f}" if s.mean is not None else "-",
                f"[{s.ci_low:.3f}, {s.ci_high:.3f}]" if s.ci_low is not None else "-",
                pass_text(s, missing="-"),
                items_text(s),
                Text(str(s.n_failed), style=RED) if s.n_failed else "0",
                f"{acc.calls}" + (f" ({retries} retried)" if retries else ""),
                f"{acc.prompt_tokens:,}/{acc.completion_tokens:,}",
                f"${acc.cost:.4f}" if priced else ("-" if not acc.calls else "unpriced"),
                f"{s.seconds:.1f}s",
            ]
        )
    caption = line(
        f"run {run.duration_s:.1f} s wall time; cache hits {run.accounting.total.cache_hits}; "
        "pass: the share of scored items at or above the pass mark, with its interval; "
        "n/a: items the metric does not apply to (not in the mean; an answer that abstains, a "
        "case the offline reader cannot decide); not English: items whose case has a text in "
        "another language (each reason says which); tokens in/out; time: the metric's wall "
        "time, while any of its items was being scored (the metrics of a case are scored at "
        "once, so their times overlap)"
    )
    if run.out_dir:
        caption.append_text(line(Text("\n"), "run folder: ", run.out_dir))
    return table(
        f"contextlens run {run.run_id}", headers, rows, numeric=headers[2:], caption=caption
    )
