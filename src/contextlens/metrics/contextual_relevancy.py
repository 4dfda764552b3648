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

An ``evaluation_template`` replaces the prompt text: a DeepEval-shaped template (a class or
object with ``generate_verdicts(input, context)`` and optionally ``generate_reason(input,
irrelevant_statements, relevant_statements, score)``; DeepEval before 3.5 named the second
``irrelevancies``, and either name is given as the template's signature says), an object with
``system`` / ``user`` strings, or a callable. The reply format is always appended, so the
reply can still be validated.

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

import inspect
import re
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from string import Template
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, create_model

from contextlens.backend import Message
from contextlens.errors import InputError, JudgeError
from contextlens.judges.base import DEFAULT_FENCE, Reply
from contextlens.judges.parsing import format_instructions
from contextlens.judges.schema import Verdict, text_field
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    DataBlocks,
    OverBudget,
    ReaderDetails,
    Services,
    build_messages,
    data_block,
    estimate_tokens,
    load_prompt,
    over_budget,
    prompt_over_budget,
    raw_reply,
    size_limit,
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
from contextlens.metrics.registry import metric
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
from contextlens.schemas import MetricResult, ModelTestCase

log = logger("contextlens.contextual_relevancy")

__all__ = [
    "DEFAULT_MAX_PROMPT_TOKENS",
    "ChunkRelevance",
    "ContextualRelevancyScorer",
    "ContextualRelevancyTemplate",
    "RelevancyDetails",
    "StatementVerdict",
    "estimate_tokens",
    "relevancy_messages",
    "reply_schema",
    "verdicts_schema",
]

SYSTEM_PROMPT = "contextual_relevancy_system.md"
USER_PROMPT = "contextual_relevancy_user.md"
#: Put before the reply format after a user's template, which may describe another one.
FORMAT_OVERRIDE = "Whatever reply format was described above, reply in this one instead."

Chunk = tuple[int, str]  # (index in retrieval_context, text)
PromptBuilder = Callable[[str, str, str], list[Message]]


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


# --- the judge's reply schemas -------------------------------------------------------------


class VerdictsReply(Reply):
    """Base of :func:`verdicts_schema`'s replies: one verdict per numbered statement."""

    n_statements: ClassVar[int] = 1

    @classmethod
    def reply_tokens(cls, messages: Sequence[Message]) -> int:
        """Room for a verdict per statement, a reason per "no" and the overall reason."""
        return 160 + 28 * cls.n_statements

    def verdict_of(self, number: int) -> Literal["yes", "no"]:
        return self.verdicts[number - 1]  # type: ignore[attr-defined,no-any-return]

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
            list[number],  # type: ignore[valid-type]
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
            list[irrelevant],  # type: ignore[valid-type]
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


class ContextualRelevancyTemplate:
    """DeepEval's template shape, with contextlens's prompts: subclass it and override
    ``generate_verdicts`` and/or ``generate_reason`` (static methods returning the prompt
    text), then pass the class as ``evaluation_template``.

    ``generate_verdicts`` gets the delimited input and every chunk, numbered, at once (one
    judge call per test case); the reply format is appended to what it returns.
    ``generate_reason``, when overridden, is asked in a second call with the statements
    found irrelevant (their reasons), the relevant ones and the computed score.
    """

    @staticmethod
    def generate_verdicts(input: str, context: str) -> str:
        system = load_prompt(SYSTEM_PROMPT).safe_substitute(format="")
        user = load_prompt(USER_PROMPT).safe_substitute(input=input, chunks=context)
        return f"{system.strip()}\n\n{user}"

    @staticmethod
    def generate_reason(
        input: str, irrelevant_statements: list[str], relevant_statements: list[str], score: float
    ) -> str:
        return (
            f"In one or two sentences, say why the retrieved context scores {score} for "
            f"relevance to the input.\n{input}\nIrrelevant, with why: {irrelevant_statements}\n"
            f"Relevant statements: {relevant_statements}"
        )


#: What DeepEval's templates call the reasons of the statements found irrelevant in
#: ``generate_reason``: agensight's and DeepEval's since 3.5, then DeepEval's before.
IRRELEVANT_NAMES = ("irrelevant_statements", "irrelevancies")


def _parameters(fn: Callable[..., Any]) -> tuple[set[str], bool]:
    """The keywords ``fn`` takes by name, and whether it takes ``**kwargs``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return set(), True
    named = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return named, any(p.kind is p.VAR_KEYWORD for p in params)


def _verdicts_text(generate: Callable[..., Any], input_block: str, chunks_block: str) -> str:
    """A template's ``generate_verdicts`` prompt; ``multimodal=False`` when it takes that
    keyword (the judge is sent text only)."""
    named, _ = _parameters(generate)
    extra = {"multimodal": False} if "multimodal" in named else {}
    return str(generate(input=input_block, context=chunks_block, **extra))


def _reason_text(
    generate: Callable[..., Any],
    input_block: str,
    irrelevant: list[str],
    relevant: list[str],
    score: float,
) -> str:
    """A template's ``generate_reason`` prompt, the irrelevant statements under the name its
    signature gives them (:data:`IRRELEVANT_NAMES`; by position in DeepEval's order when it
    names neither)."""
    named, spread = _parameters(generate)
    name = next((n for n in IRRELEVANT_NAMES if n in named), None)
    if name is None and not spread:
        return str(generate(input_block, irrelevant, relevant, score))
    extra = {"multimodal": False} if "multimodal" in named else {}
    values = {name or IRRELEVANT_NAMES[0]: irrelevant, "relevant_statements": relevant}
    return str(generate(input=input_block, score=score, **values, **extra))


def _numbered(chunks: Sequence[str]) -> list[str]:
    """Each chunk's statements, one a line, numbered across the call: ``[1] ...``."""
    texts, number = [], 0
    for chunk in chunks:
        lines = []
        for statement in statements_of(chunk):
            number += 1
            lines.append(f"[{number}] {statement}")
        texts.append("\n".join(lines))
    return texts


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"\$(?:{name}\b|\{{{name}\}})", text) is not None


def _overrides(template: Any, method: str) -> bool:
    """Whether a DeepEval-shaped template brings its own ``method``."""
    own = getattr(template, method, None)
    return callable(own) and own is not getattr(ContextualRelevancyTemplate, method)


def _template_builder(template: Any) -> PromptBuilder | None:
    """How ``evaluation_template`` turns (input, chunks, format) blocks into messages."""
    if template is None:
        return None
    if hasattr(template, "generate_verdicts"):
        if not _overrides(template, "generate_verdicts"):
            return None  # ours, unchanged: the default prompts
        generate = template.generate_verdicts

        def from_deepeval(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            text = _verdicts_text(generate, input_block, chunks_block)
            return [{"role": "user", "content": f"{text}\n\n{FORMAT_OVERRIDE}\n{fmt}"}]

        return from_deepeval
    system = getattr(template, "system", None)
    user = getattr(template, "user", None)
    if isinstance(system, str) or isinstance(user, str):
        system_text = system if isinstance(system, str) else load_prompt(SYSTEM_PROMPT).template
        user_text = user if isinstance(user, str) else load_prompt(USER_PROMPT).template
        has_format = _mentions(system_text, "format") or _mentions(user_text, "format")

        def from_texts(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            values = {"input": input_block, "chunks": chunks_block, "format": fmt}
            user_msg = Template(user_text).safe_substitute(values)
            if not has_format:
                user_msg += "\n" + fmt
            return [
                {"role": "system", "content": Template(system_text).safe_substitute(values)},
                {"role": "user", "content": user_msg},
            ]

        return from_texts
    if callable(template) and not isinstance(template, type):

        def from_callable(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            text = str(template(input=input_block, chunks=chunks_block, format=fmt))
            if fmt not in text:
                text += "\n" + fmt
            return [{"role": "user", "content": text}]

        return from_callable
    raise TypeError(
        "evaluation_template must be a DeepEval-style template (generate_verdicts), have a "
        "'system' and/or 'user' string attribute, or be a callable "
        f"(input=..., chunks=..., format=...) -> str; got {template!r}"
    )


def relevancy_messages(
    input_text: str,
    chunks: Sequence[str],
    *,
    include_reason: bool = True,
    template: Any = None,
) -> list[Message]:
    """The judge prompt for ``chunks`` (numbered from 1); every text sits in a data block."""
    schema = reply_schema(chunks, include_reason)
    numbered = _numbered(chunks)
    block = DataBlocks(input_text, *numbered)
    input_block, chunks_block = block("input", input_text), chunk_blocks(numbered, block)
    builder = _template_builder(template)
    if builder is None:
        return build_messages(
            SYSTEM_PROMPT, USER_PROMPT, schema, input=input_block, chunks=chunks_block
        )
    fmt = format_instructions(schema, DEFAULT_FENCE.bos, DEFAULT_FENCE.eos)
    return builder(input_block, chunks_block, fmt)


def reason_messages(
    template: Any, input_text: str, verdicts: Sequence[StatementVerdict], score: float
) -> list[Message]:
    """The prompt of a template's own ``generate_reason``, with the reply format appended."""
    text = _reason_text(
        template.generate_reason,
        data_block("input", input_text),
        [v.reason for v in verdicts if v.verdict == "no"],
        [v.statement for v in verdicts if v.verdict == "yes"],
        round(score, 2),
    )
    fmt = format_instructions(ReasonReply, DEFAULT_FENCE.bos, DEFAULT_FENCE.eos)
    return [{"role": "user", "content": f"{text}\n\n{FORMAT_OVERRIDE}\n{fmt}"}]


def _counts(relevant: int, total: int) -> str:
    noun, verb = ("statement", "is") if total == 1 else ("statements", "are")
    return f"{relevant} of {total} {noun} {verb} relevant."


# --- the metric -----------------------------------------------------------------------------


@metric(
    "contextual-relevancy",
    aliases=("ContextualRelevancyMetric", "Contextual Relevancy"),
    reads=("input", "retrieval_context"),
    requires=("input", "retrieval_context"),
)
class ContextualRelevancyScorer:
    """Share of the statements in the retrieved context that are relevant to the input.

    Args:
        threshold: the minimum passing score (1.0 in strict mode).
        include_reason: ask for and return a reason; False asks for none (shorter reply)
            and leaves ``reason`` None.
        strict_mode: score 1.0 when every statement is relevant, else 0.0; threshold 1.
        evaluation_template: replaces the prompt text (see the module docstring). Texts
            given as ``system`` / ``user`` strings are ``string.Template`` texts with
            ``$input`` (the delimited input), ``$chunks`` (the numbered, delimited chunks)
            and ``$format`` (the reply format; appended when no text uses it).
        max_prompt_tokens: the prompt budget of one judge call (characters / 4); longer
            contexts are split over several calls, one chunk at least per call. A chunk
            too large for a call of its own fails the case with its size, unsent.
        max_embed_tokens: offline, the longest text embedded (characters / 4); a case with
            a longer input or chunk fails with its size.
        judge: this metric's own judge (None: the run's).
        embedder: this metric's own embedder for the offline path (None: the run's).
        label: tells this instance apart from others of the same metric in a run (its
            results go by ``NAME:LABEL``); None: the metric's name alone.

    ``details`` are :class:`RelevancyDetails`: each statement's :class:`StatementVerdict` and
    each chunk's :class:`ChunkRelevance` (offline, its calibrated probability).
    """

    case_type = ModelTestCase
    details_type = RelevancyDetails

    def __init__(
        self,
        threshold: float = 0.5,
        *,
        include_reason: bool = True,
        strict_mode: bool = False,
        evaluation_template: Any = None,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        judge: Any = None,
        embedder: Any = None,
        label: str | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        _template_builder(evaluation_template)  # fail early on an unusable template
        self.threshold = 1.0 if strict_mode else threshold
        self.include_reason = include_reason
        self.strict_mode = strict_mode
        self.evaluation_template = evaluation_template
        self.max_prompt_tokens = size_limit("max_prompt_tokens", max_prompt_tokens)
        self.max_embed_tokens = size_limit("max_embed_tokens", max_embed_tokens)
        self.judge = judge
        self.embedder = embedder
        self.label = label

    def __repr__(self) -> str:
        return (
            f"ContextualRelevancyScorer(threshold={self.threshold}, "
            f"strict_mode={self.strict_mode}, label={self.label!r})"
        )

    @property
    def _reason_call(self) -> bool:
        """Whether the reason is asked in a call of its own (the template's prompt)."""
        return self.include_reason and _overrides(self.evaluation_template, "generate_reason")

    async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
        """Score one test case; changes nothing on ``self``."""
        chunks = _chunks(case)
        if not chunks:
            return self._result(
                [],
                "The retrieval context is empty: there are no statements to judge.",
                RelevancyDetails(),
            )
        if services.judge is None:
            answer = getattr(case, "actual_output", None) or ""
            return await self._offline(case.input, chunks, answer, services)
        return await self._judged(case.input, chunks, services)

    def _result(
        self,
        verdicts: list[StatementVerdict],
        explanation: str | None,
        details: RelevancyDetails,
        expected: float | None = None,
    ) -> MetricResult:
        """The result from the verdicts; ``expected`` (offline): the expected number of
        relevant statements, from the chunk probabilities, which the score carries."""
        relevant = sum(v.verdict == "yes" for v in verdicts)
        total = len(verdicts)
        score = self._score(relevant, total)
        if expected is not None and total and not self.strict_mode:
            score = min(1.0, max(0.0, expected / total))
        reason = None
        if self.include_reason and not total:
            reason = explanation
        elif self.include_reason:
            reason = _counts(relevant, total)
            if expected is not None:
                reason += f" Expected share of relevant statements: {score:.2f}."
            if explanation:
                reason += " " + explanation
        update: dict[str, Any] = {"verdicts": verdicts, "relevant": relevant, "statements": total}
        if not details.chunks:
            update["chunks"] = _judged_chunks(verdicts)
        return MetricResult(
            metric=self.name,
            score=score,
            reason=reason,
            success=score >= self.threshold,
            details=details.model_copy(update=update),
        )

    def _score(self, relevant: int, total: int) -> float:
        if self.strict_mode:
            return 1.0 if total and relevant == total else 0.0
        return relevant / total if total else 0.0

    # --- offline --------------------------------------------------------------------------

    async def _offline(
        self, input_text: str, chunks: list[Chunk], answer: str, services: Services
    ) -> MetricResult:
        answer = answer if has_words(answer) else ""
        too_big = too_long(
            [
                ("the input", input_text),
                ("actual_output", answer),
                *((f"retrieval_context[{i}]", t) for i, t in chunks),
            ],
            self.max_embed_tokens,
        )
        if too_big is not None:
            return MetricResult(
                metric=self.name,
                score=None,
                error=too_big,
                details=RelevancyDetails(
                    method="offline", judge="offline", max_embed_tokens=self.max_embed_tokens
                ),
            )
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
            judge="offline",
            chunks=scored,
            expected_relevant=round(expected, 4),
            relevance_model=found.model,
        ).model_copy(update=route.details)
        if self.evaluation_template is not None:
            details.template = "unused: the offline estimate has no prompt"
            warnings.warn(
                f"{self.name}: evaluation_template is unused offline (no judge: the estimate "
                "has no prompt); give the metric a judge to use it",
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
            include_reason=self.include_reason and not self._reason_call,
            template=self.evaluation_template,
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
        if estimate_tokens(messages) <= self.max_prompt_tokens:
            return [(chunks, messages)]
        batches = self._split(input_text, chunks)
        return [call for batch in batches for call in self._fit(input_text, batch)]

    def _split(self, input_text: str, chunks: list[Chunk]) -> list[list[Chunk]]:
        """Consecutive chunks packed into calls by their estimated cost."""
        budget = self.max_prompt_tokens
        overhead = estimate_tokens(self._messages(input_text, []))
        if overhead > budget:
            where = "the prompt without its chunks would be"
            raise OverBudget(over_budget(overhead, budget, where))
        out: list[list[Chunk]] = []
        current: list[Chunk] = []
        size = overhead
        for chunk in chunks:
            cost = text_tokens(chunk_blocks(_numbered([chunk[1]])) + "\n\n")
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
            self.max_prompt_tokens,
            lambda chunk: f"retrieval_context[{chunk[0]}]",
        )

    def _schema(self, batch: list[Chunk]) -> type[VerdictsReply]:
        with_reason = self.include_reason and not self._reason_call
        return reply_schema([text for _, text in batch], with_reason)

    async def _judged(
        self, input_text: str, chunks: list[Chunk], services: Services
    ) -> MetricResult:
        assert services.judge is not None
        judge_name = services.judge.name
        try:
            calls = self._calls(input_text, chunks)
        except OverBudget as exc:
            return self._failed(str(exc), judge_name, 0, max_prompt_tokens=self.max_prompt_tokens)
        batches = [batch for batch, _ in calls]
        replies = await judge_calls(
            services.judge, [(messages, self._schema(batch)) for batch, messages in calls]
        )
        if isinstance(replies, CallFailed):
            return self._failed(
                replies.error, judge_name, len(batches), raw_reply=replies.raw_reply
            )
        verdicts: list[StatementVerdict] = []
        reasons: list[str] = []
        for batch, judgement in zip(batches, replies.judgements, strict=True):
            verdicts.extend(_verdicts(batch, judgement.output))
            reason = (getattr(judgement.output, "reason", None) or "").strip()
            if reason:
                reasons.append(reason)
        usage, attempts = replies.usage, replies.attempts
        n_calls = len(batches)
        if self._reason_call:
            relevant = sum(v.verdict == "yes" for v in verdicts)
            messages = reason_messages(
                self.evaluation_template,
                input_text,
                verdicts,
                self._score(relevant, len(verdicts)),
            )
            too_big = prompt_over_budget(messages, self.max_prompt_tokens)
            if too_big is not None:
                return self._failed(
                    f"the reason call: {too_big}",
                    judge_name,
                    n_calls,
                    max_prompt_tokens=self.max_prompt_tokens,
                )
            n_calls += 1
            try:
                said = await services.judge.judge(messages, ReasonReply)
            except JudgeError as exc:
                return self._failed(
                    f"the reason call: {exc}", judge_name, n_calls, raw_reply=raw_reply(exc)
                )
            usage, attempts = usage + said.usage, attempts + said.attempts
            reasons.append(said.output.reason.strip())
        details = RelevancyDetails(
            method="judge",
            judge=judge_name,
            judge_calls=n_calls,
            attempts=attempts,
            usage=token_usage(usage) if usage.total_tokens else None,
        )
        return self._result(verdicts, " ".join(reasons) or None, details)

    def _failed(self, error: str, judge: str, calls: int, **extra: Any) -> MetricResult:
        log.debug("%s: judge failed: %s", self.name, error)
        return MetricResult(
            metric=self.name,
            score=None,
            error=error,
            details=RelevancyDetails(method="judge", judge=judge, judge_calls=calls, **extra),
        )


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
