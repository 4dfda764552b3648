"""The gate step of ``contextlens run``: the exit status a finished run gives (``--fail-under``,
``--max-failures``, a run its cost cap stopped) and the lines that say why."""

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
    from contextlens.runner.gates import Gate

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
    """The exit status of a finished run (0: it passes) and the lines that say why."""

    status: int = 0
    lines: list[Text] = field(default_factory=list)


def gate(run: EvalRun, gates: Sequence[Gate], max_failures: str, *, cached: bool = True) -> Verdict:
    """The verdict on ``run``: stopped by its cost cap, else its failures against
    ``max_failures``, then its ``gates`` (each a :class:`~contextlens.runner.Gate`);
    ``cached``: whether the run kept its judges' replies (how a stopped run goes on)."""
    if run.stopped is not None:  # a partial run: its gates would judge part of the data
        return Verdict(STOPPED, stopped_lines(run, cached=cached))
    missed = [why for why in (g.missed(run) for g in gates) if why is not None]
    said = [line(Text("threshold missed ", style=RED), problem) for problem in missed]
    too_many = failure_gate(run, max_failures)
    said += [line(Text("too many failures ", style=RED), problem) for problem in too_many]
    if too_many:
        return Verdict(TOO_MANY_FAILURES, said + _failed_examples(run))
    return Verdict(THRESHOLD_MISSED if missed else 0, said)


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


def failure_gate(run: EvalRun, max_failures: str) -> list[str]:
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
