"""The process-wide run store that code recording "when configured" uses."""

from __future__ import annotations

import os
import threading

from contextlens.store.runs import RunStore

__all__ = ["active_store", "configure", "record_score"]

_active: RunStore | None = None
_active_lock = threading.Lock()


def configure(path: str | os.PathLike[str] | RunStore | None) -> RunStore | None:
    """Set the process-wide store that code recording "when configured" uses; ``None``
    turns recording off. Returns the store now active."""
    global _active
    store = path if isinstance(path, RunStore) or path is None else RunStore(path)
    with _active_lock:
        _active = store
    return store


def active_store() -> RunStore | None:
    """The store set by :func:`configure`, or ``None``."""
    return _active


def record_score(
    metric: str,
    case_id: str,
    score: float | None,
    reason: str | None = None,
    error: str | None = None,
) -> str | None:
    """:meth:`RunStore.record_score` on the active store; a no-op returning ``None`` when
    no store is configured."""
    store = _active
    if store is None:
        return None
    return store.record_score(metric, case_id, score, reason, error)
