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


def test_per_loop_state_is_made_once_per_loop_and_forgotten_with_closed_loops():
    from contextlens.sync import PerLoop

    made: list[object] = []
    state = PerLoop(lambda: made.append(object()) or made[-1])
    assert state.peek() is None  # no running loop

    async def twice() -> tuple[object, object, object | None, asyncio.AbstractEventLoop]:
        return state.get(), state.get(), state.peek(), asyncio.get_running_loop()

    first, again, peeked, loop_1 = asyncio.run(twice())
    assert first is again is peeked
    second, _, _, loop_2 = asyncio.run(twice())
    assert second is not first and len(made) == 2
    assert len(state._by_loop) == 2  # closed, but still referenced here

    async def popped() -> tuple[object, object | None]:
        return state.get(), state.pop()

    mine, gone = asyncio.run(popped())
    assert gone is mine and len(state._by_loop) == 0  # the closed loops' values went too
    assert loop_1.is_closed() and loop_2.is_closed()
