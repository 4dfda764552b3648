"""The driver's side of a run: it feeds batches to the workers, tallies what comes back,
writes ``results.jsonl`` and, on resume, takes over what an earlier run finished."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import ray

from contextlens.cases import CASES_FILE
from contextlens.engine.accounting import UNATTRIBUTED, Ledger, attribute
from contextlens.errors import InputError
from contextlens.results import ItemResult
from contextlens.runner import BoundMetric, CaseChecks, RunFolder, Tally, case_id, progress_bar
from contextlens.runner.folder import CaseLog
from contextlens.scale.ray.worker import Payload, whole_lines
from contextlens.schemas import MetricKey, ModelTestCase

__all__ = ["BATCHES_PER_WORKER", "SHARDS", "Driver", "finished_before", "named"]

SHARDS = "shards"
"""The folder, in a run's folder, where workers write their batches."""

#: Batches a worker holds at once: one scored while the next waits, so no worker idles.
BATCHES_PER_WORKER = 2


class Driver:
    """The driver's side of a run: feeds batches, tallies what comes back, writes
    ``results.jsonl`` and, on resume, takes over what the earlier run finished."""

    def __init__(
        self,
        keys: list[MetricKey],
        keep: bool,
        folder: RunFolder | None,
        total: int | None,
        progress: Any,
        t0: float,
    ) -> None:
        self.tallies = {key: Tally() for key in keys}
        self.ledger = Ledger()
        self.kept: list[tuple[int, ItemResult]] = []
        self.keep = keep
        self.folder = folder
        self.total = total
        self.tick = progress if callable(progress) else None
        self.bar = None if callable(progress) else progress_bar(progress, total)
        self.t0 = t0
        self.attempt = uuid.uuid4().hex[:8]
        self.done_before: dict[str, dict[str, str]] = {}
        self.sink: IO[str] | None = None
        self.cases = CaseLog(None, keep=keep)
        self.cases_done = 0

    # -- the run folder
    def open(self, resumed: bool) -> None:
        """Create (or, resuming, take over) the run's folder and open ``results.jsonl``."""
        assert self.folder is not None
        path = self.folder.path
        if not resumed:
            self.folder.create()
        else:
            self.done_before = finished_before(path)
            old = path / "results.jsonl"
            if old.exists():  # kept as a shard until the run ends: a kill loses nothing
                keep_as = path / SHARDS / f"{self.attempt}-previous"
                keep_as.mkdir(parents=True)
                os.replace(old, keep_as / "results.jsonl")
        (path / SHARDS).mkdir(exist_ok=True)
        self.sink = open(path / "results.jsonl", "x", encoding="utf-8")  # noqa: SIM115
        (path / CASES_FILE).unlink(missing_ok=True)  # every case is written again below
        self.cases = CaseLog(path)

    def close(self) -> None:
        self.cases.close()
        if self.sink is not None:
            self.sink.close()
            self.sink = None
        if self.bar is not None:
            self.bar.__exit__()
            self.bar = None

    # -- the feed
    def drive(
        self,
        source: Iterable[Any],
        checks: CaseChecks,
        size: int,
        workers: list[Any],
        bound: Sequence[BoundMetric],
    ) -> None:
        """Feed ``source`` to ``workers`` in batches of ``size``, at most
        :data:`BATCHES_PER_WORKER` each at a time, and take in what they finish."""
        if self.bar is not None:
            self.bar.__enter__()
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
                checked = checks.one(raw, index)
                case = named(checked, index)
            except InputError:  # what is under way finishes and is written first
                while pending:
                    self._take(pending, load, wait_for_one=True)
                raise
            ident = case_id(case, index)
            self.cases.write(ident, checked)  # as a local run records it
            before = self.done_before.get(ident)
            applicable = [b.key for b in bound if b.applies_to(case)]
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

    def _absorb(self, payload: Payload, first: int, count: int) -> None:
        for at, metric, scores, failed, success, not_applicable, noted in payload.rows:
            self.tallies[metric].add(
                first + at, scores, failed, success, not_applicable, not_english=noted
            )
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
            self.bar.advance(count, elapsed, self.ledger.call_latency())


def finished_before(path: Path) -> dict[str, dict[str, str]]:
    """What an earlier run left in ``path``: per case id, per metric, the item's JSON line,
    from ``results.jsonl`` and every shard (finished or not; the first line of a case and
    metric wins)."""
    found: dict[str, dict[str, str]] = {}
    sources = [path]
    shards = path / SHARDS
    if shards.is_dir():
        sources += sorted(p for p in shards.iterdir() if p.is_dir())
    for source in sources:
        for line in whole_lines(source):
            try:
                head = json.loads(line)
                case_id, metric = str(head["case_id"]), str(head["metric"])
            except (ValueError, KeyError, TypeError, RecursionError):
                continue
            found.setdefault(case_id, {}).setdefault(metric, line)
    return found


def named(case: Any, index: int) -> Any:
    """A test case without a name gets the id a local run gives it (``case-000042``), so
    its results are named alike whichever worker scores it."""
    if isinstance(case, ModelTestCase) and case.name is None:
        return case.model_copy(update={"name": case_id(case, index)})
    return case
