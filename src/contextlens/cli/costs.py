"""What ``contextlens run`` prints of cost: the estimate of ``--dry-run``, and the end of a
run its ``--max-cost`` stopped."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from contextlens.terminal import line, table

__all__ = ["estimate_table", "stopped_lines"]


def _usd(value: float | None) -> str:
    return "no price" if value is None else f"${value:.4f}"


def estimate_table(estimate: Any) -> Table:
    """Per metric: its judge, the calls to be paid for (and those the cache answers), the
    prompt tokens, the completion tokens expected and their range, the cost and its range."""
    headers = ["metric", "judge", "calls", "cached", "prompt tokens", "completion tokens"]
    headers += ["cost", "cost range"]
    rows = []
    for m in estimate.metrics:
        if m.judge is None:
            rows.append([m.metric, "-", "0", "0", "0", "0", "$0 (no judge)", "-"])
            continue
        rows.append(
            [
                m.metric,
                m.judge,
                f"{m.calls:,}",
                f"{m.cache_hits:,}",
                f"{m.prompt_tokens:,}",
                f"{m.completion_tokens:,} [{m.completion_low:,}, {m.completion_high:,}]",
                _usd(m.cost),
                "-" if m.cost is None else f"[{_usd(m.cost_low)}, {_usd(m.cost_high)}]",
            ]
        )
    tokenizers = sorted({m.tokenizer for m in estimate.metrics if m.calls})
    sources = sorted({m.completion_source for m in estimate.metrics if m.calls})
    total = estimate.cost
    caption = line(
        f"{estimate.cases:,} cases read and checked, no judge call made; total "
        + (
            "unknown (a model has no price)"
            if total is None
            else f"{_usd(total)} [{_usd(estimate.cost_low)}, {_usd(estimate.cost_high)}]"
        )
        + f"; prompt tokens by {', '.join(tokenizers) or '-'}; completion tokens: "
        f"{' and '.join(sources) or '-'} expected, [shortest valid reply, the reply bound]"
    )
    triaged = [
        f"; {m.metric}: triage sends {m.triage_judged:,} of {m.triage_judged + m.triage_offline:,} "
        "items to the judge, the offline scorer decides the rest"
        for m in estimate.metrics
        if m.triage_judged is not None and m.triage_offline is not None
    ]
    if triaged:
        caption = line(caption, *triaged)
    return table("contextlens dry run", headers, rows, numeric=headers[2:], caption=caption)


def stopped_lines(run: Any, *, cached: bool) -> list[Any]:
    """What the end of a run stopped by its cost cap says: why, what was spent and what is
    left of the cap, the items not run per metric, and how to go on: replaying what was paid
    for when the run kept its replies (``cached``), paying for all of it again when not."""
    spent = run.accounting.total.cost
    said = f"stopped: {run.stopped}; ${spent:.4f} spent"
    cap = run.config.max_cost
    if cap is not None:
        left = cap - spent
        said += (
            f", ${left:.4f} left (less than the next call could cost)"
            if left >= 0
            else f", ${-left:.4f} past it (a backend reported more than its price allows)"
        )
    not_run = [(key, s.n_not_run) for key, s in run.summaries.items() if s.n_not_run]
    items = sum(n for _, n in not_run)
    resume = (
        "the same command with a higher --max-cost goes on, replaying what was paid for "
        "from the cache"
        if cached
        else "the same command with a higher --max-cost runs every case again, paying again "
        "for what this run spent"
    )
    return [
        line(said),
        line(
            f"{items:,} items not run (status 'not run', not failed): "
            + ", ".join(f"{key} {n:,}" for key, n in not_run)
        ),
        line(resume),
    ]
