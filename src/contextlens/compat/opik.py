"""Opik's ``ContextPrecision``.

    metric = ContextPrecision()  # model=None: offline
    result = metric.score(input=..., output=..., expected_output=..., context=[...])
    result.value, result.reason  # a ScoreResult

A thin shell over :class:`~contextlens.metrics.context_precision.ContextPrecisionScorer`,
run through :func:`~contextlens.runner.aevaluate`. Failures follow Opik: ``score`` /
``ascore`` raise :class:`~contextlens.errors.MetricComputationError` ("Failed to calculate
context precision score: ..." with the reason), except that an exception the user's own
model raised, and that no retry could mend, reaches the caller as it is;
:func:`to_score_result` turns a failed result into ``ScoreResult(scoring_failed=True)``.
``few_shot_examples`` are Opik's list of dicts, given and read back
(:data:`FEW_SHOT_EXAMPLES` are the defaults). :class:`OpikBaseModel` is the base class of a
custom judge model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from contextlens.compat.models import OpikBaseModel
from contextlens.compat.shell import judge_label, score_one
from contextlens.errors import InputError, MetricComputationError
from contextlens.judges.errors import user_errors
from contextlens.judges.resolve import as_backend
from contextlens.metrics.base import DEFAULT_MAX_EMBED_TOKENS, DEFAULT_MAX_PROMPT_TOKENS
from contextlens.metrics.context_precision import (
    DEFAULT_FEW_SHOT_EXAMPLES,
    ContextPrecisionScorer,
    FewShotExampleContextPrecision,
)
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.store import record_score
from contextlens.sync import run_sync

__all__ = [
    "FEW_SHOT_EXAMPLES",
    "ContextPrecision",
    "OpikBaseModel",
    "ScoreResult",
    "to_score_result",
]

#: Opik's name of the metric: the ``name`` of its score results. In a run the metric goes by
#: its registered name, ``context-precision`` (another ``name`` is the instance's label).
DEFAULT_NAME = "context_precision_metric"

#: Opik's message when a context precision score could not be had.
SCORE_CALC_FAILED = "Failed to calculate context precision score"


def _as_dicts(examples: Sequence[FewShotExampleContextPrecision]) -> list[dict[str, Any]]:
    return [example.model_dump() for example in examples]


#: The default few-shot examples, as Opik's list of dicts (``title``, ``input``,
#: ``expected_output``, ``context``, ``output``, ``context_precision_score``, ``reason``).
FEW_SHOT_EXAMPLES: list[dict[str, Any]] = _as_dicts(DEFAULT_FEW_SHOT_EXAMPLES)


@dataclass
class ScoreResult:
    """A metric's score for one item (Opik's shape).

    ``scoring_failed`` is True when no score could be computed; ``value`` is then NaN and
    ``metadata["error"]`` says why. Aggregations must count such results as failures.
    """

    name: str
    value: float
    reason: str | None = None
    metadata: dict[str, Any] | None = None
    scoring_failed: bool = False


def to_score_result(result: MetricResult, name: str) -> ScoreResult:
    """Opik's :class:`ScoreResult` for a :class:`MetricResult`.

    A failed result gives ``value=NaN`` together with ``scoring_failed=True`` and the reason
    in ``metadata["error"]``: NaN never appears without the flag, so it is never averaged
    in silently.
    """
    metadata = result.details.model_dump(mode="json")
    if result.failed or result.score is None:
        metadata["error"] = result.error or "no score"
        return ScoreResult(
            name=name,
            value=float("nan"),
            reason=result.reason or result.error,
            metadata=metadata,
            scoring_failed=True,
        )
    return ScoreResult(name=name, value=result.score, reason=result.reason, metadata=metadata)


def _chunks(context: Any) -> list[str]:
    if context is None:
        return []
    if isinstance(context, str):
        return [context]
    if not isinstance(context, Sequence) or not all(isinstance(c, str) for c in context):
        raise InputError("expected a string or a list of strings", field="context")
    return list(context)


class ContextPrecision:
    """How precisely an output fits the expected output, given the context (Opik's surface).

    Args:
        model: None for the offline estimate (or the run's judge in
            :func:`contextlens.evaluate`); a custom ``OpikBaseModel``-shaped model
            (``generate_chat_completion``, ``generate_string``, ``generate_provider_response``
            or their async twins); a LangChain chat model; a
            :class:`~contextlens.judges.Judge`; a spec string (``"openai:gpt-4o-mini"``,
            ``"http://localhost:11434/v1#llama3.1"``, ``"litellm:..."``) or a bare model
            name such as ``"gpt-4o"`` (OpenAI).
        name: the name of every :class:`ScoreResult`. In :func:`contextlens.evaluate` the
            metric goes by ``context-precision``; a name other than Opik's default is its
            label there (``context-precision:NAME``), so two can run side by side.
        few_shot_examples: replaces the default examples; a list of dicts (Opik's) or
            pydantic objects with ``title, input, expected_output, context, output,
            context_precision_score, reason``. None uses the defaults
            (:data:`FEW_SHOT_EXAMPLES`); ``[]`` uses none. Read back as a list of dicts.
        track: nothing is ever sent anywhere. When a local run store is configured
            (:func:`contextlens.store.configure`), each score is recorded there; otherwise
            nothing is stored.
        seed, temperature: sent with each request when ``model`` is a spec string (the
            OpenAI-compatible and LiteLLM backends); ignored for LangChain models and Judge
            objects, which carry their own settings. ``temperature=None`` keeps the backend's
            default of 0.0.
        project_name: accepted for Opik compatibility and ignored; as in Opik, it needs
            ``track=True`` (a ``ValueError`` otherwise).
        max_prompt_tokens: the prompt budget of the judge call (characters / 4); a case
            over it fails with its size and is not sent.
        max_embed_tokens: offline, the longest text embedded (characters / 4); a longer
            one fails the case with its size.
    """

    case_type = ModelTestCase

    def __init__(
        self,
        model: Any = None,
        name: str = DEFAULT_NAME,
        few_shot_examples: Sequence[Mapping[str, Any] | BaseModel] | None = None,
        track: bool = True,
        project_name: str | None = None,
        seed: int | None = None,
        temperature: float | None = None,
        *,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
    ) -> None:
        if not track and project_name is not None:  # Opik's own check and message
            raise ValueError("project_name can be set only when `track` is set to True")
        judge = as_backend(model, temperature=temperature, seed=seed)
        self._name = name
        self.metric = ContextPrecisionScorer(
            judge=judge,
            few_shot_examples=few_shot_examples,
            max_prompt_tokens=max_prompt_tokens,
            max_embed_tokens=max_embed_tokens,
            label=None if name == DEFAULT_NAME else name,
        )
        self.track = track
        self.project_name = project_name
        self.seed, self.temperature = seed, temperature
        self.judge_name = judge_label(judge)

    name = property(lambda self: self._name)

    @property
    def few_shot_examples(self) -> list[dict[str, Any]]:
        """The examples in use, as Opik's list of dicts (a fresh copy)."""
        return _as_dicts(self.metric.config.few_shot_examples)

    def __repr__(self) -> str:
        return f"ContextPrecision(name={self.name!r}, judge={self.judge_name!r})"

    async def ascore(
        self,
        input: str,
        output: str,
        expected_output: str,
        context: list[str],
        **ignored_kwargs: Any,
    ) -> ScoreResult:
        """Score one case; raises :class:`MetricComputationError` when no score can be had,
        or the exception of the user's own model that failed the judge call."""
        if not isinstance(output, str):
            raise InputError(f"expected the output as a string, got {output!r:.60}", field="output")
        case = ModelTestCase(  # Opik's context: precision reads it, with or without chunks
            input=input or "",
            actual_output=output,
            expected_output=expected_output,
            context=_chunks(context),
        )
        with user_errors() as raised:
            item = (await score_one(self.metric, case)).item
        if self.track:
            label = (input or output)[:80]
            record_score(item.metric, label, item.score, item.reason, item.error)
        if item.failed:
            if isinstance(item.exception, InputError):
                raise item.exception
            if raised:
                raise raised[-1]
            raise MetricComputationError(f"{SCORE_CALC_FAILED}: {self.name}: {item.error}")
        result = MetricResult(
            metric=item.metric, score=item.score, reason=item.reason, details=item.details
        )
        return to_score_result(result, self.name)

    def score(
        self,
        input: str,
        output: str,
        expected_output: str,
        context: list[str],
        **ignored_kwargs: Any,
    ) -> ScoreResult:
        """Synchronous :meth:`ascore`; works inside a running event loop too."""
        return run_sync(
            self.ascore(
                input=input, output=output, expected_output=expected_output, context=context
            )
        )
