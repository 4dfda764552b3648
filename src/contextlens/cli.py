"""The ``contextlens`` command: run, demo, schema, runs, compare, calibrate.

Exit status: 0 ok; 1 a ``--fail-under`` threshold missed; 2 bad input or usage (with a
message naming the file, line and field; never a traceback for a user mistake); 3 more items
failed than ``--max-failures`` allows (none by default). When both 1 and 3 apply, 3.
"""

from __future__ import annotations

import importlib
import inspect
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from contextlens.engine.accounting import current_ledger
from contextlens.errors import ContextLensError, InputError
from contextlens.schemas import Dataset, ModelTestCase
from contextlens.terminal import console, line, table

app = typer.Typer(
    help="Measure how well an LLM assistant or a RAG pipeline uses its context.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = console()
err = console(stderr=True)
RED, BOLD = "red", "bold"

_KNOWN_PREFIXES = ("offline", "openai:", "litellm:", "llama:", "http://", "https://")
_JUDGE_HELP = (
    "offline | openai:MODEL | http://HOST:PORT/v1#MODEL | litellm:PROVIDER/MODEL | "
    "llama:PATH.gguf | module:attr; settings may follow: ...#MODEL?timeout=300&max_tokens=400"
)
JudgeTimeout = Annotated[
    float | None,
    typer.Option(help="seconds per judge call, from when it is sent [default: 60; 300 local]"),
]
MaxTokens = Annotated[
    int | None,
    typer.Option(help="completion tokens per judge call [default: sized from the reply schema]"),
]
StructuredOutput = Annotated[
    str | None,
    typer.Option(
        help="auto (constrained JSON where the server has it) | json_schema | json_object | off"
    ),
]


class UsageProblem(ContextLensError):
    """A mistake in the command line (exit status 2)."""


def build_metric(name: str) -> Any:
    """The registered metric a CLI name stands for, with its defaults."""
    from contextlens.metrics import registry

    try:
        return registry.create(name)
    except registry.UnknownMetricError as exc:
        raise UsageProblem(str(exc)) from None


def load_object(spec: str) -> Any:
    """``module:attr`` from user code (called when it is a factory with no arguments)."""
    module_name, _, attr = spec.partition(":")
    sys.path.insert(0, str(Path.cwd()))
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageProblem(f"cannot load {spec!r}: {exc}") from None
    return obj() if inspect.isclass(obj) or inspect.isfunction(obj) else obj


def judge_from_spec(
    spec: str | None,
    *,
    timeout: float | None = None,
    max_tokens: int | None = None,
    structured_output: str | None = None,
) -> Any:
    """A judge spec string as the runner takes it (with the settings given added to it), or a
    LangChain model from ``module:attr``."""
    settings = {
        "timeout": timeout,
        "max_tokens": max_tokens,
        "structured_output": structured_output,
    }
    if spec is None or spec.strip().lower() == "offline":
        return spec
    if spec.startswith(_KNOWN_PREFIXES) or ":" not in spec:
        from contextlens.judges.resolve import backend_from_spec, with_settings

        full = with_settings(spec, **settings)
        try:
            backend_from_spec(full)  # a bad setting or spec is a usage problem, before any work
        except (ValueError, FileNotFoundError) as exc:
            raise UsageProblem(str(exc)) from None
        except ImportError:
            pass  # a missing extra: the runner says which
        return full
    if any(v is not None for v in settings.values()):
        raise UsageProblem(
            "--judge-timeout, --max-tokens and --structured-output apply to judge spec "
            f"strings; set them on the object {spec!r} itself"
        )
    return load_object(spec)


def parse_thresholds(items: list[str]) -> dict[str, float]:
    """``["context=0.7"]`` -> ``{"context": 0.7}``."""
    found: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            found[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise UsageProblem(f"--fail-under expects METRIC=VALUE, got {item!r}")
    return found


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
                line(
                    Text("  failed ", style=RED),
                    f"{item.case_id} {item.metric}: ",
                    item.error or "",
                )
            )
            if len(found) == limit:
                break
    return found


def gate(run: Any, thresholds: dict[str, float], mode: str) -> list[str]:
    """The thresholds a run misses: by the point value, or by the interval's upper bound."""
    missed = []
    for name, bar in thresholds.items():
        summary = _summary_for(run, name)
        value = summary.mean if mode == "point" else summary.ci_high
        if value is None or value < bar:
            shown = "no score" if value is None else f"{value:.3f}"
            what = "mean" if mode == "point" else "upper bound of the interval"
            missed.append(f"{summary.metric}: {what} {shown} < {bar}")
    return missed


def _summary_for(run: Any, name: str) -> Any:
    if name in run.summaries:
        return run.summaries[name]
    key = name.replace("-", "_")
    for metric, summary in run.summaries.items():
        if metric.replace("-", "_").replace(" ", "_").lower().startswith(key):
            return summary
    raise UsageProblem(f"--fail-under names {name!r}, which this run did not measure")


@app.command()
def run(
    data: Annotated[Path, typer.Argument(help="JSONL, CSV or Parquet file of cases")],
    metric: Annotated[
        list[str],
        typer.Option("--metric", "-m", help="metric(s) to run; `contextlens schema` lists them"),
    ] = [],  # noqa: B006
    judge: Annotated[str | None, typer.Option(help=_JUDGE_HELP)] = None,
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
) -> None:
    """Evaluate DATA with the chosen metrics; write results.jsonl, summary.json and
    report.html into the run's own folder OUT/<run id>/, then point OUT/latest at it."""
    from contextlens.loaders import Counted, case_kind, check_cases, load_cases
    from contextlens.runner import RunFolder, evaluate
    from contextlens.store import fingerprint_file

    if fail_mode not in ("point", "interval"):
        raise UsageProblem(f"--fail-mode must be point or interval, got {fail_mode!r}")
    thresholds = parse_thresholds(fail_under)
    parse_max_failures(max_failures)
    executor = _ray_executor(ray)
    names = metric or ["context"]
    metrics = [build_metric(n) for n in names]
    judge_obj = judge_from_spec(
        judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
    )
    embedder_obj = load_object(embedder) if embedder and embedder != "minilm" else None
    kind = case_kind(data)
    holds = Dataset if kind == "sessions" else ModelTestCase
    for name, m in zip(names, metrics, strict=True):
        if not issubclass(holds, m.case_type):
            raise InputError(
                f"metric {name!r} takes {_kind(m.case_type)}, but the file holds "
                f"{kind.replace('_', ' ')} (see `contextlens schema`)",
                file=str(data),
            )
    _, count = check_cases(data, list(zip(names, metrics, strict=True)))  # no judge call yet
    cases = Counted(load_cases(data)[1], count)
    config = {
        "data": str(data),
        "metrics": names,
        "judge": judge_obj if isinstance(judge_obj, str) else (judge or "offline"),
        "embedder": embedder or "minilm",
        "concurrency": concurrency,
        "repeats": repeats,
    }
    folder = RunFolder(out_dir)
    fingerprint = None if no_store else fingerprint_file(data)
    runs_store = _start(folder, store, no_store, config=config, data=data, fingerprint=fingerprint)
    with _recorded(runs_store, folder.run_id):
        result = evaluate(
            cases,
            metrics,
            judge=judge_obj,
            embedder=embedder_obj,
            max_concurrency=concurrency,
            cache=False if cache == "off" else (cache or True),
            repeats=repeats,
            out=folder,
            progress=_progress("run", quiet),
            executor=executor,
        )
        _finish(result, folder, runs_store, config=config, data=data, fingerprint=fingerprint)
    missed = gate(result, thresholds, fail_mode)
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


def _kind(case_type: type) -> str:
    if issubclass(case_type, Dataset):
        return "sessions"
    if issubclass(case_type, ModelTestCase):
        return "test cases"
    return case_type.__name__


def command_line() -> str:
    """This process's command line, quoted for a shell, to be run again as it is."""
    head = [sys.argv[0]]
    if Path(sys.argv[0]).name == "__main__.py":  # python -m contextlens
        head = [sys.executable, "-m", "contextlens"]
    return shlex.join([*head, *sys.argv[1:]])


def _start(
    folder: Any,
    store: Path | None,
    no_store: bool,
    *,
    config: dict,
    data: Path,
    fingerprint: str | None,
) -> Any:
    """The run store, with the run recorded as running (None with ``--no-store``)."""
    if no_store:
        return None
    from contextlens.store import RunStore

    runs_store = RunStore(store)
    runs_store.start(
        folder.run_id,
        judge=config.get("judge", ""),
        repeats=config.get("repeats", 1),
        out_dir=folder.path,
        config=config,
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


def _finish(
    result: Any,
    folder: Any,
    runs_store: Any,
    *,
    config: dict,
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


@app.command()
def demo(
    out_dir: Annotated[
        Path, typer.Option("--out", help="runs write into OUT/<run id>/; OUT/latest: the newest")
    ] = Path("contextlens-out/demo"),
    judge: Annotated[str | None, typer.Option(help=_JUDGE_HELP + " [default: offline]")] = None,
    judge_timeout: JudgeTimeout = None,
    max_tokens: MaxTokens = None,
    structured_output: StructuredOutput = None,
) -> None:
    """Run the bundled TechStore sessions through `context`, offline unless --judge says."""
    from importlib import resources

    from contextlens.loaders import load_cases
    from contextlens.metrics.base import DEFAULT_PASS, OFFLINE_SCALE_NOTE
    from contextlens.runner import RunFolder, evaluate

    data = Path(str(resources.files("contextlens.demo").joinpath("techstore.jsonl")))
    _, cases = load_cases(data)
    folder = RunFolder(out_dir)
    judge_obj = judge_from_spec(
        judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
    )
    result = evaluate(
        cases, [build_metric("context")], judge=judge_obj, cache=False, out=folder, progress=False
    )
    if judge_obj is None or judge_obj == "offline":
        out.print(f"{OFFLINE_SCALE_NOTE} PASS marks below: {DEFAULT_PASS}.\n")
    for item in result.iter_results():
        mean = "failed" if item.score is None else f"{item.score:.2f}"
        out.print(line(Text(item.case_id, style=BOLD), f"  context awareness {mean}"))
        for inter in item.details.get("interactions", []):
            if inter["score"] is None:
                out.print(
                    line(f"  {inter['qa_id']} ", Text("FAILED", style=RED), " ", inter["error"])
                )
                continue
            passed = inter["score"] >= DEFAULT_PASS
            mark = Text("PASS", style="green") if passed else Text("FAIL", style=RED)
            out.print(
                line(f"  {inter['qa_id']} ", mark, f" {inter['score']:.2f}  ", inter["reason"])
            )
    # an offline demo said it at the top, where its PASS marks are
    _finish(
        result,
        folder,
        None,
        config={"demo": True},
        data=data,
        fingerprint=None,
        offline_note=False,
    )


@app.command()
def schema() -> None:
    """The metrics, what each takes, and the columns of each kind of input file."""
    from contextlens.loaders import CASE_COLUMNS, SESSION_COLUMNS
    from contextlens.metrics import registry

    rows = [
        [
            info.name,
            _kind(info.case_type),
            ", ".join(info.reads) or "-",
            ", ".join(
                r if isinstance(r, str) else f"one of ({', '.join(r)})" for r in info.requires
            )
            or "-",
            info.description,
        ]
        for info in registry.registered().values()
    ]
    headers = ["metric", "takes", "reads", "requires", "what it measures"]
    out.print(table("Metrics (-m NAME)", headers, rows))
    for title, columns in (
        (
            "Sessions — JSONL objects with a `conversation` list, or one interaction per row:",
            SESSION_COLUMNS,
        ),
        ("Test cases — one case per row:", CASE_COLUMNS),
    ):
        out.print(table(title, ["column", "meaning"], columns.items()))


@app.command()
def runs(
    store: Annotated[Path | None, typer.Option(help="run store file")] = None,
    limit: Annotated[int, typer.Option(help="how many")] = 20,
) -> None:
    """List recorded runs, newest first, with their status and folder; how to resume an
    interrupted run, and why a failed one failed."""
    from contextlens.store import FAILED, INTERRUPTED, RunStore

    rows, notes = [], []
    for info in RunStore(store).list_runs(limit=limit):
        means = ", ".join(
            f"{k} {v:.3f}" if v is not None else f"{k} -" for k, v in info.means.items()
        )
        bad = info.status in (FAILED, INTERRUPTED)
        rows.append(
            [
                info.run_id,
                info.started_at,
                Text(info.status, style=RED) if bad else info.status,
                info.judge,
                info.dataset or "-",
                info.n_items,
                means,
                _near(info.out_dir) if info.out_dir else "-",
            ]
        )
        if info.status == INTERRUPTED and info.command:
            where = "" if info.cwd in (None, str(Path.cwd())) else f"cd {shlex.quote(info.cwd)} && "
            notes.append(line(f"resume {info.run_id}: ", where, info.command))
        elif info.status == FAILED and info.error:
            notes.append(line(f"failed {info.run_id}: ", info.error))
    headers = ["run", "started", "status", "judge", "data", "items", "means", "folder"]
    out.print(table(None, headers, rows, numeric=["items"]))
    for note in notes:
        out.print(note, soft_wrap=True)  # a command is printed whole, to be run again


@app.command()
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
    headers = ["metric", "pairs", "A", "B", "B - A", "interval", "P(B better)", "unpaired"]
    rows = [
        [
            m.metric,
            m.n_paired,
            _f(m.mean_a),
            _f(m.mean_b),
            _f(m.mean_diff, signed=True),
            f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]" if m.ci_low is not None else "-",
            _f(m.p_b_better),
            m.n_only_a + m.n_only_b + m.n_failed_a + m.n_failed_b,
            m.verdict,
        ]
        for m in result.metrics
    ]
    title = f"{a.run_id} (A) vs {b.run_id} (B)"
    out.print(table(title, [*headers, "verdict"], rows, numeric=headers[1:]))
    out_dir.mkdir(parents=True, exist_ok=True)
    page = write_report(b, out_dir / "compare.html", comparison=result)
    out.print(line("report: ", page))


def _progress(label: str, quiet: bool) -> Any:
    """The ``progress`` of a command: none with ``-q``, a bar on a terminal, lines in a log."""
    if quiet:
        return False
    return None if sys.stderr.isatty() else _ProgressLines(label)


class _ProgressLines:
    """Progress for a log (stderr not a terminal): a line on stderr for the first item, then
    every ``every_s`` seconds or tenth of the items, whichever comes first, and at the end."""

    def __init__(self, label: str, every_s: float = 10.0, steps: int = 10) -> None:
        self.label, self.every_s, self.steps = label, every_s, steps
        self.last_s = 0.0
        self.next_step = 0

    def __call__(self, done: int, total: int | None, elapsed: float) -> None:
        step = done * self.steps // total if total else 0
        if step < self.next_step and elapsed - self.last_s < self.every_s:
            return
        self.last_s, self.next_step = elapsed, step + 1
        rate = done / elapsed if elapsed > 0 else 0.0
        count = f"{done}/{total} items ({done / total:.0%})" if total else f"{done} items"
        speed = f"{rate:.1f} items/s" if rate >= 1 or rate == 0 else f"{1 / rate:.1f} s per item"
        text = f"{self.label}: {count}, {speed}, {elapsed:.0f} s elapsed"
        if total and rate > 0 and done < total:
            text += f", about {(total - done) / rate:.0f} s left"
        ledger = current_ledger.get()
        latency = ledger.call_latency() if ledger is not None else None
        if latency is not None:
            text += f"; {latency[0]} judge calls, {latency[1]:.1f} s per call"
        err.print(line(text))


@app.command()
def calibrate(
    data: Annotated[Path, typer.Argument(help="labelled JSONL, CSV or Parquet file")],
    metric: Annotated[str, typer.Option("--metric", "-m", help="the metric to check")] = "context",
    judge: Annotated[str | None, typer.Option(help=_JUDGE_HELP)] = None,
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
    from contextlens.report.calibration_html import write_calibration_report
    from contextlens.runner import RunFolder

    t0 = perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)  # a folder that cannot be made fails first
    report = run_calibration(
        data,
        metric,
        judge_from_spec(
            judge, timeout=judge_timeout, max_tokens=max_tokens, structured_output=structured_output
        ),
        by=by,
        threshold=threshold,
        max_concurrency=concurrency,
        progress=_progress("calibrate", quiet),
    )
    rows = [[r["statistic"], r["value"], r["note"]] for r in report.to_table()]
    title = f"{report.metric} vs human labels ({report.judge})"
    out.print(table(title, ["statistic", "value", "note"], rows, numeric=["value"]))
    if report.slices:
        bal = f"bal. acc. @ {report.threshold:g}"
        rows = [
            [
                s.value,
                s.n,
                f"{s.n_positive} / {s.n_negative}",
                _f(s.auroc),
                _f(s.balanced_accuracy),
                s.note or "",
            ]
            for s in report.slices
        ]
        headers = ["slice", "n", "1 / 0", "AUROC", bal, "note"]
        out.print(table(f"by {report.by}", headers, rows, numeric=headers[1:5]))
        out.print(
            line(
                f"The AUROC above, {_f(report.auroc)}, is pooled over all items; the mean "
                f"AUROC over {report.by}, {_f(report.slice_mean_auroc)}, is the mean of the "
                "per-slice AUROCs (slices with both classes). They differ when the score's "
                "level shifts from slice to slice."
            )
        )
    folder = RunFolder(out_dir)
    folder.create()
    saved = folder.path / "calibration.json"
    saved.write_text(report.model_dump_json(indent=2), encoding="utf-8")
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


def _near(path: str) -> str:
    """``path`` relative to the working folder when it lies inside it."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return path


def _f(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def main() -> None:
    """Entry point: user mistakes exit 2 with a message, never a traceback."""
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (ContextLensError, ValueError, FileNotFoundError) as exc:
        err.print(line(Text("error: ", style=RED), str(exc)))
        sys.exit(2)
    except Exception as exc:  # click's usage errors (typer may vendor click)
        show = getattr(exc, "show", None)
        if callable(show) and hasattr(exc, "exit_code"):
            show()
            sys.exit(2)
        if type(exc).__name__ == "Abort":
            sys.exit(130)
        raise
