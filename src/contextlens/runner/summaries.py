"""A run's items folded into its summaries, and the :class:`EvalRun` that ends it."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from contextlens.engine.accounting import Ledger
from contextlens.files import write_text
from contextlens.metrics.base import DEFAULT_PASS
from contextlens.metrics.settings import settings_of
from contextlens.provenance import current_provenance
from contextlens.redact import redact
from contextlens.results import Breakdown, EvalRun, ItemResult, MetricSummary, TriageSummary
from contextlens.runner.binding import BoundMetric
from contextlens.runner.config import RunConfig
from contextlens.runner.dry_run import DryRunJudge, estimate_of
from contextlens.runner.folder import RunFolder, new_run_id
from contextlens.schemas import MetricKey, MetricResult
from contextlens.stats import BayesianMode, StatisticalMode, repeated_interval

__all__ = [
    "Tally",
    "failed_item",
    "finish_run",
    "item_of",
    "language_noted",
    "merge_repeats",
    "not_applicable_item",
    "not_run_item",
    "summary_of",
]


@dataclass
class Tally:
    """Running per-metric data for the aggregate: each item's case index and scores (one
    per repeat), failures, and the metric's wall time (``seconds``: while any of its items
    was being scored, between :meth:`begin` and :meth:`end`). The aggregate reads the items
    in case order, so it does not depend on the order in which they completed."""

    scores: list[tuple[int, list[float | None]]] = field(default_factory=list)
    passed: list[tuple[int, bool]] = field(default_factory=list)
    n: int = 0
    failed: int = 0
    not_applicable: int = 0
    not_run: int = 0
    not_english: int = 0
    seconds: float = 0.0
    in_progress: int = 0
    busy_since: float = 0.0
    cells: Counter[str] = field(default_factory=Counter)
    """The scored items by the cell of their breakdown (:class:`ItemBreakdown`)."""
    share_sums: dict[str, float] = field(default_factory=dict)
    share_counts: Counter[str] = field(default_factory=Counter)
    decided: Counter[str] = field(default_factory=Counter)
    """In a triage run: items by who decided them (``offline``, ``judge``) and, for the
    judged, why (``inside``: inside the band; ``cannot``: not scorable offline)."""

    def begin(self) -> None:
        """An item of the metric starts being scored."""
        if self.in_progress == 0:
            self.busy_since = time.perf_counter()
        self.in_progress += 1

    def end(self) -> None:
        """An item of the metric is done: the wall time runs on while another is scored."""
        self.in_progress -= 1
        if self.in_progress == 0:
            self.seconds += time.perf_counter() - self.busy_since

    def add(
        self,
        index: int,
        scores: list[float | None],
        failed: bool,
        success: bool | None = None,
        not_applicable: bool = False,
        not_run: bool = False,
        not_english: bool = False,
    ) -> None:
        """One item of the case at ``index``: its scores (one per repeat), whether it
        failed, whether it passed, whether the metric does not apply to it, whether the run
        stopped before it, whether a text of its case is in a language other than English
        (its details say which: ``details.language``)."""
        self.n += 1
        self.not_english += not_english
        if not_applicable:
            self.not_applicable += 1
            return
        if not_run:
            self.not_run += 1
            return
        self.failed += failed
        self.scores.append((index, scores))
        if success is not None:
            self.passed.append((index, success))

    def add_item(self, index: int, item: ItemResult) -> None:
        part = item.details.breakdown() if item.score is not None else None
        if part is not None:
            if part.cell is not None:
                self.cells[part.cell] += 1
            for name, value in part.shares.items():
                if value is not None:
                    self.share_sums[name] = self.share_sums.get(name, 0.0) + value
                    self.share_counts[name] += 1
        if item.triage is not None:
            self.decided[item.triage.decided_by] += 1
            if item.triage.decided_by == "judge":
                self.decided["inside" if item.triage.offline_score is not None else "cannot"] += 1
        self.add(
            index,
            item.repeats or [item.score],
            item.failed,
            item.success,
            item.not_applicable is not None,
            item.not_run is not None,
            language_noted(item),
        )


def item_of(
    case_id: str,
    key: MetricKey,
    judge: str | None,
    result: MetricResult,
    pass_mark: float | None = DEFAULT_PASS,
) -> ItemResult:
    """A metric's result as the run's item, under the metric's key. A score that is not a
    finite number in [0, 1] fails the item with its reason (whichever metric gave it); a
    score passes at ``pass_mark`` or more, for every metric alike (None: no pass mark, no
    verdict); what the item says is masked of secrets. A result the metric says does not
    apply (``not_applicable``) is an item neither scored nor failed, with its reason and
    details."""
    score, error = result.score, result.error
    if result.triage is not None and result.triage.decided_by == "offline":
        judge = "offline"
    if error is None and result.not_applicable is not None:
        return ItemResult(
            case_id=case_id,
            metric=key,
            score=None,
            reason=_masked(result.reason),
            not_applicable=_masked(result.not_applicable),
            judge=judge,
            details=result.details,
            triage=result.triage,
        )
    if error is None and not _in_unit_interval(score):
        score, error = None, f"the metric gave the score {score!r}, not a number in [0, 1]"
    if error is not None:
        score = None
    return ItemResult(
        case_id=case_id,
        metric=key,
        score=score,
        reason=_masked(result.reason),
        error=_masked(error),
        success=None if score is None or pass_mark is None else bool(score >= pass_mark),
        judge=judge,
        details=result.details,
        triage=result.triage,
    )


def language_noted(item: ItemResult) -> bool:
    """Whether the item's details carry a language note (a text of its case is not in
    English: :class:`~contextlens.metrics.base.ReaderDetails`' ``language``)."""
    return getattr(item.details, "language", None) is not None


def not_applicable_item(case_id: str, key: MetricKey, why: str) -> ItemResult:
    """The item of a metric that does not apply to its case: neither scored nor failed."""
    return ItemResult(case_id=case_id, metric=key, score=None, not_applicable=why)


def not_run_item(case_id: str, key: MetricKey, why: str) -> ItemResult:
    """The item of a case the run stopped before (its cost cap): neither scored nor failed,
    and scored by the next run of the same command (the cache keeps what was paid for)."""
    return ItemResult(case_id=case_id, metric=key, score=None, not_run=why)


def _in_unit_interval(score: object) -> bool:
    return (
        isinstance(score, (int, float))
        and not isinstance(score, bool)
        and math.isfinite(score)
        and 0.0 <= score <= 1.0
    )


def _masked(text: str | None) -> str | None:
    return None if text is None else redact(text)


def failed_item(case_id: str, key: MetricKey, judge: str | None, exc: BaseException) -> ItemResult:
    """The item of a metric that raised: failed, with the exception as its reason."""
    error = redact(f"{type(exc).__name__}: {exc}")
    item = ItemResult(case_id=case_id, metric=key, score=None, error=error, judge=judge)
    item._exception = exc.with_traceback(None)
    return item


def merge_repeats(items: list[ItemResult], pass_mark: float | None = DEFAULT_PASS) -> ItemResult:
    """The repeats of one item as one: the mean of the scored repeats and their spread. An
    item no repeat scored is the first that did not fail (not applicable), else the first."""
    if len(items) == 1:
        return items[0]
    scores = [i.score for i in items]
    ok = [s for s in scores if s is not None]
    scored = [i for i in items if i.score is not None]
    first = scored[0] if scored else next((i for i in items if not i.failed), items[0])
    if not ok and first.not_applicable is not None:
        return first.model_copy(update={"repeats": scores})
    mean = float(np.mean(ok)) if ok else None
    return first.model_copy(
        update={
            "score": mean,
            "error": None if ok else items[0].error,
            "success": None if mean is None or pass_mark is None else bool(mean >= pass_mark),
            "repeats": scores,
            "spread": float(np.std(ok)) if len(ok) > 1 else None,
        }
    )


def _pass_rate(tally: Tally, mode: StatisticalMode, key: str) -> dict[str, float | int | None]:
    """The share of scored items that passed, with the interval of the mode's ``rate``
    (a Beta posterior for :class:`~contextlens.stats.BayesianMode`); a mode without one
    estimates the mean of the 0/1 outcomes."""
    outcomes = np.array([float(p) for _, p in sorted(tally.passed)], dtype=float)
    if not len(outcomes):
        return {"n_passed": 0, "pass_rate": None, "pass_low": None, "pass_high": None}
    passed = int(outcomes.sum())
    rate = getattr(mode, "rate", None)
    if callable(rate):
        est = rate(passed, len(outcomes), key=f"{key}:pass")
    else:
        weights = np.full(len(outcomes), 1.0 / len(outcomes))
        est = mode.estimate(outcomes, weights, key=f"{key}:pass")
    return {
        "n_passed": passed,
        "pass_rate": float(outcomes.mean()),
        "pass_low": est.ci_low,
        "pass_high": est.ci_high,
    }


def summary_of(
    key: MetricKey,
    tally: Tally,
    mode: StatisticalMode,
    ledger: Ledger,
    pass_mark: float | None = None,
) -> MetricSummary:
    """The summary of one metric: the mean of its scored items and its interval, and the
    share that reached ``pass_mark`` with its interval."""
    ordered = sorted(tally.scores, key=lambda pair: pair[0])
    rows = [s for _, s in ordered if any(v is not None for v in s)]
    accounting = ledger.by_metric().get(key)
    base: dict[str, Any] = {
        "metric": key,
        "n": tally.n,
        "n_scored": len(rows),
        "n_failed": tally.failed,
        "n_not_applicable": tally.not_applicable,
        "n_not_run": tally.not_run,
        "n_not_english": tally.not_english,
        "seconds": round(tally.seconds, 3),
        "accounting": accounting,
        "threshold": pass_mark,
        **_pass_rate(tally, mode, key),
    }
    if tally.cells or tally.share_counts:
        base["breakdown"] = Breakdown(
            cells=dict(sorted(tally.cells.items())),
            means={n: round(v / tally.share_counts[n], 6) for n, v in tally.share_sums.items()},
            n_means=dict(tally.share_counts),
        )
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


#: Why a metric of a triage run has no band.
NO_BAND = "no calibrated offline scorer for this metric and support model"
NO_JUDGE = "no judge: every item scored offline"


def triage_summary(b: BoundMetric, tally: Tally) -> TriageSummary:
    """What triage did for the metric ``b`` of a triage run, and what it saved (its
    counter's calls priced as a dry run prices them)."""
    triage = b.services.triage
    if b.services.judge is None:
        return TriageSummary(band=None, note=NO_JUDGE)
    if triage is None:
        return TriageSummary(band=None, note=NO_BAND, n_judged=tally.n)
    saved = None
    if isinstance(triage.counter, DryRunJudge):
        [saved] = estimate_of([b.key], {b.key: triage.counter}, tally.n).metrics
    return TriageSummary(
        band=b.metric.triage_band(),
        n_offline=tally.decided["offline"],
        n_judged=tally.decided["judge"],
        n_inside_band=tally.decided["inside"],
        n_offline_cannot=tally.decided["cannot"],
        saved_calls=saved.calls if saved is not None else 0,
        saved_prompt_tokens=saved.prompt_tokens if saved is not None else 0,
        saved_completion_tokens=saved.completion_tokens if saved is not None else 0,
        saved_cost=saved.cost if saved is not None else None,
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
    stopped: str | None = None,
    data_fingerprint: str | None = None,
) -> EvalRun:
    """The :class:`EvalRun` of a finished run: summaries from the tallies (with each
    metric's settings), the ledger's accounting, the kept items in case order, the
    configuration, the run's provenance (this process's versions, the configuration's data
    file and command), why it ``stopped`` before all its cases (its cost cap) and the cases'
    fingerprint; with a folder, ``summary.json`` is written and
    (``complete``) the folder recorded as the newest."""
    mode = config.statistical_mode or BayesianMode()
    judges = [b.judge_name for b in bound if b.judge_name is not None]
    summaries = {
        b.key: summary_of(b.key, tallies[b.key], mode, ledger, b.pass_mark).model_copy(
            update={
                "judge": b.judge_name,
                "settings": settings_of(b.metric),
                "triage": triage_summary(b, tallies[b.key]) if config.triage else None,
            }
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
        accounting=ledger.report(),
        config=config.describe(),
        provenance=current_provenance(data_file=config.data_file, command=config.command),
        out_dir=str(folder.path) if folder is not None else None,
        stopped=stopped,
        data_fingerprint=data_fingerprint,
        results=[item for _, item in sorted(kept, key=lambda pair: pair[0])],
    )
    if folder is not None:
        summary = json.dumps(run.model_dump(mode="json", exclude={"results"}), indent=2)
        write_text(folder.path / "summary.json", summary)
        if complete:
            folder.complete()
    return run
