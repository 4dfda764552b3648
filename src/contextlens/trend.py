"""More than two runs: each metric's mean and interval per run, in time order, and the
cases that changed most between the first run and the last."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from contextlens.compare import Comparison, compare, run_folder
from contextlens.results import EvalRun
from contextlens.store.open import open_run

__all__ = ["MetricPoint", "RunPoint", "Trend", "trend"]


class MetricPoint(BaseModel):
    """One metric in one run: its mean and interval, its pass rate with its interval and
    pass mark, items and failures, and its judge."""

    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    pass_rate: float | None = None
    pass_low: float | None = None
    pass_high: float | None = None
    threshold: float | None = None
    n: int = 0
    n_failed: int = 0
    judge: str | None = None


class RunPoint(BaseModel):
    """One run of a trend (``folder``: its folder, None when it has none)."""

    run_id: str
    started_at: str
    name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    metrics: dict[str, MetricPoint] = Field(default_factory=dict)
    folder: str | None = None


class Trend(BaseModel):
    """What :func:`trend` returns: the runs oldest first, the metrics any of them has, and
    the comparison of the last run (B) with the first (A)."""

    runs: list[RunPoint]
    metrics: list[str]
    first_to_last: Comparison | None = None

    def series(self, metric: str) -> list[MetricPoint | None]:
        """The metric's point in each run (None where the run did not measure it)."""
        return [r.metrics.get(metric) for r in self.runs]


def _point(run: EvalRun, folder: str | None) -> RunPoint:
    return RunPoint(
        run_id=run.run_id,
        started_at=run.started_at,
        name=run.name,
        tags=run.tags,
        folder=folder,
        metrics={
            key: MetricPoint(
                mean=s.mean,
                ci_low=s.ci_low,
                ci_high=s.ci_high,
                pass_rate=s.pass_rate,
                pass_low=s.pass_low,
                pass_high=s.pass_high,
                threshold=s.threshold,
                n=s.n,
                n_failed=s.n_failed,
                judge=s.judge,
            )
            for key, s in run.summaries.items()
        },
    )


def trend(
    runs: Sequence[EvalRun | str | os.PathLike[str]], *, store: Any = None, **options: Any
) -> Trend:
    """The trend of ``runs`` (runs, run folders or run ids in ``store``), put in the order
    they started; ``options`` go to :func:`~contextlens.compare.compare` for the first and
    the last run."""
    if len(runs) < 2:
        raise ValueError(f"a trend needs at least 2 runs, got {len(runs)}")
    loaded = [r if isinstance(r, EvalRun) else open_run(r, store) for r in runs]
    loaded.sort(key=lambda r: r.started_at)
    first_to_last = compare(loaded[0], loaded[-1], **options)
    points = [_point(r, run_folder(r)) for r in loaded]
    metrics = list(dict.fromkeys(k for p in points for k in p.metrics))
    return Trend(runs=points, metrics=metrics, first_to_last=first_to_last)
