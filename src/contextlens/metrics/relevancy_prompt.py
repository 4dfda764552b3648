"""The judge's side of contextual relevancy: its reply schemas (one verdict per numbered
statement) and its prompts, the default ones or a :class:`RelevancyPrompt` of one's own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, ClassVar, Literal

from pydantic import Field, create_model

from contextlens.backend import Message
from contextlens.judges.base import DEFAULT_FENCE, Reply
from contextlens.judges.parsing import format_instructions
from contextlens.judges.schema import Verdict, text_field
from contextlens.metrics.base import DataBlocks, build_messages, data_block
from contextlens.metrics.calls import chunk_blocks
from contextlens.offline.relevance import statements_of

__all__ = [
    "FORMAT_OVERRIDE",
    "SYSTEM_PROMPT",
    "USER_PROMPT",
    "ReasonReply",
    "RelevancyPrompt",
    "VerdictsReply",
    "numbered",
    "reason_messages",
    "relevancy_messages",
    "reply_schema",
    "verdicts_schema",
]

SYSTEM_PROMPT = "contextual_relevancy_system.md"
USER_PROMPT = "contextual_relevancy_user.md"
#: Put before the reply format after a user's template, which may describe another one.
FORMAT_OVERRIDE = "Whatever reply format was described above, reply in this one instead."

Chunk = tuple[int, str]  # (index in retrieval_context, text)


# --- the judge's reply schemas -------------------------------------------------------------


class VerdictsReply(Reply):
    """Base of :func:`verdicts_schema`'s replies: one verdict per numbered statement."""

    n_statements: ClassVar[int] = 1

    @classmethod
    def reply_tokens(cls, messages: Sequence[Message]) -> int:
        """Room for a verdict per statement, a reason per "no" and the overall reason."""
        return 160 + 28 * cls.n_statements

    def verdict_of(self, number: int) -> Literal["yes", "no"]:
        verdicts: list[Literal["yes", "no"]] = getattr(self, "verdicts")  # noqa: B009
        return verdicts[number - 1]

    def reasons(self) -> dict[int, str]:
        """The reason given for each statement number (the "no"s)."""
        listed = getattr(self, "irrelevant", [])
        return {int(n): entry.reason.strip() for entry in listed for n in entry.statements}


@cache
def verdicts_schema(n_statements: int, with_reason: bool) -> type[VerdictsReply]:
    """The reply schema for a prompt of ``n_statements`` numbered statements.

    ``verdicts`` has exactly one ``"yes"``/``"no"`` per statement, in order (``minItems`` =
    ``maxItems``); ``irrelevant`` gives the reasons of the "no"s, each with the numbers of the
    statements it explains (statements off-topic for the same reason share one; a number
    outside 1..n is refused); with ``with_reason``, one overall reason.
    The reply carries only what the judge adds: the statements are split here and numbered in
    the prompt, so none is restated. A grammar enforces every rule; a reply that breaks one
    fails validation and is re-asked once.
    """
    numbers = tuple(range(1, n_statements + 1)) or (1,)  # (no statements: a prompt's frame)
    number = Literal[numbers]  # type: ignore[valid-type]
    irrelevant = create_model(
        "Irrelevant",
        __base__=Reply,
        statements=(
            list[number],
            Field(
                min_length=1,
                max_length=n_statements,
                description="the numbers of the statements judged no for this reason",
            ),
        ),
        reason=(str, text_field("at most ten words", 80)),
    )
    fields: dict[str, Any] = {
        "verdicts": (
            list[Verdict],
            Field(
                min_length=n_statements,
                max_length=n_statements,
                description=f"one verdict per statement, in order: {n_statements} in all",
            ),
        ),
        "irrelevant": (
            list[irrelevant],
            Field(
                max_length=n_statements,
                description="why the statements judged no are not relevant, one entry per reason",
            ),
        ),
    }
    if with_reason:
        fields["reason"] = (
            str,
            text_field("one or two sentences on how relevant the context is overall", 300),
        )
    model = create_model("ContextualRelevancy", __base__=VerdictsReply, **fields)
    model.n_statements = n_statements
    return model


def reply_schema(chunks: Sequence[str], with_reason: bool) -> type[VerdictsReply]:
    """The reply schema of a call judging ``chunks``: one verdict per statement."""
    return verdicts_schema(sum(len(statements_of(c)) for c in chunks), with_reason)


class ReasonReply(Reply):
    """The reply to a template's ``generate_reason`` prompt."""

    reason: str = text_field("why the context scores as it does", 400)


# --- prompts --------------------------------------------------------------------------------


def numbered(chunks: Sequence[str]) -> list[str]:
    """Each chunk's statements, one a line, numbered across the call: ``[1] ...``."""
    texts, number = [], 0
    for chunk in chunks:
        lines = []
        for statement in statements_of(chunk):
            number += 1
            lines.append(f"[{number}] {statement}")
        texts.append("\n".join(lines))
    return texts


@dataclass(frozen=True)
class RelevancyPrompt:
    """A judge prompt of one's own for contextual relevancy.

    ``verdicts(input, chunks, format)`` makes the messages of a verdicts call from the
    delimited input, the numbered and delimited chunks and the reply format (which it must
    carry; None: the default prompts); ``reason(input, irrelevant, relevant, score)``, when
    given, the text of a reason call of its own (the reply format is appended), asked after
    the verdicts with the reasons of the statements found irrelevant, the relevant
    statements and the computed score. ``source`` names where it came from (recorded in
    the run's settings).
    :func:`contextlens.compat.deepeval_template.relevancy_prompt` makes one from a
    DeepEval-style ``evaluation_template``."""

    verdicts: Callable[[str, str, str], list[Message]] | None = None
    reason: Callable[[str, list[str], list[str], float], str] | None = None
    source: str = "custom"

    def __repr__(self) -> str:
        return f"RelevancyPrompt({self.source})"


def relevancy_messages(
    input_text: str,
    chunks: Sequence[str],
    *,
    include_reason: bool = True,
    prompt: RelevancyPrompt | None = None,
) -> list[Message]:
    """The judge prompt for ``chunks`` (numbered from 1); every text sits in a data block."""
    schema = reply_schema(chunks, include_reason)
    texts = numbered(chunks)
    block = DataBlocks(input_text, *texts)
    input_block, chunks_block = block("input", input_text), chunk_blocks(texts, block)
    if prompt is None or prompt.verdicts is None:
        return build_messages(
            SYSTEM_PROMPT, USER_PROMPT, schema, input=input_block, chunks=chunks_block
        )
    fmt = format_instructions(schema, DEFAULT_FENCE.bos, DEFAULT_FENCE.eos)
    return prompt.verdicts(input_block, chunks_block, fmt)


def reason_messages(
    prompt: RelevancyPrompt,
    input_text: str,
    irrelevant: list[str],
    relevant: list[str],
    score: float,
) -> list[Message]:
    """The prompt of a reason call of its own (``irrelevant``: the reasons of the statements
    found irrelevant; ``relevant``: the relevant statements), with the reply format
    appended."""
    assert prompt.reason is not None
    text = prompt.reason(data_block("input", input_text), irrelevant, relevant, round(score, 2))
    fmt = format_instructions(ReasonReply, DEFAULT_FENCE.bos, DEFAULT_FENCE.eos)
    return [{"role": "user", "content": f"{text}\n\n{FORMAT_OVERRIDE}\n{fmt}"}]
