"""The execute step of ``contextlens run``: a dry run's estimate printed, or the run
recorded, scored and finished (its report, its store entry, ``latest``, its table)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from contextlens.cli.application import out
from contextlens.cli.costs import estimate_table
from contextlens.cli.run.plan import RunPlan
from contextlens.cli.run.record import recorded, side_file_warning, start_recording
from contextlens.cli.run.table import summary_table
from contextlens.terminal import line

if TYPE_CHECKING:
    from contextlens.results import EvalRun, RecordedConfig
    from contextlens.runner import RunFolder
    from contextlens.store import RunStore

__all__ = ["execute", "finish"]


def execute(plan: RunPlan) -> EvalRun | None:
    """Run ``plan``: a dry run prints the calls, tokens and cost it would take (None); a run
    is recorded in the store as running, scored, then finished (:func:`finish`)."""
    from contextlens.runner import evaluate

    args, config = plan.args, plan.config
    if args.dry_run:
        out.print(estimate_table(evaluate(plan.cases, plan.metrics, config=config, dry_run=True)))
        return None
    said = config.describe().with_extra({"data": str(args.data), "metrics": list(plan.keys)})
    fingerprint = config.data_file.sha256 if config.data_file is not None else None
    runs_store = start_recording(plan.folder, config, said, data=args.data, fingerprint=fingerprint)
    with recorded(runs_store, plan.folder.run_id):  # a report that cannot be written fails it
        result = evaluate(plan.cases, plan.metrics, executor=plan.executor, config=config)
        finish(
            result, plan.folder, runs_store, config=said, data=args.data, fingerprint=fingerprint
        )
    return result


def finish(
    result: EvalRun,
    folder: RunFolder,
    runs_store: RunStore | None,
    *,
    config: RecordedConfig,
    data: Path,
    fingerprint: str | None,
    offline_note: bool = True,
) -> None:
    """Write the report into the run's folder, record the run as completed, point
    ``latest`` at it, and print the table and where the files are."""
    from contextlens.report.html import write_report
    from contextlens.store import StoreError

    report = write_report(result, folder.path)  # report.html in it; a folder there is an error
    if runs_store is not None:
        try:
            runs_store.record(
                result, config=config, dataset=str(data), dataset_fingerprint=fingerprint
            )
        except StoreError as exc:  # the run is complete; only its history entry is missing
            side_file_warning(
                f"the run is complete in {folder.path}, but the run store could not record "
                f"it: {exc}"
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # said here, once, as a warning line
        latest = folder.complete()
    if latest is None:
        side_file_warning(f"{folder.out / 'latest'} could not be made to name this run")
    out.print(summary_table(result))
    if offline_note and any(s.judge == "offline" for s in result.summaries.values()):
        from contextlens.metrics.base import OFFLINE_SCALE_NOTE

        out.print(line(OFFLINE_SCALE_NOTE))
    out.print(line("results: ", folder.path / "results.jsonl"))
    out.print(line("report:  ", report))
