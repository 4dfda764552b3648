"""``contextlens runs`` and ``contextlens compare``: the run history, and what changed
between two runs."""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from contextlens.cli.application import RED, UsageProblem, out
from contextlens.cli.options import age, fmt, lines, near, tags_cell, when
from contextlens.files import make_folder, write_text
from contextlens.terminal import FitTable, line, table

if TYPE_CHECKING:
    from contextlens.compare import Comparison
    from contextlens.runner.gates import RegressionOutcome

__all__ = [
    "compare",
    "folder_cell",
    "parse_tags",
    "parse_tolerance",
    "runs",
    "runs_table",
    "tolerance_lines",
    "warning_lines",
]

__all__ = [
    "REGRESSED",
    "compare",
    "folder_cell",
    "parse_tags",
    "regression_lines",
    "regression_outcomes",
    "runs",
    "runs_table",
    "warning_lines",
]

YELLOW, GREEN = "yellow", "green"
#: The exit status of ``compare`` when a ``--fail-on-regression`` gate is missed.
REGRESSED = 1
#: Cases listed under a comparison's table, regressions first.
SHOWN_CHANGES = 10

NameOption = Annotated[str | None, typer.Option("--name", help="only the runs of this name")]
TagOption = Annotated[
    list[str], typer.Option("--tag", help="KEY=VALUE: only the runs with this tag (repeatable)")
]


def parse_tags(items: list[str], option: str = "--tag") -> dict[str, str]:
    """``["branch=main"]`` as ``{"branch": "main"}``; a usage problem when malformed."""
    tags: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageProblem(f"{option} expects KEY=VALUE, got {item!r}")
        tags[key.strip()] = value
    return tags


def runs(
    store: Annotated[Path | None, typer.Option(help="run store file")] = None,
    limit: Annotated[int, typer.Option(help="how many")] = 20,
    name: NameOption = None,
    tag: TagOption = [],  # noqa: B006
    html: Annotated[
        Path | None, typer.Option(help="also write an index page of them, linking their reports")
    ] = None,
) -> None:
    """List recorded runs, newest first, with their status, name, tags, cases and folder;
    how to resume an interrupted run, and why a failed one failed."""
    from contextlens.store import RunStore

    runs_store = RunStore(store)
    infos = runs_store.list_runs(limit=limit, name=name, tags=parse_tags(tag))
    shown, notes = runs_table(infos)
    out.print(shown)
    for note in notes:
        out.print(note, soft_wrap=True)  # a command is printed whole, to be run again
    if html is not None:
        from contextlens.report.index import write_index

        page = write_index(infos, html, store=str(runs_store.path))
        out.print(line("index: ", page))


def runs_table(infos: list[Any]) -> tuple[FitTable, list[Text]]:
    """The runs as a table, one row each: id, start, status, name, tags, judge, data, cases,
    means, folder (the judge, data and folder said once under it when every run has the
    same); and the lines that say how to resume an interrupted run or why one failed."""
    from contextlens.store import FAILED, INTERRUPTED, RUNNING_OR_LOST

    rows, notes = [], []
    for info in infos:
        bad = info.status in (FAILED, INTERRUPTED, RUNNING_OR_LOST)
        status = info.status
        if status == RUNNING_OR_LOST:
            status += f" ({age(info.started_at)} since it started, on {info.host})"
        rows.append(
            [
                info.run_id,
                when(info.started_at),
                Text(status, style=RED) if bad else status,
                info.name or "-",
                tags_cell(info.tags),
                info.judge,
                near(info.dataset) if info.dataset else "-",
                info.n_cases if info.n_cases or not bad else "-",  # counted when it completes
                lines(f"{k} {fmt(v)}" for k, v in info.means.items()),
                folder_cell(info.out_dir, info.run_id),
            ]
        )
        if info.status in (INTERRUPTED, RUNNING_OR_LOST) and info.command:
            where = "" if info.cwd in (None, str(Path.cwd())) else f"cd {shlex.quote(info.cwd)} && "
            unless = " (unless it still runs there)" if info.status == RUNNING_OR_LOST else ""
            notes.append(line(f"resume {info.run_id}{unless}: ", where, info.command))
        elif info.status == FAILED and info.error:
            notes.append(line(f"failed {info.run_id}: ", info.error))
    headers = ["run", "started", "status", "name", "tags", "judge", "data", "cases", "means"]
    headers.append("folder")
    title = f"{len(rows)} run{'' if len(rows) == 1 else 's'}, newest first" if rows else None
    made = table(
        title,
        headers,
        rows,
        numeric=["cases"],
        ids=["run", "started", "means"],
        fold=["data", "folder"],
        shared=["judge", "data", "folder"],
        caption="started: UTC; <run>: the run's id" if rows else "no recorded run matches",
    )
    return made, notes


def folder_cell(out_dir: str | None, run_id: str) -> str:
    """A run's folder from the working folder; ``OUT/<run>`` when it is named by the run's
    id, so runs written to one folder show it once (``-``: no folder)."""
    if not out_dir:
        return "-"
    path = Path(out_dir)
    return f"{near(str(path.parent))}/<run>" if path.name == run_id else near(out_dir)


def warning_lines(differences: list[Any]) -> list[Text]:
    """Each way two runs differ, as a line for the terminal: a warning, or a milder note."""
    return [line(_severity(d.severity), d.message) for d in differences]


def _severity(severity: str) -> Text:
    return Text("note ", style="dim") if severity == "note" else Text("warning ", style=YELLOW)


def parse_tolerance(items: list[str]) -> float | dict[str, float] | None:
    """``--tolerance`` values: a number for every metric, ``NAME=NUMBER`` for one (a number
    beside names is for the others); a usage problem when malformed."""
    found: dict[str, float] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        key = name.strip() if sep else "*"
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < 0 or (sep and not key):
            raise UsageProblem(f"--tolerance expects a number >= 0 or NAME=NUMBER, got {item!r}")
        found[key] = number
    if not found:
        return None
    return found["*"] if list(found) == ["*"] else found


def compare(
    run_a: Annotated[str, typer.Argument(help="the baseline: a run id (or prefix) or folder")],
    run_b: Annotated[str, typer.Argument(help="the candidate: a run id or folder")],
    store: Annotated[Path | None, typer.Option(help="run store file")] = None,
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="the page's file, or a folder for compare-A-B.html "
            "[default: the comparisons/ folder beside the runs' folders]",
        ),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            help="also write the comparison as Markdown (a PR comment), with the verdict of "
            "each --fail-on-regression gate"
        ),
    ] = None,
    tolerance: Annotated[
        list[str],
        typer.Option(
            help="how far a case's score may move and count as unchanged: a number, or "
            "NAME=NUMBER for one metric (repeatable) [default: the runs' measured noise]"
        ),
    ] = [],  # noqa: B006
    fail_on_regression: Annotated[
        list[str],
        typer.Option(
            metavar="METRIC[=TOLERANCE]",
            help="exit 1 when B is credibly worse than A on METRIC: when the upper end of the "
            "95% credible interval of the paired mean difference B - A (over the cases both "
            "runs scored) is below -TOLERANCE (default 0); fewer than 2 such cases count as "
            "worse; repeatable",
        ),
    ] = [],  # noqa: B006
) -> None:
    """What changed from run A to run B (B - A): per metric the mean difference, its
    interval and P(B better); the cases that moved beyond the metric's tolerance,
    regressions first; and every way the runs differ besides their scores (judge, settings,
    prompts, data, cases). With --fail-on-regression, exit 1 when B is credibly worse than
    A on a metric named."""
    from contextlens.compare import compare as compare_runs
    from contextlens.report.comparison import default_folder, write_comparison
    from contextlens.store import RunStore

    given = parse_tolerance(tolerance)
    folders = _is_folder(run_a) and _is_folder(run_b)  # two folders need no store, unless named
    runs_store = None if folders and store is None else RunStore(store)
    result = compare_runs(run_a, run_b, store=runs_store, tolerance=given)
    regressions = regression_outcomes(result, fail_on_regression)
    for warning in warning_lines(result.warnings):
        out.print(warning)
    out.print(comparison_table(result))
    for said in tolerance_lines(result):
        out.print(said)
    changes = changes_table(result)
    if changes is not None:
        out.print(changes)
    target = out_path if out_path is not None else default_folder(result)
    if target.suffix != ".html":
        make_folder(target)
    page = write_comparison(result, target)
    out.print(line("report: ", page))
    for said in regression_lines(regressions):
        out.print(said)
    if markdown is not None:
        from contextlens.report.markdown import comparison_markdown

        _write(markdown, comparison_markdown(result, regressions=regressions))
        out.print(line("markdown: ", markdown))
    if any(o.missed for o in regressions):
        raise typer.Exit(REGRESSED)


def regression_outcomes(result: Comparison, items: list[str]) -> list[RegressionOutcome]:
    """Each ``--fail-on-regression`` gate on the comparison ``result``, checked on the
    cases both runs scored (:class:`~contextlens.runner.gates.RegressionGate`) with the
    comparison's draws, level and seed; a usage problem for a malformed item or a metric
    neither run measures."""
    from contextlens.runner.gates import parse_regression_gates
    from contextlens.stats import BayesianMode

    try:
        gates = parse_regression_gates(items, result.names)
    except (ValueError, LookupError) as exc:
        raise UsageProblem(str(exc)) from None
    mode = BayesianMode(
        mc_samples=result.mc_samples, ci_level=result.ci_level, rng_seed=result.seed
    )
    found = []
    for gate in gates:
        pairs = result.metric(gate.metric).pairs
        found.append(gate.check([p.a for p in pairs], [p.b for p in pairs], mode))
    return found


def regression_lines(outcomes: list[RegressionOutcome]) -> list[Text]:
    """The rule of the regression gates, then each gate's verdict, for the terminal."""
    from contextlens.runner.gates import REGRESSION_RULE

    if not outcomes:
        return []
    level = f"{100 * outcomes[0].ci_level:g}%"
    said = [line(Text("regression gates ", style="bold"), REGRESSION_RULE.format(level=level))]
    for o in outcomes:
        said.append(line(Text("regression gate ", style=RED if o.missed else GREEN), o.said))
    return said


def _is_folder(ref: str) -> bool:
    return Path(ref).is_dir()


def _write(path: Path, content: str) -> None:
    if path.is_dir():
        raise UsageProblem(f"{path} is a folder; give a file name")
    make_folder(path.parent)
    write_text(path, content, stream=True)


def tolerance_lines(result: Any) -> list[Text]:
    """Per metric, the tolerance its cases were held to and how it was found, and how many
    cases moved within it."""
    said = []
    for m in result.metrics:
        if m.tolerance is None:
            continue
        within = f"; {m.n_within_noise} case(s) within it" if m.n_within_noise else ""
        said.append(line(Text("tolerance ", style="dim"), f"{m.metric}: {m.tolerance.how}{within}"))
    return said


def comparison_table(result: Any) -> Any:
    """Per metric: pairs, means, difference, interval, P(B better), the pass rates of A and
    B, unpaired cases, regressions and improvements (beyond the tolerance), verdict; titled
    with which run is A and which B."""
    from contextlens.report.format import rates_text

    headers = ["metric", "pairs", "A", "B", "B - A", "interval", "P(B better)", "pass A -> B"]
    headers += ["unpaired", "regressed", "improved", "verdict"]
    rows = [
        [
            m.metric,
            m.n_paired,
            fmt(m.mean_a),
            fmt(m.mean_b),
            fmt(m.mean_diff, signed=True),
            f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]" if m.ci_low is not None else "-",
            fmt(m.p_b_better),
            rates_text(m.pass_rate_a, m.pass_rate_b),
            m.n_unpaired,
            len(m.regressions),
            len(m.improvements),
            m.verdict,
        ]
        for m in result.metrics
    ]
    title = f"{result.sides}; B - A"
    numeric = [h for h in headers[1:-1] if h != "pass A -> B"]
    return table(title, headers, rows, numeric=numeric, ids=["metric", "pass A -> B"])


def changes_table(result: Any, limit: int = SHOWN_CHANGES) -> Any:
    """The cases that changed beyond their tolerance (or failed, or are in one run only),
    most first, regressions first (None when none did)."""
    changes = sorted(
        ((m.metric, c) for m in result.metrics for c in m.changes if c.change != "unchanged"),
        key=lambda pair: pair[1].order(),
    )
    if not changes:
        return None
    rows = [
        [
            c.case_id,
            metric,
            fmt(c.a),
            fmt(c.b),
            fmt(c.diff, signed=True),
            Text(c.change, style=RED) if c.regression else c.change,
        ]
        for metric, c in changes[:limit]
    ]
    shown = f"the {len(rows)} largest of {len(changes)} changes" if len(changes) > limit else None
    headers = ["case", "metric", "A", "B", "B - A", "change"]
    return table(
        "changes by case, regressions first",
        headers,
        rows,
        numeric=["A", "B", "B - A"],
        ids=["case", "metric"],
        caption=shown,
    )
