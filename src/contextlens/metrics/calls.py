"""The judge calls of one case: its chunks in numbered blocks, split into parts whose prompts
fit the budget, judged together with their usage summed; the first failed call fails the
case, saying which call it was.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from contextlens.backend import Message, Usage
from contextlens.errors import JudgeError
from contextlens.judges.base import Judge, Judgement, Reply
from contextlens.metrics.base import (
    DataBlocks,
    OverBudget,
    estimate_tokens,
    over_budget,
    raw_reply,
)
from contextlens.schemas import TokenUsage

__all__ = ["CallFailed", "Replies", "chunk_blocks", "halve_to_fit", "judge_calls", "token_usage"]

T = TypeVar("T")


def chunk_blocks(texts: Sequence[str], block: DataBlocks | None = None) -> str:
    """The chunks in numbered data blocks (1-based, in rank order); ``block``: the data
    blocks of the whole prompt, which holds the chunks' texts."""
    if not texts:
        return "There are no retrieved chunks."
    block = block or DataBlocks(*texts)
    return "\n\n".join(f"Chunk {k}:\n{block('chunk', t)}" for k, t in enumerate(texts, 1))


def halve_to_fit(
    items: list[T],
    messages_of: Callable[[list[T]], list[Message]],
    budget: int,
    name: Callable[[T], str],
) -> list[tuple[list[T], list[Message]]]:
    """Each call's items and messages: ``items`` in one call when its prompt is within
    ``budget`` tokens, else its halves, each halved in turn; :class:`OverBudget` when one
    item alone is over it (``name(item)`` says which, e.g. ``retrieval_context[3]``)."""
    messages = messages_of(items)
    tokens = estimate_tokens(messages)
    if tokens <= budget:
        return [(items, messages)]
    if len(items) == 1:
        where = f"{name(items[0])} alone would make the prompt"
        raise OverBudget(over_budget(tokens, budget, where))
    half = len(items) // 2
    return halve_to_fit(items[:half], messages_of, budget, name) + halve_to_fit(
        items[half:], messages_of, budget, name
    )


def token_usage(usage: Usage) -> TokenUsage:
    """A result's token counts from the calls' usage."""
    return TokenUsage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens)


@dataclass(frozen=True)
class Replies:
    """The judgements of a case's calls, in call order, and what they took together."""

    judgements: list[Judgement[Any]]
    usage: Usage
    attempts: int


@dataclass(frozen=True)
class CallFailed:
    """A case's calls failed: the first failure (``call i of n: ...`` when there were
    several) and that call's last raw reply."""

    error: str
    raw_reply: str | None


async def judge_calls(
    judge: Judge, calls: Sequence[tuple[list[Message], type[Reply]]]
) -> Replies | CallFailed:
    """Every call of a case at once. An error that is not a judge's (a bug, a cancel) is
    raised; a judge's error fails the case."""
    outcomes = await asyncio.gather(
        *(judge.judge(messages, schema) for messages, schema in calls), return_exceptions=True
    )
    for outcome in outcomes:
        if isinstance(outcome, BaseException) and not isinstance(outcome, JudgeError):
            raise outcome
    failed = [(i, o) for i, o in enumerate(outcomes, 1) if isinstance(o, JudgeError)]
    if failed:
        i, exc = failed[0]
        where = f"call {i} of {len(calls)}: " if len(calls) > 1 else ""
        return CallFailed(f"{where}{exc}", raw_reply(exc))
    judgements = cast(list[Judgement[Any]], outcomes)
    usage = sum((j.usage for j in judgements), Usage())
    return Replies(judgements, usage, sum(j.attempts for j in judgements))
