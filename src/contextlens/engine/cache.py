"""A persistent SQLite cache of judge replies and embeddings.

One file, shared safely by threads and processes (WAL journal, a busy timeout, one
connection per thread). Every write is committed at once, so a run that is killed keeps
every reply it had already received, and the next run resumes from there.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import platformdirs

from contextlens.errors import ContextLensError
from contextlens.judges.base import Completion, Usage

__all__ = [
    "SCHEMA_VERSION",
    "Cache",
    "CacheError",
    "NullCache",
    "default_cache_path",
    "open_cache",
]

SCHEMA_VERSION = 1
"""Stored in ``PRAGMA user_version``; a file with an older version is emptied and
rebuilt (it is only a cache), one with a newer version is refused."""

_BUSY_TIMEOUT = 30.0
_CHUNK = 500  # keys per SELECT ... IN (...), well under SQLite's parameter limit
_VECTOR_DTYPE = np.dtype("<f4")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency REAL NOT NULL,
    parsed TEXT,
    created REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created REAL NOT NULL
) WITHOUT ROWID;
"""

# Connections a forked child inherited from its parent: never used nor closed there (SQLite
# forbids carrying a connection across fork), only kept from being garbage collected.
_inherited: list[sqlite3.Connection] = []


class CacheError(ContextLensError):
    """The cache file cannot be opened or used."""


def default_cache_path() -> Path:
    """``$CONTEXTLENS_CACHE_DIR/cache.sqlite3`` when that variable is set, else
    ``cache.sqlite3`` in the user cache folder of contextlens; the folder is created."""
    env = os.environ.get("CONTEXTLENS_CACHE_DIR")
    folder = Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("contextlens"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "cache.sqlite3"


def _canonical_json(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogatepass")


def _parsed_json(parsed: Any) -> str | None:
    """``parsed`` as JSON text, or ``None`` when it is ``None`` or not JSON-serialisable."""
    if parsed is None:
        return None
    try:
        return json.dumps(parsed, ensure_ascii=False)
    except (TypeError, ValueError):
        return None


def _load_parsed(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


class _Connection:
    """One thread's connection, with the pid and generation it was opened in."""

    __slots__ = ("__weakref__", "conn", "generation", "pid")

    def __init__(self, conn: sqlite3.Connection, generation: int) -> None:
        self.conn = conn
        self.generation = generation
        self.pid = os.getpid()


class Cache:
    """Judge replies and embeddings in one SQLite file.

    Args:
        path: the file; ``None`` uses :func:`default_cache_path`.

    Safe to share between threads (each gets its own connection) and between processes
    (WAL journal, 30 s busy timeout). The counters ``hits``, ``misses`` and ``writes``
    count completions and embedding vectors looked up or stored through this object.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            path = default_cache_path()
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError(f"Cache needs a file path, got {str(path)!r}")
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._counter_lock = threading.Lock()
        self._local = threading.local()
        self._generation = 0
        self._finalizers: list[weakref.finalize] = []
        self._finalizers_lock = threading.Lock()
        self._conn()  # fail early on a bad path or an incompatible file

    # -- connections -------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, opened (and the schema checked) on first use."""
        holder: _Connection | None = getattr(self._local, "holder", None)
        if (
            holder is not None
            and holder.pid == os.getpid()
            and holder.generation == self._generation
        ):
            return holder.conn
        conn = self._open()
        holder = _Connection(conn, self._generation)
        # Closed when the thread ends (its locals go), on close(), or at exit.
        fin = weakref.finalize(holder, _close_if_owner, conn, holder.pid)
        with self._finalizers_lock:
            self._finalizers = [f for f in self._finalizers if f.alive]
            self._finalizers.append(fin)
        self._local.holder = holder
        return conn

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT,
                isolation_level=None,  # autocommit; transactions are explicit
                check_same_thread=False,  # used by one thread, but closable from any
            )
        except sqlite3.Error as exc:
            raise CacheError(f"cannot open the cache {self.path}: {exc}") from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._ensure_schema(conn)
        except CacheError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise CacheError(f"cannot use the cache {self.path}: {exc}") from exc
        return conn

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        (version,) = conn.execute("PRAGMA user_version").fetchone()
        if version == SCHEMA_VERSION:
            return
        with _transaction(conn):
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            if version > SCHEMA_VERSION:
                raise CacheError(
                    f"the cache {self.path} has schema version {version}, newer than this "
                    f"contextlens understands ({SCHEMA_VERSION}); use another cache file"
                )
            if 0 < version < SCHEMA_VERSION:
                conn.execute("DROP TABLE IF EXISTS completions")
                conn.execute("DROP TABLE IF EXISTS embeddings")
            if version != SCHEMA_VERSION:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close every connection this object opened; later use opens new ones."""
        with self._finalizers_lock:
            finalizers, self._finalizers = self._finalizers, []
            self._generation += 1
        for fin in finalizers:
            fin()

    def __enter__(self) -> Cache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Cache({str(self.path)!r}, hits={self.hits}, misses={self.misses}, "
            f"writes={self.writes})"
        )

    def _count(self, hits: int = 0, misses: int = 0, writes: int = 0) -> None:
        with self._counter_lock:
            self.hits += hits
            self.misses += misses
            self.writes += writes

    # -- keys --------------------------------------------------------------------------

    @staticmethod
    def key(**parts: Any) -> str:
        """SHA-256 hex of the canonical JSON of ``parts`` (sorted keys, compact).

        Parts must be JSON values: turn pydantic models into ``model_dump()`` and schemas
        into ``model_json_schema()`` first. Raises ``TypeError`` otherwise.
        """
        return hashlib.sha256(_canonical_json(parts)).hexdigest()

    @staticmethod
    def _embedding_key(model: str, text: str) -> str:
        return hashlib.sha256(_canonical_json([model, text])).hexdigest()

    # -- completions -------------------------------------------------------------------

    def get_completion(self, key: str) -> Completion | None:
        """The stored reply for ``key``, or ``None``."""
        row = (
            self._conn()
            .execute(
                "SELECT text, prompt_tokens, completion_tokens, latency, parsed "
                "FROM completions WHERE key = ?",
                (key,),
            )
            .fetchone()
        )
        if row is None:
            self._count(misses=1)
            return None
        text, prompt_tokens, completion_tokens, latency, parsed = row
        self._count(hits=1)
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
            latency=latency,
            parsed=_load_parsed(parsed),
        )

    def put_completion(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` (replacing any), committed at once.

        ``parsed`` is kept when it is JSON-serialisable, else stored as ``None``.
        """
        usage = completion.usage or Usage()
        self._conn().execute(
            "INSERT OR REPLACE INTO completions "
            "(key, text, prompt_tokens, completion_tokens, latency, parsed, created) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                completion.text,
                int(usage.prompt_tokens),
                int(usage.completion_tokens),
                float(completion.latency),
                _parsed_json(completion.parsed),
                time.time(),
            ),
        )
        self._count(writes=1)

    # -- embeddings --------------------------------------------------------------------

    def get_embeddings(self, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """The stored vectors of ``texts`` under ``model``, by index in ``texts``
        (float32, one array per hit; missing texts are absent)."""
        keys = [self._embedding_key(model, text) for text in texts]
        unique = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        conn = self._conn()
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(
                f"SELECT key, dim, vector FROM embeddings WHERE key IN ({marks})", chunk
            )
            for key, dim, blob in rows:
                if len(blob) == dim * _VECTOR_DTYPE.itemsize:  # else damaged: a miss
                    found[key] = np.frombuffer(blob, dtype=_VECTOR_DTYPE)
        hits = {i: found[k].astype(np.float32) for i, k in enumerate(keys) if k in found}
        self._count(hits=len(hits), misses=len(keys) - len(hits))
        return hits

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: Any) -> None:
        """Store one vector per text under ``model``, in a single transaction.

        ``vectors`` is a 2-D array or a sequence of 1-D arrays, as long as ``texts``.
        """
        if len(vectors) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        now = time.time()
        rows = []
        for text, vector in zip(texts, vectors, strict=True):
            array = np.asarray(vector, dtype=_VECTOR_DTYPE)
            if array.ndim != 1:
                raise ValueError(f"each vector must be 1-D, got shape {array.shape}")
            rows.append((self._embedding_key(model, text), model, array.size, array.tobytes(), now))
        if not rows:
            return
        conn = self._conn()
        with _transaction(conn):
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (key, model, dim, vector, created) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        self._count(writes=len(rows))

    # -- maintenance -------------------------------------------------------------------

    def clear(self) -> None:
        """Delete every stored reply and vector (the counters are kept)."""
        conn = self._conn()
        with _transaction(conn):
            conn.execute("DELETE FROM completions")
            conn.execute("DELETE FROM embeddings")


class NullCache:
    """The cache interface, storing nothing: every lookup misses (and is counted)."""

    path: Path | None = None

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._lock = threading.Lock()

    key = staticmethod(Cache.key)

    def get_completion(self, key: str) -> Completion | None:
        with self._lock:
            self.misses += 1
        return None

    def put_completion(self, key: str, completion: Completion) -> None:
        return None

    def get_embeddings(self, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        with self._lock:
            self.misses += len(texts)
        return {}

    def put_embeddings(self, model: str, texts: Sequence[str], vectors: Any) -> None:
        if len(vectors) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")

    def clear(self) -> None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> NullCache:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return "NullCache()"


def open_cache(cache: bool | str | Path | Cache | NullCache | None = True) -> Cache | NullCache:
    """The cache a ``cache=`` argument asks for: ``True``/``None`` the default file,
    ``False`` none (:class:`NullCache`), a path that file, an instance itself."""
    if isinstance(cache, (Cache, NullCache)):
        return cache
    if cache is None or cache is True:
        return Cache()
    if cache is False:
        return NullCache()
    if isinstance(cache, (str, os.PathLike)):
        return Cache(cache)
    raise TypeError(f"cache must be a bool, a path or a Cache, got {type(cache).__name__}")


def _close_if_owner(conn: sqlite3.Connection, pid: int) -> None:
    """Close ``conn`` in the process that opened it; in a forked child only keep it."""
    if os.getpid() == pid:
        conn.close()
    else:
        _inherited.append(conn)


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` (taking the write lock up front, waiting for it under the busy
    timeout) ... ``COMMIT``, rolled back on error."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
