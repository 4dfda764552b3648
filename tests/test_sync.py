"""run_sync: the result comes back as is, from inside or outside a running loop."""

from __future__ import annotations

import asyncio
import threading

import pytest

from contextlens.sync import run_sync


class Costly:
    """A result whose repr must never be built (an evaluation's result can be huge)."""

    reprs = 0

    def __repr__(self) -> str:
        Costly.reprs += 1
        return "Costly()"


async def make() -> tuple[Costly, str]:
    await asyncio.sleep(0)
    return Costly(), threading.current_thread().name


def test_outside_a_loop_the_result_is_returned_unformatted() -> None:
    Costly.reprs = 0
    result, thread = run_sync(make())
    assert isinstance(result, Costly)
    assert thread == threading.main_thread().name
    assert Costly.reprs == 0  # asyncio.run formats its main task when it restores SIGINT


async def test_inside_a_running_loop_it_runs_in_a_worker_thread() -> None:
    result, thread = run_sync(make())
    assert isinstance(result, Costly)
    assert thread.startswith("contextlens-sync")


def test_errors_propagate() -> None:
    async def boom() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        run_sync(boom())
