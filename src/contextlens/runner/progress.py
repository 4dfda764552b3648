"""The progress a run shows: a bar on a terminal, and the rate and time left it gives.

The rate and the time left come from recent throughput: the completions of a moving window
(the last :data:`WINDOW_SECONDS` seconds, and never fewer than the last
:data:`WINDOW_LEAST` completions), measured up to now. The first cases of a run are often
slow (a model loads, a server warms up); once the window has moved past them they no longer
weigh on the estimate, and a run that stalls sees its estimate grow.
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from typing import Any

from contextlens.engine.reach import unreachable

__all__ = [
    "WINDOW_LEAST",
    "WINDOW_SECONDS",
    "ProgressBar",
    "Throughput",
    "batches_text",
    "down_text",
    "left_text",
    "progress_bar",
    "rate_text",
]

#: Seconds of recent completions the rate is measured over.
WINDOW_SECONDS = 30.0
#: The fewest completions the rate is measured over, however long they took.
WINDOW_LEAST = 10


def down_text() -> str:
    """``; judge ... unreachable since 12:03:41 UTC, retrying (...)`` for each judge that
    answered before and refuses calls now; empty when none does."""
    parts = []
    for reach in unreachable():
        since = reach.down_since.strftime("%H:%M:%S UTC") if reach.down_since else "?"
        parts.append(f"; judge {reach.key} unreachable since {since}, retrying ({reach.error})")
    return "".join(parts)


def batches_text() -> str:
    """``; batch batch_1: in_progress, 12/20 done`` for the one provider batch the run waits
    for, ``; 3 batches: 2 in_progress, 1 validating, 30/60 requests done`` for several;
    empty when it waits for none."""
    from contextlens.judges.batching import followed

    states = followed()
    if not states:
        return ""
    if len(states) == 1:
        return f"; {states[0]}"
    statuses = Counter(state.status for state in states)
    done, total = sum(s.done for s in states), sum(s.total for s in states)
    counts = f", {done}/{total} requests done" if total else ""
    listed = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    return f"; {len(states)} batches: {listed}{counts}"


class Throughput:
    """Completions per second over a moving window of recent completions, and the time
    left at that rate.

    :meth:`update` takes the count done so far and the seconds elapsed; the window opens
    at its oldest completion, so the time before the first completion (and, once the
    window has moved on, the slow first cases) is not in the rate."""

    def __init__(self, seconds: float = WINDOW_SECONDS, least: int = WINDOW_LEAST) -> None:
        self.seconds, self.least = seconds, least
        self.samples: deque[tuple[float, int]] = deque()  # (elapsed, done) at completions
        self.now = 0.0

    def update(self, done: int, elapsed: float) -> None:
        """``done`` items so far, ``elapsed`` seconds into the run."""
        self.now = max(self.now, elapsed)
        if done > (self.samples[-1][1] if self.samples else 0):  # a completion
            self.samples.append((elapsed, done))
        if not self.samples:
            return
        latest = self.samples[-1][1]
        while (
            len(self.samples) > 2
            and self.samples[1][0] < self.now - self.seconds
            and latest - self.samples[1][1] >= self.least
        ):
            self.samples.popleft()

    def rate(self) -> float | None:
        """Items per second in the window, up to now (None before two completions)."""
        if len(self.samples) < 2:
            return None
        (start, first), (_, last) = self.samples[0], self.samples[-1]
        span = self.now - start
        return (last - first) / span if span > 0 else None

    def left(self, total: int | None) -> float | None:
        """Seconds left for ``total`` items at the window's rate (None when unknown)."""
        rate = self.rate()
        if not total or not rate or not self.samples:
            return None
        return max(0, total - self.samples[-1][1]) / rate


def rate_text(rate: float | None) -> str:
    """``12.3 items/s`` or ``4.5 s per item``; ``-`` when not known yet."""
    if not rate:
        return "-"
    return f"{rate:.1f} items/s" if rate >= 1 else f"{1 / rate:.1f} s per item"


def left_text(seconds: float | None) -> str:
    """``0:04:05`` left, as the bar shows it; ``-:--:--`` when not known yet."""
    if seconds is None:
        return "-:--:--"
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


class ProgressBar:
    """A bar of cases done, the recent rate, the time left at that rate and the mean
    seconds per judge call (rich)."""

    def __init__(self, total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.total = total
        self.throughput = Throughput()
        self.bar = Progress(
            TextColumn("[bold]contextlens"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}", markup=False),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}", markup=False, style="progress.remaining"),
            transient=False,
        )
        self.task = self.bar.add_task("cases", total=total, rate="", left="")

    def __enter__(self) -> ProgressBar:
        self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()

    def advance(self, count: int, elapsed: float, latency: tuple[int, float] | None) -> None:
        """``count`` more cases done, ``elapsed`` seconds in; ``latency``: (judge calls, mean
        seconds per call) when there were any."""
        finished = int(self.bar.tasks[0].completed) + count
        self.throughput.update(finished, elapsed)
        rate = rate_text(self.throughput.rate())
        if latency is not None:
            rate += f", {latency[1]:.1f} s per judge call"
        down = down_text() + batches_text()
        if down:
            rate += down.replace("; ", " ", 1)
        left = left_text(self.throughput.left(self.total)) if self.total else ""
        self.bar.update(self.task, advance=count, rate=rate, left=left)


def progress_bar(enabled: bool | None, total: int | None) -> ProgressBar | None:
    """A bar when ``enabled`` (None: when stderr is a terminal), else None."""
    show = sys.stderr.isatty() if enabled is None else enabled
    return ProgressBar(total) if show else None
