"""DeepEval's (and agensight's) ``ContextualRelevancyMetric``: a thin shell over
:class:`~contextlens.metrics.contextual_relevancy.ContextualRelevancyScorer`, run through
:func:`~contextlens.runner.aevaluate`. ``measure`` sets the last result on the object, as
DeepEval does; nothing else about the object changes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from contextlens.compat.deepeval_template import relevancy_prompt
from contextlens.compat.shell import Scored, judge_label, say, score_one
from contextlens.errors import InputError, MetricComputationError
from contextlens.judges.errors import user_errors
from contextlens.judges.resolve import as_backend
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    DEFAULT_PASS,
)
from contextlens.metrics.contextual_relevancy import (
    ContextualRelevancyScorer,
    RelevancyDetails,
    StatementVerdict,
)
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.sync import run_sync

__all__ = [
    "EMPTY_CONTEXT",
    "ContextualRelevancyMetric",
    "ContextualRelevancyVerdict",
    "ContextualRelevancyVerdicts",
    "checked_threshold",
    "passes",
]

Verdict = dict[str, Any]
#: DeepEval scores a test case whose retrieval context is empty 0; so does its surface here.
EMPTY_CONTEXT = "The retrieval context is empty: there are no statements to judge."


class ContextualRelevancyVerdict(BaseModel):
    """One statement of a chunk with its verdict (DeepEval's shape)."""

    statement: str
    verdict: str
    reason: str | None = None


class ContextualRelevancyVerdicts(BaseModel):
    """The verdicts of one chunk of ``retrieval_context`` (DeepEval's ``verdicts_list``
    holds one per chunk, in order)."""

    verdicts: list[ContextualRelevancyVerdict]


def _verdicts_list(
    verdicts: list[StatementVerdict], n_chunks: int
) -> list[ContextualRelevancyVerdicts]:
    by_chunk: list[list[ContextualRelevancyVerdict]] = [[] for _ in range(n_chunks)]
    for v in verdicts:
        if 0 <= v.chunk < n_chunks:
            by_chunk[v.chunk].append(
                ContextualRelevancyVerdict(
                    statement=v.statement, verdict=v.verdict, reason=v.reason
                )
            )
    return [ContextualRelevancyVerdicts(verdicts=listed) for listed in by_chunk]


def checked_threshold(value: Any) -> float | None:
    """``value`` as a pass mark: a number in [0, 1], or None (score-only)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"threshold must be a number in [0, 1] or None, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"threshold must be in [0, 1] or None, got {value}")
    return float(value)


def passes(score: float | None, threshold: float | None, error: str | None) -> bool | None:
    """DeepEval's verdict: None without a threshold, False after an error or without a
    score, else ``score >= threshold``."""
    if threshold is None:
        return None
    if error is not None or score is None:
        return False
    return score >= threshold


class ContextualRelevancyMetric:
    """Share of the statements in ``retrieval_context`` that are relevant to ``input``.

    Args:
        threshold: the minimum passing score (1.0 in strict mode); None for DeepEval's
            score-only mode, where ``success`` is None. It may be set after construction.
        model: None for the offline estimate (or the run's judge in
            :func:`contextlens.evaluate`); a custom ``DeepEvalBaseLLM``-shaped model
            (``get_model_name``, ``generate`` / ``a_generate``); a LangChain chat model; a
            :class:`~contextlens.judges.Judge`; a spec string (``"openai:gpt-4o-mini"``,
            ``"http://localhost:11434/v1#llama3.1"``) or a bare OpenAI model name.
        include_reason: ask for and return a reason.
        async_mode: accepted for DeepEval compatibility; both modes run the same async core.
        strict_mode: score 1.0 when every statement is relevant, else 0.0; threshold 1.
        verbose_mode: write the verdicts, score and reason of each ``measure`` to stderr
            (that call only), and keep them in ``verbose_logs``.
        evaluation_template: a DeepEval-style template class or object
            (``generate_verdicts``, ``generate_reason``), an object with ``system`` /
            ``user`` strings, or a callable; see
            :mod:`contextlens.metrics.contextual_relevancy`.
        name: agensight's: the metric's name; other than None it is the label it goes by
            in :func:`contextlens.evaluate` (``contextual-relevancy:NAME``).
        retrieval_context: agensight's: the chunks to judge in place of each test case's
            own ``retrieval_context``.
        flaky: DeepEval's flaky metric: scored and reported as any other, but its verdict
            never decides a test case's (:func:`evaluate`, :func:`assert_test`).
        max_prompt_tokens: the prompt budget of one judge call (characters / 4); a chunk
            too large for a call of its own fails the case with its size, unsent.
        max_embed_tokens: offline, the longest text embedded (characters / 4); a longer
            input or chunk fails the case with its size.
        embedder: the embedder of the offline path (default: the bundled MiniLM).

    ``measure`` / ``a_measure`` set ``score``, ``reason``, ``success``, ``verdicts``,
    ``verdicts_list``, ``evaluation_cost``, ``error`` and ``verbose_logs`` from the last
    call. ``verdicts`` are dicts ``{chunk, statement, verdict, reason}``, ``chunk`` being the
    0-based index in ``retrieval_context``; ``verdicts_list`` is DeepEval's: one
    :class:`ContextualRelevancyVerdicts` per chunk, in order.
    """

    def __init__(
        self,
        threshold: float | None = 0.5,
        model: Any = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        evaluation_template: Any = None,
        name: str | None = None,
        retrieval_context: Sequence[str] | str | None = None,
        *,
        flaky: bool = False,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        embedder: Any = None,
    ) -> None:
        judge = as_backend(model)
        self._template = evaluation_template
        self._core_options: dict[str, Any] = {
            "include_reason": include_reason,
            "strict_mode": strict_mode,
            "prompt": relevancy_prompt(evaluation_template),
            "max_prompt_tokens": max_prompt_tokens,
            "max_embed_tokens": max_embed_tokens,
            "judge": judge,
            "embedder": embedder,
            "label": name,
        }
        self._threshold = 1.0 if strict_mode else checked_threshold(threshold)
        self.metric = self._core()
        self.flaky = flaky
        self._name = name
        self.retrieval_context = (
            [retrieval_context] if isinstance(retrieval_context, str) else retrieval_context
        )
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        self.evaluation_model = judge_label(judge)
        # The last result (set by measure / a_measure only).
        self.result: MetricResult | None = None
        self.score: float | None = None
        self.reason: str | None = None
        self.success: bool | None = None
        self.verdicts: list[Verdict] = []
        self.verdicts_list: list[ContextualRelevancyVerdicts] = []
        self.evaluation_cost: float | None = None
        self.error: str | None = None
        self.verbose_logs: str | None = None

    def _core(self) -> ContextualRelevancyScorer:
        """The metric this shell runs, at its threshold (0.5 in score-only mode, the pass
        mark :func:`contextlens.evaluate` then holds it to)."""
        mark = DEFAULT_PASS if self._threshold is None else self._threshold
        return ContextualRelevancyScorer(threshold=mark, **self._core_options)

    @property
    def threshold(self) -> float | None:
        """The minimum passing score; None for DeepEval's score-only mode (``success`` is
        then None). Set it at any time: :meth:`is_successful` and the next ``measure``
        judge by the new value, and so does a run given this metric."""
        return self._threshold

    @threshold.setter
    def threshold(self, value: float | None) -> None:
        self._threshold = checked_threshold(value)
        self.metric = self._core()

    # Configuration reads through to the metric it wraps.
    name = property(lambda self: self._name or self.metric.name)
    include_reason = property(lambda self: self.metric.config.include_reason)
    strict_mode = property(lambda self: self.metric.config.strict_mode)
    evaluation_template = property(lambda self: self._template)
    max_prompt_tokens = property(lambda self: self.metric.config.max_prompt_tokens)
    max_embed_tokens = property(lambda self: self.metric.config.max_embed_tokens)
    case_type = ModelTestCase

    @property
    def __name__(self) -> str:
        return "Contextual Relevancy"

    def __repr__(self) -> str:
        return (
            f"ContextualRelevancyMetric(threshold={self.threshold}, "
            f"model={self.evaluation_model!r}, strict_mode={self.strict_mode})"
        )

    def measure(self, test_case: ModelTestCase, *args: Any, **kwargs: Any) -> float:
        """Score ``test_case``; works inside a running event loop too.

        Raises :class:`~contextlens.errors.MetricComputationError` when the judge gave no
        usable reply, and ``InputError`` for a missing ``retrieval_context``. DeepEval's
        extra arguments (``_show_indicator`` ...) are accepted and ignored.
        """
        return run_sync(self.a_measure(test_case))

    async def a_measure(self, test_case: ModelTestCase, *args: Any, **kwargs: Any) -> float:
        """Asynchronous :meth:`measure`."""
        if self.retrieval_context is not None:
            test_case = test_case.model_copy(
                update={"retrieval_context": list(self.retrieval_context)}
            )
        try:
            with user_errors() as raised:
                scored = await score_one(self.metric, test_case)
        except InputError as exc:  # refused before scoring; DeepEval sets error, then raises
            self.score, self.success, self.error = None, False, str(exc)
            raise
        if scored.item.not_applicable is not None:  # no chunks: DeepEval's score is 0
            empty = scored.item.model_copy(
                update={"score": 0.0, "success": False, "reason": EMPTY_CONTEXT}
            )
            scored = Scored(empty, scored.accounting)
        self._store(scored, len(test_case.retrieval_context or []))
        item = scored.item
        if self.verbose_mode:
            say(f"{self.__name__} ({self.evaluation_model})\n{self.verbose_logs}")
        if item.failed:
            if isinstance(item.exception, InputError):
                raise item.exception
            cause = raised[-1] if raised else None  # the user's own model's, kept as the cause
            raise MetricComputationError(f"{self.__name__}: {item.error}") from cause
        assert item.score is not None
        return item.score

    def is_successful(self) -> bool | None:
        """Whether the last measured score passes the threshold as it is now (DeepEval's
        rule): None in score-only mode (``threshold=None``), False after an error or before
        any score; sets ``success`` to the answer."""
        self.success = passes(self.score, self._threshold, self.error)
        return self.success

    def _store(self, scored: Scored, n_chunks: int) -> None:
        item = scored.item
        self.score = item.score
        self.reason = item.reason
        self.error = item.error
        self.success = passes(item.score, self._threshold, item.error)
        self.result = MetricResult(
            metric=item.metric,
            score=item.score,
            reason=item.reason,
            error=item.error,
            success=self.success,
            details=item.details,
            cost=scored.cost,
        )
        details = item.details
        listed = details.verdicts if isinstance(details, RelevancyDetails) else []
        self.verdicts = [v.model_dump(exclude_none=True) for v in listed]
        self.verdicts_list = _verdicts_list(listed, n_chunks) if not item.failed else []
        self.evaluation_cost = scored.cost
        self.verbose_logs = (
            f"Verdicts:\n{json.dumps(self.verdicts, indent=2, ensure_ascii=False)}\n\n"
            f"Score: {self.score}\nReason: {self.reason}"
            + (f"\nError: {self.error}" if self.error else "")
        )
