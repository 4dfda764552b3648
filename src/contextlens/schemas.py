"""Data shapes shared by everything: the cases metrics score and the result they return."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator


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
    meta: dict[str, Any] = Field(default_factory=dict)
    """The user's own data about the interaction; no metric reads it."""


class Dataset(BaseModel):
    """One session of an assistant: its system context and its conversation."""

    session_id: str
    assistant_id: str
    language: str = "english"
    context: str
    conversation: list[Batch] = Field(min_length=1)
    meta: dict[str, Any] = Field(default_factory=dict)
    """The user's own data about the session; no metric reads it."""

    @model_validator(mode="after")
    def _unique_qa_ids(self) -> Dataset:
        seen: set[str] = set()
        for batch in self.conversation:
            if batch.qa_id in seen:
                raise ValueError(f"duplicate qa_id {batch.qa_id!r} in session {self.session_id!r}")
            seen.add(batch.qa_id)
        return self


class ModelTestCase(BaseModel):
    """One RAG test case (agensight / DeepEval shape); ``name`` identifies it in results."""

    input: str
    actual_output: str | None = None
    expected_output: str | None = None
    retrieval_context: list[str] | None = None
    context: list[str] | None = None
    name: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    """The user's own data about the case; no metric reads it."""


class MetricResult(BaseModel):
    """One metric's verdict on one case, as every metric's ``score`` returns it.

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
