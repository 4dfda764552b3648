"""The settings of metrics: frozen pydantic models, one per kind of metric, that a metric's
own config extends with its fields (see :class:`contextlens.metrics.metric.Metric`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from contextlens.metrics.base import DEFAULT_MAX_EMBED_TOKENS, DEFAULT_MAX_PROMPT_TOKENS, size_limit
from contextlens.offline.routes import SupportModel, resolve_support_model

__all__ = [
    "RELEVANCE_FILES",
    "SUPPORT_FILES",
    "EmbeddingConfig",
    "JudgedConfig",
    "MetricConfig",
    "SupportConfig",
]


class MetricConfig(BaseModel):
    """What every metric is set to: its pass mark and its label.

    ``threshold``: the score at or above which an item passes (None: the metric's default,
    :data:`~contextlens.metrics.base.DEFAULT_PASS` for a probability, none for a score that
    is not one). ``label`` tells an instance apart from others of the same metric in a run
    (its results go by ``NAME:LABEL``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    threshold: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    label: str | None = None


class EmbeddingConfig(MetricConfig):
    """A metric that embeds: its own embedder (None: the run's) and the longest text it
    embeds, in tokens estimated as characters / 4."""

    embedder: Any = Field(default=None, exclude=True)
    max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS

    @field_validator("max_embed_tokens", mode="before")
    @classmethod
    def _embed_limit(cls, value: Any) -> int:
        return size_limit("max_embed_tokens", value)


class JudgedConfig(EmbeddingConfig):
    """A metric that asks a judge (offline: embeds): its own judge (None: the run's;
    ``"offline"``: none) and the prompt budget of one judge call."""

    judge: Any = Field(default=None, exclude=True)
    max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS

    @field_validator("max_prompt_tokens", mode="before")
    @classmethod
    def _prompt_limit(cls, value: Any) -> int:
        return size_limit("max_prompt_tokens", value)


class SupportConfig(JudgedConfig):
    """A metric whose offline path reads claims with a support model: ``"features"`` or
    ``"reader"`` (None: ``$CONTEXTLENS_SUPPORT_MODEL``, else the default of
    :mod:`contextlens.offline.routes`), settled when the metric is made."""

    support_model: SupportModel = Field(default_factory=lambda: resolve_support_model(None))

    @field_validator("support_model", mode="before")
    @classmethod
    def _settled(cls, value: Any) -> SupportModel:
        return resolve_support_model(value)


#: The offline model files of the support models (paths under ``contextlens/offline/``).
SUPPORT_FILES = (
    "weights/support.json",
    "weights/support_reader.json",
    "assets/claim-reader/model.json",
)
#: The offline model files of the relevance model.
RELEVANCE_FILES = ("weights/relevance.json", "weights/relevance_answer.json")
