"""The Ray executor: one evaluation over the workers of a cluster, with a local run's
results; and :func:`evaluate_dataset` for a ``ray.data.Dataset``."""

from __future__ import annotations

import logging
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence, Sized
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import ray
from ray import cloudpickle  # the pickler Ray sends objects with, shipped in Ray

from contextlens.engine.cache import NullCache, open_cache
from contextlens.engine.limiter import DEFAULT_LIMIT
from contextlens.errors import ContextLensError, InputError
from contextlens.metrics.metric import Metric
from contextlens.metrics.registry import key_of
from contextlens.results import EvalRun
from contextlens.runner import (
    OFFLINE_CASES_IN_FLIGHT,
    CaseChecks,
    RunConfig,
    RunFolder,
    bind_metrics,
    checked_metrics,
    finish_run,
)
from contextlens.scale.ray.driver import BATCHES_PER_WORKER, SHARDS, Driver
from contextlens.scale.ray.permits import HandedLimits, Permits
from contextlens.scale.ray.worker import Plan, Worker

__all__ = ["ClusterUnreachable", "RayExecutor", "evaluate_dataset"]

#: Seconds to wait for a TCP answer from a ``HOST:PORT`` cluster address before Ray is asked.
PROBE_TIMEOUT = 3.0


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
    ``peak`` (most slots held at once over the cluster, a bound on the calls in flight),
    ``lowest`` (the lowest the adaptive limit fell to), ``rate_limited`` (rate-limited calls
    it was told of) and ``leases`` (slots it handed to workers, each kept by its worker for
    as many calls as keep it busy).
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

    def run(self, cases: Iterable[Any], metrics: Sequence[Any], config: RunConfig) -> EvalRun:
        """Evaluate ``cases`` (an iterable, or a ``ray.data.Dataset``) on the cluster with the
        run's ``config``, as :func:`contextlens.evaluate` would here (a cost cap and
        triage excepted: they run on one machine)."""
        if config.max_cost is not None:
            raise ValueError("max_cost caps a run on this machine; run it without Ray")
        if config.triage:
            raise ValueError("triage runs on this machine; run it without Ray")
        cores = checked_metrics(metrics)
        handed = HandedLimits(config.max_concurrency)
        bound = bind_metrics(
            cores,
            judge=config.judge,
            embedder=config.embedder,
            cache=NullCache(),
            limits=handed,
            retry=config.retry,
            thresholds=config.thresholds,
        )
        checks = CaseChecks(bound)
        judged = [b for b in bound if b.services.judge is not None]
        source: Iterable[Any] = dataset_rows(cases) if is_dataset(cases) else cases
        if isinstance(source, Sized) and not isinstance(source, Iterator):
            source = checks.all(source)  # a bad case stops the run before any is scored
        total = len(source) if isinstance(source, Sized) else None
        folder, resumed = self._folder(config.out)
        keep = config.keep_results if config.keep_results is not None else folder is None
        limits = {key: (lim.max_limit, lim.origin) for key, lim in handed.handed.items()}
        size = self.batch_size or (
            8 * max((n for n, _ in limits.values()), default=DEFAULT_LIMIT)
            if judged
            else 2 * OFFLINE_CASES_IN_FLIGHT
        )
        judge, embedder = config.judge, config.embedder
        check_sendable(cores, judge, embedder)
        connect(self.address)
        permit_actor: Any = ray.remote(Permits)
        permits = {  # by name: the workers look them up, so a restarted worker finds them
            key: (f"contextlens-permits-{uuid.uuid4().hex}", n, origin)
            for key, (n, origin) in limits.items()
        }
        permit_actors: list[Any] = [
            permit_actor.options(
                name=name,
                num_cpus=0,
                max_concurrency=100_000,
                max_restarts=-1,
                max_task_retries=-1,
            ).remote(n)
            for name, n, _ in permits.values()
        ]
        plan = Plan(
            metrics=cores,
            judge=judge,
            embedder=embedder,
            cache=cache_arg(config.cache),
            retry=config.retry,
            thresholds=dict(config.thresholds),
            repeats=config.repeats,
            shards=str(folder.path / SHARDS) if folder is not None else None,
            permits=permits,
            keep=keep,
        )
        started, t0 = datetime.now(timezone.utc), time.perf_counter()
        driver = Driver([b.key for b in bound], keep, folder, total, config.progress, t0)
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
            config,
            driver.ledger,
            started=started,
            t0=t0,
            repeats=config.repeats if judged else 1,
            folder=folder,
            kept=driver.kept,
            complete=not isinstance(config.out, RunFolder),
            data_fingerprint=driver.cases.fingerprint.hexdigest(),
        ).with_cases(driver.cases.cases)

    def preflight(self) -> None:
        """Connect to the cluster now, so a cluster that is not there is said before any
        work (:class:`ClusterUnreachable`)."""
        connect(self.address)

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

    def _start_workers(self, plan: Plan) -> list[Any]:
        count = self.num_workers or max(
            1, int(ray.cluster_resources().get("CPU", 1) // self.cpus_per_worker)
        )
        actor = ray.remote(Worker).options(
            num_cpus=self.cpus_per_worker,
            max_restarts=-1,
            max_task_retries=-1,
            max_concurrency=BATCHES_PER_WORKER,
        )
        return [actor.remote(plan, self.cpus_per_worker) for _ in range(count)]


class ClusterUnreachable(ContextLensError):
    """The Ray cluster an address names is not there."""


def connect(address: str | None) -> None:
    """Connect to the cluster (or start a local one) unless this process is connected;
    :class:`ClusterUnreachable` when the address names no running cluster."""
    if ray.is_initialized():
        return
    hint = "start one with `ray start --head`, or use --ray local to start one here"
    _probe(address, hint)
    try:
        ray.init(
            address=address,
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.WARNING,
        )
    except (ConnectionError, TimeoutError) as exc:
        raise ClusterUnreachable(
            f"no Ray cluster at {address or 'this machine'} ({exc}); {hint}"
        ) from None


def _probe(address: str | None, hint: str) -> None:
    """For a ``HOST:PORT`` address, :class:`ClusterUnreachable` at once when nothing listens
    there (Ray itself waits a minute for a head that is not coming)."""
    if not address or address in ("auto", "local") or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ClusterUnreachable(f"no Ray cluster at {address} ({reason}); {hint}") from None


def is_dataset(obj: Any) -> bool:
    return isinstance(obj, ray.data.Dataset)


def dataset_rows(ds: Any) -> Iterator[dict[str, Any]]:
    """The rows of a ``ray.data.Dataset`` as plain dicts, read block by block."""
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None):
        yield from batch.to_pylist()


def cache_arg(cache: Any) -> Any:
    """``cache=`` as each worker opens it: a Cache object by its file."""
    store = open_cache(cache)
    if isinstance(store, NullCache):
        return False
    return str(store.path)


def check_sendable(metrics: Sequence[Metric[Any]], judge: Any, embedder: Any) -> None:
    """Raise a clear error when what the workers need cannot be sent to them."""
    parts: dict[str, Any] = {f"metric {key_of(m)!r}": m for m in metrics}
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
    if not is_dataset(ds):
        raise TypeError(f"expected a ray.data.Dataset, got {type(ds).__name__}")
    return (executor or RayExecutor()).run(ds, metrics, RunConfig.of(**options))
