"""One SQLite file shared by threads and processes: the plumbing of the cache and the store.

WAL journal, a busy timeout, one connection per thread (closed with its thread, on
``close()`` or at exit, never in a forked child), writes in ``BEGIN IMMEDIATE``
transactions, and the schema created or checked against ``PRAGMA user_version``.
"""

from __future__ import annotations

import functools
import os
import random
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

__all__ = [
    "BUSY_TIMEOUT",
    "Bypassable",
    "Closing",
    "SQLiteFile",
    "bypassed_on_fault",
    "connect",
    "file_path",
    "transaction",
]

BUSY_TIMEOUT = 30.0
"""Seconds a connection waits for another one's write lock."""

# Connections a forked child inherited from its parent: never used nor closed there (SQLite
# forbids carrying a connection across fork), only kept from being garbage collected.
_inherited: list[sqlite3.Connection] = []

_C = TypeVar("_C", bound="Closing")
_R = TypeVar("_R")


class Closing:
    """An object that ``close()`` ends, usable as ``with obj: ...`` (closed on leaving)."""

    def close(self) -> None:
        """Release what this object holds."""

    def __enter__(self: _C) -> _C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class Bypassable(Closing):
    """A file that only helps (a cache, a log): a fault of it (locked, damaged, unreadable,
    a full disk) never fails what uses it. The first fault is said once, with ``bypassed``
    (what going on without the file means), and from then on the file is bypassed: the
    operations marked :func:`bypassed_on_fault` answer their default."""

    #: Why the file is bypassed (its first fault), or None while it works.
    broken: str | None = None
    path: Path
    _db: SQLiteFile
    #: What going on without the file means, said with its first fault.
    bypassed: str = "it is bypassed"

    def _break(self, exc: BaseException) -> None:
        """Bypass the file from now on, saying why once."""
        with _breaking:
            if self.broken is not None:
                return
            self.broken = f"{type(exc).__name__}: {exc}"
        message = f"{self._db.name} {self.path} cannot be used ({self.broken}); {self.bypassed}"
        warnings.warn(message, RuntimeWarning, stacklevel=3)  # said once, by one channel


_breaking = threading.Lock()


def bypassed_on_fault(
    default: Callable[..., Any],
) -> Callable[[Callable[..., _R]], Callable[..., _R]]:
    """An operation of a :class:`Bypassable` whose fault is never its caller's: the first one
    breaks the file (:meth:`Bypassable._break`), and once it is broken ``default(self, *args)``
    answers (a miss, nothing stored)."""

    def wrap(method: Callable[..., _R]) -> Callable[..., _R]:
        @functools.wraps(method)
        def guarded(self: Bypassable, *args: Any) -> _R:
            if self.broken is not None:
                return default(self, *args)
            try:
                return method(self, *args)
            except (sqlite3.Error, OSError, self._db.error) as exc:
                self._break(exc)
                return default(self, *args)

        return guarded

    return wrap


def file_path(path: str | os.PathLike[str], owner: str) -> Path:
    """``path`` expanded, its folder created; ``ValueError`` naming ``owner`` when it is
    not a file (empty, ``:memory:`` or a ``file:`` URI)."""
    if str(path) in ("", ":memory:") or str(path).startswith("file:"):
        raise ValueError(f"{owner} needs a file path, got {str(path)!r}")
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _enable_wal(conn: sqlite3.Connection, attempts: int = 50) -> None:
    """Switch to WAL. Two processes opening a new file at once can both find it locked
    while one of them converts it, without SQLite's busy handler waiting: wait briefly."""
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(0.05 + 0.05 * random.random())


def connect(
    path: Path, name: str, error: type[Exception], busy_timeout: float = BUSY_TIMEOUT
) -> sqlite3.Connection:
    """A new connection to ``path`` waiting at most ``busy_timeout`` seconds for another
    connection's lock; ``error`` when it cannot be opened.

    ``name`` says what the file is in the message ("the cache").
    """
    try:
        conn = sqlite3.connect(
            path,
            timeout=busy_timeout,
            isolation_level=None,  # autocommit; transactions are explicit
            check_same_thread=False,  # used by one thread, but closable from any
        )
    except sqlite3.Error as exc:
        raise error(f"cannot open {name} {path}: {exc}") from exc
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (taking the write lock up front, waiting for it under the busy
    timeout) ... ``COMMIT``, rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


class _Holder:
    """One thread's connection, with the pid and generation it was opened in."""

    __slots__ = ("__weakref__", "conn", "generation", "pid")

    def __init__(self, conn: sqlite3.Connection, generation: int) -> None:
        self.conn = conn
        self.generation = generation
        self.pid = os.getpid()


class SQLiteFile(Closing):
    """One SQLite file with its schema, a connection per thread.

    Args:
        path: the file, as :func:`file_path` gives it.
        name: what the file is, in messages ("the cache").
        error: raised when the file cannot be opened or used.
        schema: the DDL, statements separated by ``;``.
        version: the schema version, kept in ``PRAGMA user_version``.
        newer_hint: the advice ending the error for a file of a newer version.
        rebuild: tables dropped from a file of an older version before the schema is
            created (a cache is rebuilt); none are by default (history is kept).
        busy_timeout: seconds to wait for another process's lock before ``error`` says the
            file is locked.

    The file is opened (and its schema checked) at once, to fail early.
    """

    def __init__(
        self,
        path: Path,
        *,
        name: str,
        error: type[Exception],
        schema: str,
        version: int,
        newer_hint: str,
        rebuild: Sequence[str] = (),
        busy_timeout: float = BUSY_TIMEOUT,
    ) -> None:
        self.path = path
        self.busy_timeout = busy_timeout
        self.name = name
        self.error = error
        self.schema = schema
        self.version = version
        self.newer_hint = newer_hint
        self.rebuild = tuple(rebuild)
        self._local = threading.local()
        self._generation = 0
        self._finalizers: list[weakref.finalize] = []
        self._lock = threading.Lock()
        self.connection()

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened (and the schema checked) on first use."""
        holder: _Holder | None = getattr(self._local, "holder", None)
        if (
            holder is not None
            and holder.pid == os.getpid()
            and holder.generation == self._generation
        ):
            return holder.conn
        conn = self._open()
        holder = _Holder(conn, self._generation)
        # Closed when the thread ends (its locals go), on close(), or at exit.
        fin = weakref.finalize(holder, _close_if_owner, conn, holder.pid)
        with self._lock:
            self._finalizers = [f for f in self._finalizers if f.alive]
            self._finalizers.append(fin)
        self._local.holder = holder
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection inside a :func:`transaction`; a lock that outlasts the
        busy timeout, or any other fault of the file, is ``error`` naming it."""
        conn = self.connection()
        try:
            with transaction(conn):
                yield conn
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise self.error(
                    f"{self.name} {self.path} is locked by another process (waited "
                    f"{self.busy_timeout:g} s): {exc}"
                ) from exc
            raise self.error(f"cannot write {self.name} {self.path}: {exc}") from exc
        except sqlite3.Error as exc:
            raise self.error(f"cannot write {self.name} {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close every connection this object opened; later use opens new ones."""
        with self._lock:
            finalizers, self._finalizers = self._finalizers, []
            self._generation += 1
        for fin in finalizers:
            fin()

    def _open(self) -> sqlite3.Connection:
        conn = connect(self.path, self.name, self.error, self.busy_timeout)
        try:
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            self._ensure_schema(conn)
        except self.error:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise self.error(f"cannot use {self.name} {self.path}: {exc}") from exc
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == self.version:
            return
        with transaction(conn):
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > self.version:
                raise self.error(
                    f"{self.name} {self.path} has schema version {version}, newer than this "
                    f"contextlens understands ({self.version}); {self.newer_hint}"
                )
            if version < self.version:
                if version > 0:
                    for table in self.rebuild:
                        conn.execute(f"DROP TABLE IF EXISTS {table}")
                for statement in self.schema.split(";"):
                    if statement.strip():
                        _execute_once(conn, statement)
                conn.execute(f"PRAGMA user_version = {self.version}")


def _execute_once(conn: sqlite3.Connection, statement: str) -> None:
    """Run a schema statement; an ``ALTER TABLE ... ADD COLUMN`` of a column the file has
    already (added by an earlier version's migration) is done."""
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        words = [w.upper() for w in statement.split()[:4]]
        adds = words[:2] == ["ALTER", "TABLE"] and words[3:] == ["ADD"]
        if not (adds and "duplicate column" in str(exc)):
            raise


def _close_if_owner(conn: sqlite3.Connection, pid: int) -> None:
    """Close ``conn`` in the process that opened it; in a forked child only keep it."""
    if os.getpid() == pid:
        conn.close()
    else:
        _inherited.append(conn)
