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
    An item the metric does not apply to (a case without retrieved chunks for a metric that
    reads them) has ``not_applicable`` set and neither a score nor an error; an item a run
    stopped before (its cost cap) has ``not_run`` set, saying why. ``success``: the score
    reached the metric's pass mark (None when there is no score).
    """

    case_id: str
    metric: MetricKey
    score: float | None
    reason: str | None = None
    error: str | None = None
    not_applicable: str | None = None
    not_run: str | None = None
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
    def status(self) -> str:
        """``pass``, ``below threshold``, ``failed``, ``not applicable`` or ``not run``: one
        meaning for every metric."""
        if self.failed:
            return "failed"
        if self.not_applicable is not None:
            return "not applicable"
        if self.not_run is not None:
            return "not run"
        return "pass" if self.success else "below threshold"

    @property
    def exception(self) -> BaseException | None:
        """The exception that failed the item, when it happened in this process."""
        return self._exception


class MetricSummary(BaseModel):
    """Aggregate of one metric over the run: the scored items' mean and its interval, and the
    share of them that reached the pass mark (``threshold``) with its interval.

    ``n`` counts every item; ``n_scored`` those with a score, ``n_failed`` those that could
    not be scored, ``n_not_applicable`` those the metric does not apply to, ``n_not_run``
    those the run stopped before (its cost cap); neither of the last two is in the mean or
    the failures.
    """

    metric: MetricKey
    n: int
    n_scored: int
    n_failed: int
    n_not_applicable: int = 0
    n_not_run: int = 0
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    threshold: float | None = None
    n_passed: int = 0
    pass_rate: float | None = None
    pass_low: float | None = None
    pass_high: float | None = None
    judge_spread: float | None = None
    judge: str | None = None
    seconds: float = 0.0
    accounting: dict[str, Any] = Field(default_factory=dict)


class EvalRun(BaseModel):
    """What :func:`contextlens.evaluate` returns: summaries, accounting, per-item results.

    ``judge`` names the judges the metrics used (``offline`` when none); each summary says
    which judge its metric used; ``config`` is the run's configuration as it was recorded.
    Summaries go by the metrics' keys (``run.summaries["context-precision"]``);
    :meth:`summary` takes any name of a metric. ``stopped`` says why the run stopped before
    scoring all its cases (its cost cap was reached), None when it did not.
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
    stopped: str | None = None
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
