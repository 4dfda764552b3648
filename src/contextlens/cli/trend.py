"""``contextlens trend``: metrics over more than two runs, and what changed from the first
run to the last."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contextlens.cli.application import UsageProblem, out
from contextlens.cli.history import NameOption, TagOption, changes_table, parse_tags, warning_lines
from contextlens.files import make_folder
from contextlens.terminal import line, table

__all__ = ["trend"]


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
        typer.Option("--out", help="the page's file or folder [default: contextlens-out/trends/]"),
    ] = None,
) -> None:
    """Each metric's mean and interval per run, oldest first, with a plot; and the cases
    that changed most between the first run and the last."""
    from contextlens.report.trend import write_trend
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
    headers = ["run", "started", "name", *result.metrics]
    rows = []
    for r in result.runs:
        cells = []
        for m in result.metrics:
            p = r.metrics.get(m)
            if p is None or p.mean is None:
                cells.append("-")
            else:
                cell = f"{p.mean:.3f}"
                if p.ci_low is not None and p.ci_high is not None:
                    cell += f" [{p.ci_low:.3f}, {p.ci_high:.3f}]"
                if p.pass_rate is not None:
                    cell += f" pass {p.pass_rate:.0%}"
                cells.append(cell)
        rows.append([r.run_id, r.started_at, r.name or "-", *cells])
    out.print(
        table(
            f"{len(rows)} runs, oldest first",
            headers,
            rows,
            numeric=result.metrics,
            ids=["run", "started"],
        )
    )
    if result.first_to_last is not None:
        for warning in warning_lines(result.first_to_last.warnings):
            out.print(warning)
        changes = changes_table(result.first_to_last)
        if changes is not None:
            out.print(changes)
    target = out_path if out_path is not None else Path("contextlens-out") / "trends"
    if target.suffix != ".html":
        make_folder(target)
    out.print(line("report: ", write_trend(result, target)))
