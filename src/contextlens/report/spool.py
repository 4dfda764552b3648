"""Scratch space that lets a report of any size be written in bounded memory.

A run's items come in the order they were scored, a case's metrics anywhere among them;
the page shows them case by case. :class:`Spool` keeps the items grouped by case in a
temporary SQLite file, and the page's two long parts (the case rows and each case's
drill-down) in temporary text files, so the report is written from them in pieces and the
memory it takes does not grow with the run. Without a folder everything is held in memory
(a run kept in memory is already there).
"""

from __future__ import annotations

import contextlib
import io
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from contextlens.results import ItemResult

__all__ = ["Spool"]

#: Items written to the scratch database at once, and characters read back at once.
_BATCH, _CHUNK = 2_000, 1 << 16


class Spool:
    """The items of a run grouped by case, and the page's long parts, in ``folder`` (a
    temporary folder made there and removed on :meth:`close`), or in memory for None."""

    def __init__(self, folder: Path | None = None) -> None:
        self._tmp = (
            tempfile.TemporaryDirectory(
                dir=folder, prefix=".contextlens-report-", ignore_cleanup_errors=True
            )
            if folder is not None
            else None
        )
        where = Path(self._tmp.name) if self._tmp is not None else None
        self._db = sqlite3.connect(":memory:" if where is None else str(where / "items.db"))
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("CREATE TABLE items (seq INTEGER PRIMARY KEY, case_id TEXT, data TEXT)")
        self._db.execute("CREATE TABLE shown (case_id TEXT PRIMARY KEY)")
        self._pending: list[tuple[str, str]] = []
        self.rows = self._text(where, "rows")
        self.details = self._text(where, "details")

    @staticmethod
    def _text(where: Path | None, name: str) -> IO[str]:
        if where is None:
            return io.StringIO()
        return open(where / name, "w+", encoding="utf-8", errors="surrogatepass")

    def add(self, item: ItemResult) -> None:
        """Keep ``item`` for its case."""
        self._pending.append((item.case_id, item.model_dump_json()))
        if len(self._pending) >= _BATCH:
            self._flush()

    def _flush(self) -> None:
        self._db.executemany("INSERT INTO items (case_id, data) VALUES (?, ?)", self._pending)
        self._pending.clear()

    def ready(self) -> None:
        """Every item is in: index them by case."""
        self._flush()
        self._db.execute("CREATE INDEX items_case ON items (case_id, seq)")

    def take(self, case_id: str) -> dict[str, ItemResult]:
        """The items of ``case_id`` by metric (a metric's first item), the first time the
        case is asked for; empty when it has none or was taken before."""
        if self._db.execute("INSERT OR IGNORE INTO shown VALUES (?)", (case_id,)).rowcount == 0:
            return {}
        out: dict[str, ItemResult] = {}
        for (data,) in self._db.execute(
            "SELECT data FROM items WHERE case_id = ? ORDER BY seq", (case_id,)
        ):
            item = ItemResult.model_validate_json(data)
            out.setdefault(item.metric, item)
        return out

    def left(self) -> Iterator[str]:
        """The cases with items not yet taken, in the order their first item came."""
        self._db.execute(
            "CREATE TABLE left_cases AS SELECT case_id FROM items "
            "WHERE case_id NOT IN (SELECT case_id FROM shown) GROUP BY case_id ORDER BY MIN(seq)"
        )
        last = 0
        while page := self._db.execute(
            "SELECT rowid, case_id FROM left_cases WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (last, _BATCH),
        ).fetchall():
            for _, case_id in page:
                yield case_id
            last = page[-1][0]

    @staticmethod
    def read(handle: IO[str]) -> Iterator[str]:
        """What was written to ``handle``, from its start, in pieces."""
        handle.seek(0)
        while piece := handle.read(_CHUNK):
            yield piece

    def close(self) -> None:
        """Remove the scratch files; what they held is discarded, so a disk that cannot
        take their last buffered bytes any more is no error here."""
        for close in (self._db.close, self.rows.close, self.details.close):
            with contextlib.suppress(OSError, sqlite3.Error):
                close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
