"""``contextlens calibrate``: how well a metric agrees with human labels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contextlens.cli.application import out
from contextlens.cli.options import (
    JUDGE_HELP,
    JudgeTimeout,
    MaxTokens,
    StructuredOutput,
    build_metrics,
    fmt,
    judge_option,
    progress_option,
)
from contextlens.terminal import line, table


def calibrate(
    data: Annotated[Path, typer.Argument(help="labelled JSONL, CSV or Parquet file")],
    metric: Annotated[str, typer.Option("--metric", "-m", help="the metric to check")] = "context",
    judge: Annotated[str | None, typer.Option(help=JUDGE_HELP)] = None,
    judge_timeout: JudgeTimeout = None,
    max_tokens: MaxTokens = None,
    structured_output: StructuredOutput = None,
    by: Annotated[
        str | None, typer.Option(help="a dotted key to slice by, e.g. meta.domain")
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(help="where to measure accuracy (default: the metric's)")
    ] = None,
    out_dir: Annotated[
        Path,
        typer.Option("--out", help="each run writes into OUT/<run id>/; OUT/latest: the newest"),
    ] = Path("contextlens-out/calibrate"),
    concurrency: Annotated[
        int | None, typer.Option(help="judge calls in flight at most, per backend [default: 16]")
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="no progress bar or progress lines")
    ] = False,
) -> None:
    """How well a metric agrees with human labels: AUROC, accuracy, calibration, slices.
    Writes calibration.json, calibration.html and items.jsonl (every item's label and
    score) into the run's own folder OUT/<run id>/, then points OUT/latest at it."""
    from time import perf_counter

    from contextlens.calibration import calibrate as run_calibration
    from contextlens.files import make_folder, write_text
    from contextlens.report.calibration_html import write_calibration_report
    from contextlens.runner import RunConfig, RunFolder

    t0 = perf_counter()
    [core] = build_metrics([metric])
    make_folder(out_dir)  # a folder that cannot be made fails first
    config = RunConfig(
        judge=judge_option(
            judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
        ),
        max_concurrency=concurrency,
        progress=progress_option("calibrate", quiet),
    )
    report = run_calibration(data, core, by=by, threshold=threshold, config=config)
    rows = [[r["statistic"], r["value"], r["note"]] for r in report.to_table()]
    title = f"{report.metric} vs human labels ({report.judge})"
    out.print(table(title, ["statistic", "value", "note"], rows, numeric=["value"]))
    if report.slices:
        bal = f"bal. acc. @ {report.threshold:g}"
        rows = [
            [
                s.value,
                str(s.n),
                f"{s.n_positive} / {s.n_negative}",
                fmt(s.auroc),
                fmt(s.balanced_accuracy),
                s.note or "",
            ]
            for s in report.slices
        ]
        headers = ["slice", "n", "1 / 0", "AUROC", bal, "note"]
        out.print(table(f"by {report.by}", headers, rows, numeric=headers[1:5]))
        out.print(
            line(
                f"The AUROC above, {fmt(report.auroc)}, is pooled over all items; the mean "
                f"AUROC over {report.by}, {fmt(report.slice_mean_auroc)}, is the mean of the "
                "per-slice AUROCs (slices with both classes). They differ when the score's "
                "level shifts from slice to slice."
            )
        )
    if report.published:
        out.print(line(report.published))
    folder = RunFolder(out_dir)
    folder.create()
    saved = folder.path / "calibration.json"
    write_text(saved, report.model_dump_json(indent=2))
    items = report.write_items(folder.path / "items.jsonl")
    page = write_calibration_report(report, folder.path / "calibration.html")
    folder.complete()
    wall = perf_counter() - t0
    out.print(line("json:   ", saved))
    out.print(line("items:  ", items))
    out.print(line("report: ", page))
    out.print(
        line(f"time:   {wall:.1f} s wall time, {report.n_rows / max(wall, 1e-9):.1f} items/s")
    )
