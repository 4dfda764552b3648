"""``evaluate``: any mix of metrics over a stream of cases, on one engine.

Cases are consumed lazily, at most a bounded number in flight; each result is written to
``results.jsonl`` as soon as it is known, so memory stays flat and an interrupted run keeps
everything finished so far. Failed items are kept apart with their reasons and counted;
they never enter a mean as 0.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import AsyncIterable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from contextlens.engine.accounting import Ledger, attribute
from contextlens.engine.cache import open_cache
from contextlens.errors import InputError
from contextlens.judges.base import Judge
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Services, current_repeat
from contextlens.retriever import input_error
from contextlens.schemas import ContextMetric, Dataset, MetricResult, ModelTestCase
from contextlens.stats import BayesianMode, StatisticalMode, repeated_interval
from contextlens.sync import run_sync

Case = Dataset | ModelTestCase


class ItemResult(BaseModel):
    """One metric's verdict on one case (the mean over repeats when ``repeats > 1``)."""

    case_id: str
    metric: str
    score: float | None
    reason: str | None = None
    error: str | None = None
    success: bool | None = None
    repeats: list[float | None] | None = None
    spread: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.error is not None


class MetricSummary(BaseModel):
    """Aggregate of one metric over the run: the scored items' mean and its interval."""

    metric: str
    n: int
    n_scored: int
    n_failed: int
    mean: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    ci_level: float | None = None
    judge_spread: float | None = None
    seconds: float = 0.0
    accounting: dict[str, Any] = Field(default_factory=dict)


class EvalRun(BaseModel):
    """What :func:`evaluate` returns: summaries, accounting, and the per-item results."""

    run_id: str
    started_at: str
    duration_s: float
    judge: str
    embedder: str
    repeats: int
    summaries: dict[str, MetricSummary]
    accounting: dict[str, Any]
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

    def to_pandas(self) -> Any:
        """The per-item results as a pandas DataFrame (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("to_pandas() needs pandas: pip install pandas") from exc
        return pd.DataFrame([r.model_dump(exclude={"details"}) for r in self.iter_results()])


@dataclass
class _Tally:
    """Running per-metric data for the aggregate: scores per item, failures."""

    scores: list[list[float | None]] = field(default_factory=list)
    n: int = 0
    failed: int = 0
    seconds: float = 0.0


def _as_case(raw: Any, index: int) -> Case:
    if isinstance(raw, (Dataset, ModelTestCase)):
        return raw
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if not isinstance(raw, dict):
        raise InputError(f"case {index}: expected a Dataset, a ModelTestCase or a dict")
    model: type[BaseModel] = Dataset if "conversation" in raw else ModelTestCase
    try:
        return model.model_validate(raw)  # type: ignore[return-value]
    except ValidationError as exc:
        err = input_error(exc, file=None, line=None)
        raise InputError(f"case {index}: {err.message}", field=err.field) from None


def _case_id(case: Case, index: int) -> str:
    if isinstance(case, Dataset):
        return case.session_id
    return case.name or f"case-{index:06d}"


def _item(case_id: str, metric: str, result: Any) -> ItemResult:
    if isinstance(result, ContextMetric):
        scored = result.n_interactions - result.n_failed
        error = None if scored else f"all {result.n_interactions} interactions failed"
        return ItemResult(
            case_id=case_id,
            metric=metric,
            score=result.context_awareness,
            error=error,
            details={
                "n_interactions": result.n_interactions,
                "n_failed": result.n_failed,
                "interactions": [i.model_dump() for i in result.interactions],
            },
            reason=None if error else _context_reason(result),
        )
    assert isinstance(result, MetricResult)
    return ItemResult(
        case_id=case_id,
        metric=metric,
        score=result.score,
        reason=result.reason,
        error=result.error,
        success=result.success,
        details=result.details,
    )


def _context_reason(result: ContextMetric) -> str:
    worst = min(
        (i for i in result.interactions if not i.failed),
        key=lambda i: i.context_awareness or 0.0,
    )
    return f"lowest interaction {worst.qa_id} ({worst.context_awareness:.2f}): {worst.reason}"


def _merge_repeats(items: list[ItemResult]) -> ItemResult:
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


class _Sink:
    """Writes each item result as one JSON line, flushed at once."""

    def __init__(self, out: Path | None) -> None:
        self.handle: IO[str] | None = None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            self.handle = open(out / "results.jsonl", "w", encoding="utf-8")  # noqa: SIM115

    def write(self, item: ItemResult) -> None:
        if self.handle is not None:
            self.handle.write(item.model_dump_json() + "\n")
            self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


def _progress(enabled: bool | None, total: int | None) -> Any:
    show = sys.stderr.isatty() if enabled is None else enabled
    if not show:
        return None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("[bold]contextlens"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        transient=False,
    )
    bar.add_task("cases", total=total, rate="")
    return bar


async def _aiter(cases: Iterable[Any] | AsyncIterable[Any]) -> Any:
    if isinstance(cases, AsyncIterable):
        async for case in cases:
            yield case
    else:
        for case in cases:
            yield case


#: Cases scored at once without a judge when the embedder batches concurrent calls.
OFFLINE_CASES_IN_FLIGHT = 512


async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    judge: Any = None,
    embedder: Any = None,
    max_concurrency: int = 16,
    cache: Any = True,
    repeats: int = 1,
    out: str | Path | None = None,
    statistical_mode: StatisticalMode | None = None,
    progress: bool | None = None,
    keep_results: bool | None = None,
) -> EvalRun:
    """Evaluate ``cases`` with ``metrics``; see :func:`evaluate`."""
    if not metrics:
        raise ValueError("no metrics given")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ValueError(f"two metrics share a name: {names}")
    store = open_cache(cache)
    judge_obj: Judge | None = resolve_judge(judge, max_concurrency=max_concurrency, cache=store)
    services = _services(judge_obj, embedder, store)
    repeats_eff = repeats if judge_obj is not None else 1
    mode = statistical_mode or BayesianMode()
    out_dir = Path(out) if out is not None else None
    keep = keep_results if keep_results is not None else out_dir is None
    ledger = Ledger()
    sink = _Sink(out_dir)
    tallies = {name: _Tally() for name in names}
    kept: list[ItemResult] = []
    total = len(cases) if hasattr(cases, "__len__") else None  # type: ignore[arg-type]
    bar = _progress(progress, total)
    started, t0 = datetime.now(timezone.utc), time.perf_counter()

    async def one_metric(metric: Any, case: Case, case_id: str) -> ItemResult:
        start = time.perf_counter()
        try:
            return await _one_metric(metric, case, case_id)
        finally:
            tallies[metric.name].seconds += time.perf_counter() - start

    async def _one_metric(metric: Any, case: Case, case_id: str) -> ItemResult:
        items = []
        for r in range(repeats_eff):
            token = current_repeat.set(r)
            try:
                with attribute(ledger, metric.name):
                    result = await metric.compute(case, services)
                items.append(_item(case_id, metric.name, result))
            except Exception as exc:  # a failed item is recorded, never lost
                items.append(
                    ItemResult(
                        case_id=case_id,
                        metric=metric.name,
                        score=None,
                        error=f"{type(exc).__name__}: {exc}",
                    )
                )
            finally:
                current_repeat.reset(token)
        return _merge_repeats(items)

    async def one_case(case: Case, index: int) -> None:
        case_id = _case_id(case, index)
        applicable = [m for m in metrics if isinstance(case, m.case_type)]
        done = await asyncio.gather(*(one_metric(m, case, case_id) for m in applicable))
        for item in done:
            sink.write(item)
            tally = tallies[item.metric]
            tally.n += 1
            tally.failed += item.failed
            tally.scores.append(item.repeats if item.repeats else [item.score])
            if keep:
                kept.append(item)
        if bar is not None:
            elapsed = time.perf_counter() - t0
            finished = bar.tasks[0].completed + 1
            bar.update(bar.task_ids[0], advance=1, rate=f"{finished / max(elapsed, 1e-9):.1f}/s")

    # Cases in flight: twice the judge calls allowed; offline with an embedder that batches
    # concurrent calls, enough to make its batches large (small ones pad more and cost more
    # per run).
    batching = getattr(services.embedder, "batches_concurrent_calls", False)
    window = asyncio.Semaphore(
        OFFLINE_CASES_IN_FLIGHT if judge_obj is None and batching else max(8, 2 * max_concurrency)
    )
    tasks: set[asyncio.Task[None]] = set()

    async def guarded(case: Case, index: int) -> None:
        try:
            await one_case(case, index)
        finally:
            window.release()

    try:
        with bar if bar is not None else nullcontext():
            try:
                index = 0
                async for raw in _aiter(cases):
                    case = _as_case(raw, index)
                    await window.acquire()
                    task = asyncio.create_task(guarded(case, index))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    index += 1
            finally:
                if tasks:  # what is under way finishes and is written before any error
                    await asyncio.gather(*tasks)
    finally:
        sink.close()

    summaries = {name: _summary(name, tallies[name], mode, ledger) for name in names}
    run = EvalRun(
        run_id=uuid.uuid4().hex[:12],
        started_at=started.isoformat(timespec="seconds"),
        duration_s=round(time.perf_counter() - t0, 3),
        judge=judge_obj.name if judge_obj else "offline",
        embedder=getattr(services.embedder, "name", type(services.embedder).__name__),
        repeats=repeats_eff,
        summaries=summaries,
        accounting=ledger.to_dict(),
        out_dir=str(out_dir) if out_dir else None,
        results=kept,
    )
    if out_dir is not None:
        (out_dir / "summary.json").write_text(
            json.dumps(run.model_dump(exclude={"results"}), indent=2), encoding="utf-8"
        )
    return run


def _services(judge: Judge | None, embedder: Any, store: Any) -> Services:
    from contextlens.embeddings.adapters import as_embedder
    from contextlens.embeddings.cached import CachedEmbedder

    return Services(judge=judge, embedder=CachedEmbedder(as_embedder(embedder), store))


def _summary(name: str, tally: _Tally, mode: StatisticalMode, ledger: Ledger) -> MetricSummary:
    rows = [s for s in tally.scores if any(v is not None for v in s)]
    accounting = ledger.by_metric().get(name)
    base = {
        "metric": name,
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
        est = mode.estimate(means, weights, key=name)
        low, high = est.ci_low, est.ci_high
        spread = None
    else:
        low, high = (
            repeated_interval(
                values,
                weights,
                mc_samples=getattr(mode, "mc_samples", 5000),
                ci_level=getattr(mode, "ci_level", 0.95),
                rng=mode.seed_sequence(name) if isinstance(mode, BayesianMode) else None,
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


def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    judge: Any = None,
    embedder: Any = None,
    max_concurrency: int = 16,
    cache: Any = True,
    repeats: int = 1,
    out: str | Path | None = None,
    statistical_mode: StatisticalMode | None = None,
    progress: bool | None = None,
    keep_results: bool | None = None,
) -> EvalRun:
    """Evaluate ``cases`` (sessions for ``Context``, test cases for the others) with
    ``metrics`` and return an :class:`EvalRun`.

    ``judge``: a Judge, a LangChain chat model or a spec string (``"offline"``,
    ``"openai:MODEL"``, ``"http://HOST:PORT/v1#MODEL"``, ``"litellm:PROVIDER/MODEL"``);
    None is offline. ``max_concurrency`` bounds judge calls in flight per backend.
    ``cache``: True (the user cache folder), False, or a path. ``repeats``: judge each item
    ``k`` times and fold the judge's own spread into the interval. ``out``: a folder for
    ``results.jsonl`` (written as results come) and ``summary.json``.
    """
    return run_sync(
        aevaluate(
            cases,
            metrics,
            judge=judge,
            embedder=embedder,
            max_concurrency=max_concurrency,
            cache=cache,
            repeats=repeats,
            out=out,
            statistical_mode=statistical_mode,
            progress=progress,
            keep_results=keep_results,
        )
    )
