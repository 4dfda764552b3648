"""Ranked context precision: are the chunks useful for the expected answer ranked first?

Each retrieved chunk gets a verdict, "useful for arriving at the expected answer" (with no
expected output: useful for answering the input), and the score is the average precision of
those verdicts over the ranking::

    AP = sum_k v_k * precision@k / sum_k v_k,    precision@k = sum_{i<=k} v_i / k

with ``v_k`` 1 for a useful chunk at rank ``k`` and 0 otherwise; 0 when no chunk is useful.
Useful chunks at the top give 1, the same chunks at the bottom less. This is DeepEval's
``ContextualPrecisionMetric`` and Ragas's ``LLMContextPrecisionWithReference``; per-chunk
verdicts are in ``details.verdicts``.

With a judge, ONE call per case judges every chunk (exactly one verdict per chunk, in order:
``minItems`` = ``maxItems``, so a constrained reply always validates); when the prompt would
be over ``max_prompt_tokens`` the chunks are split in halves over several calls until each
fits (a verdict needs only its chunk, the input and the reference), and a chunk too large
for a call of its own fails the case with its size, unsent.

Without a judge, a chunk's usefulness is a probability: with an expected output, the largest
support the chunk gives to one of its claims (the support model of the ``Context`` metric);
without one, the probability that the chunk bears on the input (the relevance model of
``contextual-relevancy``). The score is the same formula with those probabilities in place of
the verdicts (the judged score is its case of 0/1 values); a chunk's verdict is "yes" from 0.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import ClassVar, Literal

from pydantic import BaseModel, Field, create_model

from contextlens.backend import Message
from contextlens.embeddings.base import Embedder
from contextlens.errors import InputError
from contextlens.judges.base import Judge, Reply
from contextlens.judges.schema import Verdict, text_field
from contextlens.metrics.base import (
    DataBlocks,
    OverBudget,
    ReaderDetails,
    Services,
    build_messages,
    too_long,
)
from contextlens.metrics.calls import (
    CallFailed,
    chunk_blocks,
    halve_to_fit,
    judge_calls,
    token_usage,
)
from contextlens.metrics.chunks import ChunkedConfig, DuplicateGroup, Unit, chunk_units
from contextlens.metrics.claims import case_chunks
from contextlens.metrics.config import RELEVANCE_FILES, SUPPORT_FILES
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.offline.language import is_english
from contextlens.offline.relevance import RelevanceItem
from contextlens.offline.routes import (
    relevance_route,
    score_relevance_routed,
    support_route,
    support_scorer,
)
from contextlens.offline.support import SupportItem
from contextlens.schemas import ModelTestCase

__all__ = [
    "ChunkVerdict",
    "RankedPrecisionConfig",
    "RankedPrecisionDetails",
    "RankedPrecisionMetric",
    "average_precision",
    "verdicts_schema",
]

_TARGETS = {
    "expected_output": "does it hold what the expected answer (the reference) rests on?",
    "input": "does it hold what a correct answer to the input rests on? (there is no "
    "reference answer)",
}


class ChunkVerdict(BaseModel):
    """One retrieved chunk (its 0-based index in ``retrieval_context``; ``merged``: the
    near-duplicates scored with it), whether it was useful, and why. Offline adds its
    ``usefulness`` (a probability)."""

    chunk: int
    verdict: Literal["yes", "no"]
    reason: str
    usefulness: float | None = None
    merged: list[int] | None = None


class RankedPrecisionDetails(ReaderDetails):
    """A ranked context-precision result's details: a verdict per chunk in rank order, what
    usefulness was judged against, the calls it took, and (offline) the reader that scored."""

    method: Literal["judge", "offline"] | None = None
    against: Literal["expected_output", "input"] | None = None
    verdicts: list[ChunkVerdict] = Field(default_factory=list)
    useful: int = 0
    chunks: int = 0
    duplicates: list[DuplicateGroup] | None = None
    judge_calls: int | None = None


class VerdictsReply(Reply):
    """Base of :func:`verdicts_schema`'s replies: sized by their number of chunks."""

    n_chunks: ClassVar[int] = 1

    @classmethod
    def reply_tokens(cls, messages: Sequence[Message]) -> int:
        return 128 + 48 * cls.n_chunks


@cache
def verdicts_schema(n_chunks: int) -> type[VerdictsReply]:
    """The reply of a call over ``n_chunks`` numbered chunks: exactly one verdict each."""
    verdict = create_model(
        "ChunkUsefulness",
        __base__=Reply,
        reason=(str, text_field("at most fifteen words", 120)),
        verdict=(Verdict, ...),
    )
    model = create_model(
        "RankedPrecision",
        __base__=VerdictsReply,
        verdicts=(
            list[verdict],
            Field(
                min_length=n_chunks,
                max_length=n_chunks,
                description=f"one verdict per chunk, in order: {n_chunks} in all",
            ),
        ),
    )
    model.n_chunks = n_chunks
    return model


def average_precision(useful: Sequence[float]) -> float:
    """Average precision of verdicts (1/0) or usefulness probabilities in rank order."""
    total = sum(useful)
    if total <= 0:
        return 0.0
    found = 0.0
    ap = 0.0
    for rank, value in enumerate(useful, 1):
        found += value
        ap += value * found / rank
    return ap / total


class RankedPrecisionConfig(ChunkedConfig):
    """Ranked precision's settings: those of :class:`~contextlens.metrics.claims.ClaimConfig`
    (the pass mark defaults to 0.5); ``max_prompt_tokens`` is the budget of one judge call
    (longer cases are split over several, one chunk at least per call) and, offline, the
    support model reads each chunk against the expected answer."""

    threshold: float | None = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)


@metric(
    "context-precision-ranked",
    aliases=("ContextualPrecisionMetric", "LLMContextPrecisionWithReference"),
    reads=("input", "expected_output", "retrieval_context"),
    requires=("input", "retrieval_context"),
)
class RankedPrecisionMetric(Metric[ModelTestCase]):
    """Average precision of the chunks useful for the expected answer, over the ranking.

    Settings: :class:`RankedPrecisionConfig`.
    """

    case_type = ModelTestCase
    details_type = RankedPrecisionDetails
    config_type = RankedPrecisionConfig
    prompts = ("context_precision_ranked_system.md", "context_precision_ranked_user.md")
    offline_models = (*SUPPORT_FILES, *RELEVANCE_FILES)
    config: RankedPrecisionConfig

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        read = await self._read(case, "judge", services.embedder)
        if isinstance(read, Score):
            return read
        question, reference, units, base = read
        try:
            calls = self.calls(question, reference, units)
        except OverBudget as exc:
            details = base.model_copy(
                update={"max_prompt_tokens": self.config.max_prompt_tokens, "judge_calls": 0}
            )
            raise ScoreFailed(str(exc), details) from None
        replies = await judge_calls(
            judge, [(messages, verdicts_schema(len(part))) for part, messages in calls]
        )
        if isinstance(replies, CallFailed):
            details = base.model_copy(
                update={"raw_reply": replies.raw_reply, "judge_calls": len(calls)}
            )
            raise ScoreFailed(replies.error, details)
        verdicts = [
            ChunkVerdict(
                chunk=u.first,
                verdict=v.verdict,
                reason=v.reason,
                merged=list(u.indices[1:]) or None,
            )
            for (part, _), judgement in zip(calls, replies.judgements, strict=True)
            for u, v in zip(part, judgement.output.verdicts, strict=True)
        ]
        details = base.model_copy(
            update={
                "judge_calls": len(calls),
                "attempts": replies.attempts,
                "usage": token_usage(replies.usage),
            }
        )
        return self._result(verdicts, details, None)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        read = await self._read(case, "offline", services.embedder)
        if isinstance(read, Score):
            return read
        question, reference, units, base = read
        texts = [u.text for u in units]
        english = is_english([question, reference, "\n".join(texts)])
        if reference:
            route = support_route(english, self.config.support_model, self.name)
            items = [SupportItem(reference, [t], question=question) for t in texts]
            found = await support_scorer(route, services.embedder)(items)
            values = [max((c.support for c in r.claims), default=0.0) for r in found]
            why = "supports a claim of the expected answer with p={:.2f} (offline)"
        else:
            route = relevance_route(english, self.name)
            [rel] = await score_relevance_routed(
                [RelevanceItem(question, texts)], services.embedder, route
            )
            values = list(rel.chunk_relevance)
            why = "bears on the input with p={:.2f} (offline)"
        verdicts = [
            ChunkVerdict(
                chunk=u.first,
                verdict="yes" if p >= 0.5 else "no",
                reason=why.format(p),
                usefulness=round(p, 4),
                merged=list(u.indices[1:]) or None,
            )
            for u, p in zip(units, values, strict=True)
        ]
        note = route.noted(
            "(Offline estimate: average precision with each chunk's probability of being "
            "useful in place of a verdict.)"
        )
        details = base.model_copy(update=route.details)
        return self._result(verdicts, details, note, values)

    async def _read(
        self, case: ModelTestCase, method: Literal["judge", "offline"], embedder: Embedder
    ) -> tuple[str, str, list[Unit], RankedPrecisionDetails] | Score:
        """The case's question, reference, chunk units and the details they start; the
        score of a case without chunks."""
        question = case.input.strip()
        if not question:
            raise InputError("the test case needs a non-empty input", field="input")
        reference = (case.expected_output or "").strip()
        against: Literal["expected_output", "input"] = "expected_output" if reference else "input"
        chunks = case_chunks(case, self.name)
        base = RankedPrecisionDetails(method=method, against=against)
        embedded = [(f"retrieval_context[{i}]", t) for i, t in chunks]
        if method == "offline":
            embedded = [("the input", question), ("the expected output", reference), *embedded]
        elif self.config.chunk_options.threshold is None:
            embedded = []
        too_big = too_long(embedded, self.config.max_embed_tokens)
        if too_big is not None:
            details = base.model_copy(update={"max_embed_tokens": self.config.max_embed_tokens})
            raise ScoreFailed(too_big, details)
        units, groups = await chunk_units(chunks, self.config.chunk_options, embedder)
        base = base.model_copy(update={"duplicates": groups})
        if not units:
            return self._result([], base, "There are no retrieved chunks.")
        return question, reference, units, base

    # --- the result -----------------------------------------------------------------------

    def _result(
        self,
        verdicts: list[ChunkVerdict],
        details: RankedPrecisionDetails,
        note: str | None,
        values: Sequence[float] | None = None,
    ) -> Score:
        flags = [1.0 if v.verdict == "yes" else 0.0 for v in verdicts]
        score = round(average_precision(flags if values is None else values), 6)
        useful = int(sum(flags))
        details = details.model_copy(
            update={"verdicts": verdicts, "useful": useful, "chunks": len(verdicts)}
        )
        against = "the expected answer" if details.against == "expected_output" else "the input"
        if verdicts:
            ranks = [str(k) for k, f in enumerate(flags, 1) if f]
            reason = f"Average precision {score:.2f}: {useful} of {len(verdicts)} chunk(s) "
            reason += f"useful for {against}"
            reason += f", at rank(s) {', '.join(ranks)}." if ranks else "."
            above = [v for k, v in enumerate(verdicts) if not flags[k] and any(flags[k + 1 :])]
            if above:
                listed = "; ".join(
                    f"retrieval_context[{v.chunk}] ({v.reason.strip().rstrip('.')})"
                    for v in above[:3]
                )
                reason += f" Ranked above a useful chunk but not useful: {listed}."
            if note:
                reason += f" {note}"
        else:
            reason = note or ""
        return Score(score, reason, details)

    # --- judge ----------------------------------------------------------------------------

    def _messages(self, question: str, reference: str, units: Sequence[Unit]) -> list[Message]:
        against = "expected_output" if reference else "input"
        texts = [u.text for u in units]
        block = DataBlocks(question, reference, *texts)
        return build_messages(
            "context_precision_ranked_system.md",
            "context_precision_ranked_user.md",
            verdicts_schema(len(units)),
            system_values={"target": _TARGETS[against]},
            input=block("input", question),
            reference=block("expected_output", reference)
            if reference
            else "There is no expected answer: judge usefulness for answering the input.",
            chunks=chunk_blocks(texts, block),
        )

    def calls(
        self, question: str, reference: str, units: list[Unit]
    ) -> list[tuple[list[Unit], list[Message]]]:
        """Each judge call's units and messages: all in one unless over the budget, else
        halves until each fits; :class:`OverBudget` names a chunk too large on its own."""
        return halve_to_fit(
            units,
            lambda part: self._messages(question, reference, part),
            self.config.max_prompt_tokens,
            lambda u: f"retrieval_context[{u.first}]",
        )
