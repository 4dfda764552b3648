"""``evaluate``: any mix of metrics over a stream of cases, on one engine.

Cases are consumed lazily, at most a bounded number in flight; each result is written to
``results.jsonl`` as soon as it is known, so memory stays flat and an interrupted run keeps
everything finished so far. Failed items are kept apart with their reasons and counted;
they never enter a mean as 0.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, Iterable, Iterator, Sequence, Sized
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any, Literal, overload

from typing_extensions import Unpack

from contextlens.engine.accounting import UNATTRIBUTED, Ledger, attribute
from contextlens.engine.budget import CostCap, CostCapReached, current_cap
from contextlens.engine.cache import current_repeat, open_cache
from contextlens.engine.limiter import DEFAULT_LIMIT
from contextlens.engine.reach import JudgeUnreachable
from contextlens.files import OutputError
from contextlens.metrics.base import Services
from contextlens.results import EvalRun, ItemResult
from contextlens.runner.binding import BoundMetric, bind_metrics, checked_metrics
from contextlens.runner.checks import Case, CaseChecks, case_id
from contextlens.runner.config import RunConfig, RunOptions
from contextlens.runner.dry_run import CostEstimate, DryRunJudge, estimate_of, measured_completions
from contextlens.runner.executor import Executor, resolve_executor
from contextlens.runner.folder import ResultSink, RunFolder
from contextlens.runner.progress import progress_bar
from contextlens.runner.summaries import (
    Tally,
    failed_item,
    finish_run,
    item_of,
    merge_repeats,
    not_applicable_item,
    not_run_item,
)
from contextlens.schemas import MetricKey
from contextlens.sync import run_sync

__all__ = [
    "OFFLINE_CASES_IN_FLIGHT",
    "aevaluate",
    "cases_in_flight",
    "cost_cap",
    "evaluate",
    "score_item",
]

#: Cases scored at once without a judge when the embedder batches concurrent calls.
OFFLINE_CASES_IN_FLIGHT = 512
#: Seconds between two updates of the progress while no case completes.
HEARTBEAT_SECONDS = 1.0


async def _aiter(cases: Iterable[Any] | AsyncIterable[Any]) -> Any:
    if isinstance(cases, AsyncIterable):
        async for case in cases:
            yield case
    else:
        for case in cases:
            yield case


@overload
async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    dry_run: Literal[False] = False,
    **options: Unpack[RunOptions],
) -> EvalRun: ...


@overload
async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    dry_run: Literal[True],
    **options: Unpack[RunOptions],
) -> CostEstimate: ...


async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    dry_run: bool = False,
    **options: Unpack[RunOptions],
) -> EvalRun | CostEstimate:
    """Evaluate ``cases`` with ``metrics``; see :func:`evaluate`."""
    run_config = RunConfig.of(config, **options)
    cores = checked_metrics(metrics)
    store = open_cache(run_config.cache)
    bound = bind_metrics(
        cores,
        judge=run_config.judge,
        embedder=run_config.embedder,
        cache=store,
        limits=run_config.limits,
        retry=run_config.retry,
        thresholds=run_config.thresholds,
        preflight=not dry_run,  # a dry run makes no call: a key need not be set
    )
    dry: dict[MetricKey, DryRunJudge | None] = {}
    if dry_run:
        bound, dry = _dry_run_metrics(bound, run_config.folder)
    cap = None if dry_run else cost_cap(bound, run_config.max_cost)
    checks = CaseChecks(bound)
    if isinstance(cases, Sized) and not isinstance(cases, (Iterator, AsyncIterable)):
        cases = checks.all(cases)  # a bad case stops the run before its first judge call
    judged = [b for b in bound if b.services.judge is not None]
    repeats = run_config.repeats if judged else 1
    folder = None if dry_run else run_config.folder
    keep = run_config.keep_results if run_config.keep_results is not None else folder is None
    keep = keep and not dry_run
    ledger = Ledger()
    sink = ResultSink(folder.create() if folder is not None else None, keep_cases=keep)
    tallies = {b.key: Tally() for b in bound}
    kept: list[tuple[int, ItemResult]] = []
    total = len(cases) if isinstance(cases, Sized) else None
    progress = False if dry_run else run_config.progress
    tick = progress if callable(progress) else None
    bar = None if callable(progress) else progress_bar(progress, total)
    cases_done = 0
    started, t0 = datetime.now(timezone.utc), time.perf_counter()
    not_run = f"not run: the cost cap of ${cap.limit:g} was reached" if cap is not None else ""

    async def one_metric(b: BoundMetric, case: Case, ident: str) -> ItemResult:
        why = b.not_applicable(case)
        if why is not None:  # one rule for every metric: neither scored nor failed
            return not_applicable_item(ident, b.key, why)
        if dry_run and b.services.judge is None:  # asks no judge: costs nothing
            return not_run_item(ident, b.key, "not run: a dry run")
        start = time.perf_counter()
        try:
            runs = repeats if b.services.judge is not None else 1
            items = [await score_item(b, case, ident, r, ledger) for r in range(runs)]
            stopped = next((i for i in items if i.not_run is not None), None)
            return stopped or merge_repeats(items, b.pass_mark)
        finally:
            tallies[b.key].seconds += time.perf_counter() - start

    def record(item: ItemResult, index: int) -> bool:
        """Write and count one item; False when results can no longer be written."""
        try:
            sink.write(item)
        except OutputError:  # the feed stops; what is in flight finishes unwritten
            stop.set()
            return False
        tallies[item.metric].add_item(index, item)
        if keep:
            kept.append((index, item))
        return True

    def record_case(ident: str, case: Case) -> bool:
        """Write the case whose items were just written; False as :func:`record`."""
        try:
            sink.write_case(ident, case)
        except OutputError:
            stop.set()
            return False
        return True

    async def one_case(case: Case, index: int) -> None:
        nonlocal cases_done
        ident = case_id(case, index)
        applicable = [b for b in bound if b.applies_to(case)]
        done = await asyncio.gather(*(one_metric(b, case, ident) for b in applicable))
        for item in done:
            if not record(item, index):
                return
        if not record_case(ident, case):
            return
        cases_done += 1
        if tick is not None:  # the run's ledger is current: the callback may read it
            with attribute(ledger, UNATTRIBUTED):
                tick(cases_done, total, time.perf_counter() - t0)
        if bar is not None:
            bar.advance(1, time.perf_counter() - t0, ledger.call_latency())

    window = asyncio.Semaphore(cases_in_flight(bound))
    tasks: set[asyncio.Task[None]] = set()
    stop = asyncio.Event()  # set when results can no longer be written: no new work

    fatal: list[BaseException] = []  # what stopped the run (a judge that cannot be reached)

    async def guarded(case: Case, index: int) -> None:
        try:
            await one_case(case, index)
        except JudgeUnreachable as exc:  # no new case starts; the rest is not paid for
            fatal.append(exc)
            stop.set()
        finally:
            window.release()

    async def beat() -> None:
        """The progress is shown every second even when no case completes (every call
        failing, a judge down): a log that says nothing for minutes is a hung run."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            if tick is not None:
                with attribute(ledger, UNATTRIBUTED):
                    tick(cases_done, total, time.perf_counter() - t0)
            if bar is not None:
                bar.advance(0, time.perf_counter() - t0, ledger.call_latency())

    def skip(case: Case, index: int) -> None:
        """A case the run stopped before (its cost cap): not run, for every metric."""
        ident = case_id(case, index)
        for b in bound:
            if b.applies_to(case):
                why = b.not_applicable(case)
                item = not_applicable_item(ident, b.key, why) if why else None
                if not record(item or not_run_item(ident, b.key, not_run), index):
                    return
        record_case(ident, case)

    cap_token = current_cap.set(cap)  # every task the run starts calls within the cap
    heartbeat = asyncio.create_task(beat())
    try:
        with bar if bar is not None else nullcontext():
            try:
                index = 0
                async for raw in _aiter(cases):
                    case = checks.one(raw, index)
                    if cap is not None and cap.reached and not stop.is_set():
                        skip(case, index)  # read and checked, recorded as not run
                        index += 1
                        continue
                    await window.acquire()
                    if stop.is_set():
                        window.release()
                        break
                    task = asyncio.create_task(guarded(case, index))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    index += 1
            finally:
                if tasks:  # what is under way finishes and is written before any error
                    await asyncio.gather(*tasks)
    finally:
        sink.close()
        heartbeat.cancel()
        current_cap.reset(cap_token)
    if sink.failed is not None:  # nothing more was sent once a result could not be written
        raise sink.failed
    if fatal:
        raise fatal[0]
    if dry_run:
        return estimate_of([b.key for b in bound], dry, index)

    return finish_run(
        bound,
        tallies,
        run_config,
        ledger,
        started=started,
        t0=t0,
        repeats=repeats,
        folder=folder,
        kept=kept,
        complete=not isinstance(run_config.out, RunFolder),  # a caller's own is theirs
        stopped=not_run.removeprefix("not run: ") if cap is not None and cap.reached else None,
        data_fingerprint=sink.fingerprint.hexdigest(),
    ).with_cases(sink.cases)


async def score_item(
    b: BoundMetric, case: Case, ident: str, repeat: int, ledger: Ledger
) -> ItemResult:
    """One metric on one case (one repeat): its result, or a failed item with the reason."""
    token = current_repeat.set(repeat)
    key: MetricKey = b.key
    try:
        with attribute(ledger, key, ident):
            result = await b.metric.score(case, b.services)
        return item_of(ident, key, b.judge_name, result, b.pass_mark)
    except JudgeUnreachable:  # not this item's fault: the run stops
        raise
    except CostCapReached as exc:  # the cap stops the run: this item is not run, not failed
        return not_run_item(ident, key, f"not run: {exc}")
    except Exception as exc:  # a failed item is recorded, never lost
        return failed_item(ident, key, b.judge_name, exc)
    finally:
        current_repeat.reset(token)


def _dry_run_metrics(
    bound: Sequence[BoundMetric], folder: RunFolder | None
) -> tuple[list[BoundMetric], dict[MetricKey, DryRunJudge | None]]:
    """The metrics of a dry run: each judge replaced by a :class:`DryRunJudge`, expecting
    the replies measured by the runs in the same ``out`` folder."""
    names = {b.key: b.services.judge.name for b in bound if b.services.judge is not None}
    measured = measured_completions(folder.out if folder is not None else None, names)
    out, judges = [], {}
    for b in bound:
        judge = b.services.judge
        dry = DryRunJudge(judge, measured) if judge is not None else None
        judges[b.key] = dry
        out.append(b if dry is None else replace(b, services=Services(dry, b.services.embedder)))
    return out, judges


def cost_cap(bound: Sequence[BoundMetric], max_cost: float | None) -> CostCap | None:
    """The cap of a run's judge calls (None without ``max_cost``); a ValueError when a
    judge's cost cannot be known: its calls are not sent by contextlens, or its backend's
    ``price_key`` has no price."""
    from contextlens.judges.llm import LLMJudge

    if max_cost is None:
        return None
    cap = CostCap(max_cost)
    for b in bound:
        judge = b.services.judge
        if judge is None:
            continue
        if not isinstance(judge, LLMJudge):
            raise ValueError(
                f"--max-cost: the judge {judge.name} of {b.key} makes its own calls, so "
                "contextlens cannot bound their cost; give a judge spec or a chat model"
            )
        cap.check_priced(judge.backend.price_key, judge.name)
    return cap


def cases_in_flight(bound: Sequence[BoundMetric]) -> int:
    """Cases scored at once: twice the judge calls allowed; offline with an embedder that
    batches concurrent calls, enough to make its batches large (small ones pad more and
    cost more per run)."""
    limits = [b.services.judge.max_connections() for b in bound if b.services.judge is not None]
    if not limits and all(b.services.embedder.batches_concurrent_calls for b in bound):
        return OFFLINE_CASES_IN_FLIGHT
    return max(8, 2 * max(limits, default=DEFAULT_LIMIT))


@overload
def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    dry_run: Literal[False] = False,
    **options: Unpack[RunOptions],
) -> EvalRun: ...


@overload
def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    dry_run: Literal[True],
    **options: Unpack[RunOptions],
) -> CostEstimate: ...


def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    dry_run: bool = False,
    **options: Unpack[RunOptions],
) -> EvalRun | CostEstimate:
    """Evaluate ``cases`` (sessions for ``context``, test cases for the others) with
    ``metrics`` and return an :class:`EvalRun`.

    Each case must have a unique id (a test case's ``name``, a session's ``session_id``)
    and the fields each of its metrics ``requires``; an :class:`InputError` names the case
    (its index) otherwise. A list, or any sized collection, is checked whole before the
    first judge call; an iterator is checked as it is consumed, and what was under way when
    a bad case came finishes and is written first.

    ``metrics``: metric names (``"context-precision"``), metric objects, or the seed metric
    classes (``ContextPrecision(model=...)``); each goes by its key, the registered name
    (``NAME:LABEL`` for an instance given a ``label``). The run's settings are the keyword
    arguments of :class:`~contextlens.runner.config.RunConfig` (``judge``, ``embedder``,
    ``max_concurrency``, ``retry``, ``repeats``, ``cache``, ``out``, ``max_cost``,
    ``statistical_mode``, ``keep_results``, ``progress``), or a ready ``config=`` they are
    set over. A metric's own ``model=`` / ``judge=`` wins over the run's ``judge``. With
    ``out``, the run writes into its own ``out/<run id>/`` (the run's ``out_dir``)
    ``results.jsonl`` (as results come) and ``summary.json``, then points ``out/latest`` at
    it; a :class:`RunFolder` is written into but not completed.
    ``max_cost``: USD the run's judge calls may cost at most; the run stops sending calls
    before the next could pass it, and the cases it did not score are ``not_run`` (the run's
    ``stopped`` says why).
    ``dry_run``: make no judge call and return a
    :class:`~contextlens.runner.dry_run.CostEstimate` of the calls, tokens and cost the run
    would take, every case read and checked and every prompt built.
    ``executor``: where the cases are scored: None here, ``"ray"`` (or a
    ``contextlens.scale.ray.RayExecutor``) sharded over the workers of a Ray cluster,
    with the same results (a dry run is always made here).
    """
    run_config = RunConfig.of(config, **options)
    if dry_run:
        return run_sync(aevaluate(cases, metrics, config=run_config, dry_run=True))
    if executor is not None:
        return resolve_executor(executor).run(cases, metrics, run_config)
    return run_sync(aevaluate(cases, metrics, config=run_config))
