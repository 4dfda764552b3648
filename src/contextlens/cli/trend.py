"""``contextlens trend``: metrics over more than two runs, and what changed from the first
run to the last."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from contextlens.cli.application import UsageProblem, out
from contextlens.cli.history import NameOption, TagOption, changes_table, parse_tags, warning_lines
from contextlens.cli.options import fmt, tags_cell, when
from contextlens.files import make_folder
from contextlens.terminal import FitTable, line, table

__all__ = ["trend", "trend_table"]


def trend(
    runs: Annotated[
        list[str] | None, typer.Argument(help="run ids or run folders (or use --name)")
    ] = None,
    name: NameOption = None,
    tag: TagOption = [],  # noqa: B006
    last: Annotated[int, typer.Option(help="with --name: the last N completed runs")] = 10,
    store: Annotated[Path | None, typer.Option(help="run store file")] = None,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="the page's file or folder [default: the trends/ folder beside the runs' folders]",
        ),
    ] = None,
) -> None:
    """Each metric's mean and interval per run, oldest first, with a plot; and the cases
    that changed most between the first run and the last."""
    from contextlens.report.trend import default_folder, write_trend
    from contextlens.store import RunStore
    from contextlens.trend import trend as trend_of

    runs_store = RunStore(store)
    refs: list[str] = list(runs or [])
    if not refs:
        if name is None and not tag:
            raise UsageProblem("name the runs, or give --name NAME (and --last N) to follow")
        if last < 2:
            raise UsageProblem(f"--last expects 2 or more, got {last}")
        infos = runs_store.list_runs(limit=last, completed=True, name=name, tags=parse_tags(tag))
        refs = [i.run_id for i in reversed(infos)]
        if len(refs) < 2:
            raise UsageProblem(f"{len(refs)} completed run(s) match; a trend needs 2 or more")
    elif len(refs) < 2:
        raise UsageProblem("a trend needs 2 or more runs")
    result = trend_of(refs, store=runs_store)
    out.print(trend_table(result))
    if result.first_to_last is not None:
        for warning in warning_lines(result.first_to_last.warnings):
            out.print(warning)
        changes = changes_table(result.first_to_last)
        if changes is not None:
            out.print(changes)
    target = out_path if out_path is not None else default_folder(result)
    if target.suffix != ".html":
        make_folder(target)
    out.print(line("report: ", write_trend(result, target)))


def _point_text(p: Any) -> str:
    """``0.812 [0.790, 0.833] 64%``: a metric's mean, interval and pass rate in one run."""
    if p is None or p.mean is None:
        return "-"
    cell = f"{p.mean:.3f}"
    if p.ci_low is not None and p.ci_high is not None:
        cell += f" [{p.ci_low:.3f}, {p.ci_high:.3f}]"
    if p.pass_rate is not None:
        cell += f" {p.pass_rate:.0%}"
    return cell


def trend_table(result: Any) -> FitTable:
    """The runs oldest first, with their names and tags and each metric's mean, interval
    and pass rate; where one column per metric does not fit, one row per metric and run."""
    runs = [[r.run_id, when(r.started_at), r.name or "-", tags_cell(r.tags)] for r in result.runs]
    said = f"{len(result.runs)} runs, oldest first"
    legend = "started: UTC; each metric: mean [interval] pass rate"
    wide = table(
        said,
        ["run", "started", "name", "tags", *result.metrics],
        [
            [*cells, *(_point_text(r.metrics.get(m)) for m in result.metrics)]
            for cells, r in zip(runs, result.runs, strict=True)
        ],
        numeric=result.metrics,
        ids=["run", "started"],
        shared=["name"],
        caption=legend,
    )
    long_rows = []
    for m in result.metrics:
        for cells, r in zip(runs, result.runs, strict=True):
            p = r.metrics.get(m)
            long_rows.append(
                [
                    m,
                    *cells,
                    fmt(p.mean if p else None),
                    f"[{p.ci_low:.3f}, {p.ci_high:.3f}]"
                    if p and p.ci_low is not None and p.ci_high is not None
                    else "-",
                    f"{p.pass_rate:.0%}" if p and p.pass_rate is not None else "-",
                    p.n if p else "-",
                ]
            )
    headers = ["metric", "run", "started", "name", "tags", "mean", "interval", "pass", "n"]
    wide.fallback = table(
        said,
        headers,
        long_rows,
        numeric=headers[5:],
        ids=["run", "started"],
        shared=["name"],
        caption="started: UTC; pass: the pass rate",
    )
    return wide
