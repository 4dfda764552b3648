"""Context precision: does the output fit the expected output, given the context?

With a judge, one call per case returns the reason and a score in [0, 1] together; the
prompt anchors the scale at 0.0/0.2/0.4/0.6/0.8/1.0 and shows few-shot examples (Opik's
fields, our own defaults, replaceable). Every evaluated text sits in a delimited data block,
so a verdict quoted inside the output (Opik issue #7848) is data, not the judge's answer.
Without a judge the offline estimate of :mod:`contextlens.offline.precision` is used. A
case whose prompt is over ``max_prompt_tokens``, or (offline) with a text over
``max_embed_tokens``, fails with its size and the limit and is never sent.
Opik's surface over it is :class:`contextlens.compat.opik.ContextPrecision`.
"""

from __future__ import annotations

import json
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

from contextlens.backend import Message
from contextlens.errors import InputError, JudgeError
from contextlens.judges.base import DEFAULT_FENCE, Fence, Reply
from contextlens.judges.schema import Score, text_field
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    DataBlocks,
    ReaderDetails,
    Services,
    build_messages,
    prompt_over_budget,
    raw_reply,
    size_limit,
    too_long,
)
from contextlens.metrics.calls import token_usage
from contextlens.metrics.registry import metric
from contextlens.offline.language import is_english
from contextlens.offline.precision import PrecisionItem, score_precision
from contextlens.offline.routes import (
    SupportModel,
    resolve_support_model,
    support_route,
    support_scorer,
)
from contextlens.redact import logger
from contextlens.schemas import MetricResult, ModelTestCase

log = logger("contextlens.context_precision")

__all__ = [
    "DEFAULT_FEW_SHOT_EXAMPLES",
    "ContextPrecisionScorer",
    "FewShotExampleContextPrecision",
    "PrecisionCase",
    "PrecisionDetails",
    "PrecisionVerdict",
    "precision_messages",
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
                "output": value.actual_output,
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


class PrecisionDetails(ReaderDetails):
    """A context-precision result's details: the judge call's latency, or (offline) the
    parts the estimate is made of and the reader that scored them."""

    latency: float | None = None
    components: dict[str, float] | None = None


class PrecisionVerdict(Reply):
    """What the judge returns for one case: the reason first, then the score."""

    reason: str = text_field("what agrees with the expected output and what does not", 400)
    score: Score


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


def _chunks(context: str | Sequence[str]) -> list[str]:
    return [context] if isinstance(context, str) else list(context)


def _context_blocks(context: str | Sequence[str], block: DataBlocks) -> str:
    chunks = _chunks(context)
    if not chunks:
        return "There is no context for this case."
    return "\n".join(block("context", chunk) for chunk in chunks)


def _blocks(
    input: str, output: str, expected_output: str, context: str | Sequence[str]
) -> DataBlocks:
    return DataBlocks(input, output, expected_output, *_chunks(context))


def render_examples(
    examples: Sequence[FewShotExampleContextPrecision], fence: Fence = DEFAULT_FENCE
) -> str:
    """The few-shot section of the system prompt (empty when there are no examples)."""
    if not examples:
        return ""
    bos, eos = fence.bos, fence.eos
    parts = [
        "Worked examples (each case's data as one JSON object; each verdict shows "
        "your reply's form):"
    ]
    for i, ex in enumerate(examples, 1):
        verdict = PrecisionVerdict(reason=ex.reason, score=ex.context_precision_score)
        data = {
            "input": ex.input,
            "output": ex.output,
            "expected_output": ex.expected_output,
            "context": ex.context,
        }
        parts.append(
            f"### Example {i}: {ex.title}\n"
            f"Case: {json.dumps(data, ensure_ascii=False)}\n"
            f"Verdict:\n{bos}\n{verdict.model_dump_json()}\n{eos}"
        )
    return "\n\n".join(parts) + "\n"


def precision_messages(
    case: PrecisionCase,
    examples: Sequence[FewShotExampleContextPrecision],
    fence: Fence = DEFAULT_FENCE,
) -> list[Message]:
    """The judge prompt for one case: instructions and examples, then the case as data."""
    block = _blocks(case.input, case.output, case.expected_output, case.context)
    return build_messages(
        "context_precision_system.md",
        "context_precision_user.md",
        PrecisionVerdict,
        fence,
        system_values={"examples": render_examples(examples, fence)},
        input=block("input", case.input),
        output=block("output", case.output),
        expected_output=block("expected_output", case.expected_output),
        context=_context_blocks(case.context, block),
    )


@metric(
    "context-precision",
    aliases=("ContextPrecision", "context_precision_metric"),
    reads=("input", "actual_output", "expected_output", "retrieval_context"),
    requires=("actual_output", ("expected_output", "retrieval_context", "context")),
)
class ContextPrecisionScorer:
    """How precisely an output fits the expected output, given the context.

    Args:
        judge: this metric's own judge (None: the run's).
        few_shot_examples: replaces the default examples; a list of dicts or pydantic
            objects with ``title, input, expected_output, context, output,
            context_precision_score, reason``. None uses the defaults; ``[]`` uses none.
        max_prompt_tokens: the prompt budget of the judge call (characters / 4); a case
            over it fails with its size and is not sent (a case is one judgement: it is
            not split).
        max_embed_tokens: offline, the longest text embedded (characters / 4); a case with
            a longer output, expected output or context chunk fails with its size.
        support_model: offline, the faithfulness model of English cases: ``"features"``
            (the default) or ``"reader"`` (None: ``$CONTEXTLENS_SUPPORT_MODEL``, else the default of
            :mod:`contextlens.offline.routes`), settled when the metric is made. A case that
            does not read as English is read by the English scorer and says so
            (``details.language`` and the reason); :mod:`~contextlens.offline.routes` reads
            it with the multilingual embedder only when that extra and the models fitted for
            it are both installed.
        label: tells this instance apart from others of the same metric in a run (its
            results go by ``NAME:LABEL``); None: the metric's name alone.

    A :class:`~contextlens.schemas.ModelTestCase` is read as ``actual_output`` -> output,
    ``retrieval_context`` (else ``context``) -> context. A case without an output is an
    :class:`~contextlens.errors.InputError`: there is nothing to score.
    """

    case_type = ModelTestCase
    details_type = PrecisionDetails

    def __init__(
        self,
        *,
        judge: Any = None,
        few_shot_examples: Sequence[Mapping[str, Any] | BaseModel] | None = None,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        support_model: SupportModel | None = None,
        label: str | None = None,
    ) -> None:
        self.support_model: SupportModel = resolve_support_model(support_model)
        self.judge = judge
        self.label = label
        self.max_prompt_tokens = size_limit("max_prompt_tokens", max_prompt_tokens)
        self.max_embed_tokens = size_limit("max_embed_tokens", max_embed_tokens)
        self.few_shot_examples = (
            DEFAULT_FEW_SHOT_EXAMPLES
            if few_shot_examples is None
            else validate_few_shot_examples(few_shot_examples)
        )

    def __repr__(self) -> str:
        return f"ContextPrecisionScorer(label={self.label!r}, support_model={self.support_model!r})"

    async def score(
        self, case: ModelTestCase | PrecisionCase | Mapping[str, Any], services: Services
    ) -> MetricResult:
        """Score one case; stateless, safe for many concurrent tasks on one object."""
        if not isinstance(case, PrecisionCase):
            try:
                case = PrecisionCase.model_validate(case)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or None
                if where == "output" and isinstance(case, ModelTestCase):
                    where = "actual_output"
                raise InputError(
                    f"{first['msg']}: context precision scores the output under test",
                    field=where,
                ) from None
        if services.judge is None:
            return await self._offline(case, services)
        messages = precision_messages(case, self.few_shot_examples)
        judge = services.judge.name
        too_big = prompt_over_budget(messages, self.max_prompt_tokens)
        if too_big is not None:
            details = PrecisionDetails(judge=judge, max_prompt_tokens=self.max_prompt_tokens)
            return MetricResult(metric=self.name, score=None, error=too_big, details=details)
        try:
            judgement = await services.judge.judge(messages, PrecisionVerdict)
        except JudgeError as exc:
            log.debug("%s: judge failed: %s", self.name, exc)
            details = PrecisionDetails(judge=judge, raw_reply=raw_reply(exc))
            return MetricResult(metric=self.name, score=None, error=str(exc), details=details)
        details = PrecisionDetails(
            judge=judge,
            usage=token_usage(judgement.usage),
            attempts=judgement.attempts,
            latency=judgement.latency,
        )
        verdict = judgement.output
        return MetricResult(
            metric=self.name, score=verdict.score, reason=verdict.reason, details=details
        )

    async def _offline(self, case: PrecisionCase, services: Services) -> MetricResult:
        too_big = too_long(
            [
                ("the output", case.output),
                ("the expected output", case.expected_output),
                *((f"context[{i}]", chunk) for i, chunk in enumerate(case.context)),
            ],
            self.max_embed_tokens,
        )
        if too_big is not None:
            details = PrecisionDetails(judge="offline", max_embed_tokens=self.max_embed_tokens)
            return MetricResult(metric=self.name, score=None, error=too_big, details=details)
        english = is_english([case.output, case.expected_output, "\n".join(case.context)])
        route = support_route(english, self.support_model, self.name)
        [estimate] = await score_precision(
            [PrecisionItem(case.output, case.expected_output, case.context, case.input)],
            services.embedder,
            support_scorer(route, services.embedder),
        )
        details = PrecisionDetails(judge="offline", components=estimate.components, **route.details)
        if estimate.error is not None:
            return MetricResult(metric=self.name, score=None, error=estimate.error, details=details)
        return MetricResult(
            metric=self.name,
            score=estimate.score,
            reason=route.noted(estimate.reason),
            details=details,
        )
