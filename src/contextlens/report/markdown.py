"""A run or a comparison as Markdown, for a pull request comment or a CI step summary
(``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from contextlens.compare import Comparison
from contextlens.report.format import items_text, pass_text, rates_text
from contextlens.results import EvalRun
from contextlens.runner.gates import (
    REGRESSION_RULE,
    GateOutcome,
    RegressionOutcome,
    check_run,
    ordered,
)
from contextlens.terminal import safe

__all__ = [
    "comparison_markdown",
    "gates_markdown",
    "regression_markdown",
    "run_markdown",
]

#: Cases listed under a comparison, regressions first.
SHOWN = 10


def cell(value: Any) -> str:
    """``value`` as one Markdown table cell: one line, pipes and markup escaped."""
    text = safe(" ".join(str(value).split()))
    for char in ("\\", "|", "*", "_", "`", "<", ">", "[", "]", "&"):
        text = text.replace(char, "\\" + char)
    return text or " "


def _table(headers: list[str], rows: list[list[Any]], right: int = 1) -> list[str]:
    align = ["---"] * right + ["---:"] * (len(headers) - right)
    out = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return out


def _score(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def gates_markdown(outcomes: Sequence[GateOutcome]) -> list[str]:
    """The gates a run was held to: whether it passes, a line per missed gate, and a table
    of every gate with its outcome, what the run shows and what the gate asks."""
    if not outcomes:
        return []
    missed = [o for o in outcomes if o.missed]
    if missed:
        head = f"**Gates: {len(missed)} of {len(outcomes)} missed**, the run fails."
    else:
        head = f"**Gates: {'the' if len(outcomes) == 1 else 'all'} {len(outcomes)} met**."
    lines = ["", head, ""]
    lines += [
        f"> **Missed:** {cell(o.name)}: {cell(o.said.removeprefix(f'{o.metric}: '))}"
        for o in missed
    ]
    if missed:
        lines.append("")
    rows = [[o.name, o.status, o.found, o.mark] for o in outcomes]
    return lines + _table(["gate", "outcome", "found", "asks"], rows, right=2)


def run_markdown(run: EvalRun, outcomes: Sequence[GateOutcome] | None = None) -> str:
    """The run's summary table: per metric its judge, mean, interval, pass rate (with its
    interval and pass mark), items and failures; then its gates and their outcome
    (``outcomes``, by default :func:`~contextlens.runner.gates.check_run`'s: no failed
    item, and its cost cap)."""
    rows = []
    for key, s in run.summaries.items():
        interval = (
            f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            if s.ci_low is not None and s.ci_high is not None
            else "-"
        )
        rows.append(
            [
                key,
                s.judge or "-",
                _score(s.mean),
                interval,
                pass_text(s, missing="-"),
                items_text(s),
                s.n_failed,
            ]
        )
    title = f"### contextlens run `{cell(run.run_id)}`"
    if run.name:
        title += f" · {cell(run.name)}"
    lines = [title, ""]
    lines += _table(
        ["metric", "judge", "mean", "interval", "pass", "items", "failed"],
        rows,
        right=2,
    )
    lines += [
        "",
        f"{run.duration_s:.1f} s; pass: the share of scored items at or above the pass mark, "
        "with its interval; failed items could not be scored (never counted 0); n/a: items "
        "the metric does not apply to.",
    ]
    if run.stopped:
        lines += ["", f"> **Stopped early:** {cell(run.stopped)}; the other items are not run."]
    lines += gates_markdown(check_run(run) if outcomes is None else outcomes)
    return "\n".join(lines) + "\n"


def regression_markdown(outcomes: Sequence[RegressionOutcome]) -> list[str]:
    """The regression gates of a comparison: the rule, whether B passes, and per gate its
    pairs, the means of A and B over them, B - A with its interval, and the verdict."""
    if not outcomes:
        return []
    missed = [o for o in outcomes if o.missed]
    level = f"{100 * outcomes[0].ci_level:g}%"
    verdict = (
        f"**Regression gates: {len(missed)} of {len(outcomes)} missed**, B fails."
        if missed
        else f"**Regression gates: {'the' if len(outcomes) == 1 else 'all'} {len(outcomes)} met**."
    )
    lines = ["", verdict, "", cell(REGRESSION_RULE.format(level=level)) + ".", ""]
    rows = []
    for o in outcomes:
        if o.ci_low is None or o.ci_high is None:
            interval, said = "-", "cannot be checked: regressed"
        else:
            upper, bar = ordered(o.ci_high, -o.tolerance, below=o.missed, signed=True)
            interval = f"[{o.ci_low:+.3f}, {upper}]"
            said = f"{'regressed' if o.missed else 'met'}: upper end {upper} "
            said += f"{'<' if o.missed else '>='} {bar}"
        rows.append(
            [
                o.metric,
                f"{o.tolerance:g}",
                o.pairs,
                _score(o.mean_a),
                _score(o.mean_b),
                _score(o.diff, signed=True),
                interval,
                said,
            ]
        )
    headers = ["gate", "tolerance", "pairs", "A", "B", "B - A", "interval", "verdict"]
    return lines + _table(headers, rows)


def comparison_markdown(
    comparison: Comparison,
    shown: int = SHOWN,
    regressions: Sequence[RegressionOutcome] = (),
) -> str:
    """The comparison: how the runs differ besides their scores, the table per metric, its
    ``regressions`` gates (``compare --fail-on-regression``) with their verdicts, and the
    cases that changed most, regressions first."""
    lines = [
        f"### contextlens: {cell(comparison.sides)}; B - A",
        "",
    ]
    if comparison.warnings:
        lines += [
            f"> **{'Note' if w.severity == 'note' else 'Warning'}:** {cell(w.message)}"
            for w in comparison.warnings
        ]
        lines.append("")
    rows = [
        [
            m.metric,
            m.n_paired,
            _score(m.mean_a),
            _score(m.mean_b),
            _score(m.mean_diff, signed=True),
            f"[{m.ci_low:+.3f}, {m.ci_high:+.3f}]" if m.ci_low is not None else "-",
            "-" if m.p_b_better is None else f"{m.p_b_better:.3f}",
            rates_text(m.pass_rate_a, m.pass_rate_b),
            m.n_unpaired,
            len(m.regressions),
            m.verdict,
        ]
        for m in comparison.metrics
    ]
    headers = ["metric", "pairs", "A", "B", "B - A", "interval", "P(B better)", "pass A -> B"]
    lines += _table([*headers, "unpaired", "regressed", "verdict"], rows)
    lines += regression_markdown(regressions)
    changes = sorted(
        ((m.metric, c) for m in comparison.metrics for c in m.changes if c.change != "unchanged"),
        key=lambda pair: pair[1].order(),
    )
    if changes:
        lines += ["", f"The {min(shown, len(changes))} largest of {len(changes)} changes:", ""]
        lines += _table(
            ["case", "metric", "A", "B", "B - A", "change"],
            [
                [c.case_id, metric, _score(c.a), _score(c.b), _score(c.diff, True), c.change]
                for metric, c in changes[:shown]
            ],
            right=2,
        )
    return "\n".join(lines) + "\n"
