"""``contextlens run``: a file of cases through the chosen metrics, into its own folder.

The command gathers its options (:class:`~contextlens.cli.run.args.RunArgs`) and takes three
steps: :func:`~contextlens.cli.run.plan.planned` checks the options, the file and its metrics
before any judge call; :func:`~contextlens.cli.run.execute.execute` scores and records the
run; :func:`~contextlens.cli.run.gate.gate` gives its exit status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from contextlens.cli.application import err
from contextlens.cli.formats import CsvOption, JunitItemsOption, JunitOption, MarkdownOption
from contextlens.cli.options import JUDGE_HELP, JudgeTimeout, MaxTokens, StructuredOutput
from contextlens.cli.run.args import RunArgs
from contextlens.cli.run.execute import execute, finish
from contextlens.cli.run.gate import failure_gate, gate, parse_max_failures
from contextlens.cli.run.plan import planned
from contextlens.cli.run.table import summary_table

__all__ = ["failure_gate", "finish", "parse_max_failures", "run", "summary_table"]


def run(
    data: Annotated[
        Path, typer.Argument(help="JSONL, CSV or Parquet file of cases; - reads standard input")
    ],
    metric: Annotated[
        list[str],
        typer.Option("--metric", "-m", help="metric(s) to run; `contextlens schema` lists them"),
    ] = [],  # noqa: B006
    judge: Annotated[str | None, typer.Option(help=JUDGE_HELP)] = None,
    judge_timeout: JudgeTimeout = None,
    max_tokens: MaxTokens = None,
    structured_output: StructuredOutput = None,
    embedder: Annotated[
        str | None, typer.Option(help="minilm (default) or module:attr of an embeddings object")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="judge calls in flight at most, per backend [default: 16]")
    ] = None,
    repeats: Annotated[int, typer.Option(help="ask the judge K times per item")] = 1,
    out_dir: Annotated[
        Path, typer.Option("--out", help="runs write into OUT/<run id>/; OUT/latest: the newest")
    ] = Path("contextlens-out"),
    fail_under: Annotated[
        list[str], typer.Option(help="METRIC=VALUE: exit 1 when the metric is below VALUE")
    ] = [],  # noqa: B006
    fail_mode: Annotated[
        str, typer.Option(help="point: the mean must reach VALUE; interval: its upper bound")
    ] = "point",
    threshold: Annotated[
        list[str],
        typer.Option(
            help="METRIC=VALUE: an item passes at a score of VALUE or more [default: the "
            "metric's own pass mark, else 0.5; none for a score that is not a probability "
            "(context-similarity): its items are scored with no verdict]"
        ),
    ] = [],  # noqa: B006
    store: Annotated[Path | None, typer.Option(help="run store file (default: user data)")] = None,
    no_store: Annotated[bool, typer.Option("--no-store", help="do not record the run")] = False,
    cache: Annotated[
        str | None, typer.Option(help="cache file, or 'off' (default: user cache folder)")
    ] = None,
    max_failures: Annotated[
        str,
        typer.Option(help="N or P%: exit 3 when more items than this failed (default: any)"),
    ] = "0",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
    input_format: Annotated[
        str | None,
        typer.Option(
            "--format", help="jsonl, csv or parquet: for - and pipes [default: the suffix]"
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="score on a Ray cluster: ADDRESS, or auto (the one on this machine); "
            "'local' starts one here (needs contextlens[ray])",
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="make no judge call: read and check every case, build every prompt, and "
            "print the calls, tokens and cost the run would take",
        ),
    ] = False,
    max_cost: Annotated[
        float | None,
        typer.Option(
            metavar="USD",
            help="stop sending judge calls before the next could take the run past USD; "
            "the rest is 'not run' (exit 4)",
        ),
    ] = None,
    triage: Annotated[
        bool,
        typer.Option(
            "--triage",
            help="let the calibrated offline scorer decide the items it is sure of (outside "
            "its metric's band) and send only the rest to the judge",
        ),
    ] = False,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="send the judge calls through the provider's batch API (OpenAI, or a server "
            "that serves /v1/batches; Anthropic) at its batch price, and wait for the "
            "batches; a run stopped and started again collects them, paying nothing twice",
        ),
    ] = False,
    triage_band: Annotated[
        list[str],
        typer.Option(
            metavar="METRIC=LOW:HIGH",
            help="with --triage: the offline scores METRIC sends to the judge (repeatable; "
            "default: the band measured for its offline scorer)",
        ),
    ] = [],  # noqa: B006
    name: Annotated[str | None, typer.Option(help="name the run, to find and follow it")] = None,
    tag: Annotated[list[str], typer.Option(help="KEY=VALUE: tag the run (repeatable)")] = [],  # noqa: B006
    junit: JunitOption = None,
    junit_items: JunitItemsOption = False,
    markdown: MarkdownOption = None,
    csv: CsvOption = None,
) -> None:
    """Evaluate DATA with the chosen metrics; write results.jsonl, summary.json and
    report.html into the run's own folder OUT/<run id>/, then point OUT/latest at it."""
    args = RunArgs(
        data=data,
        metric=metric,
        judge=judge,
        judge_timeout=judge_timeout,
        max_tokens=max_tokens,
        structured_output=structured_output,
        embedder=embedder,
        concurrency=concurrency,
        repeats=repeats,
        out_dir=out_dir,
        fail_under=fail_under,
        fail_mode=fail_mode,
        threshold=threshold,
        store=store,
        no_store=no_store,
        cache=cache,
        max_failures=max_failures,
        quiet=quiet,
        input_format=input_format,
        ray=ray,
        dry_run=dry_run,
        max_cost=max_cost,
        triage=triage,
        batch=batch,
        triage_band=triage_band,
        name=name,
        tag=tag,
        junit=junit,
        junit_items=junit_items,
        markdown=markdown,
        csv=csv,
    )
    with planned(args) as plan:  # every check is made before the first judge call
        result = execute(plan)
    if result is None:  # a dry run: its estimate is printed
        return
    from contextlens.engine.cache import keeps_replies

    cached = keeps_replies(plan.config.cache)  # how a run its cost cap stopped goes on
    verdict = gate(result, plan.gates, args.max_failures, cached=cached)
    plan.outputs.write(result, verdict.outcomes)  # the files fail exactly when the run does
    for said in verdict.lines:
        err.print(said)
    if verdict.status:
        raise typer.Exit(verdict.status)
