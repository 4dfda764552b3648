"""The run store's tables, and the rows a run and its items are written as."""

from __future__ import annotations

import math
import sqlite3
from typing import Any

from contextlens.redact import redact
from contextlens.results import ItemResult, MetricSummary

__all__ = [
    "ITEM_INSERT",
    "RUN_COLUMNS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "TABLES",
    "add_score",
    "item_row",
    "refresh_counts",
    "replace_run",
    "score_column",
]

SCHEMA_VERSION = 4
"""Stored in ``PRAGMA user_version``. A file with a newer version is refused; run history
is never dropped, so later versions migrate older files in place (version 2 added the
status, command and process of each run, the runs of version 1 being ``completed``;
version 3 the name, tags and data fingerprint of each run; version 4 its provenance, read for
a run of an older version from its versions, dataset and command)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    started_ts REAL NOT NULL,
    recorded_at REAL NOT NULL,
    duration_s REAL NOT NULL,
    judge TEXT NOT NULL,
    embedder TEXT NOT NULL,
    repeats INTEGER NOT NULL,
    out_dir TEXT,
    dataset TEXT,
    dataset_fingerprint TEXT,
    config TEXT NOT NULL,
    versions TEXT NOT NULL,
    summaries TEXT NOT NULL,
    accounting TEXT NOT NULL,
    n_cases INTEGER NOT NULL DEFAULT 0,
    n_items INTEGER NOT NULL DEFAULT 0,
    n_failed INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS runs_by_time ON runs (started_ts, recorded_at);
CREATE TABLE IF NOT EXISTS items (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    case_id TEXT NOT NULL,
    metric TEXT NOT NULL,
    score REAL,
    error TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS items_by_case ON items (run_id, case_id);
ALTER TABLE runs ADD COLUMN status TEXT NOT NULL DEFAULT 'completed';
ALTER TABLE runs ADD COLUMN error TEXT;
ALTER TABLE runs ADD COLUMN command TEXT;
ALTER TABLE runs ADD COLUMN cwd TEXT;
ALTER TABLE runs ADD COLUMN pid INTEGER;
ALTER TABLE runs ADD COLUMN host TEXT;
ALTER TABLE runs ADD COLUMN name TEXT;
ALTER TABLE runs ADD COLUMN tags TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN data_fingerprint TEXT;
ALTER TABLE runs ADD COLUMN provenance TEXT;
CREATE INDEX IF NOT EXISTS runs_by_name ON runs (name, started_ts);
"""
# On a file of an older version the columns it has already are kept (see SQLiteFile).

RUN_COLUMNS = (
    "run_id",
    "started_at",
    "started_ts",
    "recorded_at",
    "duration_s",
    "judge",
    "embedder",
    "repeats",
    "out_dir",
    "dataset",
    "dataset_fingerprint",
    "config",
    "versions",
    "summaries",
    "accounting",
    "status",
    "error",
    "command",
    "cwd",
    "pid",
    "host",
    "name",
    "tags",
    "data_fingerprint",
    "provenance",
)
ITEM_COLUMNS = ("run_id", "seq", "case_id", "metric", "score", "error", "data")
TABLES = {"runs": RUN_COLUMNS, "items": ITEM_COLUMNS}
"""The tables of a run store, each with the columns it must have."""
ITEM_INSERT = (
    "INSERT INTO items (run_id, seq, case_id, metric, score, error, data) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def score_column(score: float | None) -> float | None:
    return score if score is not None and math.isfinite(score) else None


def replace_run(conn: sqlite3.Connection, row: tuple[Any, ...]) -> None:
    """Insert the run ``row`` (values of ``RUN_COLUMNS``), replacing the run and its items."""
    conn.execute("DELETE FROM items WHERE run_id = ?", (row[0],))
    conn.execute("DELETE FROM runs WHERE run_id = ?", (row[0],))
    conn.execute(
        f"INSERT INTO runs ({', '.join(RUN_COLUMNS)}) VALUES ({', '.join('?' * len(row))})",
        tuple(redact(v) if isinstance(v, str) else v for v in row),  # no secret is stored
    )


def item_row(run_id: str, seq: int, item: ItemResult) -> tuple[Any, ...]:
    return (
        run_id,
        seq,
        item.case_id,
        item.metric,
        None if item.error is not None else score_column(item.score),
        None if item.error is None else redact(item.error),
        redact(item.model_dump_json()),
    )


def add_score(summary: dict[str, Any] | None, item: ItemResult) -> MetricSummary:
    """``summary`` (a dumped :class:`MetricSummary`, or None) with one more item folded in."""
    old = (
        MetricSummary.model_validate(summary)
        if summary
        else MetricSummary(metric=item.metric, n=0, n_scored=0, n_failed=0, mean=None)
    )
    if item.failed or item.score is None:
        return old.model_copy(update={"n": old.n + 1, "n_failed": old.n_failed + 1})
    k = old.n_scored
    mean = item.score if old.mean is None else old.mean + (item.score - old.mean) / (k + 1)
    return old.model_copy(update={"n": old.n + 1, "n_scored": k + 1, "mean": mean})


def refresh_counts(conn: sqlite3.Connection, run_id: str) -> None:
    """The run's counts from its items: cases, items, and failed items (an item the metric
    does not apply to, or that the run stopped before, has no score but did not fail)."""
    conn.execute(
        "UPDATE runs SET "
        "n_cases = (SELECT COUNT(DISTINCT case_id) FROM items WHERE run_id = ?1), "
        "n_items = (SELECT COUNT(*) FROM items WHERE run_id = ?1), "
        "n_failed = (SELECT COUNT(*) FROM items WHERE run_id = ?1 AND error IS NOT NULL) "
        "WHERE run_id = ?1",
        (run_id,),
    )
