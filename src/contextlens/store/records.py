"""What the run store gives back: runs at a glance, whole stored runs, and how a recorded
run went as a process."""

from __future__ import annotations

import os
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from contextlens.engine.sqlite import connect
from contextlens.errors import ContextLensError
from contextlens.results import RESULTS_FILE, EvalRun, ItemResult
from contextlens.runfiles import read_records

__all__ = [
    "COMPLETED",
    "FAILED",
    "INTERRUPTED",
    "RUNNING",
    "RUNNING_OR_LOST",
    "RunInfo",
    "RunProcess",
    "StoreError",
    "StoredRun",
    "run_status",
]

RUNNING, COMPLETED, FAILED, INTERRUPTED = "running", "completed", "failed", "interrupted"
RUNNING_OR_LOST = "running or lost"
"""A run recorded ``running`` by another host, whose process cannot be checked from here."""
"""A run's status. ``interrupted``: recorded ``running``, but its process is gone (on this
host), or stopped by the user (Ctrl-C)."""

#: Item rows read back per page.
PAGE = 1000


class StoreError(ContextLensError):
    """The run store file cannot be opened or used."""


class RunProcess(BaseModel):
    """How a recorded run went as a process: its ``status`` (``running``, ``completed``,
    ``failed`` with ``error`` saying why, or ``interrupted``), the ``command`` run in ``cwd``
    that started it (and resumes it), and its process id and host while it runs."""

    status: str = COMPLETED
    error: str | None = None
    command: str | None = None
    cwd: str | None = None
    pid: int | None = None
    host: str | None = None


class RunInfo(RunProcess):
    """One line of :meth:`RunStore.list_runs`: a run at a glance.

    ``status``: ``running``, ``completed``, ``failed`` (``error`` says why) or
    ``interrupted``; ``command`` run in ``cwd`` started it (and resumes it); ``out_dir`` is
    its run folder; ``name`` and ``tags`` those it was given. Counts and means are those of a
    completed run (0 and none before).
    """

    run_id: str
    started_at: str
    judge: str
    dataset: str | None
    n_cases: int
    n_items: int
    n_failed: int
    means: dict[str, float | None]
    out_dir: str | None = None
    name: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)


class StoredRun(EvalRun, RunProcess):
    """An :class:`EvalRun` read back from a :class:`RunStore`, plus what was recorded with it.

    ``results`` and ``iter_results()`` stream the items from the store (unless ``results``
    was filled by ``load(..., results=True)``); ``to_pandas()`` and ``failures()`` use it.
    """

    dataset: str | None = None
    dataset_fingerprint: str | None = None
    versions: dict[str, str | None] = Field(default_factory=dict)
    recorded_at: str | None = None
    _store_path: str | None = PrivateAttr(default=None)

    def _reads_results(self) -> bool:
        return True

    def _stream_results(self) -> Iterator[ItemResult]:
        """Every item result, in the order they were recorded; for a run that did not
        complete, those its run folder's ``results.jsonl`` holds (none when it is gone)."""
        if self._store_path is None:
            return iter(())
        if self.status != COMPLETED:
            return _partial_results(self.out_dir)
        return _stored_items(Path(self._store_path), self.run_id)


def _stored_items(path: Path, run_id: str) -> Iterator[ItemResult]:
    """The items of run ``run_id`` in the store file ``path``, read page by page."""
    if not path.exists():
        raise StoreError(f"the run store {path} of run {run_id!r} is gone")
    conn = connect(path, "the run store", StoreError)
    try:
        last = -1
        while True:
            try:
                rows = conn.execute(
                    "SELECT seq, data FROM items WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                    (run_id, last, PAGE),
                ).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read run {run_id!r} from {path}: {exc}") from exc
            for seq, data in rows:
                try:
                    item = ItemResult.model_validate_json(data)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    where = ".".join(str(p) for p in first["loc"])
                    why = f"{where}: {first['msg']}" if where else first["msg"]
                    raise StoreError(
                        f"item {seq} of run {run_id!r} in {path} cannot be read: {why}"
                    ) from None
                yield item
            if len(rows) < PAGE:
                return
            last = rows[-1][0]
    finally:
        conn.close()


def _partial_results(out_dir: str | None) -> Iterator[ItemResult]:
    """The whole lines of ``out_dir/results.jsonl``: a killed run may have left its last
    line half written. The folder is the store's word, read as a file from elsewhere
    (:mod:`contextlens.runfiles`)."""
    if out_dir is None:
        return
    path = Path(out_dir) / RESULTS_FILE
    yield from read_records(path, ItemResult.model_validate_json, what="result")


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still runs (a zombie does not). Where that
    cannot be told (Windows), it is taken to run."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    state = stat.rpartition(")")[2].split()[:1]
    return state not in (["Z"], ["X"])


def run_status(status: str, pid: int | None, host: str | None, out_dir: str | None = None) -> str:
    """The status as recorded, read against what can be seen now: a ``running`` run whose
    folder holds its ``summary.json`` completed (the store could not be told); one whose
    process is gone from this host is ``interrupted``; one started on another host (a
    container, another machine) cannot be checked from here: ``running or lost``."""
    if status != RUNNING:
        return status
    if out_dir is not None and (Path(out_dir) / "summary.json").is_file():
        return COMPLETED
    if host is not None and host != socket.gethostname():
        return RUNNING_OR_LOST
    if pid is not None and not _alive(pid):
        return INTERRUPTED
    return status
