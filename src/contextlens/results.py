"""What an evaluation returns: per-item results, per-metric summaries, the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, SerializeAsAny, ValidationInfo, field_validator

from contextlens.metrics.registry import details_type, match
from contextlens.schemas import MetricDetails, MetricKey


class ItemResult(BaseModel):
    """One metric's verdict on one case (the mean over repeats when ``repeats > 1``).

    ``score`` is None exactly when ``error`` says why the item could not be scored.
    ``metric`` is the key of the metric (its registered name, ``NAME:LABEL`` for a labelled
    instance); ``details`` are that metric's own :class:`~contextlens.schemas.MetricDetails`.
    """

    case_id: str
    metric: MetricKey
    score: float | None
    reason: str | None = None
    error: str | None = None
    success: bool | None = None
    judge: str | None = None
    repeats: list[float | None] | None = None
    spread: float | None = None
    details: SerializeAsAny[MetricDetails] = Field(default_factory=MetricDetails)
    _exception: BaseException | None = PrivateAttr(default=None)

    @field_validator("details", mode="before")
    @classmethod
    def _metric_details(cls, value: Any, info: ValidationInfo) -> Any:
        """Details read back (from ``results.jsonl``, the store) as their metric's model."""
        if isinstance(value, dict) and "metric" in info.data:
            return details_type(info.data["metric"]).model_validate(value)
        return value

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def exception(self) -> BaseException | None:
        """The exception that failed the item, when it happened in this process."""
        return self._exception


class MetricSummary(BaseModel):
    """Aggregate of one metric over the run: the scored items' mean and its interval."""

    metric: MetricKey
    n: int
    n_scored: int
    n_failed: int
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    judge_spread: float | None = None
    judge: str | None = None
    seconds: float = 0.0
    accounting: dict[str, Any] = Field(default_factory=dict)


class EvalRun(BaseModel):
    """What :func:`contextlens.evaluate` returns: summaries, accounting, per-item results.

    ``judge`` names the judges the metrics used (``offline`` when none); each summary says
    which judge its metric used; ``config`` is the run's configuration as it was recorded.
    Summaries go by the metrics' keys (``run.summaries["context-precision"]``);
    :meth:`summary` takes any name of a metric.
    """

    run_id: str
    started_at: str
    duration_s: float
    judge: str
    embedder: str
    repeats: int
    summaries: dict[str, MetricSummary]
    accounting: dict[str, Any]
    config: dict[str, Any] = Field(default_factory=dict)
    out_dir: str | None = None
    results: list[ItemResult] = Field(default_factory=list)

    def iter_results(self) -> Iterator[ItemResult]:
        """Every item result: from memory, or streamed back from ``results.jsonl``."""
        if self.results or self.out_dir is None:
            yield from self.results
            return
        with open(Path(self.out_dir) / "results.jsonl", encoding="utf-8") as handle:
            for line in handle:
                yield ItemResult.model_validate_json(line)

    def failures(self) -> list[ItemResult]:
        return [r for r in self.iter_results() if r.failed]

    def summary(self, name: str) -> MetricSummary:
        """The summary of the metric ``name`` names: a key of :attr:`summaries`, or any name
        of the metric (``context_precision_metric``); an error says which metrics ran."""
        return self.summaries[match(name, list(self.summaries))]

    def to_pandas(self) -> Any:
        """The per-item results as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from exc
        return pd.DataFrame([r.model_dump(exclude={"details"}) for r in self.iter_results()])
