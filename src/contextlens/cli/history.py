"""``contextlens runs`` and ``contextlens compare``: the run history."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from contextlens.cli.application import RED, out
from contextlens.cli.options import age, fmt, near
from contextlens.terminal import line, table


def runs(
    store: Annotated[Path | None, typer.Option(help="run store file")] = None,
    limit: Annotated[int, typer.Option(help="how many")] = 20,
) -> None:
    """List recorded runs, newest first, with their status and folder; how to resume an
    interrupted run, and why a failed one failed."""
    from contextlens.store import FAILED, INTERRUPTED, RUNNING_OR_LOST, RunStore

    rows, notes = [], []
    for info in RunStore(store).list_runs(limit=limit):
        means = ", ".join(
            f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in info.means.items()
        )
        bad = info.status in (FAILED, INTERRUPTED, RUNNING_OR_LOST)
        status = info.status
        if status == RUNNING_OR_LOST:
            status += f" ({age(info.started_at)} since it started, on {info.host})"
        rows.append(
            [
                info.run_id,
                info.started_at,
                Text(status, style=RED) if bad else status,
                info.judge,
                info.dataset or "-",
                info.n_items,
                means,
                near(info.out_dir) if info.out_dir else "-",
            ]
        )
        if info.status in (INTERRUPTED, RUNNING_OR_LOST) and info.command:
            where = "" if info.cwd in (None, str(Path.cwd())) else f"cd {shlex.quote(info.cwd)} && "
            unless = " (unless it still runs there)" if info.status == RUNNING_OR_LOST else ""
            notes.append(line(f"resume {info.run_id}{unless}: ", where, info.command))
        elif info.status == FAILED and info.error:
            notes.append(line(f"failed {info.run_id}: ", info.error))
    headers = ["run", "started", "status", "judge", "data", "items", "means", "folder"]
    out.print(table(None, headers, rows, numeric=["items"]))
    for note in notes:
        out.print(note, soft_wrap=True)  # a command is printed whole, to be run again


def compare(
    run_a: Annotated[str, typer.Argument(help="the baseline run id (a prefix is enough)")],
    run_b: Annotated[str, typer.Argument(help="the candidate run id")],
    store: Annotated[Path | None, typer.Option(help="run store file")] = None,
    out_dir: Annotated[Path, typer.Option("--out", help="folder for compare.html")] = Path(
        "contextlens-out"
    ),
) -> None:
    """Paired comparison of two runs: mean difference, interval, P(B better)."""
    from contextlens.compare import compare as compare_runs
    from contextlens.report.html import write_report
    from contextlens.store import RunStore

    runs_store = RunStore(store)
    a, b = runs_store.load(run_a), runs_store.load(run_b)
    result = compare_runs(a, b)
    headers = ["metric", "pairs", "A", "B", "B - A", "interval", "P(B better)", "pass A -> B"]
    headers += ["unpaired"]
    rows = [
        [
            m.metric,
            m.n_paired,
            fmt(m.mean_a),
            fmt(m.mean_b),
            fmt(m.mean_diff, signed=True),
            f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]" if m.ci_low is not None else "-",
            fmt(m.p_b_better),
            _rates(m.pass_rate_a, m.pass_rate_b),
            m.n_only_a + m.n_only_b + m.n_failed_a + m.n_failed_b,
            m.verdict,
        ]
        for m in result.metrics
    ]
    title = f"{a.run_id} (A) vs {b.run_id} (B)"
    numeric = [h for h in headers[1:] if h != "pass A -> B"]
    out.print(table(title, [*headers, "verdict"], rows, numeric=numeric))
    out_dir.mkdir(parents=True, exist_ok=True)
    page = write_report(b, out_dir / "compare.html", comparison=result)
    out.print(line("report: ", page))


def _rates(a: float | None, b: float | None) -> str:
    """``80% -> 85%``: the pass rates of both runs."""
    if a is None and b is None:
        return "-"
    return f"{'-' if a is None else f'{a:.0%}'} -> {'-' if b is None else f'{b:.0%}'}"
