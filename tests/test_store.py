"""The run store: record, list, load (by prefix), concurrency, fingerprints, tracking."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading

import numpy as np
import pytest

from contextlens import store as store_mod
from contextlens.engine.accounting import Counts, LedgerReport
from contextlens.errors import InputError
from contextlens.provenance import DataFile, current_provenance
from contextlens.results import RecordedConfig
from contextlens.runner import EvalRun, ItemResult, MetricSummary, evaluate
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.store import (
    RunStore,
    StoredRun,
    StoreError,
    active_store,
    configure,
    default_store_path,
    fingerprint_cases,
    fingerprint_file,
    record_score,
)


def make_run(run_id: str, scores: list[float | None], started: str = "2024-05-01T10:00:00+00:00"):
    results = [
        ItemResult(
            case_id=f"c{i}",
            metric="m",
            score=s,
            error=None if s is not None else "JudgeError: bad reply",
            reason="r" if s is not None else None,
            details={"k": i},
        )
        for i, s in enumerate(scores)
    ]
    ok = [s for s in scores if s is not None]
    summary = MetricSummary(
        metric="m",
        n=len(scores),
        n_scored=len(ok),
        n_failed=len(scores) - len(ok),
        mean=float(np.mean(ok)) if ok else None,
    )
    return EvalRun(
        run_id=run_id,
        started_at=started,
        duration_s=1.5,
        judge="offline",
        embedder="minilm",
        repeats=1,
        summaries={"m": summary},
        accounting=LedgerReport(total=Counts(calls=3, cost=0.25)),
        results=results,
    )


@pytest.fixture
def store(tmp_path):
    with RunStore(tmp_path / "runs.sqlite3") as s:
        yield s


def test_round_trip(store, tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("{}\n")
    run = make_run("abc123def456", [0.5, None, 0.25])
    run.provenance = current_provenance(data_file=DataFile.of(data), command="contextlens run x")
    rid = store.record(
        run,
        config={"metrics": ["m"], "args": {"out": tmp_path}},
        dataset=data,
        dataset_fingerprint=fingerprint_file(data),
    )
    assert rid == "abc123def456"
    loaded = store.load(rid)
    assert isinstance(loaded, StoredRun) and isinstance(loaded, EvalRun)
    assert loaded.results == run.results  # streamed from the store when asked
    assert list(loaded.iter_results()) == run.results
    assert loaded.summaries == run.summaries
    assert loaded.accounting == LedgerReport(total=Counts(calls=3, cost=0.25))
    assert (loaded.judge, loaded.embedder, loaded.started_at) == (
        "offline",
        "minilm",
        run.started_at,
    )
    assert loaded.config.model_extra == {"metrics": ["m"], "args": {"out": str(tmp_path)}}
    assert loaded.dataset == str(data)
    assert loaded.dataset_fingerprint == fingerprint_file(data)
    assert loaded.provenance == run.provenance  # typed, as the run recorded it
    assert loaded.provenance.data_file.sha256 == fingerprint_file(data)
    assert loaded.provenance.packages["numpy"] == np.__version__
    assert set(loaded.versions) == {"contextlens", "python", "numpy", "onnxruntime"}
    assert loaded.versions["numpy"] == np.__version__
    assert [f.case_id for f in loaded.failures()] == ["c1"]
    frame = loaded.to_pandas()
    assert list(frame["case_id"]) == ["c0", "c1", "c2"]
    full = store.load(rid, results=True)
    assert full.results == run.results


def test_many_items_are_streamed_in_pages(store):
    scores = [i / 2500 for i in range(2500)]
    store.record(make_run("big", scores))
    loaded = store.load("big")
    assert [r.score for r in loaded.iter_results()] == scores
    assert store.list_runs()[0].n_items == 2500


def test_list_runs_newest_first_with_means(store):
    store.record(make_run("r-old", [0.2, 0.4], started="2024-01-01T00:00:00+00:00"))
    store.record(make_run("r-new", [1.0, None], started="2024-06-01T00:00:00+02:00"))
    store.record(make_run("r-mid", [0.5], started="2024-03-01T00:00:00"))
    infos = store.list_runs()
    assert [i.run_id for i in infos] == ["r-new", "r-mid", "r-old"]
    new = infos[0]
    assert (new.n_cases, new.n_items, new.n_failed) == (2, 2, 1)
    assert new.means == {"m": 1.0}
    assert infos[2].means["m"] == pytest.approx(0.3)
    assert [i.run_id for i in store.list_runs(limit=1)] == ["r-new"]
    assert [r.run_id for r in store.latest(2)] == ["r-mid", "r-new"]  # oldest first


def test_recording_again_replaces(store):
    store.record(make_run("same", [0.1, 0.2, 0.3]))
    store.record(make_run("same", [0.9]))
    assert len(store.list_runs()) == 1
    assert [r.score for r in store.load("same").iter_results()] == [0.9]


def test_prefix_ids_and_errors(store):
    store.record(make_run("abc111", [0.1]))
    store.record(make_run("abc222", [0.2]))
    store.record(make_run("abc", [0.3]))
    assert store.load("abc1").run_id == "abc111"
    assert store.load("abc").run_id == "abc"  # an exact id wins over prefixes
    with pytest.raises(InputError, match=r"'ab' is ambiguous") as info:
        store.load("ab")
    assert all(c in str(info.value) for c in ("abc111", "abc222", "abc"))
    with pytest.raises(InputError, match=r"no run 'zzz'.*recent runs: .*abc"):
        store.load("zzz")
    with pytest.raises(InputError, match="empty run id"):
        store.load("  ")


def test_unknown_id_in_an_empty_store(store):
    with pytest.raises(InputError, match=r"no run 'x'.*has no runs"):
        store.load("x")


def test_concurrent_writers(tmp_path):
    path = tmp_path / "runs.sqlite3"
    shared = RunStore(path)
    errors: list[BaseException] = []

    def writer(tag: str, own: bool) -> None:
        try:
            s = RunStore(path) if own else shared
            for i in range(15):
                s.record(make_run(f"{tag}{i:02d}", [0.1 * (i % 10)] * 40))
                s.record_score("m", f"{tag}-{i}", 0.5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=writer, args=("a", False)),
        threading.Thread(target=writer, args=("b", False)),
        threading.Thread(target=writer, args=("c", True)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    infos = shared.list_runs(limit=100)
    tracked = [i for i in infos if i.run_id.startswith("tracked-")]
    assert len(infos) == 45 + len(tracked)
    assert all(i.n_items == 40 for i in infos if not i.run_id.startswith("tracked-"))
    assert len(tracked) == 2  # one ad-hoc run per store object (shared, own)
    assert sum(i.n_items for i in tracked) == 45
    shared.close()


def test_fingerprints_are_stable(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"x" * 3_000_000)
    fp = fingerprint_file(path)
    assert fp == fingerprint_file(str(path)) and len(fp) == 64
    path.write_bytes(b"x" * 3_000_000 + b"y")
    assert fingerprint_file(path) != fp

    cases = [ModelTestCase(input="q", actual_output="a", retrieval_context=["c"], name="n")]
    as_dicts = [c.model_dump(mode="json") for c in cases]
    assert fingerprint_cases(cases) == fingerprint_cases(iter(as_dicts))
    reordered = [dict(reversed(list(d.items()))) for d in as_dicts]
    assert fingerprint_cases(reordered) == fingerprint_cases(cases)
    assert fingerprint_cases([*cases, *cases]) != fingerprint_cases(cases)
    assert fingerprint_cases([]) == fingerprint_cases(())


def test_default_store_path(monkeypatch, tmp_path):
    monkeypatch.setenv("CONTEXTLENS_STORE", str(tmp_path / "x.sqlite3"))
    assert default_store_path() == tmp_path / "x.sqlite3"
    monkeypatch.delenv("CONTEXTLENS_STORE")
    assert default_store_path().name == "runs.sqlite3"


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match="schema version 99"):
        RunStore(path)


def test_configure_and_record_score(tmp_path, monkeypatch):
    monkeypatch.setattr(store_mod.active, "_active", None)
    assert active_store() is None
    assert record_score("m", "c", 0.5, None, None) is None  # not configured: no-op
    s = configure(tmp_path / "runs.sqlite3")
    assert active_store() is s
    rid = record_score("precision", "c1", 0.75, "fine", None)
    assert rid is not None and rid.startswith("tracked-")
    assert record_score("precision", "c2", None, None, "MetricComputationError: x") == rid
    assert record_score("precision", "c3", float("nan"), None, None) == rid
    assert record_score("precision", "c4", 0.25, None, None) == rid
    run = s.load(rid)
    summary = run.summaries["precision"]
    assert (summary.n, summary.n_scored, summary.n_failed) == (4, 2, 2)
    assert summary.mean == pytest.approx(0.5)
    items = list(run.iter_results())
    assert [i.case_id for i in items] == ["c1", "c2", "c3", "c4"]
    assert items[2].error and items[2].score is None
    assert record_score("recall", "c1", 1.0, None, None) == rid  # a known case, a new metric
    (info,) = [i for i in s.list_runs() if i.run_id == rid]
    assert (info.n_cases, info.n_items, info.n_failed) == (4, 5, 2)
    assert info.means == {"precision": pytest.approx(0.5), "recall": 1.0}
    configure(None)
    assert active_store() is None
    s.close()


class _Fixed:
    """A stand-in metric: a fixed score per case, one failure."""

    name = "fixed"
    case_type = ModelTestCase

    async def score(self, case: ModelTestCase, services: object) -> MetricResult:
        if case.name == "bad":
            return MetricResult(metric=self.name, score=None, error="no score")
        return MetricResult(metric=self.name, score=len(case.input) / 10, reason="len")


class _Embedder:
    name = "fake"

    async def embed(self, texts):  # pragma: no cover - not called
        return np.zeros((len(texts), 2), dtype=np.float32)


def test_evaluate_then_record(store, tmp_path):
    cases = [
        ModelTestCase(input="abc", name="a"),
        ModelTestCase(input="abcde", name="b"),
        ModelTestCase(input="x", name="bad"),
    ]
    run = evaluate(
        cases, [_Fixed()], embedder=_Embedder(), cache=False, progress=False, out=tmp_path / "o"
    )
    assert sorted(r.case_id for r in run.results) == ["a", "b", "bad"]  # read back from out/
    store.record(run, config={"metrics": ["fixed"]}, dataset_fingerprint=fingerprint_cases(cases))
    loaded = store.load(run.run_id[:6])
    assert sorted((r.case_id, r.score) for r in loaded.iter_results()) == [
        ("a", 0.3),
        ("b", 0.5),
        ("bad", None),
    ]
    assert loaded.summaries["fixed"].n_failed == 1
    assert loaded.summaries == run.summaries
    info = store.list_runs()[0]
    assert (info.n_cases, info.n_failed) == (3, 1)


# -- the run's life: running, completed, failed, interrupted ---------------------------


def _dead_pid() -> int:
    """The pid of a process that has ended and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_run_is_recorded_when_it_starts_and_when_it_ends(store, tmp_path):
    store.start("r1", judge="offline", out_dir=tmp_path / "out" / "r1", command="contextlens run x")
    (info,) = store.list_runs()
    assert (info.status, info.command, info.cwd) == ("running", "contextlens run x", os.getcwd())
    assert (info.pid, info.host) == (os.getpid(), socket.gethostname())
    assert info.out_dir == str(tmp_path / "out" / "r1")
    assert (info.n_items, info.means) == (0, {})
    store.record(make_run("r1", [0.5, 0.25]))
    (info,) = store.list_runs()
    assert (info.status, info.command, info.pid, info.n_items) == (
        "completed",
        "contextlens run x",
        os.getpid(),
        2,
    )
    store.start("r2", command="contextlens run y")
    store.fail("r2", "InputError: cases.jsonl:3: field 'input': Field required")
    loaded = store.load("r2")
    assert (loaded.status, loaded.command) == ("failed", "contextlens run y")
    assert loaded.error == "InputError: cases.jsonl:3: field 'input': Field required"
    store.start("r3")
    store.fail("r3", "stopped by the user", interrupted=True)
    assert store.load("r3").status == "interrupted"
    assert [r.run_id for r in store.latest(2)] == ["r1"]  # only completed runs are compared


def test_a_running_run_whose_process_is_gone_is_interrupted(store, tmp_path):
    folder = tmp_path / "out" / "gone"
    folder.mkdir(parents=True)
    done = [ItemResult(case_id=f"c{i}", metric="m", score=0.5) for i in range(2)]
    torn = ItemResult(case_id="c2", metric="m", score=0.5).model_dump_json()[:20]
    (folder / "results.jsonl").write_text("".join(i.model_dump_json() + "\n" for i in done) + torn)
    for run_id in ("gone", "elsewhere"):
        store.start(run_id, out_dir=tmp_path / "out" / run_id, command=f"contextlens {run_id}")
    with store._db.write() as conn:
        conn.execute("UPDATE runs SET pid = ?", (_dead_pid(),))
        conn.execute("UPDATE runs SET host = 'another-host' WHERE run_id = 'elsewhere'")
    status = {i.run_id: i.status for i in store.list_runs()}
    assert status == {"gone": "interrupted", "elsewhere": "running or lost"}  # can't tell there
    run = store.load("gone")
    assert (run.status, run.command, run.summaries) == ("interrupted", "contextlens gone", {})
    assert list(run.iter_results()) == done  # the whole lines of its folder's results.jsonl
    assert list(store.load("elsewhere").iter_results()) == []  # no results.jsonl


def test_a_store_of_version_1_is_migrated_in_place(tmp_path):
    path = tmp_path / "runs.sqlite3"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at TEXT NOT NULL,
            started_ts REAL NOT NULL, recorded_at REAL NOT NULL, duration_s REAL NOT NULL,
            judge TEXT NOT NULL, embedder TEXT NOT NULL, repeats INTEGER NOT NULL,
            out_dir TEXT, dataset TEXT, dataset_fingerprint TEXT, config TEXT NOT NULL,
            versions TEXT NOT NULL, summaries TEXT NOT NULL, accounting TEXT NOT NULL,
            n_cases INTEGER NOT NULL DEFAULT 0, n_items INTEGER NOT NULL DEFAULT 0,
            n_failed INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID;
        CREATE TABLE items (run_id TEXT NOT NULL, seq INTEGER NOT NULL, case_id TEXT NOT NULL,
            metric TEXT NOT NULL, score REAL, error TEXT, data TEXT NOT NULL,
            PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
        INSERT INTO runs VALUES ('old', '2024-01-01T00:00:00+00:00', 1704067200, 1704067201,
            2.0, 'offline', 'minilm', 1, NULL, NULL, NULL, '{}', '{}', '{}', '{}', 0, 0, 0);
        PRAGMA user_version = 1;
        """
    )
    conn.close()
    with RunStore(path) as migrated:
        (info,) = migrated.list_runs()
        assert (info.run_id, info.status, info.command) == ("old", "completed", None)
        migrated.start("new", command="contextlens run z")
        assert [i.status for i in migrated.list_runs()] == ["running", "completed"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (store_mod.SCHEMA_VERSION,)
    conn.close()


# -- names and tags --------------------------------------------------------------------------


def test_runs_are_named_tagged_and_filtered(store):
    for run_id, name, tags, started in (
        ("n1", "nightly", {"branch": "main"}, "2024-01-01T00:00:00+00:00"),
        ("n2", "nightly", {"branch": "dev"}, "2024-01-02T00:00:00+00:00"),
        ("n3", "nightly", {"branch": "main", "model": "x"}, "2024-01-03T00:00:00+00:00"),
        ("other", "ad-hoc", {}, "2024-01-04T00:00:00+00:00"),
    ):
        run = make_run(run_id, [0.5], started=started)
        run.config = RecordedConfig(name=name, tags=tags)
        run.data_fingerprint = f"fp-{run_id}"
        store.record(run)
    assert [i.run_id for i in store.list_runs(name="nightly")] == ["n3", "n2", "n1"]
    assert [i.run_id for i in store.list_runs(tags={"branch": "main"})] == ["n3", "n1"]
    assert [i.run_id for i in store.list_runs(name="nightly", tags={"model": "x"})] == ["n3"]
    assert [i.run_id for i in store.list_runs(limit=1, tags={"branch": "main"})] == ["n3"]
    info = store.list_runs(name="ad-hoc")[0]
    assert (info.name, info.tags) == ("ad-hoc", {})
    assert [r.run_id for r in store.latest(2, name="nightly")] == ["n2", "n3"]
    loaded = store.load("n3")
    assert (loaded.name, loaded.tags) == ("nightly", {"branch": "main", "model": "x"})
    assert loaded.data_fingerprint == "fp-n3"


def test_a_started_run_has_its_name_and_tags(store):
    store.start("s1", config={"name": "nightly", "tags": {"branch": "main"}})
    (info,) = store.list_runs(name="nightly")
    assert (info.status, info.tags) == ("running", {"branch": "main"})


def test_a_store_of_version_2_gets_names_and_tags(tmp_path):
    path = tmp_path / "runs.sqlite3"
    with RunStore(path) as new:
        new.record(make_run("kept", [0.5]))
    conn = sqlite3.connect(path)
    conn.executescript(
        "DROP INDEX runs_by_name; ALTER TABLE runs DROP COLUMN name; "
        "ALTER TABLE runs DROP COLUMN tags; ALTER TABLE runs DROP COLUMN data_fingerprint; "
        "PRAGMA user_version = 2;"
    )
    conn.close()
    with RunStore(path) as migrated:
        (info,) = migrated.list_runs()
        assert (info.run_id, info.name, info.tags) == ("kept", None, {})
        run = make_run("named", [0.1])
        run.config = RecordedConfig(name="nightly")
        migrated.record(run)
        assert [i.run_id for i in migrated.list_runs(name="nightly")] == ["named"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (store_mod.SCHEMA_VERSION,)
    conn.close()
