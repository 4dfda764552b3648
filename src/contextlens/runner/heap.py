"""The garbage collector during a run: what exists when the run starts is not scanned again.

A run allocates a few objects per judge call and keeps its cases alive throughout; Python's
cyclic collector, at its default thresholds, would walk every live case again and again (a
fifth of a cached re-run's time went to it). While a run is under way the objects made
before it are frozen (``gc.freeze``: they stay alive, as they would anyway, and are left out
of collections) and the youngest generation is collected less often. Both are undone when
the last run of the process ends. A collector turned off by the user is left off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["RUN_THRESHOLDS", "steady_heap"]

#: The collector's thresholds while a run is under way (Python's default is 700, 10, 10).
RUN_THRESHOLDS = (20_000, 20, 20)

_lock = threading.Lock()
_runs = 0
_saved: tuple[int, int, int] | None = None


@contextmanager
def steady_heap() -> Iterator[None]:
    """Freeze the heap and space out collections for the duration of the block (nested and
    concurrent runs share one freeze, undone by the last to end)."""
    global _runs, _saved
    with _lock:
        _runs += 1
        if _runs == 1 and gc.isenabled():
            gc.freeze()
            _saved = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(RUN_THRESHOLDS, _saved, strict=True)))
    try:
        yield
    finally:
        with _lock:
            _runs -= 1
            if _runs == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                gc.unfreeze()
                _saved = None
