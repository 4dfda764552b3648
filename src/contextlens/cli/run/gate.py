"""The gate step of ``contextlens run``: the exit status a finished run gives (``--fail-under``,
``--max-failures``, a run its cost cap stopped), the lines that say why, and every gate's
outcome (:func:`~contextlens.runner.gates.check_run`), which the JUnit file and the Markdown
summary write, so that they fail exactly when the exit status does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text

from contextlens.cli.application import RED, UsageProblem
from contextlens.cli.costs import stopped_lines
from contextlens.terminal import line

if TYPE_CHECKING:
    from contextlens.results import EvalRun
    from contextlens.runner.gates import Gate, GateOutcome

__all__ = [
    "STOPPED",
    "THRESHOLD_MISSED",
    "TOO_MANY_FAILURES",
    "Verdict",
    "failure_gate",
    "gate",
    "parse_max_failures",
]

#: A ``--fail-under`` threshold was missed.
THRESHOLD_MISSED = 1
#: More items failed than ``--max-failures`` allows (this wins over a missed threshold).
TOO_MANY_FAILURES = 3
#: The run's cost cap stopped it: its gates would judge part of the data.
STOPPED = 4


@dataclass(frozen=True)
class Verdict:
    """The exit status of a finished run (0: it passes), the lines that say why, and the
    outcome of each gate it was held to (none missed exactly when the status is 0)."""

    status: int = 0
    lines: list[Text] = field(default_factory=list)
    outcomes: list[GateOutcome] = field(default_factory=list)


def gate(run: EvalRun, gates: Sequence[Gate], max_failures: str, *, cached: bool = True) -> Verdict:
    """The verdict on ``run``: stopped by its cost cap, else its failures against
    ``max_failures``, then its ``gates`` (each a :class:`~contextlens.runner.Gate`);
    ``cached``: whether the run kept its judges' replies (how a stopped run goes on)."""
    from contextlens.runner.gates import check_run

    parse_max_failures(max_failures)
    outcomes = check_run(run, gates, max_failures)
    if run.stopped is not None:  # a partial run: its gates would judge part of the data
        return Verdict(STOPPED, stopped_lines(run, cached=cached), outcomes)
    missed = [o.said for o in outcomes if o.missed and o.kind == "fail-under"]
    said = [line(Text("threshold missed ", style=RED), problem) for problem in missed]
    too_many = [o.said for o in outcomes if o.missed and o.kind == "max-failures"]
    said += [line(Text("too many failures ", style=RED), problem) for problem in too_many]
    if too_many:
        return Verdict(TOO_MANY_FAILURES, said + _failed_examples(run), outcomes)
    return Verdict(THRESHOLD_MISSED if missed else 0, said, outcomes)


def parse_max_failures(value: str) -> tuple[float, bool]:
    """``"5"`` -> (5, False): at most 5 items; ``"2%"`` -> (2, True): at most 2% of them."""
    from contextlens.runner.gates import parse_max_failures as parsed

    try:
        return parsed(value)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None


def failure_gate(run: EvalRun, max_failures: str) -> list[str]:
    """The metrics whose failed items exceed ``--max-failures``."""
    from contextlens.runner.gates import failure_outcomes

    parse_max_failures(max_failures)
    return [o.said for o in failure_outcomes(run, max_failures) if o.missed]


def _failed_examples(run: EvalRun, limit: int = 5) -> list[Text]:
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
