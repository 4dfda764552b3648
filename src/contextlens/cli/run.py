"""``contextlens run``: a file of cases through the chosen metrics, into its own folder."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from contextlens.cli.app import RED, UsageProblem, err, out
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
from contextlens.errors import ContextLensError, InputError
from contextlens.schemas import Dataset, ModelTestCase
from contextlens.terminal import line, table

__all__ = ["failure_gate", "finish", "parse_max_failures", "run", "summary_table"]


def summary_table(run: Any) -> Table:
    """Per metric: judge, mean, interval, n, failures, calls, retries, tokens, cost, time."""
    headers = ["metric", "judge", "mean", "interval", "n", "failed", "calls", "retries"]
    headers += ["tokens", "cost", "time"]
    rows = []
    for s in run.summaries.values():
        acc = s.accounting or {}
        cost = acc.get("cost")
        priced = cost is not None and not acc.get("unpriced_calls")
        rows.append(
            [
                s.metric,
                s.judge or "-",
                f"{s.mean:.3f}" if s.mean is not None else "-",
                f"[{s.ci_low:.3f}, {s.ci_high:.3f}]" if s.ci_low is not None else "-",
                str(s.n),
                Text(str(s.n_failed), style=RED) if s.n_failed else "0",
                str(acc.get("calls", 0)),
                str(acc.get("retries", 0)),
                f"{acc.get('prompt_tokens', 0):,}/{acc.get('completion_tokens', 0):,}",
                f"${cost:.4f}" if priced else ("-" if not acc.get("calls") else "unpriced"),
                f"{s.seconds:.1f}s",
            ]
        )
    caption = (
        f"run {run.duration_s:.1f} s; cache hits {run.accounting['total']['cache_hits']}; "
        "tokens in/out; time: the metric's work on its items, added up"
    )
    if run.out_dir:
        caption += f"\nrun folder: {run.out_dir}"
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
        allowed = bound * s.n / 100 if share else bound
        if s.n_failed > allowed:
            over.append(f"{s.metric}: {s.n_failed} of {s.n} items failed (allowed {max_failures})")
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


def _kind(case_type: type) -> str:
    if issubclass(case_type, Dataset):
        return "sessions"
    if issubclass(case_type, ModelTestCase):
        return "test cases"
    return case_type.__name__


def run(
    data: Annotated[Path, typer.Argument(help="JSONL, CSV or Parquet file of cases")],
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
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="score on a Ray cluster: ADDRESS, or auto (the one on this machine); "
            "'local' starts one here (needs contextlens[ray])",
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
    from contextlens.loaders import Counted, case_kind, check_cases, load_cases
    from contextlens.metrics.registry import key_of
    from contextlens.runner import RunConfig, RunFolder, evaluate, parse_gates
    from contextlens.store import fingerprint_file

    if fail_mode not in ("point", "interval"):
        raise UsageProblem(f"--fail-mode must be point or interval, got {fail_mode!r}")
    parse_max_failures(max_failures)
    outputs = Outputs(junit=junit, markdown=markdown, csv=csv)
    outputs.check()
    names = metric or ["context"]
    metrics = build_metrics(names)
    keys = [key_of(m) for m in metrics]
    try:
        gates = parse_gates(fail_under, keys, mode=fail_mode)  # type: ignore[arg-type]
    except (ValueError, ContextLensError) as exc:
        raise UsageProblem(str(exc)) from None
    executor = _ray_executor(ray)
    judge_obj = judge_option(
        judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
    )
    embedder_obj = load_object(embedder) if embedder and embedder != "minilm" else None
    kind = case_kind(data)
    holds = Dataset if kind == "sessions" else ModelTestCase
    for key, m in zip(keys, metrics, strict=True):
        if not issubclass(holds, m.case_type):
            raise InputError(
                f"metric {key!r} takes {_kind(m.case_type)}, but the file holds "
                f"{kind.replace('_', ' ')} (see `contextlens schema`)",
                file=str(data),
            )
    _, count = check_cases(data, list(zip(keys, metrics, strict=True)))  # no judge call yet
    cases = Counted(load_cases(data)[1], count)
    folder = RunFolder(out_dir)
    config = RunConfig(
        judge=judge_obj,
        embedder=embedder_obj,
        max_concurrency=concurrency,
        repeats=repeats,
        cache=False if cache == "off" else (cache or True),
        out=folder,
        store=False if no_store else store,
        progress=progress_option("run", quiet),
        name=name,
        tags=parse_tags(tag),
    )
    recorded = {"data": str(data), "metrics": list(keys), **config.describe()}
    fingerprint = None if no_store else fingerprint_file(data)
    runs_store = _start(folder, config, recorded, data=data, fingerprint=fingerprint)
    with _recorded(runs_store, folder.run_id):
        result = evaluate(cases, metrics, executor=executor, config=config)
        finish(result, folder, runs_store, config=recorded, data=data, fingerprint=fingerprint)
    outputs.write(result)
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
    return executor


def command_line() -> str:
    """This process's command line, quoted for a shell, to be run again as it is."""
    head = [sys.argv[0]]
    if Path(sys.argv[0]).name == "__main__.py":  # python -m contextlens
        head = [sys.executable, "-m", "contextlens"]
    return shlex.join([*head, *sys.argv[1:]])


def _start(
    folder: Any, config: Any, recorded: dict[str, Any], *, data: Path, fingerprint: str | None
) -> Any:
    """The run store, with the run recorded as running (None when the run is not stored)."""
    if config.store is False:
        return None
    from contextlens.store import RunStore

    runs_store = RunStore(config.store)
    runs_store.start(
        folder.run_id,
        judge=recorded["judge"],
        repeats=config.repeats,
        out_dir=folder.path,
        config=recorded,
        dataset=data,
        dataset_fingerprint=fingerprint,
        command=command_line(),
    )
    return runs_store


@contextmanager
def _recorded(runs_store: Any, run_id: str) -> Iterator[None]:
    """Records the run as failed, with the error, when the block raises (interrupted on
    Ctrl-C); the block records it as completed."""
    try:
        yield
    except KeyboardInterrupt:
        if runs_store is not None:
            runs_store.fail(run_id, "stopped by the user", interrupted=True)
        raise
    except BaseException as exc:
        if runs_store is not None:
            runs_store.fail(run_id, f"{type(exc).__name__}: {exc}")
        raise


def finish(
    result: Any,
    folder: Any,
    runs_store: Any,
    *,
    config: dict[str, Any],
    data: Path,
    fingerprint: str | None,
    offline_note: bool = True,
) -> None:
    """Write the report into the run's folder, record the run as completed, point
    ``latest`` at it, and print the table and where the files are."""
    from contextlens.report.html import write_report

    report = write_report(result, folder.path / "report.html")
    if runs_store is not None:
        runs_store.record(result, config=config, dataset=str(data), dataset_fingerprint=fingerprint)
    folder.complete()
    out.print(summary_table(result))
    if offline_note and any(s.judge == "offline" for s in result.summaries.values()):
        from contextlens.metrics.base import OFFLINE_SCALE_NOTE

        out.print(line(OFFLINE_SCALE_NOTE))
    out.print(line("results: ", folder.path / "results.jsonl"))
    out.print(line("report:  ", report))
