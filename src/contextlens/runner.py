"""``evaluate``: any mix of metrics over a stream of cases, on one engine.

Cases are consumed lazily, at most a bounded number in flight; each result is written to
``results.jsonl`` as soon as it is known, so memory stays flat and an interrupted run keeps
everything finished so far. Failed items are kept apart with their reasons and counted;
they never enter a mean as 0.

With ``out=OUT`` each run writes into its own folder, ``OUT/<run id>/`` (a
:class:`RunFolder`), so runs sharing ``OUT`` never mix and a failed run leaves nothing but
its own partial results; ``OUT/latest`` names the newest completed run.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterable, Callable, Iterable, Iterator, Mapping, Sequence, Sized
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ValidationError

from contextlens.embeddings.adapters import as_embedder
from contextlens.embeddings.base import Embedder
from contextlens.embeddings.cached import CachedEmbedder
from contextlens.engine.accounting import UNATTRIBUTED, Ledger, attribute
from contextlens.engine.cache import Cache, NullCache, current_repeat, open_cache
from contextlens.engine.limiter import DEFAULT_LIMIT
from contextlens.errors import InputError
from contextlens.judges.base import Judge
from contextlens.judges.llm import LLMJudge
from contextlens.judges.resolve import resolve_judge
from contextlens.metrics import registry
from contextlens.metrics.base import (
    Metric,
    Services,
    own_embedder,
    own_judge,
    required_fields,
    unmet_requirement,
    uses_judge,
)
from contextlens.results import EvalRun, ItemResult, MetricSummary
from contextlens.retriever import input_error
from contextlens.schemas import Dataset, MetricResult, ModelTestCase
from contextlens.stats import BayesianMode, StatisticalMode, repeated_interval
from contextlens.sync import run_sync

__all__ = [
    "LATEST",
    "EvalRun",
    "Executor",
    "ItemResult",
    "MetricSummary",
    "ProgressCallback",
    "RunFolder",
    "aevaluate",
    "as_metric",
    "evaluate",
    "latest_run",
    "new_run_id",
]

Case = Dataset | ModelTestCase

ProgressCallback = Callable[[int, int | None, float], None]
"""Called after each case with (cases done, cases in all or None, seconds since the start)."""


def as_metric(obj: Any) -> Metric[Any]:
    """The metric ``obj`` stands for: a registered name, a metric, or a seed-style facade
    (its ``metric`` attribute is the metric it wraps)."""
    if isinstance(obj, str):
        return registry.create(obj)
    inner = getattr(obj, "metric", None)
    if isinstance(inner, Metric):
        return inner
    if isinstance(obj, Metric):
        return obj
    raise TypeError(
        f"not a metric: {obj!r}; pass a metric name ({', '.join(registry.names())}), a "
        "metric object or one of the seed metric classes"
    )


@dataclass(frozen=True)
class _Bound:
    """A metric with the services it runs on."""

    metric: Metric[Any]
    services: Services

    @property
    def judge_name(self) -> str | None:
        """The judge the metric used: its name, ``offline``, or None when it asks none."""
        if self.services.judge is not None:
            return self.services.judge.name
        return "offline" if uses_judge(self.metric) else None


def _bind(
    metrics: Sequence[Metric[Any]],
    judge: Any,
    embedder: Any,
    store: Cache | NullCache,
    max_concurrency: int | None,
) -> list[_Bound]:
    """Each metric's services: its own judge and embedder if it has them, else the run's."""

    def judge_for(choice: Any) -> Judge | None:
        return resolve_judge(choice, max_concurrency=max_concurrency, cache=store)

    def embedder_for(choice: Any) -> Embedder:
        return CachedEmbedder(as_embedder(choice), store)

    run_judge = judge_for(judge)
    run_embedder = embedder_for(embedder)
    bound = []
    for metric in metrics:
        own = own_judge(metric)
        own_emb = own_embedder(metric)
        judge_obj = run_judge if own is None else judge_for(own)
        bound.append(
            _Bound(
                metric,
                Services(
                    judge=judge_obj if uses_judge(metric) else None,
                    embedder=run_embedder if own_emb is None else embedder_for(own_emb),
                ),
            )
        )
    return bound


@dataclass
class _Tally:
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


class _CaseChecks:
    """What a case must meet before it is scored: a unique id (a test case's ``name``, a
    session's ``session_id``) and the fields each of its metrics requires. Keeps the ids
    seen, nothing else."""

    def __init__(self, bound: Sequence[_Bound]) -> None:
        self.needs = [(b.metric, required_fields(b.metric)) for b in bound]
        self.seen: dict[tuple[bool, str], int] = {}
        self.done = False

    def one(self, raw: Any, index: int) -> Case:
        """``raw`` as a case, checked (once: a collection checked whole is not again)."""
        case = _as_case(raw, index)
        if self.done:
            return case
        session = isinstance(case, Dataset)
        ident = case.session_id if session else case.name  # type: ignore[union-attr]
        if ident is not None:
            first = self.seen.setdefault((session, ident), index)
            if first != index:
                what = "session_id" if session else "id"
                raise InputError(
                    f"case {index}: duplicate {what} {ident!r} (also case {first})",
                    field="session_id" if session else "name",
                )
        for metric, requires in self.needs:
            if isinstance(case, metric.case_type):
                unmet = unmet_requirement(case, requires, metric.name)
                if unmet is not None:
                    raise InputError(f"case {index}: {unmet[1]}", field=unmet[0])
        return case

    def all(self, cases: Iterable[Any]) -> list[Case]:
        """Every case of a collection, checked before any is scored."""
        checked = [self.one(raw, index) for index, raw in enumerate(cases)]
        self.done = True
        return checked


def _case_id(case: Case, index: int) -> str:
    if isinstance(case, Dataset):
        return case.session_id
    return case.name or f"case-{index:06d}"


def _item(case_id: str, judge: str | None, result: MetricResult) -> ItemResult:
    return ItemResult(
        case_id=case_id,
        metric=result.metric,
        score=result.score,
        reason=result.reason,
        error=result.error,
        success=result.success,
        judge=judge,
        details=result.details,
    )


def _failed_item(case_id: str, metric: str, judge: str | None, exc: BaseException) -> ItemResult:
    item = ItemResult(
        case_id=case_id,
        metric=metric,
        score=None,
        error=f"{type(exc).__name__}: {exc}",
        judge=judge,
    )
    item._exception = exc.with_traceback(None)
    return item


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


LATEST = "latest"
"""The name, in an ``out`` folder, of the pointer to its newest completed run."""


def new_run_id() -> str:
    """A fresh run id: 12 hex digits."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class RunFolder:
    """Where one run writes: ``<out>/<run_id>/``.

    :func:`evaluate` given a path makes one and completes it when the run ends; given a
    ``RunFolder`` it writes into it and leaves :meth:`complete` to the caller, who may add
    files first (the command adds ``report.html``).
    """

    out: Path
    run_id: str = field(default_factory=new_run_id)

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))

    @property
    def path(self) -> Path:
        """The run's own folder."""
        return self.out / self.run_id

    def create(self) -> Path:
        """Make the run's folder (and ``out``); ``FileExistsError`` if it exists: a folder
        serves one run."""
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            self.path.mkdir()
        except FileExistsError:
            raise FileExistsError(
                f"the run folder {self.path} exists already; a run folder serves one run"
            ) from None
        return self.path

    def complete(self) -> Path:
        """Make ``<out>/latest`` name this run and return it: a relative symlink to the run's
        folder, put in place atomically with ``os.replace``, or, where symlinks cannot be
        made, a text file holding the run id (replaced the same way)."""
        link = self.out / LATEST
        tmp = self.out / f".{LATEST}.{self.run_id}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.symlink(self.run_id, tmp, target_is_directory=True)
        except (OSError, NotImplementedError):
            tmp.write_text(self.run_id + "\n", encoding="utf-8")
        try:
            os.replace(tmp, link)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise InputError(
                f"cannot make it name run {self.run_id}: {exc.strerror or exc}", file=str(link)
            ) from None
        return link


def latest_run(out: str | Path) -> Path | None:
    """The folder of the newest completed run in ``out`` (as ``out/latest`` names it), or
    None when no run has completed there."""
    link = Path(out) / LATEST
    if link.is_symlink():
        return Path(out) / os.readlink(link)
    if link.is_file():
        run_id = link.read_text(encoding="utf-8").strip()
        return Path(out) / run_id if run_id else None
    return None


class _Sink:
    """Writes each item result as one JSON line, flushed at once."""

    def __init__(self, folder: Path | None) -> None:
        self.handle: IO[str] | None = None
        if folder is not None:
            self.handle = open(folder / "results.jsonl", "x", encoding="utf-8")  # noqa: SIM115

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
    max_concurrency: int | None = None,
    cache: Any = True,
    repeats: int = 1,
    out: str | Path | RunFolder | None = None,
    statistical_mode: StatisticalMode | None = None,
    progress: bool | ProgressCallback | None = None,
    keep_results: bool | None = None,
) -> EvalRun:
    """Evaluate ``cases`` with ``metrics``; see :func:`evaluate`."""
    cores = checked_metrics(metrics, repeats, max_concurrency)
    names = [m.name for m in cores]
    store = open_cache(cache)
    bound = _bind(cores, judge, embedder, store, max_concurrency)
    checks = _CaseChecks(bound)
    if isinstance(cases, Sized) and not isinstance(cases, (Iterator, AsyncIterable)):
        cases = checks.all(cases)  # a bad case stops the run before its first judge call
    judged = [b for b in bound if b.services.judge is not None]
    repeats_eff = repeats if judged else 1
    mode = statistical_mode or BayesianMode()
    folder = RunFolder(Path(out)) if isinstance(out, (str, os.PathLike)) else out
    keep = keep_results if keep_results is not None else folder is None
    ledger = Ledger()
    sink = _Sink(folder.create() if folder is not None else None)
    tallies = {name: _Tally() for name in names}
    kept: list[tuple[int, ItemResult]] = []
    total = len(cases) if hasattr(cases, "__len__") else None  # type: ignore[arg-type]
    tick = progress if callable(progress) else None
    bar = None if callable(progress) else _progress(progress, total)
    cases_done = 0
    started, t0 = datetime.now(timezone.utc), time.perf_counter()

    async def one_metric(b: _Bound, case: Case, case_id: str) -> ItemResult:
        start = time.perf_counter()
        try:
            runs = repeats_eff if b.services.judge is not None else 1
            items = [await _score(b, case, case_id, r, ledger) for r in range(runs)]
            return _merge_repeats(items)
        finally:
            tallies[b.metric.name].seconds += time.perf_counter() - start

    async def one_case(case: Case, index: int) -> None:
        nonlocal cases_done
        case_id = _case_id(case, index)
        applicable = [b for b in bound if isinstance(case, b.metric.case_type)]
        done = await asyncio.gather(*(one_metric(b, case, case_id) for b in applicable))
        for item in done:
            sink.write(item)
            tallies[item.metric].add_item(index, item)
            if keep:
                kept.append((index, item))
        cases_done += 1
        if tick is not None:  # the run's ledger is current: the callback may read it
            with attribute(ledger, UNATTRIBUTED):
                tick(cases_done, total, time.perf_counter() - t0)
        if bar is not None:
            elapsed = time.perf_counter() - t0
            finished = bar.tasks[0].completed + 1
            rate = f"{finished / max(elapsed, 1e-9):.1f}/s"
            latency = ledger.call_latency()
            if latency is not None:
                rate += f", {latency[1]:.1f} s per judge call"
            bar.update(bar.task_ids[0], advance=1, rate=rate)

    window = asyncio.Semaphore(_cases_in_flight(bound))
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
                    case = checks.one(raw, index)
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

    return finish_run(
        bound,
        tallies,
        mode,
        ledger,
        started=started,
        t0=t0,
        repeats=repeats_eff,
        folder=folder,
        kept=kept,
        complete=not isinstance(out, RunFolder),  # a caller's own RunFolder is theirs
    )


def checked_metrics(
    metrics: Sequence[Any], repeats: int, max_concurrency: int | None
) -> list[Metric[Any]]:
    """The metric cores of a run, once its settings are checked (ValueError naming the one
    that is wrong)."""
    if not metrics:
        raise ValueError("no metrics given")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if max_concurrency is not None and max_concurrency < 1:
        raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
    cores = [as_metric(m) for m in metrics]
    names = [m.name for m in cores]
    if len(set(names)) != len(names):
        raise ValueError(f"two metrics share a name: {names}")
    return cores


def finish_run(
    bound: Sequence[_Bound],
    tallies: Mapping[str, _Tally],
    mode: StatisticalMode,
    ledger: Ledger,
    *,
    started: datetime,
    t0: float,
    repeats: int,
    folder: RunFolder | None,
    kept: list[tuple[int, ItemResult]],
    complete: bool,
) -> EvalRun:
    """The :class:`EvalRun` of a finished run: summaries from the tallies, the ledger's
    accounting, the kept items in case order; with a folder, ``summary.json`` is written and
    (``complete``) the folder recorded as the newest."""
    judges = [b.judge_name for b in bound if b.judge_name is not None]
    summaries = {
        b.metric.name: _summary(b.metric.name, tallies[b.metric.name], mode, ledger).model_copy(
            update={"judge": b.judge_name}
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
        out_dir=str(folder.path) if folder is not None else None,
        results=[item for _, item in sorted(kept, key=lambda pair: pair[0])],
    )
    if folder is not None:
        (folder.path / "summary.json").write_text(
            json.dumps(run.model_dump(exclude={"results"}), indent=2), encoding="utf-8"
        )
        if complete:
            folder.complete()
    return run


async def _score(b: _Bound, case: Case, case_id: str, repeat: int, ledger: Ledger) -> ItemResult:
    """One metric on one case (one repeat): its result, or a failed item with the reason."""
    token = current_repeat.set(repeat)
    try:
        with attribute(ledger, b.metric.name, case_id):
            result = await b.metric.score(case, b.services)
        return _item(case_id, b.judge_name, result)
    except Exception as exc:  # a failed item is recorded, never lost
        return _failed_item(case_id, b.metric.name, b.judge_name, exc)
    finally:
        current_repeat.reset(token)


def _cases_in_flight(bound: Sequence[_Bound]) -> int:
    """Cases scored at once: twice the judge calls allowed; offline with an embedder that
    batches concurrent calls, enough to make its batches large (small ones pad more and
    cost more per run)."""
    limits = [
        b.services.judge.limiter.max_limit
        if isinstance(b.services.judge, LLMJudge)
        else DEFAULT_LIMIT
        for b in bound
        if b.services.judge is not None
    ]
    if not limits and all(
        getattr(b.services.embedder, "batches_concurrent_calls", False) for b in bound
    ):
        return OFFLINE_CASES_IN_FLIGHT
    return max(8, 2 * max(limits, default=DEFAULT_LIMIT))


def _summary(name: str, tally: _Tally, mode: StatisticalMode, ledger: Ledger) -> MetricSummary:
    ordered = sorted(tally.scores, key=lambda pair: pair[0])
    rows = [s for _, s in ordered if any(v is not None for v in s)]
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


@runtime_checkable
class Executor(Protocol):
    """Runs an evaluation somewhere else (a cluster) and returns the :class:`EvalRun` a
    local run of the same cases would: ``run(cases, metrics, **options)`` takes what
    :func:`evaluate` takes."""

    def run(self, cases: Iterable[Any], metrics: Sequence[Any], **options: Any) -> EvalRun: ...


#: Executors :func:`evaluate` knows by name: ``module:class``, imported when first asked
#: for, so the core never imports what an executor needs.
EXECUTORS = {"ray": ("contextlens.scale.ray:RayExecutor", "ray")}


def resolve_executor(executor: str | Executor) -> Executor:
    """The executor ``executor`` names (``"ray"``), or ``executor`` itself."""
    if isinstance(executor, str):
        if executor not in EXECUTORS:
            raise ValueError(f"unknown executor {executor!r}; known: {', '.join(EXECUTORS)}")
        target, extra = EXECUTORS[executor]
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] == extra:
                raise ImportError(
                    f"executor={executor!r} needs {extra}: pip install 'contextlens[{extra}]'"
                ) from None
            raise
        return getattr(module, attr)()
    if isinstance(executor, Executor):
        return executor
    raise TypeError(f"executor must be a name ({', '.join(EXECUTORS)}) or an Executor")


def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    judge: Any = None,
    embedder: Any = None,
    max_concurrency: int | None = None,
    cache: Any = True,
    repeats: int = 1,
    out: str | Path | RunFolder | None = None,
    statistical_mode: StatisticalMode | None = None,
    progress: bool | ProgressCallback | None = None,
    keep_results: bool | None = None,
    executor: str | Executor | None = None,
) -> EvalRun:
    """Evaluate ``cases`` (sessions for ``context``, test cases for the others) with
    ``metrics`` and return an :class:`EvalRun`.

    Each case must have a unique id (a test case's ``name``, a session's ``session_id``)
    and the fields each of its metrics ``requires``; an :class:`InputError` names the case
    (its index) otherwise. A list, or any sized collection, is checked whole before the
    first judge call; an iterator is checked as it is consumed, and what was under way when
    a bad case came finishes and is written first.

    ``metrics``: registered names (``"context-precision"``), metric objects, or the seed
    metric classes (``ContextPrecision(model=...)``). ``judge``: the judge of every metric
    that has none of its own (a metric's own ``model=`` / ``judge=`` wins): a Judge, a
    ChatBackend, a LangChain chat model or a spec string (``"offline"``, ``"openai:MODEL"``,
    ``"http://HOST:PORT/v1#MODEL"``, ``"litellm:PROVIDER/MODEL"``); None is offline. Each
    summary records the judge its metric used. ``embedder``: the same for the embedder.
    ``max_concurrency`` sets the bound on judge calls in flight per backend (None keeps the
    backend's, 16 for a new one). ``cache``: True (the user cache folder), False, or a
    path. ``repeats``: judge each item ``k`` times and fold the judge's own spread into the
    interval. ``out``: a folder; the run writes into its own ``out/<run id>/`` (the run's
    ``out_dir``) ``results.jsonl`` (as results come) and ``summary.json``, then points
    ``out/latest`` at it. A :class:`RunFolder` is written into but not completed.
    ``progress``: a progress bar on stderr (None: when stderr is a terminal), or a
    :data:`ProgressCallback` called after each case instead.
    ``executor``: where the cases are scored: None here, ``"ray"`` (or a
    ``contextlens.scale.ray.RayExecutor``) sharded over the workers of a Ray cluster,
    with the same results.
    """
    options: dict[str, Any] = {
        "judge": judge,
        "embedder": embedder,
        "max_concurrency": max_concurrency,
        "cache": cache,
        "repeats": repeats,
        "out": out,
        "statistical_mode": statistical_mode,
        "progress": progress,
        "keep_results": keep_results,
    }
    if executor is not None:
        return resolve_executor(executor).run(cases, metrics, **options)
    return run_sync(aevaluate(cases, metrics, **options))
