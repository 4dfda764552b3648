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
import warnings
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import platformdirs

from contextlens.backend import Completion, Usage
from contextlens.engine.sqlite import Bypassable, Closing, SQLiteFile, bypassed_on_fault, file_path
from contextlens.errors import ContextLensError

__all__ = [
    "SCHEMA_VERSION",
    "Cache",
    "CacheError",
    "NullCache",
    "current_repeat",
    "default_cache_path",
    "keeps_replies",
    "open_cache",
]

SCHEMA_VERSION = 1
"""Stored in ``PRAGMA user_version``; a file with an older version is emptied and
rebuilt (it is only a cache), one with a newer version is refused."""

#: Which repeat of an item is being judged (``evaluate(..., repeats=k)``); part of the cache
#: key, so that each repeat is a call of its own.
current_repeat: ContextVar[int] = ContextVar("contextlens_repeat", default=0)

#: Seconds the cache waits for another process's lock before it is bypassed.
CACHE_BUSY_TIMEOUT = 5.0
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


class CacheError(ContextLensError):
    """The cache file cannot be opened or used."""


R = TypeVar("R")


def _miss(self: Cache, *args: Any) -> None:
    return None


def _no_vectors(self: Cache, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
    self._count(misses=len(texts))
    return {}


def default_cache_path() -> Path:
    """``$CONTEXTLENS_CACHE_DIR/cache.sqlite3`` when that variable is set, else
    ``cache.sqlite3`` in the user cache folder of contextlens; the folder is created."""
    env = os.environ.get("CONTEXTLENS_CACHE_DIR")
    folder = Path(env).expanduser() if env else Path(platformdirs.user_cache_dir("contextlens"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "cache.sqlite3"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical_json(value: Any) -> bytes:
    return _CANONICAL.encode(value).encode("utf-8", "surrogatepass")


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


class Cache(Bypassable):
    """Judge replies and embeddings in one SQLite file.

    Args:
        path: the file; ``None`` uses :func:`default_cache_path`.

    Safe to share between threads (each gets its own connection) and between processes
    (WAL journal, 30 s busy timeout). The counters ``hits``, ``misses`` and ``writes``
    count completions and embedding vectors looked up or stored through this object.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = file_path(default_cache_path() if path is None else path, "Cache")
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self._counter_lock = threading.Lock()
        self._db = SQLiteFile(
            self.path,
            name="the cache",
            error=CacheError,
            schema=_SCHEMA,
            version=SCHEMA_VERSION,
            newer_hint="use another cache file",
            rebuild=("completions", "embeddings"),
            busy_timeout=CACHE_BUSY_TIMEOUT,
        )

    bypassed = (
        "it is bypassed: every judge call and embedding of this run is made afresh, and none "
        "is lost"
    )

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection, opened (and the schema checked) on first use."""
        return self._db.connection()

    def close(self) -> None:
        """Close every connection this object opened; later use opens new ones."""
        self._db.close()

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

    @bypassed_on_fault(_miss)
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
        if not isinstance(text, str) or not all(
            isinstance(n, int) and n >= 0 for n in (prompt_tokens, completion_tokens)
        ):  # a damaged row: a miss, asked afresh and stored again
            self._count(misses=1)
            return None
        self._count(hits=1)
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
            latency=latency,
            parsed=_load_parsed(parsed),
        )

    @bypassed_on_fault(_miss)
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

    @bypassed_on_fault(_no_vectors)
    def get_embeddings(self, model: str, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """The stored vectors of ``texts`` under ``model``, by index in ``texts``
        (float32, one array per hit; missing texts are absent). A stored vector that is
        damaged (cut short, not finite, of another size than the others, or zero) is a
        miss."""
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
                if isinstance(blob, bytes) and len(blob) == dim * _VECTOR_DTYPE.itemsize:
                    vector = np.frombuffer(blob, dtype=_VECTOR_DTYPE)
                    if np.all(np.isfinite(vector)) and np.any(vector):
                        found[key] = vector
        sizes = [v.size for v in found.values()]
        if sizes and min(sizes) != max(sizes):  # keep the size most of them have
            usual = max(set(sizes), key=sizes.count)
            found = {k: v for k, v in found.items() if v.size == usual}
        hits = {i: found[k].astype(np.float32) for i, k in enumerate(keys) if k in found}
        self._count(hits=len(hits), misses=len(keys) - len(hits))
        return hits

    @bypassed_on_fault(_miss)
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
        with self._db.write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings (key, model, dim, vector, created) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        self._count(writes=len(rows))

    # -- maintenance -------------------------------------------------------------------

    def clear(self) -> None:
        """Delete every stored reply and vector (the counters are kept)."""
        with self._db.write() as conn:
            conn.execute("DELETE FROM completions")
            conn.execute("DELETE FROM embeddings")


class NullCache(Closing):
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

    broken: str | None = None

    def __repr__(self) -> str:
        return "NullCache()"


#: Set to ``off`` to use no cache wherever the default cache would be used.
ENV_CACHE = "CONTEXTLENS_CACHE"


def open_cache(cache: bool | str | Path | Cache | NullCache | None = True) -> Cache | NullCache:
    """The cache a ``cache=`` argument asks for: ``True``/``None`` the default file (none when
    ``$CONTEXTLENS_CACHE`` is ``off``), ``False`` none (:class:`NullCache`), a path that
    file, an instance itself."""
    if isinstance(cache, (Cache, NullCache)):
        return cache
    if not keeps_replies(cache):
        return NullCache()
    if cache is None or cache is True:
        return _opened(None)
    if isinstance(cache, (str, os.PathLike)):
        return _opened(cache)
    raise TypeError(f"cache must be a bool, a path or a Cache, got {type(cache).__name__}")


def keeps_replies(cache: object) -> bool:
    """Whether a ``cache=`` argument asks for replies to be kept (see :func:`open_cache`):
    not ``False``, a :class:`NullCache`, nor the default while ``$CONTEXTLENS_CACHE`` is
    ``off``."""
    if cache is False or isinstance(cache, NullCache):
        return False
    if cache is None or cache is True:
        return os.environ.get(ENV_CACHE, "").strip().lower() not in ("off", "0", "false", "no")
    return True


def _opened(path: str | os.PathLike[str] | None) -> Cache | NullCache:
    """The cache file at ``path`` (None: the default one); one that cannot be opened (a
    read-only folder, a damaged file, a lock that outlasts the wait) is warned about and
    bypassed: a cache fault never stops a run."""
    try:
        return Cache(path)
    except (CacheError, OSError, sqlite3.Error) as exc:
        where = f"the cache {path}" if path is not None else "the default cache"
        message = f"{where} cannot be used ({exc}); the run goes on without it"
        warnings.warn(message, RuntimeWarning, stacklevel=3)  # said once, by one channel
        return NullCache()
