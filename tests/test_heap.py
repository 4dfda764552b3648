"""The collector during a run: frozen and spaced out while it runs, as it was afterwards."""

import gc
import threading

from contextlens import evaluate
from contextlens.runner.heap import RUN_THRESHOLDS, steady_heap


def test_the_heap_is_frozen_during_a_run_and_released_after():
    before = gc.get_threshold()
    seen: list[tuple[int, tuple[int, int, int]]] = []

    def tick(done: int, total: int | None, elapsed: float) -> None:
        seen.append((gc.get_freeze_count(), gc.get_threshold()))

    run = evaluate(
        [{"input": "q", "actual_output": "a", "retrieval_context": ["a"]}],
        ["context-precision"],
        progress=tick,
        cache=False,
    )
    assert run.summaries
    assert seen and all(frozen > 0 for frozen, _ in seen)
    assert all(t[0] >= RUN_THRESHOLDS[0] for _, t in seen)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_runs_in_threads_share_one_freeze_undone_by_the_last():
    before = gc.get_threshold()
    inside = threading.Event()
    leave = threading.Event()

    def other() -> None:
        with steady_heap():
            inside.set()
            leave.wait(5)

    thread = threading.Thread(target=other)
    with steady_heap():
        thread.start()
        assert inside.wait(5)
    assert gc.get_freeze_count() > 0  # the other run is still under way
    leave.set()
    thread.join(5)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_a_collector_turned_off_is_left_off():
    gc.disable()
    try:
        with steady_heap():
            assert gc.get_freeze_count() == 0 and not gc.isenabled()
    finally:
        gc.enable()
