"""``ContextPrecision``: does the output fit the expected output, given the context?

Opik's call surface, with only the import changed::

    metric = ContextPrecision()  # model=None: offline
    result = metric.score(input=..., output=..., expected_output=..., context=[...])
    result.value, result.reason  # a ScoreResult

With a judge, one call per case returns the reason and a score in [0, 1] together; the
prompt anchors the scale at 0.0/0.2/0.4/0.6/0.8/1.0 and shows few-shot examples (Opik's
fields, our own defaults, replaceable). Every evaluated text sits in a delimited data block,
so a verdict quoted inside the output (Opik issue #7848) is data, not the judge's answer.
Without a judge the offline estimate of :mod:`contextlens.offline.precision` is used.

Failures follow Opik: ``score`` / ``ascore`` raise :class:`MetricComputationError` with the
reason; the stateless core ``compute`` returns a :class:`MetricResult` with ``error`` set,
and :func:`to_score_result` turns that into ``ScoreResult(scoring_failed=True)``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from contextlens.errors import InputError, JudgeError, MetricComputationError
from contextlens.judges.base import Message
from contextlens.judges.resolve import backend_from_spec
from contextlens.metrics.base import Services, build_messages, data_block, make_services
from contextlens.offline.precision import PrecisionItem, score_precision
from contextlens.schemas import MetricResult, ModelTestCase, ScoreResult
from contextlens.store import record_score
from contextlens.sync import run_sync

log = logging.getLogger("contextlens.context_precision")

__all__ = [
    "DEFAULT_FEW_SHOT_EXAMPLES",
    "ContextPrecision",
    "FewShotExampleContextPrecision",
    "PrecisionCase",
    "PrecisionVerdict",
    "precision_messages",
    "to_score_result",
    "validate_few_shot_examples",
]


class PrecisionCase(BaseModel):
    """One case: the user's input, the output under evaluation, a reference, the context."""

    model_config = ConfigDict(frozen=True)

    input: str = ""
    output: str
    expected_output: str = ""
    context: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_test_case(cls, value: Any) -> Any:
        """A :class:`ModelTestCase`: actual_output -> output, retrieval_context -> context."""
        if isinstance(value, ModelTestCase):
            return {
                "input": value.input,
                "output": value.actual_output or "",
                "expected_output": value.expected_output,
                "context": value.retrieval_context or value.context,
            }
        return value

    @field_validator("input", "expected_output", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return "" if value is None else value

    @field_validator("context", mode="before")
    @classmethod
    def _one_chunk_or_many(cls, value: Any) -> Any:
        if value is None:
            return []
        return [value] if isinstance(value, str) else value


class PrecisionVerdict(BaseModel):
    """What the judge returns for one case: the reason first, then the score."""

    reason: str = Field(description="what agrees with the expected output and what does not")
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description="0.0 to 1.0")


class FewShotExampleContextPrecision(BaseModel):
    """One worked example for the prompt (Opik's fields; ``context`` may also be a list)."""

    model_config = ConfigDict(frozen=True)

    title: str
    input: str
    expected_output: str
    context: str | list[str]
    output: str
    context_precision_score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    reason: str


_EXAMPLE_FIELDS = tuple(FewShotExampleContextPrecision.model_fields)

DEFAULT_FEW_SHOT_EXAMPLES: tuple[FewShotExampleContextPrecision, ...] = (
    FewShotExampleContextPrecision(
        title="Contradicts the expected output and the context",
        input="How long is the warranty on the K2 kettle?",
        expected_output="Two years from the date of purchase.",
        context=(
            "The K2 kettle has a two-year warranty from the date of purchase. "
            "Damage caused by limescale is not covered."
        ),
        output="The K2 has a five-year warranty that covers everything, limescale included.",
        context_precision_score=0.0,
        reason=(
            "The expected answer and the context both say two years; the output says five "
            "years and claims limescale is covered, which the context excludes."
        ),
    ),
    FewShotExampleContextPrecision(
        title="Right direction, key detail missing",
        input="When is the museum open on Sundays?",
        expected_output="On Sundays the museum is open from 10am to 4pm.",
        context="Opening hours: Tuesday to Saturday 9am-6pm, Sunday 10am-4pm. Closed on Mondays.",
        output="Yes, the museum is open on Sundays.",
        context_precision_score=0.4,
        reason=(
            "Correct that the museum opens on Sundays, but the hours, which are the substance "
            "of the expected answer, are missing."
        ),
    ),
    FewShotExampleContextPrecision(
        title="Matches, with extra detail the context supports",
        input="At what temperature does water boil at sea level, in Celsius?",
        expected_output="100 °C.",
        context=[
            "At standard atmospheric pressure, as at sea level, pure water boils at 100 °C.",
            "At higher altitudes the air pressure is lower and water boils below 100 °C.",
        ],
        output="At sea level water boils at 100 °C; higher up it boils at a lower temperature.",
        context_precision_score=1.0,
        reason=(
            "The output gives the expected 100 °C, and its extra remark about altitude is "
            "supported by the context."
        ),
    ),
)


def validate_few_shot_examples(
    examples: Sequence[Mapping[str, Any] | BaseModel],
) -> tuple[FewShotExampleContextPrecision, ...]:
    """``examples`` as validated objects; :class:`InputError` names the example and field."""
    if isinstance(examples, (str, bytes, Mapping, BaseModel)) or not isinstance(examples, Sequence):
        raise InputError(
            f"few_shot_examples must be a list of examples, got a {type(examples).__name__}"
        )
    checked: list[FewShotExampleContextPrecision] = []
    for i, example in enumerate(examples):
        where = f"few_shot_examples[{i}]"
        if isinstance(example, FewShotExampleContextPrecision):
            checked.append(example)
            continue
        if isinstance(example, BaseModel):
            data: Mapping[str, Any] = example.model_dump()
        elif isinstance(example, Mapping):
            data = example
        else:
            raise InputError(
                f"must be a dict or a pydantic model, not a {type(example).__name__}", field=where
            )
        missing = [name for name in _EXAMPLE_FIELDS if name not in data]
        if missing:
            raise InputError(
                f"missing {', '.join(repr(m) for m in missing)}; each example needs "
                f"{', '.join(_EXAMPLE_FIELDS)}",
                field=where,
            )
        try:
            checked.append(
                FewShotExampleContextPrecision.model_validate({k: data[k] for k in _EXAMPLE_FIELDS})
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise InputError(first["msg"], field=f"{where}.{loc}") from None
    return tuple(checked)


def _context_blocks(context: str | Sequence[str]) -> str:
    chunks = [context] if isinstance(context, str) else list(context)
    if not chunks:
        return "There is no context for this case."
    return "\n".join(data_block("context", chunk) for chunk in chunks)


def render_examples(examples: Sequence[FewShotExampleContextPrecision], services: Services) -> str:
    """The few-shot section of the system prompt (empty when there are no examples)."""
    if not examples:
        return ""
    bos, eos = services.bos_json_clause, services.eos_json_clause
    parts = ["Worked examples (their blocks are data too; each verdict shows your reply's form):"]
    for i, ex in enumerate(examples, 1):
        verdict = PrecisionVerdict(reason=ex.reason, score=ex.context_precision_score)
        parts.append(
            f"### Example {i}: {ex.title}\n"
            f"{data_block('input', ex.input)}\n{data_block('output', ex.output)}\n"
            f"{data_block('expected_output', ex.expected_output)}\n"
            f"{_context_blocks(ex.context)}\n"
            f"Verdict:\n{bos}\n{verdict.model_dump_json()}\n{eos}"
        )
    return "\n\n".join(parts) + "\n"


def precision_messages(
    case: PrecisionCase,
    examples: Sequence[FewShotExampleContextPrecision],
    services: Services,
) -> list[Message]:
    """The judge prompt for one case: instructions and examples, then the case as data."""
    return build_messages(
        "context_precision_system.md",
        "context_precision_user.md",
        PrecisionVerdict,
        services,
        system_values={"examples": render_examples(examples, services)},
        input=data_block("input", case.input),
        output=data_block("output", case.output),
        expected_output=data_block("expected_output", case.expected_output),
        context=_context_blocks(case.context),
    )


def to_score_result(result: MetricResult, name: str) -> ScoreResult:
    """Opik's :class:`ScoreResult` for a :class:`MetricResult`.

    A failed result gives ``value=NaN`` together with ``scoring_failed=True`` and the reason
    in ``metadata["error"]``: NaN never appears without the flag, so it is never averaged
    in silently.
    """
    metadata = dict(result.details)
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


def _services(model: Any, seed: int | None, temperature: float | None) -> Services:
    """Services for ``model``; a spec string's backend gets ``seed`` and ``temperature``."""
    if isinstance(model, str) and model.strip().lower() not in ("", "offline"):
        model = backend_from_spec(model, temperature=temperature, seed=seed)
    return make_services(model)


def _case_label(case: PrecisionCase) -> str:
    """A readable id for a tracked score: the start of the input."""
    return (case.input or case.output)[:80]


class ContextPrecision:
    """How precisely an output fits the expected output, given the context (Opik's surface).

    Args:
        model: None for the offline estimate; a LangChain chat model; a
            :class:`~contextlens.judges.Judge`; a spec string (``"openai:gpt-4o-mini"``,
            ``"http://localhost:11434/v1#llama3.1"``, ``"litellm:..."``) or a bare model
            name such as ``"gpt-4o"`` (OpenAI). Resolved once, here.
        name: the name of every :class:`ScoreResult`.
        few_shot_examples: replaces the default examples; a list of dicts or pydantic
            objects with ``title, input, expected_output, context, output,
            context_precision_score, reason``. None uses the defaults; ``[]`` uses none.
        track: nothing is ever sent anywhere. When a local run store is configured
            (:func:`contextlens.store.configure`), each score is recorded there; otherwise
            nothing is stored.
        seed, temperature: sent with each request when ``model`` is a spec string (the
            OpenAI-compatible and LiteLLM backends); ignored for LangChain models and Judge
            objects, which carry their own settings. ``temperature=None`` keeps the backend's
            default of 0.0.
        project_name: accepted for Opik compatibility and ignored.
    """

    case_type = ModelTestCase

    def __init__(
        self,
        model: Any = None,
        name: str = "context_precision_metric",
        few_shot_examples: Sequence[Mapping[str, Any] | BaseModel] | None = None,
        track: bool = True,
        seed: int | None = None,
        temperature: float | None = None,
        *,
        project_name: str | None = None,
    ) -> None:
        self.name = name
        self.track = track
        self.project_name = project_name
        self.seed, self.temperature = seed, temperature
        self.few_shot_examples = (
            DEFAULT_FEW_SHOT_EXAMPLES
            if few_shot_examples is None
            else validate_few_shot_examples(few_shot_examples)
        )
        self.services = _services(model, seed, temperature)

    def __repr__(self) -> str:
        judge = self.services.judge.name if self.services.judge else "offline"
        return f"ContextPrecision(name={self.name!r}, judge={judge!r})"

    async def compute(
        self, case: PrecisionCase | Mapping[str, Any], services: Services
    ) -> MetricResult:
        """Score one case; stateless, safe for many concurrent tasks on one object."""
        if not isinstance(case, PrecisionCase):
            case = PrecisionCase.model_validate(case)
        if services.judge is None:
            return await self._offline(case, services)
        messages = precision_messages(case, self.few_shot_examples, services)
        details: dict[str, Any] = {"judge": services.judge.name}
        try:
            judgement = await services.judge.judge(messages, PrecisionVerdict)
        except JudgeError as exc:
            log.warning("%s: judge failed: %s", self.name, exc)
            return MetricResult(metric=self.name, score=None, error=str(exc), details=details)
        usage = judgement.usage
        details.update(
            usage={
                "prompt_tokens": usage.prompt_tokens,
                "completion_tokens": usage.completion_tokens,
                "total_tokens": usage.total_tokens,
            },
            attempts=judgement.attempts,
            latency=judgement.latency,
        )
        verdict = judgement.output
        if not (math.isfinite(verdict.score) and 0.0 <= verdict.score <= 1.0):
            error = f"context precision score must be between 0.0 and 1.0, got {verdict.score}"
            return MetricResult(metric=self.name, score=None, error=error, details=details)
        log.info("%s: %.2f", self.name, verdict.score)
        return MetricResult(
            metric=self.name, score=verdict.score, reason=verdict.reason, details=details
        )

    async def _offline(self, case: PrecisionCase, services: Services) -> MetricResult:
        [estimate] = await score_precision(
            [PrecisionItem(case.output, case.expected_output, case.context)], services.embedder
        )
        details: dict[str, Any] = {"judge": "offline", "components": estimate.components}
        if estimate.error is not None:
            return MetricResult(metric=self.name, score=None, error=estimate.error, details=details)
        log.info("%s: %.2f (offline)", self.name, estimate.score)
        return MetricResult(
            metric=self.name, score=estimate.score, reason=estimate.reason, details=details
        )

    async def ascore(
        self,
        input: str,
        output: str,
        expected_output: str,
        context: list[str],
        **ignored_kwargs: Any,
    ) -> ScoreResult:
        """Score one case; raises :class:`MetricComputationError` when no score can be had."""
        case = PrecisionCase(
            input=input, output=output, expected_output=expected_output, context=context
        )
        result = await self.compute(case, self.services)
        if self.track:
            record_score(self.name, _case_label(case), result.score, result.reason, result.error)
        if result.failed:
            raise MetricComputationError(f"{self.name}: {result.error}")
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
