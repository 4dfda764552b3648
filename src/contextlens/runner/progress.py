"""The progress bar a run shows on a terminal."""

from __future__ import annotations

import sys
from typing import Any

from contextlens.engine.reach import unreachable

__all__ = ["ProgressBar", "down_text", "progress_bar"]


def down_text() -> str:
    """``; judge ... unreachable since 12:03:41 UTC, retrying (...)`` for each judge that
    answered before and refuses calls now; empty when none does."""
    parts = []
    for reach in unreachable():
        since = reach.down_since.strftime("%H:%M:%S UTC") if reach.down_since else "?"
        parts.append(f"; judge {reach.key} unreachable since {since}, retrying ({reach.error})")
    return "".join(parts)


class ProgressBar:
    """A bar of cases done, their rate and the mean seconds per judge call (rich)."""

    def __init__(self, total: int | None) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.bar = Progress(
            TextColumn("[bold]contextlens"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}", markup=False),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            transient=False,
        )
        self.task = self.bar.add_task("cases", total=total, rate="")

    def __enter__(self) -> ProgressBar:
        self.bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.stop()

    def advance(self, count: int, elapsed: float, latency: tuple[int, float] | None) -> None:
        """``count`` more cases done, ``elapsed`` seconds in; ``latency``: (judge calls, mean
        seconds per call) when there were any."""
        finished = self.bar.tasks[0].completed + count
        rate = f"{finished / max(elapsed, 1e-9):.1f}/s"
        if latency is not None:
            rate += f", {latency[1]:.1f} s per judge call"
        down = down_text()
        if down:
            rate += down.replace("; ", " ", 1)
        self.bar.update(self.task, advance=count, rate=rate)


def progress_bar(enabled: bool | None, total: int | None) -> ProgressBar | None:
    """A bar when ``enabled`` (None: when stderr is a terminal), else None."""
    show = sys.stderr.isatty() if enabled is None else enabled
    return ProgressBar(total) if show else None
