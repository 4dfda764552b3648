"""``ContextualRelevancyMetric``: how much of the retrieved context bears on the input.

DeepEval's and agensight's call surface: a user changes only the import.

    metric = ContextualRelevancyMetric(threshold=0.7, model="gpt-4o-mini")
    metric.measure(ModelTestCase(input=..., actual_output=..., retrieval_context=[...]))
    metric.score, metric.reason, metric.success

``score = relevant statements / all statements`` over every chunk of ``retrieval_context``
(strict mode: 1.0 when every statement is relevant, else 0.0).

With a judge, ONE call per test case lists every chunk in its own numbered data block and
asks for the statements of each chunk with a ``"yes"``/``"no"`` verdict (an enum, so any
other verdict is rejected by validation and re-asked) and, with ``include_reason``, the
overall reason in the same reply. The score is computed here from the verdicts, never
asked from the judge, and the reason starts with the computed counts ("3 of 5 statements
are relevant."), so score and reason cannot disagree (DeepEval issue #3079). The chunks
are split over several calls only when the prompt would exceed ``max_prompt_tokens``.

Without a judge (``model=None``) the offline estimate of
:mod:`contextlens.offline.relevance` judges each sentence of each chunk, read in its chunk:
a chunk's probability of answering the input is shared out over its sentences, the
best-matching first, so the score is about the share of the context that answers.

Decisions: ``retrieval_context=None`` raises :class:`~contextlens.errors.InputError` (a
``ValueError``) naming the field, as DeepEval requires it too; an empty list or only blank
chunks is a computed 0.0 ("the retrieval context is empty"), not a failure. A blank
``input`` raises too. ``actual_output`` is not used and not required.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from functools import cache
from string import Template
from typing import Any, Literal, cast

from pydantic import BaseModel, Field, create_model, model_validator

from contextlens.embeddings.base import Embedder
from contextlens.errors import InputError, JudgeError, MetricComputationError
from contextlens.judges.base import Judgement, Message, Usage
from contextlens.judges.parsing import format_instructions
from contextlens.logs import enable_verbose
from contextlens.metrics.base import (
    Services,
    build_messages,
    data_block,
    load_prompt,
    make_services,
)
from contextlens.offline.relevance import RelevanceItem, StatementRelevance, score_relevance
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.sync import run_sync

log = logging.getLogger("contextlens.contextual_relevancy")

SYSTEM_PROMPT = "contextual_relevancy_system.md"
USER_PROMPT = "contextual_relevancy_user.md"
#: Default prompt budget of one judge call, in tokens estimated as characters / 4.
DEFAULT_MAX_PROMPT_TOKENS = 12_000

Chunk = tuple[int, str]  # (index in retrieval_context, text)
Verdict = dict[str, Any]
PromptBuilder = Callable[[str, str, str], list[Message]]


# --- the judge's reply schema --------------------------------------------------------------


@cache
def verdicts_schema(n_chunks: int, with_reason: bool) -> type[BaseModel]:
    """The reply schema for a prompt of ``n_chunks`` numbered chunks.

    Each statement names its chunk (1..n_chunks) and has a ``"yes"``/``"no"`` verdict;
    every chunk needs at least one statement. A reply that breaks any of this fails
    validation, and the judge is re-asked once with the error.
    """
    statement = create_model(
        "Statement",
        chunk=(int, Field(ge=1, le=n_chunks, description="chunk number")),
        statement=(str, Field(min_length=1)),
        reason=(str, Field(description="at most ten words")),
        verdict=(Literal["yes", "no"], ...),
    )
    fields: dict[str, Any] = {"statements": (list[statement], ...)}  # type: ignore[valid-type]
    if with_reason:
        fields["reason"] = (
            str,
            Field(description="one or two sentences on how relevant the context is overall"),
        )

    def every_chunk(self: Any) -> Any:
        missing = sorted(set(range(1, n_chunks + 1)) - {s.chunk for s in self.statements})
        if missing:
            raise ValueError(
                f"no statements for chunk(s) {', '.join(map(str, missing))}: "
                "every chunk needs at least one statement"
            )
        return self

    return create_model(
        "ContextualRelevancy",
        __validators__={"every_chunk": model_validator(mode="after")(every_chunk)},
        **fields,
    )


# --- prompts --------------------------------------------------------------------------------


def _chunk_blocks(chunks: Sequence[str]) -> str:
    return "\n\n".join(f"Chunk {k}:\n{data_block('chunk', c)}" for k, c in enumerate(chunks, 1))


def _mentions(text: str, name: str) -> bool:
    return re.search(rf"\$(?:{name}\b|\{{{name}\}})", text) is not None


def _template_builder(template: Any) -> PromptBuilder | None:
    """How ``evaluation_template`` turns (input, chunks, format) blocks into messages."""
    if template is None:
        return None
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
    if callable(template):

        def from_callable(input_block: str, chunks_block: str, fmt: str) -> list[Message]:
            text = str(template(input=input_block, chunks=chunks_block, format=fmt))
            if fmt not in text:
                text += "\n" + fmt
            return [{"role": "user", "content": text}]

        return from_callable
    raise TypeError(
        "evaluation_template must have a 'system' and/or 'user' string attribute, or be a "
        "callable (input=..., chunks=..., format=...) -> str; DeepEval template classes "
        f"are not supported (got {type(template).__name__})"
    )


def relevancy_messages(
    input_text: str,
    chunks: Sequence[str],
    services: Services,
    *,
    include_reason: bool = True,
    template: Any = None,
) -> list[Message]:
    """The judge prompt for ``chunks`` (numbered from 1); every text sits in a data block."""
    schema = verdicts_schema(len(chunks), include_reason)
    input_block, chunks_block = data_block("input", input_text), _chunk_blocks(chunks)
    builder = _template_builder(template)
    if builder is None:
        return build_messages(
            SYSTEM_PROMPT, USER_PROMPT, schema, services, input=input_block, chunks=chunks_block
        )
    fmt = format_instructions(schema, services.bos_json_clause, services.eos_json_clause)
    return builder(input_block, chunks_block, fmt)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Prompt tokens, estimated as characters / 4."""
    return math.ceil(sum(len(m["content"]) for m in messages) / 4)


def _counts(relevant: int, total: int) -> str:
    noun, verb = ("statement", "is") if total == 1 else ("statements", "are")
    return f"{relevant} of {total} {noun} {verb} relevant."


# --- the metric -----------------------------------------------------------------------------


class ContextualRelevancyMetric:
    """Share of the statements in ``retrieval_context`` that are relevant to ``input``.

    Args:
        threshold: the minimum passing score (1.0 in strict mode).
        model: None for the offline estimate; a LangChain chat model; a
            :class:`~contextlens.judges.Judge`; a spec string (``"openai:gpt-4o-mini"``,
            ``"http://localhost:11434/v1#llama3.1"``) or a bare OpenAI model name.
        include_reason: ask for and return a reason; False asks for none (shorter reply)
            and leaves ``reason`` None.
        async_mode: accepted for DeepEval compatibility; both modes run the same async core.
        strict_mode: score 1.0 when every statement is relevant, else 0.0; threshold 1.
        verbose_mode: log the verdicts (logger ``contextlens.contextual_relevancy``) and
            keep them in ``verbose_logs``.
        evaluation_template: replaces the prompt text. Either an object or class with a
            ``system`` and/or ``user`` string attribute (the one not given keeps the
            default), or a callable ``(input=..., chunks=..., format=...) -> str`` whose
            text is sent as the only (user) message. Strings are ``string.Template``
            texts with ``$input`` (the delimited input), ``$chunks`` (the numbered,
            delimited chunks) and ``$format`` (the JSON answer format); when no text
            uses ``$format`` it is appended to the user message. The reply must still
            follow the format. DeepEval's template classes are not accepted.
        max_prompt_tokens: the prompt budget of one judge call (characters / 4); longer
            contexts are split over several calls, one chunk at least per call.
        embedder: the embedder of the offline path (default: the bundled MiniLM).

    ``measure`` / ``a_measure`` set ``score``, ``reason``, ``success``, ``verdicts``,
    ``evaluation_cost``, ``error`` and ``verbose_logs`` from the last call. ``verdicts``
    (also ``MetricResult.details["verdicts"]``) are dicts ``{chunk, statement, verdict,
    reason}``, ``chunk`` being the 0-based index in ``retrieval_context`` (offline adds
    ``relevance``). The stateless
    ``compute(case, services)`` changes nothing on the object and may run concurrently.
    """

    name = "contextual_relevancy"
    case_type = ModelTestCase

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        evaluation_template: Any = None,
        *,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        embedder: Embedder | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        if max_prompt_tokens < 1:
            raise ValueError(f"max_prompt_tokens must be >= 1, got {max_prompt_tokens}")
        _template_builder(evaluation_template)  # fail early on an unusable template
        self.threshold = 1.0 if strict_mode else threshold
        self.include_reason = include_reason
        self.async_mode = async_mode
        self.strict_mode = strict_mode
        self.verbose_mode = verbose_mode
        self.evaluation_template = evaluation_template
        self.max_prompt_tokens = max_prompt_tokens
        self.services = make_services(model, embedder=embedder)
        self.evaluation_model = self.services.judge.name if self.services.judge else "offline"
        # The last result (set by measure / a_measure only).
        self.result: MetricResult | None = None
        self.score: float | None = None
        self.reason: str | None = None
        self.success: bool | None = None
        self.verdicts: list[Verdict] = []
        self.evaluation_cost: float | None = None
        self.error: str | None = None
        self.verbose_logs: str | None = None

    @property
    def __name__(self) -> str:  # type: ignore[override]
        return "Contextual Relevancy"

    def __repr__(self) -> str:
        return (
            f"ContextualRelevancyMetric(threshold={self.threshold}, "
            f"model={self.evaluation_model!r}, strict_mode={self.strict_mode})"
        )

    # --- DeepEval facade ------------------------------------------------------------------

    def measure(self, test_case: ModelTestCase, *args: Any, **kwargs: Any) -> float:
        """Score ``test_case``; works inside a running event loop too.

        Raises :class:`~contextlens.errors.MetricComputationError` when the judge gave no
        usable reply, and ``InputError`` for a missing ``retrieval_context``. DeepEval's
        extra arguments (``_show_indicator`` ...) are accepted and ignored.
        """
        return run_sync(self.a_measure(test_case))

    async def a_measure(self, test_case: ModelTestCase, *args: Any, **kwargs: Any) -> float:
        """Asynchronous :meth:`measure`."""
        if self.verbose_mode:
            enable_verbose()
        try:
            result = await self.compute(test_case, self.services)
        except InputError as exc:
            self._store(MetricResult(metric=self.name, score=None, error=str(exc)))
            raise
        self._store(result)
        if result.failed:
            raise MetricComputationError(f"{self.__name__}: {result.error}")
        assert result.score is not None
        return result.score

    def is_successful(self) -> bool:
        """Whether the last measured score passed the threshold."""
        return self.error is None and bool(self.success)

    def _store(self, result: MetricResult) -> None:
        self.result = result
        self.score = result.score
        self.reason = result.reason
        self.error = result.error
        self.success = False if result.failed else result.success
        self.verdicts = list(result.details.get("verdicts", []))
        self.evaluation_cost = result.cost
        self.verbose_logs = (
            f"Verdicts:\n{json.dumps(self.verdicts, indent=2, ensure_ascii=False)}\n\n"
            f"Score: {self.score}\nReason: {self.reason}"
            + (f"\nError: {self.error}" if self.error else "")
        )
        if self.verbose_mode:
            log.info("%s\n%s", self.__name__, self.verbose_logs)

    # --- stateless core -------------------------------------------------------------------

    async def compute(self, case: ModelTestCase, services: Services) -> MetricResult:
        """Score one test case; changes nothing on ``self``."""
        chunks = _chunks(case)
        if not chunks:
            return self._result(
                [], "The retrieval context is empty: there are no statements to judge.", {}
            )
        if services.judge is None:
            return await self._offline(case.input, chunks, services)
        return await self._judged(case.input, chunks, services)

    def _result(
        self, verdicts: list[Verdict], explanation: str | None, extra: dict[str, Any]
    ) -> MetricResult:
        relevant = sum(v["verdict"] == "yes" for v in verdicts)
        total = len(verdicts)
        score = relevant / total if total else 0.0
        if self.strict_mode:
            score = 1.0 if total and relevant == total else 0.0
        reason = None
        if self.include_reason:
            reason = explanation if not total else _counts(relevant, total)
            if total and explanation:
                reason += " " + explanation
        details = {"verdicts": verdicts, "relevant": relevant, "statements": total, **extra}
        return MetricResult(
            metric=self.name,
            score=score,
            reason=reason,
            success=score >= self.threshold,
            details=details,
        )

    # --- offline --------------------------------------------------------------------------

    async def _offline(
        self, input_text: str, chunks: list[Chunk], services: Services
    ) -> MetricResult:
        texts = [t for _, t in chunks]
        [found] = await score_relevance([RelevanceItem(input_text, texts)], services.embedder)
        verdicts = [
            {
                "chunk": chunks[s.chunk][0],
                "statement": s.statement,
                "verdict": s.verdict,
                "reason": f"chunk answers the input with p={found.chunk_relevance[s.chunk]:.2f}; "
                f"statement similarity {s.similarity:.2f} (offline)",
                "relevance": round(s.relevance, 4),
            }
            for s in found.statements
        ]
        log.info("%s (offline): %d of %d relevant", input_text[:60], found.relevant, found.total)
        return self._result(
            verdicts,
            _offline_explanation(found.statements),
            {
                "method": "offline",
                "chunk_relevance": [
                    {"chunk": chunks[i][0], "relevance": round(r, 4)}
                    for i, r in enumerate(found.chunk_relevance)
                ],
            },
        )

    # --- judge ----------------------------------------------------------------------------

    def _messages(self, input_text: str, texts: Sequence[str], services: Services) -> list[Message]:
        return relevancy_messages(
            input_text,
            texts,
            services,
            include_reason=self.include_reason,
            template=self.evaluation_template,
        )

    def batches(
        self, input_text: str, chunks: list[Chunk], services: Services
    ) -> list[list[Chunk]]:
        """The chunks of each judge call: all in one unless over ``max_prompt_tokens``."""
        return [batch for batch, _ in self._calls(input_text, chunks, services)]

    def _calls(
        self, input_text: str, chunks: list[Chunk], services: Services
    ) -> list[tuple[list[Chunk], list[Message]]]:
        """Each judge call's chunks and messages (built once per call)."""
        messages = self._messages(input_text, [t for _, t in chunks], services)
        if estimate_tokens(messages) <= self.max_prompt_tokens:
            return [(chunks, messages)]
        return [
            (batch, self._messages(input_text, [t for _, t in batch], services))
            for batch in self._split(input_text, chunks, services)
        ]

    def _split(self, input_text: str, chunks: list[Chunk], services: Services) -> list[list[Chunk]]:
        overhead = estimate_tokens(self._messages(input_text, [], services))
        out: list[list[Chunk]] = []
        current: list[Chunk] = []
        size = overhead
        for chunk in chunks:
            cost = math.ceil(len(_chunk_blocks([chunk[1]]) + "\n\n") / 4)
            if current and size + cost > self.max_prompt_tokens:
                out.append(current)
                current, size = [], overhead
            if size + cost > self.max_prompt_tokens:
                log.warning("chunk %d alone exceeds max_prompt_tokens; sent alone", chunk[0])
            current.append(chunk)
            size += cost
        out.append(current)
        return out

    async def _judge_batch(
        self, batch: list[Chunk], messages: list[Message], services: Services
    ) -> Judgement[Any]:
        assert services.judge is not None
        schema = verdicts_schema(len(batch), self.include_reason)
        return await services.judge.judge(messages, schema)

    async def _judged(
        self, input_text: str, chunks: list[Chunk], services: Services
    ) -> MetricResult:
        assert services.judge is not None
        calls = self._calls(input_text, chunks, services)
        batches = [batch for batch, _ in calls]
        outcomes = await asyncio.gather(
            *(self._judge_batch(batch, messages, services) for batch, messages in calls),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, JudgeError):
                raise outcome
        failures = [(i, o) for i, o in enumerate(outcomes, 1) if isinstance(o, JudgeError)]
        if failures:
            i, exc = failures[0]
            where = f"call {i} of {len(batches)}: " if len(batches) > 1 else ""
            log.warning("%s: judge failed: %s%s", input_text[:60], where, exc)
            return MetricResult(
                metric=self.name,
                score=None,
                error=f"{where}{exc}",
                details={"judge": services.judge.name, "judge_calls": len(batches)},
            )
        verdicts: list[Verdict] = []
        reasons: list[str] = []
        usage, attempts = Usage(), 0
        for batch, outcome in zip(batches, outcomes, strict=True):
            judgement = cast(Judgement[Any], outcome)
            out = judgement.output
            usage, attempts = usage + judgement.usage, attempts + judgement.attempts
            verdicts.extend(
                {
                    "chunk": batch[s.chunk - 1][0],
                    "statement": s.statement,
                    "verdict": s.verdict,
                    "reason": s.reason,
                }
                for s in sorted(out.statements, key=lambda s: s.chunk)
            )
            reason = (getattr(out, "reason", None) or "").strip()
            if reason:
                reasons.append(reason)
        extra: dict[str, Any] = {
            "method": "judge",
            "judge": services.judge.name,
            "judge_calls": len(batches),
            "attempts": attempts,
        }
        if usage.total_tokens:
            extra["usage"] = {
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
            }
        relevant = sum(v["verdict"] == "yes" for v in verdicts)
        log.info("%s: %d of %d relevant", input_text[:60], relevant, len(verdicts))
        return self._result(verdicts, " ".join(reasons) or None, extra)


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


def _offline_explanation(statements: Sequence[StatementRelevance]) -> str:
    text = (
        "(Offline estimate: each chunk's probability of answering the input, from embedding "
        "similarity and the input's terms, shared out over its statements.)"
    )
    weakest = min(statements, key=lambda s: s.relevance)
    if weakest.verdict == "no":
        text += (
            f" Least relevant: {weakest.statement[:120]!r} "
            f"(similarity {weakest.similarity:.2f} to the input)."
        )
    return text
