"""The run loop: a stream of cases through a run's bound metrics, at most a bounded number of
cases in flight, each result written as soon as it is known.

:class:`RunLoop` holds what one run keeps while it runs (its metrics, result sink, tallies,
ledger, cost cap, progress and stop signal); :func:`~contextlens.runner.evaluate.aevaluate`
builds one and awaits it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from contextlib import nullcontext
from datetime import datetime, timezone
from typing import Any

from contextlens.engine.accounting import UNATTRIBUTED, Ledger, attribute
from contextlens.engine.budget import CostCap, CostCapReached, current_cap
from contextlens.engine.cache import current_repeat
from contextlens.engine.limiter import current_turns
from contextlens.engine.reach import JudgeUnreachable
from contextlens.files import OutputError
from contextlens.results import EvalRun, ItemResult
from contextlens.runner.binding import BoundMetric
from contextlens.runner.checks import Case, CaseChecks, case_id
from contextlens.runner.config import RunConfig
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
from contextlens.sync import gather_all

__all__ = ["HEARTBEAT_SECONDS", "RunLoop", "score_item"]

#: Seconds between two updates of the progress while no case completes.
HEARTBEAT_SECONDS = 1.0


class RunLoop:
    """One run of ``bound`` over a stream of cases: its folder is made when the loop is,
    :meth:`run` scores the cases, :meth:`finish` gives the :class:`EvalRun`.

    A dry run writes nothing, keeps nothing, shows no progress and scores only the metrics
    that ask a judge (a :class:`~contextlens.runner.dry_run.DryRunJudge`)."""

    def __init__(
        self,
        bound: Sequence[BoundMetric],
        checks: CaseChecks,
        config: RunConfig,
        *,
        cap: CostCap | None,
        in_flight: int,
        total: int | None,
        dry_run: bool = False,
    ) -> None:
        self.bound, self.checks, self.config = bound, checks, config
        self.cap, self.total, self.dry_run = cap, total, dry_run
        judged = any(b.services.judge is not None for b in bound)
        self.repeats = config.repeats if judged else 1
        self.folder = None if dry_run else config.folder
        keep = config.keep_results if config.keep_results is not None else self.folder is None
        self.keep = keep and not dry_run
        self.ledger = Ledger()
        made = self.folder.create() if self.folder is not None else None
        self.sink = ResultSink(made, keep_cases=self.keep)
        self.tallies = {b.key: Tally() for b in bound}
        self.kept: list[tuple[int, ItemResult]] = []
        progress = False if dry_run else config.progress
        self.tick = progress if callable(progress) else None
        self.bar = None if callable(progress) else progress_bar(progress, total)
        self.read = 0  # cases read from the stream
        self.cases_done = 0  # cases scored and written
        self.started, self.t0 = datetime.now(timezone.utc), time.perf_counter()
        self.window = asyncio.Semaphore(in_flight)
        self.stop = asyncio.Event()  # set when results can no longer be written: no new work
        self.fatal: list[BaseException] = []  # what stopped the run (an unreachable judge)

    @property
    def not_run(self) -> str:
        """The reason of the items the cost cap left unscored."""
        if self.cap is None:
            return ""
        return f"not run: the cost cap of ${self.cap.limit:g} was reached"

    async def run(self, cases: Iterable[Any] | AsyncIterable[Any]) -> None:
        """Score ``cases``; what was under way when the feed stopped (a bad case, Ctrl-C) is
        finished and written first. Raises what stopped the run: a result that could not be
        written, then a judge that cannot be reached."""
        cap_token = current_cap.set(self.cap)  # every task the run starts calls within the cap
        turns_token = current_turns.set(self.cap)  # and its metrics take turns for slots
        heartbeat = asyncio.create_task(self.beat())
        try:
            with self.bar if self.bar is not None else nullcontext():
                await self.feed(cases)
        finally:
            self.sink.close()
            heartbeat.cancel()
            current_turns.reset(turns_token)
            current_cap.reset(cap_token)
        if self.sink.failed is not None:  # nothing more was sent once a write failed
            raise self.sink.failed
        if self.fatal:
            raise self.fatal[0]

    async def feed(self, cases: Iterable[Any] | AsyncIterable[Any]) -> None:
        """Read, check and start each case when the window has room; once the cap is
        reached, the rest is read, checked and recorded as not run."""
        tasks: set[asyncio.Task[None]] = set()
        try:
            async for raw in _aiter(cases):
                case = self.checks.one(raw, self.read)
                if self.cap is not None and self.cap.reached and not self.stop.is_set():
                    self.skip(case, self.read)  # read and checked, recorded as not run
                else:
                    await self.window.acquire()
                    if self.stop.is_set():
                        self.window.release()
                        break
                    task = asyncio.create_task(self.guarded(case, self.read))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                self.read += 1
        finally:
            if tasks:  # what is under way finishes and is written before any error
                await asyncio.gather(*tasks)

    async def guarded(self, case: Case, index: int) -> None:
        """One case in the window; a judge that cannot be reached stops the feed."""
        try:
            await self.score_case(case, index)
        except JudgeUnreachable as exc:  # no new case starts; the rest is not paid for
            self.fatal.append(exc)
            self.stop.set()
        finally:
            self.window.release()

    async def score_case(self, case: Case, index: int) -> None:
        """Every metric that applies to ``case``, at once; its items, then the case, written."""
        ident = case_id(case, index)
        applicable = [b for b in self.bound if b.applies_to(case)]
        done = await gather_all(self.score(b, case, ident) for b in applicable)
        if not all(self.record(item, index) for item in done):
            return
        if not self.record_case(ident, case):
            return
        self.cases_done += 1
        self.show(1)

    async def score(self, b: BoundMetric, case: Case, ident: str) -> ItemResult:
        """One metric on one case, over the run's repeats when it asks a judge."""
        why = b.not_applicable(case)
        if why is not None:  # one rule for every metric: neither scored nor failed
            return not_applicable_item(ident, b.key, why)
        if self.dry_run and b.services.judge is None:  # asks no judge: costs nothing
            return not_run_item(ident, b.key, "not run: a dry run")
        tally = self.tallies[b.key]
        tally.begin()  # the metric's wall time: its items overlap, their waits are not added
        try:
            items: list[ItemResult] = []
            for repeat in range(self.repeats if b.services.judge is not None else 1):
                items.append(await score_item(b, case, ident, repeat, self.ledger))
                if items[-1].not_run is not None:  # the cap: no further repeat is paid for
                    return items[-1]
            return merge_repeats(items, b.pass_mark)
        finally:
            tally.end()

    def record(self, item: ItemResult, index: int) -> bool:
        """Write and count one item; False when results can no longer be written."""
        try:
            self.sink.write(item)
        except OutputError:  # the feed stops; what is in flight finishes unwritten
            self.stop.set()
            return False
        self.tallies[item.metric].add_item(index, item)
        if self.keep:
            self.kept.append((index, item))
        return True

    def record_case(self, ident: str, case: Case) -> bool:
        """Write the case whose items were just written; False as :meth:`record`."""
        try:
            self.sink.write_case(ident, case)
        except OutputError:
            self.stop.set()
            return False
        return True

    def skip(self, case: Case, index: int) -> None:
        """A case the run stopped before (its cost cap): not run, for every metric."""
        ident = case_id(case, index)
        for b in self.bound:
            if b.applies_to(case):
                why = b.not_applicable(case)
                item = not_applicable_item(ident, b.key, why) if why else None
                if not self.record(item or not_run_item(ident, b.key, self.not_run), index):
                    return
        self.record_case(ident, case)

    async def beat(self) -> None:
        """The progress is shown every second even when no case completes (every call
        failing, a judge down): a log that says nothing for minutes is a hung run."""
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            self.show(0)

    def show(self, advanced: int) -> None:
        """The progress, ``advanced`` more cases done."""
        if self.tick is not None:  # the run's ledger is current: the callback may read it
            with attribute(self.ledger, UNATTRIBUTED):
                self.tick(self.cases_done, self.total, time.perf_counter() - self.t0)
        if self.bar is not None:
            self.bar.advance(advanced, time.perf_counter() - self.t0, self.ledger.call_latency())

    def finish(self) -> EvalRun:
        """The run's :class:`EvalRun`, its summary written into its folder."""
        reached = self.cap is not None and self.cap.reached
        return finish_run(
            self.bound,
            self.tallies,
            self.config,
            self.ledger,
            started=self.started,
            t0=self.t0,
            repeats=self.repeats,
            folder=self.folder,
            kept=self.kept,
            complete=not isinstance(self.config.out, RunFolder),  # a caller's own is theirs
            stopped=self.not_run.removeprefix("not run: ") if reached else None,
            data_fingerprint=self.sink.fingerprint.hexdigest(),
        ).with_cases(self.sink.cases)


async def score_item(
    b: BoundMetric, case: Case, ident: str, repeat: int, ledger: Ledger
) -> ItemResult:
    """One metric on one case (one repeat): its result, or a failed item with the reason."""
    token = current_repeat.set(repeat)
    key: MetricKey = b.key
    try:
        with attribute(ledger, key, ident, b.judge_name):
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


async def _aiter(cases: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(cases, AsyncIterable):
        async for case in cases:
            yield case
    else:
        for case in cases:
            yield case
