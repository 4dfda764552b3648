"""The SQLite cache: round trips, keys, embeddings, threads, processes and SIGKILL."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from contextlens.backend import Completion, Usage
from contextlens.engine.cache import (
    SCHEMA_VERSION,
    Cache,
    CacheError,
    NullCache,
    default_cache_path,
    open_cache,
)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Cache]:
    with Cache(tmp_path / "cache.sqlite3") as c:
        yield c


def completion(i: int = 0, parsed: object = None) -> Completion:
    return Completion(text=f"reply {i}", usage=Usage(10 + i, 5), latency=0.25, parsed=parsed)


# -- keys ------------------------------------------------------------------------------


def test_key_is_canonical_and_sensitive() -> None:
    messages = [{"role": "user", "content": "héllo"}]
    a = Cache.key(backend="b", model="m", params={"temperature": 0, "seed": 1}, messages=messages)
    b = Cache.key(messages=messages, params={"seed": 1, "temperature": 0}, model="m", backend="b")
    assert a == b  # order of keys does not matter
    assert len(a) == 64 and int(a, 16) >= 0
    assert a != Cache.key(backend="b", model="m2", params={"temperature": 0, "seed": 1},
                          messages=messages)  # fmt: skip
    assert Cache.key(repeat=0, x="y") != Cache.key(repeat=1, x="y")
    assert Cache.key(text="\ud800") != Cache.key(text="")  # lone surrogates do not crash
    with pytest.raises(TypeError):
        Cache.key(thing=object())


# -- completions -------------------------------------------------------------------------


def test_completion_round_trip_and_counters(cache: Cache) -> None:
    key = Cache.key(n=1)
    assert cache.get_completion(key) is None
    cache.put_completion(key, completion(1, parsed={"score": 0.5, "reason": "ok"}))
    got = cache.get_completion(key)
    assert got == Completion("reply 1", Usage(11, 5), 0.25, {"score": 0.5, "reason": "ok"})
    assert (cache.hits, cache.misses, cache.writes) == (1, 1, 1)
    assert str(cache.path) in repr(cache)


def test_unserialisable_parsed_is_stored_as_none(cache: Cache) -> None:
    cache.put_completion("k", completion(parsed=object()))
    got = cache.get_completion("k")
    assert got is not None and got.parsed is None and got.text == "reply 0"


def test_put_replaces(cache: Cache) -> None:
    cache.put_completion("k", completion(1))
    cache.put_completion("k", completion(2))
    got = cache.get_completion("k")
    assert got is not None and got.text == "reply 2"


def test_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "c.sqlite3"
    with Cache(path) as first:
        first.put_completion("k", completion(3))
        first.put_embeddings("emb", ["a"], np.ones((1, 4)))
    with Cache(path) as second:
        got = second.get_completion("k")
        assert got is not None and got.text == "reply 3"
        assert list(second.get_embeddings("emb", ["a"])) == [0]


def test_pragmas_and_schema_version(cache: Cache) -> None:
    conn = cache._conn()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 5_000  # then it is bypassed
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_newer_schema_is_refused_and_older_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    with Cache(path) as c:
        c.put_completion("k", completion())
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.commit()
    with pytest.raises(CacheError, match="newer"):
        Cache(path)
    if SCHEMA_VERSION > 1:  # pragma: no cover - only once there is an older version
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION - 1}")
    else:
        raw.execute("DROP TABLE completions")
        raw.execute("PRAGMA user_version = 0")
    raw.commit()
    raw.close()
    with Cache(path) as c:
        assert c.get_completion("k") is None
        c.put_completion("k", completion())
        assert c.get_completion("k") is not None


def test_not_a_database_raises_cache_error(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(CacheError):
        Cache(path)


def test_memory_paths_refused() -> None:
    with pytest.raises(ValueError):
        Cache(":memory:")


def test_clear_and_close_then_reuse(cache: Cache) -> None:
    cache.put_completion("k", completion())
    cache.put_embeddings("m", ["x"], [np.zeros(3)])
    cache.clear()
    assert cache.get_completion("k") is None
    assert cache.get_embeddings("m", ["x"]) == {}
    cache.put_completion("k", completion())
    cache.close()
    got = cache.get_completion("k")  # reopens
    assert got is not None


# -- embeddings --------------------------------------------------------------------------


def test_embeddings_round_trip_by_index(cache: Cache) -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3, 8))
    cache.put_embeddings("mini", ["a", "b", "c"], vectors)
    got = cache.get_embeddings("mini", ["z", "c", "a", "a"])
    assert sorted(got) == [1, 2, 3]
    np.testing.assert_array_equal(got[1], vectors[2].astype(np.float32))
    np.testing.assert_array_equal(got[2], vectors[0].astype(np.float32))
    assert got[2].dtype == np.float32 and got[2].shape == (8,)
    got[2][0] = 123.0  # writable, and a copy
    assert got[3][0] != 123.0
    assert cache.get_embeddings("other-model", ["a"]) == {}
    assert cache.writes == 3
    assert cache.hits == 3 and cache.misses == 2


def test_embeddings_many_texts_are_chunked(cache: Cache) -> None:
    texts = [f"text {i}" for i in range(2345)]
    vectors = np.arange(len(texts) * 2, dtype=np.float32).reshape(-1, 2)
    cache.put_embeddings("m", texts, vectors)
    got = cache.get_embeddings("m", texts)
    assert len(got) == len(texts)
    np.testing.assert_array_equal(np.stack([got[i] for i in range(len(texts))]), vectors)


def test_put_embeddings_is_one_transaction(cache: Cache) -> None:
    with pytest.raises(ValueError):
        cache.put_embeddings("m", ["a", "b"], [np.zeros(2), np.zeros((2, 2))])
    with pytest.raises(ValueError):
        cache.put_embeddings("m", ["a", "b"], [np.zeros(2)])
    assert cache.get_embeddings("m", ["a", "b"]) == {}
    statements: list[str] = []
    cache._conn().set_trace_callback(statements.append)
    cache.put_embeddings("m", ["a", "b", "c"], np.zeros((3, 2)))
    cache._conn().set_trace_callback(None)
    assert [s for s in statements if s.startswith(("BEGIN", "COMMIT"))] == [
        "BEGIN IMMEDIATE",
        "COMMIT",
    ]


# -- threads ---------------------------------------------------------------------------


def test_one_connection_per_thread_and_concurrent_use(cache: Cache) -> None:
    main_conn = cache._conn()

    def work(i: int) -> sqlite3.Connection:
        cache.put_completion(f"k{i}", completion(i))
        assert cache.get_completion(f"k{i}") is not None
        return cache._conn()

    with ThreadPoolExecutor(8) as pool:
        conns = list(pool.map(work, range(200)))
    assert main_conn not in conns
    assert len({id(c) for c in conns}) <= 8
    assert cache.writes == 200 and cache.hits == 200
    assert all(cache.get_completion(f"k{i}") is not None for i in range(200))


def test_thread_connections_close_with_the_thread(tmp_path: Path) -> None:
    cache = Cache(tmp_path / "c.sqlite3")
    holder: list[sqlite3.Connection] = []
    thread = threading.Thread(target=lambda: holder.append(cache._conn()))
    thread.start()
    thread.join()
    del thread
    deadline = time.monotonic() + 2
    while True:
        try:
            holder[0].execute("SELECT 1")
        except sqlite3.ProgrammingError:
            break  # closed
        assert time.monotonic() < deadline, "a dead thread's connection stayed open"
        time.sleep(0.01)
    cache.close()


# -- null cache and open_cache ---------------------------------------------------------


def test_null_cache_stores_nothing() -> None:
    null = NullCache()
    null.put_completion("k", completion())
    assert null.get_completion("k") is None
    null.put_embeddings("m", ["a"], [np.zeros(2)])
    assert null.get_embeddings("m", ["a", "b"]) == {}
    assert (null.hits, null.misses, null.writes) == (0, 3, 0)
    assert null.key(a=1) == Cache.key(a=1)
    with null as same:
        same.clear()


def test_open_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONTEXTLENS_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_path() == tmp_path / "env" / "cache.sqlite3"
    assert (tmp_path / "env").is_dir()
    with open_cache(True) as c:
        assert isinstance(c, Cache) and c.path == tmp_path / "env" / "cache.sqlite3"
    with open_cache(None) as c:
        assert isinstance(c, Cache)
    assert isinstance(open_cache(False), NullCache)
    with open_cache(str(tmp_path / "a.db")) as c:
        assert isinstance(c, Cache) and c.path == tmp_path / "a.db"
    with open_cache(tmp_path / "b.db") as c:
        assert open_cache(c) is c
    null = NullCache()
    assert open_cache(null) is null
    with pytest.raises(TypeError):
        open_cache(3)  # type: ignore[arg-type]


def test_default_path_without_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONTEXTLENS_CACHE_DIR", raising=False)
    monkeypatch.setattr(
        "contextlens.engine.cache.platformdirs.user_cache_dir", lambda app: str(tmp_path / app)
    )
    assert default_cache_path() == tmp_path / "contextlens" / "cache.sqlite3"


# -- processes -------------------------------------------------------------------------

WRITER = textwrap.dedent(
    """
    import importlib.util, sys, time, types
    from pathlib import Path
    path, tag, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    # Start fast: bare package modules, so the heavy contextlens/__init__ (metrics,
    # judges, ...) is not run; the cache module itself and its imports are the real ones.
    root = Path(importlib.util.find_spec("contextlens").submodule_search_locations[0])
    for name, folder in (("contextlens", root), ("contextlens.judges", root / "judges")):
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        sys.modules[name] = module
    from contextlens.engine.cache import Cache
    from contextlens.backend import Completion, Usage
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    cache = Cache(path)  # both processes create the schema at the same moment
    for i in range(n):
        cache.put_completion(Cache.key(tag=tag, i=i), Completion(f"{tag}-{i}", Usage(i, 1)))
        print(i, flush=True)
    """
)


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_write_the_same_file(tmp_path: Path) -> None:
    path, go = tmp_path / "shared.sqlite3", tmp_path / "go"
    procs = [_spawn(str(path), tag, "200", str(go)) for tag in ("a", "b")]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        go.touch()
        for proc in procs:
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    with Cache(path) as cache:
        for tag in ("a", "b"):
            for i in range(200):
                got = cache.get_completion(Cache.key(tag=tag, i=i))
                assert got is not None and got.text == f"{tag}-{i}"
        assert cache.hits == 400


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkilled_writer_keeps_every_completed_put(tmp_path: Path) -> None:
    path, go = tmp_path / "resume.sqlite3", tmp_path / "go"
    go.touch()
    proc = _spawn(str(path), "r", "1000000", str(go))
    assert proc.stdout is not None
    done = -1
    try:
        assert proc.stdout.readline().strip() == "ready"
        for _ in range(300):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else "writer died"
            done = int(line)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL  # killed mid-way, not finished
    k = done + 1
    with Cache(path) as cache:
        assert all(cache.get_completion(Cache.key(tag="r", i=i)) is not None for i in range(k))
        (stored,) = cache._conn().execute("SELECT COUNT(*) FROM completions").fetchone()
    assert stored >= k


def test_keeps_replies_says_what_open_cache_does(monkeypatch, tmp_path):
    from contextlens.engine.cache import ENV_CACHE, NullCache, keeps_replies

    monkeypatch.delenv(ENV_CACHE, raising=False)
    assert keeps_replies(True) and keeps_replies(None) and keeps_replies(tmp_path / "c.db")
    assert not keeps_replies(False) and not keeps_replies(NullCache())
    monkeypatch.setenv(ENV_CACHE, "off")
    assert not keeps_replies(True) and not keeps_replies(None)
    assert keeps_replies(tmp_path / "c.db")  # a file asked for by name is kept
    assert isinstance(open_cache(True), NullCache)
