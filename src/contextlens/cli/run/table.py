"""The table a run prints: one row per metric (see :mod:`contextlens.report.summary_table`),
and the run's folder under it."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from contextlens.terminal import FitTable, line

__all__ = ["summary_table"]


def summary_table(run: Any) -> FitTable:
    """Per metric: mean, interval, pass rate, items, failures and wall time (judge, calls,
    tokens and cost when some metric asked a judge); the run folder under the legend."""
    from contextlens.report.summary_table import summary_table as run_table

    made = run_table(run)
    if run.out_dir and made.caption is not None:
        made.caption = line(made.caption, Text("\n"), "run folder: ", run.out_dir)
    return made
