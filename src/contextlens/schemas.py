"""Data shapes shared by everything: sessions in, per-session results out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Batch(BaseModel):
    """One interaction of a session: a user query and the assistant's reply."""

    qa_id: str
    query: str
    assistant: str
    ground_truth_assistant: str = ""
    observation: str | None = None
    agentic: dict[str, Any] = Field(default_factory=dict)
    ground_truth_agentic: dict[str, Any] = Field(default_factory=dict)
    logprobs: dict[str, Any] = Field(default_factory=dict)
    weight: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class Dataset(BaseModel):
    """One session of an assistant: its system context and its conversation."""

    session_id: str
    assistant_id: str
    language: str = "english"
    context: str
    conversation: list[Batch] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_qa_ids(self) -> Dataset:
        seen: set[str] = set()
        for batch in self.conversation:
            if batch.qa_id in seen:
                raise ValueError(f"duplicate qa_id {batch.qa_id!r} in session {self.session_id!r}")
            seen.add(batch.qa_id)
        return self


class ContextInteraction(BaseModel):
    """The context-awareness verdict on one interaction.

    ``context_awareness`` is None exactly when ``error`` is set: a failed interaction is
    recorded with its reason and left out of the session mean, never scored 0.
    """

    model_config = ConfigDict(frozen=True)

    qa_id: str
    context_awareness: float | None
    reason: str | None = None
    error: str | None = None
    weight: float | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


class ContextMetric(BaseModel):
    """Context awareness of one session: weighted mean of its scored interactions.

    ``n_interactions`` counts every interaction of the session; ``n_failed`` those that
    could not be scored. The mean and its interval are over the scored ones; with none
    scored they are None.
    """

    session_id: str
    assistant_id: str
    n_interactions: int
    n_failed: int = 0
    context_awareness: float | None
    context_awareness_ci_low: float | None = None
    context_awareness_ci_high: float | None = None
    interactions: list[ContextInteraction]
    judge: str = "offline"


class ModelTestCase(BaseModel):
    """One RAG test case (agensight / DeepEval shape); ``name`` identifies it in results."""

    input: str
    actual_output: str | None = None
    expected_output: str | None = None
    retrieval_context: list[str] | None = None
    context: list[str] | None = None
    name: str | None = None


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


class MetricResult(BaseModel):
    """One metric's verdict on one test case, as every metric's ``compute`` returns it.

    ``score`` is None exactly when ``error`` is set: a failed item is kept with its reason
    and counted, never scored 0.
    """

    metric: str
    score: float | None
    reason: str | None = None
    error: str | None = None
    success: bool | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    cost: float | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None
