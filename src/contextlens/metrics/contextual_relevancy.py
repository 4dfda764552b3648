"""Contextual relevancy: how much of the retrieved context bears on the input.

``score = relevant statements / all statements`` over every chunk of ``retrieval_context``
(strict mode: 1.0 when every statement is relevant, else 0.0; offline, the expected share of
relevant statements, below). DeepEval's and agensight's
surface over it is :class:`contextlens.compat.deepeval.ContextualRelevancyMetric`.

With a judge, ONE call per test case lists every chunk in its own numbered data block, its
statements split here and numbered across the call, and asks for a ``"yes"``/``"no"``
verdict per statement number (an enum: from a judge asked with the prompt alone, case,
spaces and punctuation around the word do not count, ``"Yes."`` is ``"yes"``, as DeepEval
reads it; any other verdict, and anything but the two words in a constrained reply, is
rejected by validation and re-asked), the reasons of the "no"s and, with
``include_reason``, the overall reason in the same reply. The score is computed here from
the verdicts, never asked from the judge, and the reason starts with the computed counts
("3 of 5 statements are relevant."), so score and reason cannot disagree (DeepEval issue
#3079). The chunks are split over several calls only when the prompt would exceed
``max_prompt_tokens``; a case that cannot be split to fit (one chunk, or the input, larger
than the whole budget) fails with its size and the budget, and nothing of it is sent.

A :class:`RelevancyPrompt` replaces the prompt text (DeepEval's ``evaluation_template`` is
made into one by :mod:`contextlens.compat.deepeval_template`); the reply format is always
given, so the reply can still be validated.

Without a judge the offline estimate of :mod:`contextlens.offline.relevance` gives each chunk
a calibrated probability of bearing on the input, read from its embedding similarity to the
input (and to ``actual_output`` when the case has one: a chunk the answer draws on bears on
the input) within its list. A chunk is relevant exactly when that probability is at least
0.5, and each of its statements (its sentences) carries the chunk's probability and verdict,
so no verdict disagrees with its probability. The score is the expected share of relevant
statements: the sum over chunks of probability times statements, over all statements
(strict mode reads the verdicts). It has no prompt: a given template is reported as unused
(a warning and ``details.template``). An input, answer or chunk over ``max_embed_tokens``
fails the case with its size; nothing is embedded. A case that does not read as English
says so in its reason and ``details.language`` (:mod:`contextlens.offline.routes`).

Every result lists its chunks in ``details.chunks`` (:class:`ChunkRelevance`: index,
relevant, probability, statements, relevant statements). Offline the probability is the
model's; with a judge it is None (a judge gives verdicts, not probabilities) and a chunk is
relevant when the judge found at least one of its statements relevant.

Decisions: ``retrieval_context=None`` raises :class:`~contextlens.errors.InputError` (a
``ValueError``) naming the field, as DeepEval requires it too; an empty list or only blank
chunks is a computed 0.0 ("the retrieval context is empty"), not a failure. A blank
``input`` raises too. ``actual_output`` is not required; offline it is read when it has a
word.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from contextlens.backend import Message
from contextlens.errors import InputError, JudgeError
from contextlens.judges.base import Judge
from contextlens.metrics.base import (
    DEFAULT_MAX_PROMPT_TOKENS,
    OverBudget,
    ReaderDetails,
    Services,
    estimate_tokens,
    over_budget,
    prompt_over_budget,
    raw_reply,
    text_tokens,
    too_long,
)
from contextlens.metrics.calls import (
    CallFailed,
    chunk_blocks,
    halve_to_fit,
    judge_calls,
    token_usage,
)
from contextlens.metrics.config import RELEVANCE_FILES, JudgedConfig
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.metrics.relevancy_prompt import (
    SYSTEM_PROMPT,
    USER_PROMPT,
    ReasonReply,
    RelevancyPrompt,
    VerdictsReply,
    numbered,
    reason_messages,
    relevancy_messages,
    reply_schema,
)
from contextlens.offline.language import is_english
from contextlens.offline.relevance import (
    THRESHOLD,
    RelevanceItem,
    RelevanceResult,
    has_words,
    statements_of,
)
from contextlens.offline.routes import relevance_route, score_relevance_routed
from contextlens.redact import logger
from contextlens.schemas import ModelTestCase

log = logger("contextlens.contextual_relevancy")

#: A chunk: its index in ``retrieval_context`` and its text.
Chunk = tuple[int, str]

__all__ = [
    "DEFAULT_MAX_PROMPT_TOKENS",
    "ChunkRelevance",
    "ContextualRelevancyScorer",
    "RelevancyConfig",
    "RelevancyDetails",
    "RelevancyPrompt",
    "StatementVerdict",
    "estimate_tokens",
    "relevancy_messages",
    "reply_schema",
]

# --- what a result holds ------------------------------------------------------------------


class StatementVerdict(BaseModel):
    """One statement of a chunk and whether it is relevant to the input; ``chunk`` is its
    chunk's 0-based index in ``retrieval_context``. Offline, ``relevance`` is its chunk's
    probability and the verdict is "yes" exactly when that is at least 0.5."""

    chunk: int
    statement: str
    verdict: Literal["yes", "no"]
    reason: str
    relevance: float | None = None


class ChunkRelevance(BaseModel):
    """One chunk of ``retrieval_context`` (``index``) and whether it bears on the input.

    Offline, ``probability`` is the calibrated probability that it does and ``relevant`` is
    exactly ``probability >= 0.5``; each of its statements shares that verdict, so
    ``relevant_statements`` is all of them or none. With a judge, ``probability`` is None
    (the judge gives verdicts, not probabilities) and the chunk is relevant when the judge
    found at least one of its statements relevant; ``relevant_statements`` counts those.
    """

    index: int
    relevant: bool
    probability: float | None = None
    statements: int
    relevant_statements: int


class RelevancyDetails(ReaderDetails):
    """A contextual-relevancy result's details: every statement's verdict, every chunk's
    (``chunks``) and the counts the score is computed from; offline, the expected number of
    relevant statements (the score is it over ``statements``, unless in strict mode), the
    relevance model and the reader that scored them."""

    method: Literal["judge", "offline"] | None = None
    verdicts: list[StatementVerdict] = Field(default_factory=list)
    chunks: list[ChunkRelevance] = Field(default_factory=list)
    relevant: int = 0
    statements: int = 0
    expected_relevant: float | None = None
    relevance_model: str | None = None
    judge_calls: int | None = None
    template: str | None = None


def _counts(relevant: int, total: int) -> str:
    noun, verb = ("statement", "is") if total == 1 else ("statements", "are")
    return f"{relevant} of {total} {noun} {verb} relevant."


# --- the metric -----------------------------------------------------------------------------


class RelevancyConfig(JudgedConfig):
    """Contextual relevancy's settings.

    ``threshold``: the minimum passing score (default 0.5; 1.0 in strict mode).
    ``include_reason``: ask for and return a reason; False asks for none (a shorter reply)
    and leaves ``reason`` None. ``strict_mode``: score 1.0 when every statement is
    relevant, else 0.0. ``prompt``: a :class:`RelevancyPrompt` of one's own in place of the
    default prompts. ``max_prompt_tokens``: the prompt budget of one judge call (characters
    / 4); longer contexts are split over several calls, one chunk at least per call, and a
    chunk too large for a call of its own fails the case with its size, unsent.
    ``max_embed_tokens``: offline, the longest text embedded; a case with a longer input or
    chunk fails with its size.
    """

    threshold: float | None = Field(default=0.5, ge=0.0, le=1.0, allow_inf_nan=False)
    include_reason: bool = True
    strict_mode: bool = False
    prompt: RelevancyPrompt | None = None

    @model_validator(mode="before")
    @classmethod
    def _strict_passes_at_one(cls, values: Any) -> Any:
        if isinstance(values, dict) and values.get("strict_mode"):
            return {**values, "threshold": 1.0}
        return values


@metric(
    "contextual-relevancy",
    aliases=("ContextualRelevancyMetric", "Contextual Relevancy"),
    reads=("input", "retrieval_context"),
    requires=("input", "retrieval_context"),
)
class ContextualRelevancyScorer(Metric[ModelTestCase]):
    """Share of the statements in the retrieved context that are relevant to the input.

    Settings: :class:`RelevancyConfig`. ``details`` are :class:`RelevancyDetails`: each
    statement's :class:`StatementVerdict` and each chunk's :class:`ChunkRelevance` (offline,
    its calibrated probability).
    """

    case_type = ModelTestCase
    details_type = RelevancyDetails
    config_type = RelevancyConfig
    prompts = (SYSTEM_PROMPT, USER_PROMPT)
    offline_models = RELEVANCE_FILES
    config: RelevancyConfig

    @property
    def _reason_call(self) -> bool:
        """Whether the reason is asked in a call of its own (the prompt's own reason)."""
        prompt = self.config.prompt
        return self.config.include_reason and prompt is not None and prompt.reason is not None

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        chunks = _chunks(case)
        if not chunks:
            return self._empty()
        return await self._judged(case.input, chunks, judge)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        chunks = _chunks(case)
        if not chunks:
            return self._empty()
        answer = getattr(case, "actual_output", None) or ""
        return await self._offline(case.input, chunks, answer, services)

    def _empty(self) -> Score:
        why = "The retrieval context is empty: there are no statements to judge."
        return self._result([], why, RelevancyDetails())

    def _result(
        self,
        verdicts: list[StatementVerdict],
        explanation: str | None,
        details: RelevancyDetails,
        expected: float | None = None,
    ) -> Score:
        """The score from the verdicts; ``expected`` (offline): the expected number of
        relevant statements, from the chunk probabilities, which the score carries."""
        relevant = sum(v.verdict == "yes" for v in verdicts)
        total = len(verdicts)
        score = self._score(relevant, total)
        if expected is not None and total and not self.config.strict_mode:
            score = min(1.0, max(0.0, expected / total))
        reason = None
        if self.config.include_reason and not total:
            reason = explanation
        elif self.config.include_reason:
            reason = _counts(relevant, total)
            if expected is not None:
                reason += f" Expected share of relevant statements: {score:.2f}."
            if explanation:
                reason += " " + explanation
        update: dict[str, Any] = {"verdicts": verdicts, "relevant": relevant, "statements": total}
        if not details.chunks:
            update["chunks"] = _judged_chunks(verdicts)
        return Score(score, reason, details.model_copy(update=update))

    def _score(self, relevant: int, total: int) -> float:
        if self.config.strict_mode:
            return 1.0 if total and relevant == total else 0.0
        return relevant / total if total else 0.0

    # --- offline --------------------------------------------------------------------------

    async def _offline(
        self, input_text: str, chunks: list[Chunk], answer: str, services: Services
    ) -> Score:
        answer = answer if has_words(answer) else ""
        too_big = too_long(
            [
                ("the input", input_text),
                ("actual_output", answer),
                *((f"retrieval_context[{i}]", t) for i, t in chunks),
            ],
            self.config.max_embed_tokens,
        )
        if too_big is not None:
            details = RelevancyDetails(
                method="offline", max_embed_tokens=self.config.max_embed_tokens
            )
            raise ScoreFailed(too_big, details)
        texts = [t for _, t in chunks]
        route = relevance_route(is_english([input_text, "\n".join(texts)]), self.name)
        [found] = await score_relevance_routed(
            [RelevanceItem(input_text, texts, answer)], services.embedder, route
        )
        verdicts: list[StatementVerdict] = []
        scored: list[ChunkRelevance] = []
        expected = 0.0
        for c in found.chunks:
            p = round(c.probability, 4)  # the verdict is read from the probability shown
            relevant = p >= THRESHOLD
            index = chunks[c.chunk][0]
            expected += p * len(c.statements)
            scored.append(
                ChunkRelevance(
                    index=index,
                    relevant=relevant,
                    probability=p,
                    statements=len(c.statements),
                    relevant_statements=len(c.statements) if relevant else 0,
                )
            )
            why = _chunk_reason(p, c.similarity, c.answer_similarity)
            verdicts.extend(
                StatementVerdict(
                    chunk=index,
                    statement=statement,
                    verdict="yes" if relevant else "no",
                    reason=why,
                    relevance=p,
                )
                for statement in c.statements
            )
        details = RelevancyDetails(
            method="offline",
            chunks=scored,
            expected_relevant=round(expected, 4),
            relevance_model=found.model,
        ).model_copy(update=route.details)
        if self.config.prompt is not None:
            details.template = "unused: the offline estimate has no prompt"
            warnings.warn(
                f"{self.name}: its prompt ({self.config.prompt.source}) is unused offline (no "
                "judge: the estimate has no prompt); give the metric a judge to use it",
                UserWarning,
                stacklevel=2,
            )
        explanation = route.noted(_offline_explanation(found, scored, bool(answer)))
        return self._result(verdicts, explanation, details, expected)

    # --- judge ----------------------------------------------------------------------------

    def _messages(self, input_text: str, texts: Sequence[str]) -> list[Message]:
        return relevancy_messages(
            input_text,
            texts,
            include_reason=self.config.include_reason and not self._reason_call,
            prompt=self.config.prompt,
        )

    def batches(self, input_text: str, chunks: list[Chunk]) -> list[list[Chunk]]:
        """The chunks of each judge call: all in one unless over ``max_prompt_tokens``.

        Raises :class:`~contextlens.metrics.base.OverBudget` when no split fits: the input,
        or one chunk, is larger than the whole budget.
        """
        return [batch for batch, _ in self._calls(input_text, chunks)]

    def _calls(
        self, input_text: str, chunks: list[Chunk]
    ) -> list[tuple[list[Chunk], list[Message]]]:
        """Each judge call's chunks and messages (built once per call), every one within
        the budget; :class:`OverBudget` when that cannot be."""
        messages = self._messages(input_text, [t for _, t in chunks])
        if estimate_tokens(messages) <= self.config.max_prompt_tokens:
            return [(chunks, messages)]
        batches = self._split(input_text, chunks)
        return [call for batch in batches for call in self._fit(input_text, batch)]

    def _split(self, input_text: str, chunks: list[Chunk]) -> list[list[Chunk]]:
        """Consecutive chunks packed into calls by their estimated cost."""
        budget = self.config.max_prompt_tokens
        overhead = estimate_tokens(self._messages(input_text, []))
        if overhead > budget:
            where = "the prompt without its chunks would be"
            raise OverBudget(over_budget(overhead, budget, where))
        out: list[list[Chunk]] = []
        current: list[Chunk] = []
        size = overhead
        for chunk in chunks:
            cost = text_tokens(chunk_blocks(numbered([chunk[1]])) + "\n\n")
            if current and size + cost > budget:
                out.append(current)
                current, size = [], overhead
            if size + cost > budget:
                self._fit(input_text, [chunk])  # raises unless the estimate was off
            current.append(chunk)
            size += cost
        out.append(current)
        return out

    def _fit(self, input_text: str, batch: list[Chunk]) -> list[tuple[list[Chunk], list[Message]]]:
        """``batch``'s call, halved until each part's prompt is within the budget; a chunk
        over it on its own raises :class:`OverBudget` naming it."""
        return halve_to_fit(
            batch,
            lambda part: self._messages(input_text, [t for _, t in part]),
            self.config.max_prompt_tokens,
            lambda chunk: f"retrieval_context[{chunk[0]}]",
        )

    def _schema(self, batch: list[Chunk]) -> type[VerdictsReply]:
        with_reason = self.config.include_reason and not self._reason_call
        return reply_schema([text for _, text in batch], with_reason)

    async def _judged(self, input_text: str, chunks: list[Chunk], judge: Judge) -> Score:
        try:
            calls = self._calls(input_text, chunks)
        except OverBudget as exc:
            raise self._failed(
                str(exc), 0, max_prompt_tokens=self.config.max_prompt_tokens
            ) from None
        batches = [batch for batch, _ in calls]
        replies = await judge_calls(
            judge, [(messages, self._schema(batch)) for batch, messages in calls]
        )
        if isinstance(replies, CallFailed):
            raise self._failed(replies.error, len(batches), raw_reply=replies.raw_reply)
        verdicts: list[StatementVerdict] = []
        reasons: list[str] = []
        for batch, judgement in zip(batches, replies.judgements, strict=True):
            verdicts.extend(_verdicts(batch, judgement.output))
            reason = (getattr(judgement.output, "reason", None) or "").strip()
            if reason:
                reasons.append(reason)
        usage, attempts = replies.usage, replies.attempts
        n_calls = len(batches)
        if self._reason_call and self.config.prompt is not None:
            relevant = sum(v.verdict == "yes" for v in verdicts)
            messages = reason_messages(
                self.config.prompt,
                input_text,
                [v.reason for v in verdicts if v.verdict == "no"],
                [v.statement for v in verdicts if v.verdict == "yes"],
                self._score(relevant, len(verdicts)),
            )
            too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
            if too_big is not None:
                raise self._failed(
                    f"the reason call: {too_big}",
                    n_calls,
                    max_prompt_tokens=self.config.max_prompt_tokens,
                )
            n_calls += 1
            try:
                said = await judge.judge(messages, ReasonReply)
            except JudgeError as exc:
                raise self._failed(
                    f"the reason call: {exc}", n_calls, raw_reply=raw_reply(exc)
                ) from None
            usage, attempts = usage + said.usage, attempts + said.attempts
            reasons.append(said.output.reason.strip())
        details = RelevancyDetails(
            method="judge",
            judge_calls=n_calls,
            attempts=attempts,
            usage=token_usage(usage) if usage.total_tokens else None,
        )
        return self._result(verdicts, " ".join(reasons) or None, details)

    def _failed(self, error: str, calls: int, **extra: Any) -> ScoreFailed:
        details = RelevancyDetails(method="judge", judge_calls=calls, **extra)
        return ScoreFailed(error, details)


def _verdicts(batch: list[Chunk], reply: VerdictsReply) -> list[StatementVerdict]:
    """The reply's verdicts on the statements of ``batch``, numbered as the prompt numbered
    them; a "no" carries its reason, a "yes" none."""
    reasons = reply.reasons()
    found, number = [], 0
    for index, text in batch:
        for statement in statements_of(text):
            number += 1
            verdict = reply.verdict_of(number)
            why = reasons.get(number) if verdict == "no" else None
            found.append(
                StatementVerdict(
                    chunk=index,
                    statement=statement,
                    verdict=verdict,
                    reason=why or ("" if verdict == "yes" else "judged not relevant"),
                )
            )
    return found


def _chunks(case: ModelTestCase) -> list[Chunk]:
    """The non-blank chunks of ``case`` with their index; raises for unusable input."""
    if not (getattr(case, "input", None) or "").strip():
        raise InputError("the test case needs a non-empty input", field="input")
    context = getattr(case, "retrieval_context", None)
    if context is None:
        raise InputError(
            "ContextualRelevancyMetric needs the test case's retrieval_context "
            "(a list of retrieved chunks)",
            field="retrieval_context",
        )
    return [(i, text) for i, text in enumerate(context) if text and text.strip()]


def _judged_chunks(verdicts: Sequence[StatementVerdict]) -> list[ChunkRelevance]:
    """Each judged chunk: relevant when at least one of its statements is; no probability."""
    counts: dict[int, list[int]] = {}
    for v in verdicts:
        seen = counts.setdefault(v.chunk, [0, 0])
        seen[0] += 1
        seen[1] += v.verdict == "yes"
    return [
        ChunkRelevance(index=i, relevant=yes > 0, statements=n, relevant_statements=yes)
        for i, (n, yes) in counts.items()
    ]


def _chunk_reason(p: float, similarity: float, answer_similarity: float | None) -> str:
    text = f"the chunk bears on the input with p={p:.2f} (offline; cosine {similarity:.2f} to "
    text += "the input"
    if answer_similarity is not None:
        text += f", {answer_similarity:.2f} to the answer"
    return text + ")"


def _offline_explanation(
    found: RelevanceResult, chunks: Sequence[ChunkRelevance], answered: bool
) -> str:
    read = "the input and the answer" if answered else "the input"
    text = (
        "(Offline estimate: each chunk's calibrated probability of bearing on the input, from "
        f"its embedding similarity to {read} within its list; a chunk is relevant at 0.5 or "
        "more, and its statements with it.)"
    )
    k = min(range(len(chunks)), key=lambda i: chunks[i].probability or 0.0)
    weakest = chunks[k]
    if not weakest.relevant:
        text += (
            f" Least relevant: retrieval_context[{weakest.index}] (p={weakest.probability:.2f}), "
            f"{found.chunks[k].statements[0][:120]!r}."
        )
    return text
