"""The workers: Ray actors that score batches with the engine's own ``aevaluate``."""

from __future__ import annotations

import asyncio
import copy
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from contextlens.engine.accounting import LedgerEntry, LedgerReport
from contextlens.engine.cache import open_cache
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.metric import Metric
from contextlens.results import RESULTS_FILE, EvalRun, ItemResult, MetricSummary
from contextlens.runfiles import read_records
from contextlens.runfiles import whole_lines as numbered_lines
from contextlens.runner import RunFolder, aevaluate, case_id
from contextlens.runner.folder import masked_json
from contextlens.runner.summaries import language_noted
from contextlens.scale.ray.permits import ClusterLimiter, ClusterLimits
from contextlens.schemas import MetricKey
from contextlens.stats import FrequentistMode

__all__ = ["Payload", "Plan", "Worker", "read_shard", "whole_lines"]


@dataclass(frozen=True)
class Plan:
    """What every worker needs, sent once when it starts."""

    metrics: list[Metric[Any]]
    judge: Any
    embedder: Any
    cache: Any
    retry: Any
    thresholds: dict[str, float]
    repeats: int
    shards: str | None
    permits: dict[str, tuple[str, int, str | None]]  # backend key -> (actor name, limit, origin)
    keep: bool


@dataclass
class Payload:
    """A finished batch, as a worker reports it: per item its index in the batch, metric,
    scores (one per repeat), whether it failed, passed, did not apply and carries a language
    note; the JSON lines of the items; seconds per metric; the accounting entries."""

    shard: str | None
    rows: list[tuple[int, MetricKey, list[float | None], bool, bool | None, bool, bool]]
    lines: list[tuple[int, str]]
    seconds: dict[MetricKey, float]
    entries: list[LedgerEntry]


class Worker:
    """A Ray actor that scores batches with :func:`aevaluate`; its embedder is loaded once,
    and its judges' calls go through the cluster's limiters."""

    def __init__(self, plan: Plan, cpus: float) -> None:
        self.plan = plan
        actor = ray.get_runtime_context().get_actor_id() or uuid.uuid4().hex
        self.holder = f"{actor}/{uuid.uuid4().hex[:8]}"  # this life of the worker
        self.store = open_cache(plan.cache)
        self.embedder = worker_embedder(plan.embedder, cpus)
        self.limiters = {
            key: ClusterLimiter(ray.get_actor(name), limit, self.holder, origin)
            for key, (name, limit, origin) in plan.permits.items()
        }
        self.limits = ClusterLimits(self.limiters)
        self.judge = self._judge(plan.judge)
        self.metrics = [self._metric(m) for m in plan.metrics]
        self.ready = False

    def _judge(self, choice: Any) -> Any:
        """``choice`` as a judge whose calls count against the cluster's limit."""
        judge = resolve_judge(choice, limits=self.limits, cache=self.store)
        return choice if judge is None else judge

    def _metric(self, metric: Metric[Any]) -> Metric[Any]:
        own = metric.judge
        if own is None or not metric.uses_judge:
            return metric
        judge = self._judge(own)
        if judge is own:
            return metric
        bound = copy.copy(metric)
        bound.config = metric.config.model_copy(update={"judge": judge})
        return bound

    async def score(self, shard: str | None, cases: list[Any]) -> Payload:
        """Score one batch; with a shard name, stream its results into the shard's folder.
        A shard already written (a retry after the worker finished it) is read back."""
        if not self.ready:  # slots a previous life of this worker held are given back
            await asyncio.gather(*(lim.begin() for lim in self.limiters.values()))
            self.ready = True
        index = {case_id(case, i): i for i, case in enumerate(cases)}
        if shard is not None and self.plan.shards is not None:
            final = Path(self.plan.shards) / shard
            if (final / "results.jsonl").exists():
                return read_shard(final, shard, index)
            part = f"{shard}.part-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            folder = RunFolder(Path(self.plan.shards), part)
        else:
            folder = None
        run = await aevaluate(
            cases,
            self.metrics,
            judge=self.judge,
            embedder=self.embedder,
            cache=self.store,
            retry=self.plan.retry,
            repeats=self.plan.repeats,
            thresholds=self.plan.thresholds,
            out=folder,
            statistical_mode=FrequentistMode(),
            progress=False,
            keep_results=True,
        )
        await asyncio.gather(*(lim.flush() for lim in self.limiters.values()))
        if folder is not None:
            os.replace(folder.path, final)
        payload = payload_of(shard, run.results, index, run.summaries, run.accounting)
        if not self.plan.keep and self.plan.shards is None:
            payload.lines = []  # the driver neither writes nor keeps them
        return payload


def worker_embedder(choice: Any, cpus: float) -> Any:
    """The worker's embedder: the user's, or the bundled one on the worker's CPUs only."""
    if choice is not None:
        return choice
    from contextlens.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder(threads=max(1, int(cpus)))


def payload_of(
    shard: str | None,
    items: Sequence[ItemResult],
    index: dict[str, int],
    summaries: dict[str, MetricSummary],
    accounting: LedgerReport,
) -> Payload:
    rows = []
    lines = []
    for item in items:
        at = index[item.case_id]
        scores = item.repeats or [item.score]
        na = item.not_applicable is not None
        noted = language_noted(item)
        rows.append((at, item.metric, scores, item.failed, item.success, na, noted))
        lines.append((at, masked_json(item)))  # the driver writes it to results.jsonl
    return Payload(
        shard=shard,
        rows=rows,
        lines=lines,
        seconds={MetricKey(name): s.seconds for name, s in summaries.items()},
        entries=list(accounting.entries),
    )


def read_shard(folder: Path, shard: str, index: dict[str, int]) -> Payload:
    items = list(read_records(folder / RESULTS_FILE, ItemResult.model_validate_json))
    run = EvalRun.from_folder(folder)
    return payload_of(shard, items, index, run.summaries, run.accounting)


def whole_lines(folder: Path) -> Iterator[str]:
    """The whole lines of ``folder/results.jsonl`` (a killed writer may have cut the last),
    read as :func:`contextlens.runfiles.whole_lines` reads a run's file."""
    for _, text in numbered_lines(folder / RESULTS_FILE):
        yield text.rstrip("\n")
