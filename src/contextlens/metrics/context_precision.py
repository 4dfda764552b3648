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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contextlens.backend import Message
from contextlens.errors import InputError
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judge, Reply
from contextlens.judges.schema import AnchoredScore, text_field
from contextlens.metrics.base import (
    DataBlocks,
    OverBudget,
    ReaderDetails,
    Services,
    build_messages,
    prompt_over_budget,
    too_long,
)
from contextlens.metrics.calls import token_usage
from contextlens.metrics.config import SUPPORT_FILES, SupportConfig
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.offline.language import is_english
from contextlens.offline.precision import PrecisionItem, score_precision
from contextlens.offline.routes import support_route, support_scorer
from contextlens.schemas import ModelTestCase

__all__ = [
    "DEFAULT_FEW_SHOT_EXAMPLES",
    "ContextPrecisionScorer",
    "FewShotExampleContextPrecision",
    "PrecisionConfig",
    "PrecisionDetails",
    "PrecisionVerdict",
    "precision_messages",
    "validate_few_shot_examples",
]


class PrecisionDetails(ReaderDetails):
    """A context-precision result's details: the judge call's latency, or (offline) the
    parts the estimate is made of and the reader that scored them."""

    latency: float | None = None
    components: dict[str, float] | None = None


class PrecisionVerdict(Reply):
    """What the judge returns for one case: the reason first, then the score."""

    reason: str = text_field("what agrees with the expected output and what does not", 400)
    score: AnchoredScore


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


def case_context(case: ModelTestCase) -> list[str]:
    """The context a case's output is judged against: its retrieved chunks, else its
    ``context``."""
    return list(case.retrieval_context or case.context or [])


def precision_messages(
    case: ModelTestCase,
    examples: Sequence[FewShotExampleContextPrecision],
    fence: Fence = DEFAULT_FENCE,
) -> list[Message]:
    """The judge prompt for one case: instructions and examples, then the case as data."""
    question, output = case.input or "", case.actual_output or ""
    expected, context = case.expected_output or "", case_context(case)
    block = _blocks(question, output, expected, context)
    return build_messages(
        "context_precision_system.md",
        "context_precision_user.md",
        PrecisionVerdict,
        fence,
        system_values={"examples": render_examples(examples, fence)},
        input=block("input", question),
        output=block("output", output),
        expected_output=block("expected_output", expected),
        context=_context_blocks(context, block),
    )


class PrecisionConfig(SupportConfig):
    """Context precision's settings.

    ``few_shot_examples``: replaces the default examples; a list of dicts or pydantic
    objects with ``title, input, expected_output, context, output,
    context_precision_score, reason``. None uses the defaults; ``[]`` uses none.
    ``max_prompt_tokens``: the prompt budget of the judge call (characters / 4); a case
    over it fails with its size and is not sent (a case is one judgement: it is not split).
    ``max_embed_tokens``: offline, the longest text embedded; a case with a longer output,
    expected output or context chunk fails with its size. ``support_model``: offline, the
    faithfulness model of English cases; a case that does not read as English is read by
    the English scorer and says so (``details.language`` and the reason).
    """

    few_shot_examples: tuple[FewShotExampleContextPrecision, ...] = DEFAULT_FEW_SHOT_EXAMPLES

    @field_validator("few_shot_examples", mode="before")
    @classmethod
    def _examples(cls, value: Any) -> tuple[FewShotExampleContextPrecision, ...]:
        return DEFAULT_FEW_SHOT_EXAMPLES if value is None else validate_few_shot_examples(value)


@metric(
    "context-precision",
    aliases=("ContextPrecision", "context_precision_metric"),
    reads=("input", "actual_output", "expected_output", "retrieval_context"),
    requires=("actual_output", ("expected_output", "retrieval_context", "context")),
)
class ContextPrecisionScorer(Metric[ModelTestCase]):
    """How precisely an output fits the expected output, given the context.

    Settings: :class:`PrecisionConfig`. A :class:`~contextlens.schemas.ModelTestCase` is
    read as ``actual_output`` (the output), ``expected_output`` and ``retrieval_context``
    (else ``context``). A case without an output is an
    :class:`~contextlens.errors.InputError`: there is nothing to score.
    """

    case_type = ModelTestCase
    details_type = PrecisionDetails
    config_type = PrecisionConfig
    prompts = ("context_precision_system.md", "context_precision_user.md")
    offline_models = SUPPORT_FILES
    config: PrecisionConfig

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        _checked(case)
        messages = precision_messages(case, self.config.few_shot_examples)
        too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
        if too_big is not None:
            raise OverBudget(too_big)
        judgement = await judge.judge(messages, PrecisionVerdict)
        details = PrecisionDetails(
            usage=token_usage(judgement.usage),
            attempts=judgement.attempts,
            latency=judgement.latency,
        )
        verdict = judgement.output
        return Score(verdict.score, verdict.reason, details)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        output, expected = _checked(case), case.expected_output or ""
        context = case_context(case)
        too_big = too_long(
            [
                ("the output", output),
                ("the expected output", expected),
                *((f"context[{i}]", chunk) for i, chunk in enumerate(context)),
            ],
            self.config.max_embed_tokens,
        )
        if too_big is not None:
            raise OverBudget(too_big, "max_embed_tokens")
        english = is_english([output, expected, "\n".join(context)])
        route = support_route(english, self.config.support_model, self.name)
        [estimate] = await score_precision(
            [PrecisionItem(output, expected, context, case.input or "")],
            services.embedder,
            support_scorer(route, services.embedder),
        )
        details = PrecisionDetails(components=estimate.components, **route.details)
        if estimate.error is not None:
            raise ScoreFailed(estimate.error, details)
        return Score(estimate.score, route.noted(estimate.reason), details)


def _checked(case: ModelTestCase) -> str:
    """The case's output; InputError when it has none."""
    if not isinstance(case.actual_output, str):
        raise InputError(
            "the output is missing: context precision scores the output under test",
            field="actual_output",
        )
    return case.actual_output
