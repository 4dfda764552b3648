"""Which judge calls were submitted in which provider batch: what lets a stopped run reattach.

A batched judge call has a request id (a hash of what is sent). Once a batch is created, its
id and the ids of its requests are written here at once, in one transaction; a run that is
stopped, killed or started again finds its requests here, waits for the batch they are in
and reads their replies from it, and submits nothing twice. A request whose line failed or
expired is forgotten, so that it may be submitted again; a batch whose results were read,
or that was cancelled, is closed.

The log is a SQLite file (``batches.sqlite3`` beside the default cache, or where
``path`` says). A fault of the file (locked, damaged, a full disk) never fails a call: it
is said once, and the run goes on without the log (a run stopped after that would submit
its calls again).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contextlens.engine.cache import default_cache_path
from contextlens.engine.sqlite import Bypassable, SQLiteFile, bypassed_on_fault, file_path
from contextlens.errors import ContextLensError

__all__ = ["BatchLog", "BatchLogError", "LoggedBatch", "default_batch_log_path"]

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    created REAL NOT NULL,
    requests INTEGER NOT NULL,
    state TEXT NOT NULL,
    PRIMARY KEY (endpoint, batch_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    request_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (endpoint, request_id)
) WITHOUT ROWID;
"""

#: A batch's state in the log: its results not yet read; read, or cancelled.
OPEN, CLOSED = "open", "closed"


class BatchLogError(ContextLensError):
    """The batch log file cannot be opened or used."""


@dataclass(frozen=True)
class LoggedBatch:
    """A batch as the log holds it."""

    batch_id: str
    endpoint: str
    created: float
    requests: int
    state: str


def default_batch_log_path() -> Path:
    """``batches.sqlite3`` in the folder of the default cache."""
    return default_cache_path().parent / "batches.sqlite3"


def _nothing(self: BatchLog, *args: Any) -> None:
    return None


def _none_listed(self: BatchLog, *args: Any) -> list[LoggedBatch]:
    return []


class BatchLog(Bypassable):
    """The batches a backend submitted and the requests in each, in one SQLite file.

    Safe to share between threads and processes (as the cache is). ``endpoint`` names the
    provider's API and account (a backend's ``key``): ids are only looked up under it.
    """

    bypassed = (
        "batches go on, but are not recorded: a run stopped from now on would submit its "
        "calls again"
    )

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = file_path(default_batch_log_path() if path is None else path, "BatchLog")
        self._db = SQLiteFile(
            self.path,
            name="the batch log",
            error=BatchLogError,
            schema=_SCHEMA,
            version=SCHEMA_VERSION,
            newer_hint="use another batch log file",
        )

    def __repr__(self) -> str:
        return f"BatchLog({str(self.path)!r})"

    def close(self) -> None:
        self._db.close()

    @bypassed_on_fault(_nothing)
    def record(self, endpoint: str, batch_id: str, request_ids: Sequence[str]) -> None:
        """The batch ``batch_id`` was created with ``request_ids``: written at once."""
        with self._db.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?, ?)",
                (batch_id, endpoint, time.time(), len(request_ids), OPEN),
            )
            conn.executemany(
                "INSERT OR REPLACE INTO requests VALUES (?, ?, ?)",
                [(r, endpoint, batch_id) for r in request_ids],
            )

    @bypassed_on_fault(_nothing)
    def batch_of(self, endpoint: str, request_id: str) -> str | None:
        """The open batch ``request_id`` was submitted in, or None."""
        row = (
            self._db.connection()
            .execute(
                "SELECT r.batch_id FROM requests r JOIN batches b "
                "ON b.endpoint = r.endpoint AND b.batch_id = r.batch_id "
                "WHERE r.endpoint = ? AND r.request_id = ? AND b.state = ?",
                (endpoint, request_id, OPEN),
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    @bypassed_on_fault(_nothing)
    def forget(self, endpoint: str, request_ids: Sequence[str]) -> None:
        """``request_ids`` failed or expired in their batch: they may be submitted again."""
        with self._db.write() as conn:
            conn.executemany(
                "DELETE FROM requests WHERE endpoint = ? AND request_id = ?",
                [(endpoint, r) for r in request_ids],
            )

    @bypassed_on_fault(_nothing)
    def close_batch(self, endpoint: str, batch_id: str) -> None:
        """The batch's results were read (or it was cancelled): it is waited for no more."""
        with self._db.write() as conn:
            conn.execute(
                "UPDATE batches SET state = ? WHERE endpoint = ? AND batch_id = ?",
                (CLOSED, endpoint, batch_id),
            )
            conn.execute(
                "DELETE FROM requests WHERE endpoint = ? AND batch_id = ?", (endpoint, batch_id)
            )

    @bypassed_on_fault(_none_listed)
    def batches(
        self, endpoint: str | None = None, *, state: str | None = OPEN
    ) -> list[LoggedBatch]:
        """The batches logged (of ``endpoint``; in ``state``, None: any), oldest first."""
        query = "SELECT batch_id, endpoint, created, requests, state FROM batches"
        where, args = [], []
        if endpoint is not None:
            where.append("endpoint = ?")
            args.append(endpoint)
        if state is not None:
            where.append("state = ?")
            args.append(state)
        if where:
            query += " WHERE " + " AND ".join(where)
        rows = self._db.connection().execute(query + " ORDER BY created", args).fetchall()
        return [LoggedBatch(str(b), str(e), float(c), int(n), str(s)) for b, e, c, n, s in rows]
