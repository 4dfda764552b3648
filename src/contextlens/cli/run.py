"""``contextlens run``: a file of cases through the chosen metrics, into its own folder."""

from __future__ import annotations

import shlex
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from contextlens.cli.application import RED, UsageProblem, err, out, stop_signal
from contextlens.cli.costs import estimate_table, stopped_lines
from contextlens.cli.formats import CsvOption, JunitOption, MarkdownOption, Outputs
from contextlens.cli.history import parse_tags
from contextlens.cli.options import (
    JUDGE_HELP,
    JudgeTimeout,
    MaxTokens,
    StructuredOutput,
    build_metrics,
    judge_option,
    load_object,
    progress_option,
)
from contextlens.engine.accounting import Counts
from contextlens.errors import ContextLensError, InputError
from contextlens.provenance import DataFile
from contextlens.results import RecordedConfig
from contextlens.schemas import Dataset, ModelTestCase
from contextlens.terminal import line, table

__all__ = ["failure_gate", "finish", "parse_max_failures", "run", "summary_table"]


def summary_table(run: Any) -> Table:
    """Per metric: judge, mean, interval, pass rate, n, failures, calls, retries, tokens,
    cost, time."""
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
        f"run {run.duration_s:.1f} s; cache hits {run.accounting.total.cache_hits}; "
        "pass: the share of scored items at or above the pass mark, with its interval; "
        "n/a: items the metric does not apply to (not in the mean; an answer that abstains, a "
        "case the offline reader cannot decide); not English: items whose case has a text in "
        "another language (each reason says which); tokens in/out; time: the metric's work on "
        "its items, added up"
    )
    if run.out_dir:
        caption.append_text(line(Text("\n"), "run folder: ", run.out_dir))
    return table(
        f"contextlens run {run.run_id}", headers, rows, numeric=headers[2:], caption=caption
    )


def parse_max_failures(value: str) -> tuple[float, bool]:
    """``"5"`` -> (5, False): at most 5 items; ``"2%"`` -> (2, True): at most 2% of them."""
    text = value.strip()
    share = text.endswith("%")
    try:
        bound = float(text[:-1] if share else text)
    except ValueError:
        bound = -1.0
    if not bound >= 0 or (share and bound > 100):
        raise UsageProblem(f"--max-failures expects N or P% (P <= 100), got {value!r}")
    return bound, share


def failure_gate(run: Any, max_failures: str) -> list[str]:
    """The metrics whose failed items exceed ``--max-failures``."""
    bound, share = parse_max_failures(max_failures)
    over = []
    for s in run.summaries.values():
        applicable = s.n - s.n_not_applicable - s.n_not_run
        allowed = bound * applicable / 100 if share else bound
        if s.n_failed > allowed:
            over.append(
                f"{s.metric}: {s.n_failed} of {applicable} items failed (allowed {max_failures})"
            )
    return over


def _failed_examples(run: Any, limit: int = 5) -> list[Text]:
    """The first failed items, each with its case id, metric and reason."""
    found = []
    for item in run.iter_results():
        if item.failed:
            found.append(
                line(Text("  failed ", style=RED), f"{item.case_id} {item.metric}: ", item.error)
            )
            if len(found) == limit:
                break
    return found


def _default_metric(kind: str) -> str:
    """The metric a run without ``-m`` means: the one registered metric that takes what the
    file holds (said on stderr); a usage problem naming the choices when there are several."""
    from contextlens.metrics import registry

    holds = Dataset if kind == "sessions" else ModelTestCase
    fitting = [i.name for i in registry.registered().values() if issubclass(holds, i.case_type)]
    what = kind.replace("_", " ")
    if len(fitting) == 1:
        err.print(line(f"no -m given: the file holds {what}, which only {fitting[0]!r} scores"))
        return fitting[0]
    raise UsageProblem(
        f"name the metric(s) with -m: the file holds {what}, which "
        f"{', '.join(fitting) or 'no registered metric'} score (`contextlens schema`)"
    )


def _kind(case_type: type) -> str:
    if issubclass(case_type, Dataset):
        return "sessions"
    if issubclass(case_type, ModelTestCase):
        return "test cases"
    return case_type.__name__


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
    name: Annotated[str | None, typer.Option(help="name the run, to find and follow it")] = None,
    tag: Annotated[list[str], typer.Option(help="KEY=VALUE: tag the run (repeatable)")] = [],  # noqa: B006
    junit: JunitOption = None,
    markdown: MarkdownOption = None,
    csv: CsvOption = None,
) -> None:
    """Evaluate DATA with the chosen metrics; write results.jsonl, summary.json and
    report.html into the run's own folder OUT/<run id>/, then point OUT/latest at it."""
    from contextlens.loaders import Counted, case_kind, check_cases, load_cases, readable
    from contextlens.metrics.registry import key_of
    from contextlens.runner import RunConfig, RunFolder, evaluate, parse_gates, parse_pass_marks

    if fail_mode not in ("point", "interval"):
        raise UsageProblem(f"--fail-mode must be point or interval, got {fail_mode!r}")
    parse_max_failures(max_failures)
    if max_cost is not None and not max_cost > 0:
        raise UsageProblem(f"--max-cost expects a positive number of USD, got {max_cost:g}")
    if max_cost is not None and ray is not None:
        raise UsageProblem("--max-cost caps a run on this machine; run it without --ray")
    outputs = Outputs(junit=junit, markdown=markdown, csv=csv)
    outputs.check()
    tags = parse_tags(tag)
    judge_obj = judge_option(
        judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
    )
    embedder_obj = load_object(embedder) if embedder and embedder != "minilm" else None
    folder = RunFolder(out_dir)
    if not dry_run:
        folder.check()  # an --out that cannot be written is said before any work
    with readable(data, input_format) as source:
        kind = case_kind(source)
        metrics = build_metrics(metric or [_default_metric(kind)])
        keys = [key_of(m) for m in metrics]
        try:
            gates = parse_gates(fail_under, keys, mode=fail_mode)  # type: ignore[arg-type]
            pass_marks = parse_pass_marks(threshold, keys)
        except (ValueError, ContextLensError) as exc:
            raise UsageProblem(str(exc)) from None
        holds = Dataset if kind == "sessions" else ModelTestCase
        for key, m in zip(keys, metrics, strict=True):
            if not issubclass(holds, m.case_type):
                raise InputError(
                    f"metric {key!r} takes {_kind(m.case_type)}, but the file holds "
                    f"{kind.replace('_', ' ')} (see `contextlens schema`)",
                    file=str(data),
                )
        executor = None if dry_run else _ray_executor(ray)
        config = RunConfig(
            judge=judge_obj,
            embedder=embedder_obj,
            max_concurrency=concurrency,
            repeats=repeats,
            cache=False if cache == "off" else (cache or True),
            out=folder,
            store=False if no_store else store,
            thresholds=pass_marks,
            max_cost=max_cost,
            progress=progress_option("run", quiet),
            name=name,
            tags=tags,
            data_file=DataFile.of(data, read=source),  # the path as given, the bytes read
            command=command_line(),
        )
        _, count = check_cases(source, list(zip(keys, metrics, strict=True)))  # no call yet
        cases = Counted(load_cases(source)[1], count)
        if dry_run:
            out.print(estimate_table(evaluate(cases, metrics, config=config, dry_run=True)))
            return
        recorded = config.describe().with_extra({"data": str(data), "metrics": list(keys)})
        fingerprint = config.data_file.sha256 if config.data_file is not None else None
        runs_store = _start(folder, config, recorded, data=data, fingerprint=fingerprint)
        with _recorded(runs_store, folder.run_id):
            result = evaluate(cases, metrics, executor=executor, config=config)
        finish(result, folder, runs_store, config=recorded, data=data, fingerprint=fingerprint)
    outputs.write(result)
    if result.stopped is not None:  # a partial run: its gates would judge part of the data
        for said in stopped_lines(result):
            err.print(said)
        raise typer.Exit(4)
    missed = [why for why in (g.missed(result) for g in gates) if why is not None]
    for problem in missed:
        err.print(line(Text("threshold missed ", style=RED), problem))
    too_many = failure_gate(result, max_failures)
    for problem in too_many:
        err.print(line(Text("too many failures ", style=RED), problem))
    if too_many:
        for example in _failed_examples(result):
            err.print(example)
        raise typer.Exit(3)
    if missed:
        raise typer.Exit(1)


def _ray_executor(address: str | None) -> Any:
    """The executor ``--ray ADDRESS`` asks for (None: run here)."""
    if address is None:
        return None
    if not address.strip():
        raise UsageProblem("--ray expects ADDRESS, auto or local")
    from contextlens.runner import resolve_executor

    try:
        executor = resolve_executor("ray")
    except ImportError as exc:
        raise UsageProblem(str(exc)) from None
    executor.address = None if address == "local" else address  # type: ignore[attr-defined]
    executor.preflight()  # type: ignore[attr-defined]  # a missing cluster is said now
    return executor


def command_line() -> str:
    """This process's command line, quoted for a shell, to be run again as it is."""
    head = [sys.argv[0]]
    if Path(sys.argv[0]).name == "__main__.py":  # python -m contextlens
        head = [sys.executable, "-m", "contextlens"]
    return shlex.join([*head, *sys.argv[1:]])


def _start(
    folder: Any, config: Any, recorded: RecordedConfig, *, data: Path, fingerprint: str | None
) -> Any:
    """The run store, with the run recorded as running (None when the run is not stored)."""
    if config.store is False:
        return None
    from contextlens.store import RunStore, StoreError

    try:
        runs_store = RunStore(config.store)
        runs_store.start(
            folder.run_id,
            judge=recorded.judge or "",
            repeats=config.repeats,
            out_dir=folder.path,
            config=recorded,
            dataset=data,
            dataset_fingerprint=fingerprint,
            command=config.command,
        )
    except StoreError as exc:  # the history is a side file: the run goes on, unrecorded
        _side_file_warning(f"this run is not recorded in the run store: {exc}")
        return None
    return runs_store


def _side_file_warning(message: str) -> None:
    err.print(line(Text("warning: ", style=RED), message))


@contextmanager
def _recorded(runs_store: Any, run_id: str) -> Iterator[None]:
    """Records the run as failed, with the error, when the block raises (interrupted on
    Ctrl-C); the block records it as completed."""
    try:
        yield
    except KeyboardInterrupt:
        _record_end(runs_store, run_id, f"stopped by {stop_signal()}", interrupted=True)
        raise
    except BaseException as exc:
        _record_end(runs_store, run_id, f"{type(exc).__name__}: {exc}", interrupted=False)
        raise


def _record_end(runs_store: Any, run_id: str, error: str, *, interrupted: bool) -> None:
    """Record how the run ended, when there is a store; a store that cannot take it (locked
    by another process) is warned about: it never hides why the run ended."""
    if runs_store is None:
        return
    from contextlens.store import StoreError

    try:
        runs_store.fail(run_id, error, interrupted=interrupted)
    except StoreError as exc:
        _side_file_warning(f"the run store could not record how the run ended: {exc}")


def finish(
    result: Any,
    folder: Any,
    runs_store: Any,
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

    report = write_report(result, folder.path / "report.html")
    if runs_store is not None:
        try:
            runs_store.record(
                result, config=config, dataset=str(data), dataset_fingerprint=fingerprint
            )
        except StoreError as exc:  # the run is complete; only its history entry is missing
            _side_file_warning(
                f"the run is complete in {folder.path}, but the run store could not record "
                f"it: {exc}"
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # said here, once, as a warning line
        latest = folder.complete()
    if latest is None:
        _side_file_warning(f"{folder.out / 'latest'} could not be made to name this run")
    out.print(summary_table(result))
    if offline_note and any(s.judge == "offline" for s in result.summaries.values()):
        from contextlens.metrics.base import OFFLINE_SCALE_NOTE

        out.print(line(OFFLINE_SCALE_NOTE))
    out.print(line("results: ", folder.path / "results.jsonl"))
    out.print(line("report:  ", report))
