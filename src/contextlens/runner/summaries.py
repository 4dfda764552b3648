"""A run's items folded into its summaries, and the :class:`EvalRun` that ends it."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from contextlens.engine.accounting import Ledger
from contextlens.metrics.settings import settings_of
from contextlens.results import EvalRun, ItemResult, MetricSummary
from contextlens.runner.binding import BoundMetric
from contextlens.runner.config import RunConfig
from contextlens.runner.folder import RunFolder, new_run_id
from contextlens.schemas import MetricKey, MetricResult
from contextlens.stats import BayesianMode, StatisticalMode, repeated_interval

__all__ = ["Tally", "failed_item", "finish_run", "item_of", "merge_repeats", "summary_of"]


@dataclass
class Tally:
    """Running per-metric data for the aggregate: each item's case index and scores (one
    per repeat), failures. The aggregate reads the items in case order, so it does not
    depend on the order in which they completed."""

    scores: list[tuple[int, list[float | None]]] = field(default_factory=list)
    n: int = 0
    failed: int = 0
    seconds: float = 0.0

    def add(self, index: int, scores: list[float | None], failed: bool) -> None:
        """One item of the case at ``index``: its scores (one per repeat) and whether it
        failed."""
        self.n += 1
        self.failed += failed
        self.scores.append((index, scores))

    def add_item(self, index: int, item: ItemResult) -> None:
        self.add(index, item.repeats or [item.score], item.failed)


def item_of(case_id: str, key: MetricKey, judge: str | None, result: MetricResult) -> ItemResult:
    """A metric's result as the run's item, under the metric's key."""
    return ItemResult(
        case_id=case_id,
        metric=key,
        score=result.score,
        reason=result.reason,
        error=result.error,
        success=result.success,
        judge=judge,
        details=result.details,
    )


def failed_item(case_id: str, key: MetricKey, judge: str | None, exc: BaseException) -> ItemResult:
    """The item of a metric that raised: failed, with the exception as its reason."""
    item = ItemResult(
        case_id=case_id, metric=key, score=None, error=f"{type(exc).__name__}: {exc}", judge=judge
    )
    item._exception = exc.with_traceback(None)
    return item


def merge_repeats(items: list[ItemResult]) -> ItemResult:
    """The repeats of one item as one: the mean of the scored repeats and their spread."""
    if len(items) == 1:
        return items[0]
    scores = [i.score for i in items]
    ok = [s for s in scores if s is not None]
    first = next((i for i in items if not i.failed), items[0])
    return first.model_copy(
        update={
            "score": float(np.mean(ok)) if ok else None,
            "error": None if ok else items[0].error,
            "repeats": scores,
            "spread": float(np.std(ok)) if len(ok) > 1 else None,
        }
    )


def summary_of(
    key: MetricKey, tally: Tally, mode: StatisticalMode, ledger: Ledger
) -> MetricSummary:
    """The summary of one metric: the mean of its scored items and its interval."""
    ordered = sorted(tally.scores, key=lambda pair: pair[0])
    rows = [s for _, s in ordered if any(v is not None for v in s)]
    accounting = ledger.by_metric().get(key)
    base = {
        "metric": key,
        "n": tally.n,
        "n_scored": len(rows),
        "n_failed": tally.failed,
        "seconds": round(tally.seconds, 3),
        "accounting": accounting.to_dict() if accounting else {},
    }
    if not rows:
        return MetricSummary(mean=None, **base)
    k = max(len(r) for r in rows)
    values = np.array(
        [[np.nan if v is None else v for v in r] + [np.nan] * (k - len(r)) for r in rows]
    )
    means = np.nanmean(values, axis=1)
    weights = np.full(len(rows), 1.0 / len(rows))
    if k == 1:
        est = mode.estimate(means, weights, key=key)
        low, high = est.ci_low, est.ci_high
        spread = None
    else:
        low, high = (
            repeated_interval(
                values,
                weights,
                mc_samples=getattr(mode, "mc_samples", 5000),
                ci_level=getattr(mode, "ci_level", 0.95),
                rng=mode.seed_sequence(key) if isinstance(mode, BayesianMode) else None,
            )
            if len(rows) > 1
            else (None, None)
        )
        spreads = np.nanstd(values, axis=1)
        spread = float(np.mean(spreads))
    return MetricSummary(
        mean=float(np.mean(means)),
        ci_low=low,
        ci_high=high,
        ci_level=getattr(mode, "ci_level", None) if low is not None else None,
        judge_spread=spread,
        **base,
    )


def finish_run(
    bound: Sequence[BoundMetric],
    tallies: Mapping[MetricKey, Tally],
    config: RunConfig,
    ledger: Ledger,
    *,
    started: datetime,
    t0: float,
    repeats: int,
    folder: RunFolder | None,
    kept: list[tuple[int, ItemResult]],
    complete: bool,
    data_fingerprint: str | None = None,
) -> EvalRun:
    """The :class:`EvalRun` of a finished run: summaries from the tallies (with each
    metric's settings), the ledger's accounting, the kept items in case order, the
    configuration and the cases' fingerprint; with a folder, ``summary.json`` is written and
    (``complete``) the folder recorded as the newest."""
    mode = config.statistical_mode or BayesianMode()
    judges = [b.judge_name for b in bound if b.judge_name is not None]
    summaries = {
        b.key: summary_of(b.key, tallies[b.key], mode, ledger).model_copy(
            update={"judge": b.judge_name, "settings": settings_of(b.metric)}
        )
        for b in bound
    }
    run = EvalRun(
        run_id=folder.run_id if folder is not None else new_run_id(),
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - t0, 3),
        judge=", ".join(dict.fromkeys(judges)) or "offline",
        embedder=", ".join(dict.fromkeys(b.services.embedder.name for b in bound)),
        repeats=repeats,
        summaries=summaries,
        accounting=ledger.to_dict(),
        config=config.describe(),
        out_dir=str(folder.path) if folder is not None else None,
        data_fingerprint=data_fingerprint,
        results=[item for _, item in sorted(kept, key=lambda pair: pair[0])],
    )
    if folder is not None:
        (folder.path / "summary.json").write_text(
            json.dumps(run.model_dump(mode="json", exclude={"results"}), indent=2),
            encoding="utf-8",
        )
        if complete:
            folder.complete()
    return run
