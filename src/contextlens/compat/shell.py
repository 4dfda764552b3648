"""What every seed shell shares: one case through :func:`~contextlens.runner.aevaluate`,
what it cost, and the lines of a ``verbose`` call."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from contextlens.engine.accounting import Counts
from contextlens.judges.base import Judge
from contextlens.judges.spec import is_offline
from contextlens.results import ItemResult
from contextlens.runner import aevaluate


@dataclass(frozen=True)
class Scored:
    """One item's result and the judge work it took."""

    item: ItemResult
    accounting: Counts | None

    @property
    def cost(self) -> float | None:
        """Estimated USD of the judge calls; None offline or when the model has no price."""
        acc = self.accounting
        if acc is None or not acc.calls or acc.unpriced_calls:
            return None
        return acc.cost


async def score_one(metric: Any, case: Any) -> Scored:
    """``metric`` (a metric core) on ``case`` through the engine path of ``evaluate``
    (default cache, the shared limiter, retries, accounting), with the metric's own judge and
    embedder."""
    run = await aevaluate([case], [metric], progress=False, keep_results=True)
    [item] = run.results
    [summary] = run.summaries.values()
    return Scored(item, summary.accounting)


def judge_label(choice: Any) -> str:
    """How a judge choice is shown: ``offline``, a judge's name, or ``kind:model``."""
    if choice is None or is_offline(choice):
        return "offline"
    if isinstance(choice, Judge):
        return choice.name
    return f"{choice.name}:{choice.model}"


def say(text: str) -> None:
    """Write a ``verbose`` line to stderr (only for the call that asked for it)."""
    print(text, file=sys.stderr, flush=True)
