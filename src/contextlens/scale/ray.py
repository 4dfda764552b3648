"""Ray: one evaluation sharded over the workers of a Ray cluster, with the results of a
local run.

``evaluate(cases, metrics, executor="ray")`` (or ``executor=RayExecutor(address=...,
num_workers=...)``), :func:`evaluate_dataset` for a ``ray.data.Dataset``, and
``contextlens run ... --ray ADDRESS|auto|local`` all come here.

* **Workers** are Ray actors, each running :func:`contextlens.runner.aevaluate` (the same
  scoring, cache, retries and accounting as a local run) on batches of cases; an actor loads
  its embedder once and scores two batches at a time, so the embedder's batches stay large.
* **Input** is read lazily: the driver consumes the cases (a loader's iterator, a list, or a
  dataset's blocks) as workers take batches, holding at most two batches per worker.
* **One rate limit for the cluster**: per judge backend, a small actor holds the engine's
  :class:`~contextlens.engine.limiter.Limiter` and hands out its slots, so every worker's
  calls count against one bound, and a rate limit lowers it once for the whole cluster.
* **Results**: with ``out``, a worker streams each batch's results into
  ``<run>/shards/<shard>.part-<attempt>/results.jsonl`` and renames the folder to
  ``<run>/shards/<shard>/`` when the batch is done; the driver appends each finished batch to
  ``<run>/results.jsonl`` and computes the summaries with the local run's own code, over the
  items in case order, so means and intervals equal a local run's. A batch whose worker died
  is redone by Ray on the restarted worker; only finished shards reach ``results.jsonl``, so
  nothing is counted twice. ``RayExecutor(resume=RUN_FOLDER)`` continues a run whose driver
  was killed: what ``results.jsonl`` and the shards hold is kept (whole cases only) and only
  the cases with no result are scored.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import shutil
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, NoReturn

import cloudpickle
import ray

from contextlens.engine.accounting import UNATTRIBUTED, Ledger, attribute
from contextlens.engine.cache import NullCache, open_cache
from contextlens.engine.limiter import DEFAULT_LIMIT, Limiter
from contextlens.errors import InputError
from contextlens.judges.llm import LLMJudge
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics.base import Metric, own_judge, uses_judge
from contextlens.results import EvalRun, ItemResult
from contextlens.runner import (
    OFFLINE_CASES_IN_FLIGHT,
    ProgressCallback,
    RunFolder,
    _bind,
    _case_id,
    _CaseChecks,
    _progress,
    _Tally,
    aevaluate,
    checked_metrics,
    finish_run,
)
from contextlens.schemas import ModelTestCase
from contextlens.stats import BayesianMode, FrequentistMode, StatisticalMode

__all__ = ["ClusterLimiter", "RayExecutor", "evaluate_dataset"]

SHARDS = "shards"
"""The folder, in a run's folder, where workers write their batches."""

#: Batches a worker holds at once: one scored while the next waits, so no worker idles.
BATCHES_PER_WORKER = 2


# ------------------------------------------------------------------------ the cluster's limit


class _Permits:
    """A Ray actor holding one backend's :class:`Limiter` for the whole cluster: its slots
    are handed out to the workers' calls, and its adaptive bound moves once per event for
    the cluster. Slots are counted per holder (one life of a worker, ``ACTOR_ID/LIFE``), so
    a worker that died and was restarted gives back what its earlier lives held, and a
    slot granted to an earlier life afterwards is given back at once."""

    EVENTS = frozenset({"on_success", "on_rate_limited", "on_timeout"})

    def __init__(self, limit: int) -> None:
        self.limiter = Limiter(limit)
        self.held: Counter[str] = Counter()
        self.lives: set[str] = set()
        self.dead: set[str] = set()

    async def acquire(self, holder: str) -> None:
        self.lives.add(holder)
        await self.limiter.acquire()
        if holder in self.dead:  # granted to a life that has ended
            self.limiter.release()
        else:
            self.held[holder] += 1

    async def release(self, holder: str) -> None:
        if self.held[holder] > 0:
            self.held[holder] -= 1
            self.limiter.release()

    async def begin(self, holder: str) -> int:
        """A worker's new life ``holder``: its earlier lives have ended; give back the slots
        they held (how many)."""
        actor = holder.split("/", 1)[0]
        ended = {h for h in self.lives if h.split("/", 1)[0] == actor and h != holder}
        self.dead |= ended
        self.lives = (self.lives - ended) | {holder}
        count = 0
        for life in ended:
            count += self.held.pop(life, 0)
        for _ in range(count):
            self.limiter.release()
        return count

    async def event(self, name: str) -> None:
        """A call's outcome, as the judge tells its limiter (``on_rate_limited``...)."""
        handler = getattr(self.limiter, name, None) if name in self.EVENTS else None
        if handler is not None:
            handler()

    async def configure(self, limit: int) -> None:
        self.limiter.configure(limit)

    async def stats(self) -> dict[str, int]:
        lim = self.limiter
        return {
            "limit": lim.max_limit,
            "peak": lim.peak,
            "lowest": lim.lowest,
            "rate_limited": lim.rate_limited,
            "in_flight": lim.in_flight,
        }


def _driver_gone() -> NoReturn:
    """The permit actor is gone for good (it is restarted when it merely crashes): the
    driver that owns it and this worker died. End the worker at once, before the call that
    could not get a slot is written down as a failed item."""
    os._exit(1)


class ClusterLimiter(Limiter):
    """A worker's side of a cluster-wide limiter: the slots come from the backend's permit
    actor, and the calls' outcomes go to it, so the bound and its adaptation are the
    cluster's. ``peak`` is the most slots this worker held at once."""

    def __init__(self, actor: Any, limit: int, holder: str, origin: str | None = None) -> None:
        super().__init__(limit)
        self._actor = actor
        self.holder = holder
        self._sent: list[Any] = []  # outcomes told to the permit actor, not yet confirmed
        if origin is not None:  # the limit was settled where the run started
            self.origin = origin

    async def begin(self) -> None:
        """Tell the permit actor this life of the worker has begun (see ``_Permits.begin``)."""
        try:
            await self._actor.begin.remote(self.holder)
        except ray.exceptions.RayActorError:
            _driver_gone()

    async def acquire(self) -> None:
        """Wait for one of the cluster's slots."""
        granted = asyncio.wrap_future(self._actor.acquire.remote(self.holder).future())
        try:
            await asyncio.shield(granted)
        except asyncio.CancelledError:  # a slot granted after all is given back
            granted.add_done_callback(self._give_back)
            raise
        except ray.exceptions.RayActorError:
            _driver_gone()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _give_back(self, granted: asyncio.Future[None]) -> None:
        if not granted.cancelled() and granted.exception() is None:
            self._actor.release.remote(self.holder)

    def release(self) -> None:
        self.in_flight -= 1
        self._actor.release.remote(self.holder)

    def on_success(self) -> None:
        self._sent.append(self._actor.event.remote("on_success"))

    def on_rate_limited(self) -> None:
        self.rate_limited += 1
        self._sent.append(self._actor.event.remote("on_rate_limited"))

    def on_timeout(self) -> None:
        self._sent.append(self._actor.event.remote("on_timeout"))

    async def flush(self) -> None:
        """Wait until the permit actor has taken in every outcome told so far."""
        sent, self._sent = self._sent, []
        try:
            await asyncio.gather(*sent)
        except ray.exceptions.RayActorError:
            _driver_gone()

    def configure(self, limit: int) -> None:
        super().configure(limit)
        self._actor.configure.remote(limit)


# ------------------------------------------------------------------------------- the workers


@dataclass(frozen=True)
class _Plan:
    """What every worker needs, sent once when it starts."""

    metrics: list[Metric[Any]]
    judge: Any
    embedder: Any
    cache: Any
    repeats: int
    shards: str | None
    permits: dict[str, tuple[str, int, str | None]]  # backend key -> (actor name, limit, origin)
    keep: bool


@dataclass
class _Payload:
    """A finished batch, as a worker reports it: per item its index in the batch, metric,
    scores (one per repeat) and whether it failed; the JSON lines of the items; seconds per
    metric; the accounting entries."""

    shard: str | None
    rows: list[tuple[int, str, list[float | None], bool]]
    lines: list[tuple[int, str]]
    seconds: dict[str, float]
    entries: list[dict[str, Any]]


class _Worker:
    """A Ray actor that scores batches with :func:`aevaluate`; its embedder is loaded once,
    and its judges' calls go through the cluster's limiters."""

    def __init__(self, plan: _Plan, cpus: float) -> None:
        self.plan = plan
        actor = ray.get_runtime_context().get_actor_id() or uuid.uuid4().hex
        self.holder = f"{actor}/{uuid.uuid4().hex[:8]}"  # this life of the worker
        self.store = open_cache(plan.cache)
        self.embedder = _worker_embedder(plan.embedder, cpus)
        self.limiters = {
            key: ClusterLimiter(ray.get_actor(name), limit, self.holder, origin)
            for key, (name, limit, origin) in plan.permits.items()
        }
        self.judge = self._judge(plan.judge)
        self.metrics = [self._metric(m) for m in plan.metrics]
        self.ready = False

    def _judge(self, choice: Any) -> Any:
        """``choice`` as a judge whose calls count against the cluster's limit."""
        judge = resolve_judge(choice, cache=self.store)
        if not isinstance(judge, LLMJudge):
            return choice if judge is None else judge
        limiter = self.limiters.get(judge.backend.key)
        if limiter is not None:
            judge.limiter = limiter  # type: ignore[assignment]
        return judge

    def _metric(self, metric: Metric[Any]) -> Metric[Any]:
        own = own_judge(metric)
        if own is None or not uses_judge(metric):
            return metric
        judge = self._judge(own)
        if judge is own:
            return metric
        bound = copy.copy(metric)
        bound.judge = judge  # type: ignore[attr-defined]
        return bound

    async def score(self, shard: str | None, cases: list[Any]) -> _Payload:
        """Score one batch; with a shard name, stream its results into the shard's folder.
        A shard already written (a retry after the worker finished it) is read back."""
        if not self.ready:  # slots a previous life of this worker held are given back
            await asyncio.gather(*(lim.begin() for lim in self.limiters.values()))
            self.ready = True
        index = {_case_id(case, i): i for i, case in enumerate(cases)}
        if shard is not None and self.plan.shards is not None:
            final = Path(self.plan.shards) / shard
            if (final / "results.jsonl").exists():
                return _read_shard(final, shard, index)
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
            repeats=self.plan.repeats,
            out=folder,
            statistical_mode=FrequentistMode(),
            progress=False,
            keep_results=True,
        )
        await asyncio.gather(*(lim.flush() for lim in self.limiters.values()))
        if folder is not None:
            os.replace(folder.path, final)
        payload = _payload(shard, run.results, index, run.summaries, run.accounting)
        if not self.plan.keep and self.plan.shards is None:
            payload.lines = []  # the driver neither writes nor keeps them
        return payload


def _worker_embedder(choice: Any, cpus: float) -> Any:
    """The worker's embedder: the user's, or the bundled one on the worker's CPUs only."""
    if choice is not None:
        return choice
    from contextlens.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder(threads=max(1, int(cpus)))


def _payload(
    shard: str | None,
    items: Sequence[ItemResult],
    index: dict[str, int],
    summaries: dict[str, Any],
    accounting: dict[str, Any],
) -> _Payload:
    rows = []
    lines = []
    for item in items:
        at = index[item.case_id]
        rows.append((at, item.metric, item.repeats or [item.score], item.failed))
        lines.append((at, item.model_dump_json()))
    return _Payload(
        shard=shard,
        rows=rows,
        lines=lines,
        seconds={name: s.seconds for name, s in summaries.items()},
        entries=list(accounting.get("entries", [])),
    )


def _read_shard(folder: Path, shard: str, index: dict[str, int]) -> _Payload:
    items = [ItemResult.model_validate_json(line) for line in _whole_lines(folder)]
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    seconds = {name: s["seconds"] for name, s in summary["summaries"].items()}
    payload = _payload(shard, items, index, {}, summary["accounting"])
    payload.seconds = seconds
    return payload


def _whole_lines(folder: Path) -> Iterator[str]:
    """The whole lines of ``folder/results.jsonl`` (a killed writer may have cut the last)."""
    path = folder / "results.jsonl"
    if not path.exists():
        return
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.endswith("\n") and line.strip():
                yield line.rstrip("\n")


# ------------------------------------------------------------------------------- the driver


class RayExecutor:
    """Run :func:`contextlens.evaluate` on a Ray cluster: ``evaluate(cases, metrics,
    executor=RayExecutor(...))`` returns the :class:`EvalRun` a local run would.

    Args:
        address: the cluster: ``"auto"`` (the one running on this machine), ``ray://...`` or
            ``HOST:PORT``; None: the one this process is connected to, else a new local one.
        num_workers: worker actors; default one per CPU of the cluster (at least one).
        cpus_per_worker: CPUs each worker reserves (and the bundled embedder's threads).
        batch_size: cases per batch sent to a worker; default 1,024 offline, eight times the
            judge's concurrency limit with a judge.
        resume: the folder of a run (``OUT/<run id>``) whose driver was killed: the run goes
            on in that folder, and only the cases with no result there are scored.

    After a run, ``limits`` holds, per judge backend, the cluster limiter's ``limit``,
    ``peak`` (most calls in flight at once over the cluster), ``lowest`` (the lowest the
    adaptive limit fell to) and ``rate_limited`` (rate-limited calls it was told of).
    ``workers`` are the worker actors of the run under way.
    """

    def __init__(
        self,
        address: str | None = None,
        num_workers: int | None = None,
        *,
        cpus_per_worker: float = 1.0,
        batch_size: int | None = None,
        resume: str | os.PathLike[str] | None = None,
    ) -> None:
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be >= 1, got {num_workers}")
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if cpus_per_worker <= 0:
            raise ValueError(f"cpus_per_worker must be > 0, got {cpus_per_worker}")
        self.address = address
        self.num_workers = num_workers
        self.cpus_per_worker = cpus_per_worker
        self.batch_size = batch_size
        self.resume = Path(resume) if resume is not None else None
        self.limits: dict[str, dict[str, int]] = {}
        self.workers: list[Any] = []

    def __repr__(self) -> str:
        return (
            f"RayExecutor(address={self.address!r}, num_workers={self.num_workers}, "
            f"batch_size={self.batch_size})"
        )

    def run(
        self,
        cases: Iterable[Any],
        metrics: Sequence[Any],
        *,
        judge: Any = None,
        embedder: Any = None,
        max_concurrency: int | None = None,
        cache: Any = True,
        repeats: int = 1,
        out: str | os.PathLike[str] | RunFolder | None = None,
        statistical_mode: StatisticalMode | None = None,
        progress: bool | ProgressCallback | None = None,
        keep_results: bool | None = None,
    ) -> EvalRun:
        """Evaluate ``cases`` (an iterable, or a ``ray.data.Dataset``) on the cluster; the
        arguments are :func:`contextlens.evaluate`'s."""
        cores = checked_metrics(metrics, repeats, max_concurrency)
        names = [m.name for m in cores]
        bound = _bind(cores, judge, embedder, NullCache(), max_concurrency)
        checks = _CaseChecks(bound)
        judged = [b for b in bound if b.services.judge is not None]
        source: Iterable[Any] = _dataset_rows(cases) if _is_dataset(cases) else cases
        if isinstance(source, Sized) and not isinstance(source, Iterator):
            source = checks.all(source)  # a bad case stops the run before any is scored
        total = len(source) if isinstance(source, Sized) else None
        folder, resumed = self._folder(out)
        keep = keep_results if keep_results is not None else folder is None
        limits: dict[str, tuple[int, str | None]] = {}
        for b in judged:
            if isinstance(b.services.judge, LLMJudge):
                lim = b.services.judge.limiter
                origin = getattr(lim, "origin", None)
                limits.setdefault(b.services.judge.backend.key, (lim.max_limit, origin))
        size = self.batch_size or (
            8 * max((n for n, _ in limits.values()), default=DEFAULT_LIMIT)
            if judged
            else 2 * OFFLINE_CASES_IN_FLIGHT
        )
        _check_sendable(cores, judge, embedder)
        _connect(self.address)
        permit_actor = ray.remote(_Permits)
        permits = {  # by name: the workers look them up, so a restarted worker finds them
            key: (f"contextlens-permits-{uuid.uuid4().hex}", n, origin)
            for key, (n, origin) in limits.items()
        }
        permit_actors = [
            permit_actor.options(
                name=name,
                num_cpus=0,
                max_concurrency=100_000,
                max_restarts=-1,
                max_task_retries=-1,
            ).remote(n)
            for name, n, _ in permits.values()
        ]
        plan = _Plan(
            metrics=cores,
            judge=judge,
            embedder=embedder,
            cache=_cache_arg(cache),
            repeats=repeats,
            shards=str(folder.path / SHARDS) if folder is not None else None,
            permits=permits,
            keep=keep,
        )
        mode = statistical_mode or BayesianMode()
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        driver = _Driver(names, keep, folder, total, progress, t0)
        try:
            if folder is not None:
                driver.open(resumed)
            self.workers = self._start_workers(plan)
            driver.drive(source, checks, size, self.workers, bound)
            self.limits = {
                key: ray.get(actor.stats.remote())
                for key, actor in zip(permits, permit_actors, strict=True)
            }
        finally:
            driver.close()
            for worker in self.workers:
                ray.kill(worker, no_restart=True)
            for actor in permit_actors:
                ray.kill(actor, no_restart=True)
            self.workers = []
        if folder is not None:
            shutil.rmtree(folder.path / SHARDS, ignore_errors=True)
        return finish_run(
            bound,
            driver.tallies,
            mode,
            driver.ledger,
            started=started,
            t0=t0,
            repeats=repeats if judged else 1,
            folder=folder,
            kept=driver.kept,
            complete=not isinstance(out, RunFolder),
        )

    def _folder(self, out: Any) -> tuple[RunFolder | None, bool]:
        """The run's folder, and whether it continues a run (``resume``)."""
        if self.resume is None:
            folder = RunFolder(Path(out)) if isinstance(out, (str, os.PathLike)) else out
            return folder, False
        path = self.resume
        if not path.is_dir():
            raise InputError("no such run folder to resume", file=str(path))
        if (path / "summary.json").exists():
            raise InputError("this run has completed: nothing to resume", file=str(path))
        folder = RunFolder(path.parent, path.name)
        given = out.path if isinstance(out, RunFolder) else None
        if isinstance(out, (str, os.PathLike)):
            given = Path(out) / path.name
        if given is not None and given.resolve() != path.resolve():
            raise ValueError(f"out={out!s} is not the folder of the run to resume, {path}")
        return (out if isinstance(out, RunFolder) else folder), True

    def _start_workers(self, plan: _Plan) -> list[Any]:
        count = self.num_workers or max(
            1, int(ray.cluster_resources().get("CPU", 1) // self.cpus_per_worker)
        )
        actor = ray.remote(_Worker).options(
            num_cpus=self.cpus_per_worker,
            max_restarts=-1,
            max_task_retries=-1,
            max_concurrency=BATCHES_PER_WORKER,
        )
        return [actor.remote(plan, self.cpus_per_worker) for _ in range(count)]


class _Driver:
    """The driver's side of a run: feeds batches, tallies what comes back, writes
    ``results.jsonl`` and, on resume, takes over what the earlier run finished."""

    def __init__(
        self,
        names: list[str],
        keep: bool,
        folder: RunFolder | None,
        total: int | None,
        progress: bool | ProgressCallback | None,
        t0: float,
    ) -> None:
        self.tallies = {name: _Tally() for name in names}
        self.ledger = Ledger()
        self.kept: list[tuple[int, ItemResult]] = []
        self.keep = keep
        self.folder = folder
        self.total = total
        self.tick = progress if callable(progress) else None
        self.bar = None if callable(progress) else _progress(progress, total)
        self.t0 = t0
        self.attempt = uuid.uuid4().hex[:8]
        self.done_before: dict[str, dict[str, str]] = {}
        self.sink: IO[str] | None = None
        self.cases_done = 0

    # -- the run folder
    def open(self, resumed: bool) -> None:
        """Create (or, resuming, take over) the run's folder and open ``results.jsonl``."""
        assert self.folder is not None
        path = self.folder.path
        if not resumed:
            self.folder.create()
        else:
            self.done_before = _finished_before(path)
            old = path / "results.jsonl"
            if old.exists():  # kept as a shard until the run ends: a kill loses nothing
                keep_as = path / SHARDS / f"{self.attempt}-previous"
                keep_as.mkdir(parents=True)
                os.replace(old, keep_as / "results.jsonl")
        (path / SHARDS).mkdir(exist_ok=True)
        self.sink = open(path / "results.jsonl", "x", encoding="utf-8")  # noqa: SIM115

    def close(self) -> None:
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        if self.bar is not None:
            self.bar.stop()

    # -- the feed
    def drive(
        self,
        source: Iterable[Any],
        checks: _CaseChecks,
        size: int,
        workers: list[Any],
        bound: Sequence[Any],
    ) -> None:
        """Feed ``source`` to ``workers`` in batches of ``size``, at most
        :data:`BATCHES_PER_WORKER` each at a time, and take in what they finish."""
        if self.bar is not None:
            self.bar.start()
        load = [0] * len(workers)
        pending: dict[Any, tuple[int, int, int]] = {}  # ref -> (worker, first index, cases)
        batch: list[Any] = []
        first = 0
        number = 0

        def submit() -> None:
            nonlocal batch, number
            while len(pending) >= BATCHES_PER_WORKER * len(workers):
                self._take(pending, load, wait_for_one=True)
            worker = min(range(len(workers)), key=load.__getitem__)
            shard = f"{self.attempt}-{number:06d}" if self.folder is not None else None
            ref = workers[worker].score.remote(shard, batch)
            pending[ref] = (worker, first, len(batch))
            load[worker] += 1
            batch, number = [], number + 1
            self._take(pending, load, wait_for_one=False)

        for index, raw in enumerate(source):
            try:
                case = _named(checks.one(raw, index), index)
            except InputError:  # what is under way finishes and is written first
                while pending:
                    self._take(pending, load, wait_for_one=True)
                raise
            ident = _case_id(case, index)
            before = self.done_before.get(ident)
            applicable = [b.metric.name for b in bound if isinstance(case, b.metric.case_type)]
            if before is not None and all(name in before for name in applicable):
                self._take_over(index, [before[name] for name in applicable])
                continue
            if not batch:
                first = index
            elif index != first + len(batch):  # keep each batch's indices contiguous
                submit()
                first = index
            batch.append(case)
            if len(batch) >= size:
                submit()
        if batch:
            submit()
        while pending:
            self._take(pending, load, wait_for_one=True)

    def _take(
        self, pending: dict[Any, tuple[int, int, int]], load: list[int], *, wait_for_one: bool
    ) -> None:
        if not pending:
            return
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=None if wait_for_one else 0)
        for ref in ready:
            worker, first, count = pending.pop(ref)
            load[worker] -= 1
            self._absorb(ray.get(ref), first, count)

    def _absorb(self, payload: _Payload, first: int, count: int) -> None:
        for at, metric, scores, failed in payload.rows:
            self.tallies[metric].add(first + at, scores, failed)
        for name, seconds in payload.seconds.items():
            self.tallies[name].seconds += seconds
        self.ledger.merge(payload.entries)
        if self.sink is not None:
            self.sink.write("".join(line + "\n" for _, line in payload.lines))
            self.sink.flush()
        if self.keep:
            self.kept += [
                (first + at, ItemResult.model_validate_json(line)) for at, line in payload.lines
            ]
        if self.folder is not None and payload.shard is not None:  # now in results.jsonl
            shutil.rmtree(self.folder.path / SHARDS / payload.shard, ignore_errors=True)
        self._advance(count)

    def _take_over(self, index: int, lines: list[str]) -> None:
        """A case the earlier run finished: its results as they were."""
        for line in lines:
            item = ItemResult.model_validate_json(line)
            self.tallies[item.metric].add_item(index, item)
            if self.keep:
                self.kept.append((index, item))
        if self.sink is not None:
            self.sink.write("".join(line + "\n" for line in lines))
        self._advance(1)

    def _advance(self, count: int) -> None:
        self.cases_done += count
        elapsed = time.perf_counter() - self.t0
        if self.tick is not None:  # the run's ledger is current: the callback may read it
            with attribute(self.ledger, UNATTRIBUTED):
                self.tick(self.cases_done, self.total, elapsed)
        if self.bar is not None:
            rate = f"{self.cases_done / max(elapsed, 1e-9):.1f}/s"
            latency = self.ledger.call_latency()
            if latency is not None:
                rate += f", {latency[1]:.1f} s per judge call"
            self.bar.update(self.bar.task_ids[0], advance=count, rate=rate)


def _finished_before(path: Path) -> dict[str, dict[str, str]]:
    """What an earlier run left in ``path``: per case id, per metric, the item's JSON line,
    from ``results.jsonl`` and every shard (finished or not; the first line of a case and
    metric wins)."""
    found: dict[str, dict[str, str]] = {}
    sources = [path]
    shards = path / SHARDS
    if shards.is_dir():
        sources += sorted(p for p in shards.iterdir() if p.is_dir())
    for source in sources:
        for line in _whole_lines(source):
            try:
                head = json.loads(line)
                case_id, metric = str(head["case_id"]), str(head["metric"])
            except (ValueError, KeyError, TypeError):
                continue
            found.setdefault(case_id, {}).setdefault(metric, line)
    return found


# ---------------------------------------------------------------------------------- helpers


def _connect(address: str | None) -> None:
    """Connect to the cluster (or start a local one) unless this process is connected."""
    if not ray.is_initialized():
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )


def _is_dataset(obj: Any) -> bool:
    return isinstance(obj, ray.data.Dataset)


def _dataset_rows(ds: Any) -> Iterator[dict[str, Any]]:
    """The rows of a ``ray.data.Dataset`` as plain dicts, read block by block."""
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        yield from batch.to_pylist()


def _named(case: Any, index: int) -> Any:
    """A test case without a name gets the id a local run gives it (``case-000042``), so
    its results are named alike whichever worker scores it."""
    if isinstance(case, ModelTestCase) and case.name is None:
        return case.model_copy(update={"name": _case_id(case, index)})
    return case


def _cache_arg(cache: Any) -> Any:
    """``cache=`` as each worker opens it: a Cache object by its file."""
    store = open_cache(cache)
    if isinstance(store, NullCache):
        return False
    return str(store.path)


def _check_sendable(metrics: Sequence[Metric[Any]], judge: Any, embedder: Any) -> None:
    """Raise a clear error when what the workers need cannot be sent to them."""
    parts: dict[str, Any] = {f"metric {m.name!r}": m for m in metrics}
    parts["judge"] = judge
    parts["embedder"] = embedder
    for what, obj in parts.items():
        try:
            cloudpickle.dumps(obj)
        except Exception as exc:
            raise TypeError(
                f"the {what} cannot be sent to Ray workers ({type(exc).__name__}: {exc}); "
                "give judges as spec strings ('openai:MODEL', 'http://HOST:PORT/v1#MODEL') "
                "and embedders as objects that pickle"
            ) from None


def evaluate_dataset(
    ds: Any, metrics: Sequence[Any], *, executor: RayExecutor | None = None, **options: Any
) -> EvalRun:
    """Evaluate the rows of a ``ray.data.Dataset`` (one case per row, the columns of
    ``contextlens schema``) on Ray; ``options`` are :func:`contextlens.evaluate`'s."""
    if not _is_dataset(ds):
        raise TypeError(f"expected a ray.data.Dataset, got {type(ds).__name__}")
    return (executor or RayExecutor()).run(ds, metrics, **options)
