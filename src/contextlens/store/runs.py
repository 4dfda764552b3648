"""A local run history: every :class:`~contextlens.runner.EvalRun` in one SQLite file.

One file, shared safely by threads and processes (WAL journal, a busy timeout, one
connection per thread, writes in ``BEGIN IMMEDIATE`` transactions). A run is stored with
what is needed to reproduce and compare it: judge, embedder, repeats, the caller's config
(metrics, CLI arguments), the dataset path and fingerprint, its provenance (library versions,
data file, command, platform), summaries, accounting, and every item result.

A run is recorded when it starts (:meth:`RunStore.start`: status ``running``, with the
command line, working folder, pid and host) and again when it ends: ``completed`` with its
results (:meth:`RunStore.record`) or ``failed`` with the error (:meth:`RunStore.fail`). A
run still ``running`` whose process is gone from this host is read back as
``interrupted``; the same command, run again in the same folder, resumes it (the judge-call
cache answers what was already done). Its items are then those of the ``results.jsonl`` in
its run folder, as far as they were written.

Reading a run back (:meth:`RunStore.load`) gives a :class:`StoredRun`, which *is* an
``EvalRun`` (a subclass with a few extra fields), so reports and :func:`contextlens.compare`
take a fresh run and a stored one alike. As for an ``EvalRun`` written to ``out=``, read
the items with ``iter_results()``: they are streamed from the file page by page and
``results`` stays empty unless ``load(..., results=True)`` is asked for.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import platformdirs
from pydantic import ValidationError
from pydantic_core import to_jsonable_python

from contextlens.engine.sqlite import Closing, SQLiteFile, file_path
from contextlens.errors import InputError
from contextlens.files import describe_os_error
from contextlens.provenance import DataFile, Provenance, current_provenance
from contextlens.redact import redact
from contextlens.results import EvalRun, ItemResult, MetricSummary, RecordedConfig
from contextlens.runfiles import check_run_id, is_run_id
from contextlens.store.records import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    PAGE,
    RUNNING,
    RunInfo,
    StoredRun,
    StoreError,
    run_status,
)
from contextlens.store.schema import (
    ITEM_INSERT,
    SCHEMA,
    SCHEMA_VERSION,
    TABLES,
    add_score,
    item_row,
    refresh_counts,
    replace_run,
    score_column,
)

__all__ = [
    "SCHEMA_VERSION",
    "STORE_BUSY_TIMEOUT",
    "RunStore",
    "default_store_path",
    "library_versions",
]

#: Seconds the run store waits for another process's lock (a backup, an open ``sqlite3``
#: shell) before it says so; the command then goes on with the run unrecorded.
STORE_BUSY_TIMEOUT = 10.0

_MAX_CANDIDATES = 10


def default_store_path() -> Path:
    """``$CONTEXTLENS_STORE`` when set, else ``runs.sqlite3`` in the user data folder."""
    env = os.environ.get("CONTEXTLENS_STORE")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("contextlens")) / "runs.sqlite3"


def _timestamp(started_at: str, fallback: float) -> float:
    """Seconds since the epoch of an ISO time (naive means UTC), or ``fallback``."""
    try:
        when = datetime.fromisoformat(started_at.replace("Z", "+00:00"))
    except (TypeError, ValueError):
        return fallback
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp()


#: The versions the ``versions`` column holds, as it always did.
_VERSIONS = ("contextlens", "python", "numpy", "onnxruntime")


def library_versions(provenance: Provenance | None = None) -> dict[str, str | None]:
    """Versions of contextlens, Python, numpy and onnxruntime (None when not installed) in
    ``provenance`` (default: this process's)."""
    made = current_provenance() if provenance is None else provenance
    return {name: made.version_of(name) for name in _VERSIONS}


def _json(value: Any) -> str:
    return json.dumps(
        to_jsonable_python(value, fallback=str), sort_keys=True, default=str, ensure_ascii=False
    )


def _config(config: RecordedConfig | Mapping[str, Any] | None) -> RecordedConfig:
    """A caller's configuration as the typed record (a mapping is checked as one)."""
    if isinstance(config, RecordedConfig):
        return config
    return RecordedConfig().with_extra(config)


def _labels(config: RecordedConfig) -> tuple[str | None, str]:
    """The ``name`` and ``tags`` (as JSON) a run's configuration gives it."""
    return config.name, _json(dict(config.tags))


def _provenance_column(provenance: Provenance | None) -> str | None:
    return None if provenance is None else provenance.model_dump_json()


def _first_error(exc: Exception) -> str:
    """What is wrong, in one line (the first error of a validation)."""
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc)


def _read_provenance(text: str | None) -> Provenance | None:
    """The provenance a row holds (None: none, or one this contextlens cannot read)."""
    if text is None:
        return None
    try:
        return Provenance.model_validate_json(text)
    except ValidationError:
        return None


def _started_provenance(started: tuple[Any, ...] | None) -> Provenance | None:
    """The provenance :meth:`RunStore.start` recorded for a run, if it did."""
    return _read_provenance(started[4]) if started else None


def _legacy_provenance(
    versions: Any, dataset: str | None, fingerprint: str | None, command: str | None
) -> Provenance | None:
    """The provenance of a run recorded before the store kept one, from the columns it had
    (its versions, data file and command); None when it has none of them."""
    if not isinstance(versions, Mapping):
        versions = {}
    if not versions and fingerprint is None and command is None:
        return None
    packages = {k: str(v) for k, v in versions.items() if k not in ("contextlens", "python") and v}
    data_file = (
        DataFile(path=dataset or "", sha256=fingerprint) if fingerprint is not None else None
    )
    return Provenance(
        contextlens=versions.get("contextlens"),
        python=versions.get("python"),
        packages=packages,
        data_file=data_file,
        command=command,
    )


def _absolute(path: str | os.PathLike[str] | None) -> str | None:
    """``path`` made absolute (a run folder is found again from any working folder)."""
    return None if path is None else os.path.abspath(path)


class RunStore(Closing):
    """Evaluation runs in one SQLite file.

    Args:
        path: the file; ``None`` uses :func:`default_store_path`. Its folder is created.

    Safe to share between threads (each gets its own connection) and processes (WAL
    journal, 30 s busy timeout).
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        given = default_store_path() if path is None else path
        try:
            self.path = file_path(given, "RunStore")
        except OSError as exc:  # its folder cannot be made: a store fault like the others
            raise StoreError(
                f"cannot use the run store {given}: cannot make its folder "
                f"{exc.filename or Path(given).parent}: {describe_os_error(exc)}"
            ) from None
        self._tracked: tuple[int, str] | None = None  # (pid, run id) of the ad-hoc run
        self._tracked_lock = threading.Lock()
        self._db = SQLiteFile(
            self.path,
            name="the run store",
            error=StoreError,
            schema=SCHEMA,
            version=SCHEMA_VERSION,
            newer_hint="upgrade contextlens",
            busy_timeout=STORE_BUSY_TIMEOUT,
        )
        self._check_tables()

    def _check_tables(self) -> None:
        """A :class:`StoreError` naming the file when it lacks a table or a column of the run
        store (a file of the right version made by hand, or damaged), before it is used."""
        with self._reading() as conn:
            for table, columns in TABLES.items():
                have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                missing = [c for c in columns if c not in have]
                if not missing:
                    continue
                shown = ", ".join(missing[:3]) + (
                    f" and {len(missing) - 3} more" * (len(missing) > 3)
                )
                what = (
                    f"has no {table!r} table"
                    if not have
                    else f"lacks the column(s) {shown} of its {table!r} table"
                )
                raise StoreError(
                    f"the run store {self.path} {what}: it is damaged, or not a contextlens "
                    "run store; move it aside, and a new one is made in its place"
                )

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """This thread's connection; a fault of the file while it is read (a table gone, a
        damaged page) is a :class:`StoreError` naming it."""
        try:
            yield self._db.connection()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the run store {self.path}: {exc}") from None

    def _run_id(self, value: object) -> str:
        """A run id read from the store, checked: a :class:`StoreError` naming the file when
        it is not one (a store written by hand, or damaged)."""
        if not is_run_id(value):
            raise StoreError(
                f"the run store {self.path} holds a run whose id {value!r:.80} is not a run "
                "id (1 to 64 letters, digits, '.', '_' or '-', not starting with '.'): it is "
                "damaged, or was not written by contextlens"
            )
        return str(value)

    def close(self) -> None:
        """Close every connection this object opened; later use opens new ones."""
        self._db.close()

    def __repr__(self) -> str:
        return f"RunStore({str(self.path)!r})"

    # -- writing -----------------------------------------------------------------------

    def start(
        self,
        run_id: str,
        *,
        judge: str = "",
        embedder: str = "",
        repeats: int = 1,
        out_dir: str | os.PathLike[str] | None = None,
        config: RecordedConfig | Mapping[str, Any] | None = None,
        dataset: str | os.PathLike[str] | None = None,
        dataset_fingerprint: str | None = None,
        command: str | None = None,
    ) -> str:
        """Record that run ``run_id`` starts: status ``running``, with ``command`` (the
        command line that started it), this process's working folder, pid and host, and its
        provenance (the data file ``dataset`` of SHA-256 ``dataset_fingerprint``).
        :meth:`record` completes it, :meth:`fail` fails it; if the process dies first, it
        reads back as ``interrupted``. Returns ``run_id``; an :class:`InputError` when it is
        not a run id (:data:`contextlens.runfiles.RUN_ID`)."""
        check_run_id(run_id)  # read back, it is checked: a store holds none it cannot read
        now = datetime.now(timezone.utc).replace(microsecond=0)  # as a run's started_at
        recorded = _config(config)
        data_file = (
            DataFile(path=str(dataset), sha256=dataset_fingerprint)
            if dataset is not None and dataset_fingerprint is not None
            else None
        )
        provenance = current_provenance(data_file=data_file, command=command)
        row = (
            run_id,
            now.isoformat(timespec="seconds"),
            now.timestamp(),
            now.timestamp(),
            0.0,
            judge,
            embedder,
            int(repeats),
            _absolute(out_dir),
            None if dataset is None else str(dataset),
            dataset_fingerprint,
            _json(recorded),
            _json(library_versions(provenance)),
            _json({}),
            _json({}),
            RUNNING,
            None,
            command,
            os.getcwd(),
            os.getpid(),
            socket.gethostname(),
            *_labels(recorded),
            None,
            _provenance_column(provenance),
        )
        with self._db.write() as conn:
            replace_run(conn, row)
        return run_id

    def fail(self, run_id: str, error: str, *, interrupted: bool = False) -> None:
        """Mark the started run ``run_id`` ``failed`` with ``error`` (``interrupted`` when
        the user stopped it). A run the store does not hold is left alone."""
        now = datetime.now(timezone.utc).timestamp()
        with self._db.write() as conn:
            conn.execute(
                "UPDATE runs SET status = ?, error = ?, recorded_at = ?, "
                "duration_s = MAX(? - started_ts, 0) WHERE run_id = ?",
                (INTERRUPTED if interrupted else FAILED, redact(error), now, now, run_id),
            )

    def record(
        self,
        run: EvalRun,
        *,
        config: RecordedConfig | Mapping[str, Any] | None = None,
        dataset: str | os.PathLike[str] | None = None,
        dataset_fingerprint: str | None = None,
    ) -> str:
        """Save ``run`` and every item result in one transaction; return its ``run_id``.

        ``config`` is the caller's settings (metrics, CLI arguments ...), stored over the
        run's own configuration as JSON (values that are not JSON become strings); its
        ``name`` and ``tags`` are the run's. ``dataset`` and ``dataset_fingerprint`` default
        to the data file of the run's provenance. Recording a run id again replaces it; the
        run is ``completed``, and keeps the command and process :meth:`start` recorded (and
        the provenance, for a run that has none of its own).
        """
        check_run_id(run.run_id)
        now = datetime.now(timezone.utc)
        recorded = run.config.with_extra(
            config.model_dump(exclude_unset=True) if isinstance(config, RecordedConfig) else config
        )
        data_file = run.provenance.data_file if run.provenance is not None else None
        if dataset is None and data_file is not None:
            dataset, dataset_fingerprint = data_file.path, data_file.sha256
        row = (
            run.run_id,
            run.started_at,
            _timestamp(run.started_at, now.timestamp()),
            now.timestamp(),
            float(run.duration_s),
            run.judge,
            run.embedder,
            int(run.repeats),
            _absolute(run.out_dir),
            None if dataset is None else str(dataset),
            dataset_fingerprint,
            _json(recorded),
        )
        with self._db.write() as conn:
            started = conn.execute(
                "SELECT command, cwd, pid, host, provenance FROM runs WHERE run_id = ?",
                (run.run_id,),
            ).fetchone()
            process = tuple(started[:4]) if started else (None, None, None, None)
            provenance = run.provenance or _started_provenance(started)
            row += (
                _json(library_versions(provenance) if provenance is not None else {}),
                _json({k: v.model_dump(mode="json") for k, v in run.summaries.items()}),
                _json(run.accounting.model_dump(mode="json")),
                COMPLETED,
                None,
                *process,
                *_labels(recorded),
                run.data_fingerprint,
                _provenance_column(provenance),
            )
            replace_run(conn, row)
            batch: list[tuple[Any, ...]] = []
            for seq, item in enumerate(run.iter_results()):
                batch.append(item_row(run.run_id, seq, item))
                if len(batch) >= PAGE:
                    conn.executemany(ITEM_INSERT, batch)
                    batch.clear()
            if batch:
                conn.executemany(ITEM_INSERT, batch)
            refresh_counts(conn, run.run_id)
        return run.run_id

    def record_score(
        self,
        metric: str,
        case_id: str,
        score: float | None,
        reason: str | None = None,
        error: str | None = None,
    ) -> str:
        """Append one score to this process's ad-hoc run ``tracked-<date>-<id>``; return its id.

        For scores computed outside :func:`evaluate` (e.g. Opik's ``track=True``). A ``None``
        or non-finite score without an ``error`` is recorded as failed. The run's summaries
        (n, failures, mean; no interval) are updated with each score, in O(1).
        """
        if error is None and score_column(score) is None:
            error = f"no score ({score!r})"
        item = ItemResult(
            case_id=str(case_id),
            metric=str(metric),
            score=None if error is not None else score,
            reason=reason,
            error=error,
        )
        run_id = self._tracked_run()
        with self._db.write() as conn:
            (seq,) = conn.execute(
                "SELECT COALESCE(MAX(seq), -1) + 1 FROM items WHERE run_id = ?", (run_id,)
            ).fetchone()
            new_case = not conn.execute(
                "SELECT 1 FROM items WHERE run_id = ? AND case_id = ? LIMIT 1",
                (run_id, item.case_id),
            ).fetchone()
            conn.execute(ITEM_INSERT, item_row(run_id, seq, item))
            (text,) = conn.execute(
                "SELECT summaries FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            summaries = json.loads(text)
            summaries[item.metric] = add_score(summaries.get(item.metric), item).model_dump(
                mode="json"
            )
            conn.execute(
                "UPDATE runs SET summaries = ?, duration_s = ? - started_ts, "
                "n_cases = n_cases + ?, n_items = n_items + 1, n_failed = n_failed + ? "
                "WHERE run_id = ?",
                (
                    _json(summaries),
                    datetime.now(timezone.utc).timestamp(),
                    int(new_case),
                    int(item.failed),
                    run_id,
                ),
            )
        return run_id

    def _tracked_run(self) -> str:
        """The id of this process's ad-hoc run, created on first use."""
        with self._tracked_lock:
            if self._tracked is not None and self._tracked[0] == os.getpid():
                return self._tracked[1]
            now = datetime.now(timezone.utc)
            run_id = f"tracked-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(3)}"
            run = EvalRun(
                run_id=run_id,
                started_at=now.isoformat(timespec="seconds"),
                duration_s=0.0,
                judge="tracked",
                embedder="",
                repeats=1,
                summaries={},
                accounting={},
                provenance=current_provenance(),
            )
            self.record(run, config={"source": "tracked", "pid": os.getpid()})
            self._tracked = (os.getpid(), run_id)
            return run_id

    # -- reading -----------------------------------------------------------------------

    def list_runs(
        self,
        limit: int = 50,
        *,
        completed: bool = False,
        name: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> list[RunInfo]:
        """The ``limit`` most recent runs, newest first (by start time); ``completed``:
        only the runs that completed; ``name``: only the runs of that name; ``tags``: only
        the runs that have every one of these tags with these values."""
        where, args = [], []
        if completed:
            where.append("status = ?")
            args.append(COMPLETED)
        if name is not None:
            where.append("name = ?")
            args.append(name)
        wanted = {str(k): str(v) for k, v in (tags or {}).items()}
        infos: list[RunInfo] = []
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT run_id, started_at, judge, dataset, n_cases, n_items, n_failed, "
                "summaries, status, error, command, cwd, pid, host, out_dir, name, tags FROM runs "
                f"{'WHERE ' + ' AND '.join(where) + ' ' if where else ''}"
                "ORDER BY started_ts DESC, recorded_at DESC",
                args,
            )
            for row in rows:
                info = self._info(row, wanted)
                if info is not None:
                    infos.append(info)
                    if len(infos) >= limit:
                        break
        return infos

    def _info(self, row: tuple[Any, ...], wanted: Mapping[str, str]) -> RunInfo | None:
        """A row of ``list_runs`` as a :class:`RunInfo` (None: it lacks a tag wanted); a
        :class:`StoreError` naming the file when it cannot be read."""
        (run_id, started_at, judge, dataset, n_cases, n_items, n_failed, summaries) = row[:8]
        status, error, command, cwd, pid, host, out_dir, run_name, run_tags = row[8:]
        run_id = self._run_id(run_id)
        try:
            labels = json.loads(run_tags or "{}")
            if any(labels.get(k) != v for k, v in wanted.items()):
                return None
            return RunInfo(
                run_id=run_id,
                started_at=started_at,
                judge=judge,
                dataset=dataset,
                n_cases=n_cases,
                n_items=n_items,
                n_failed=n_failed,
                means={k: v.get("mean") for k, v in json.loads(summaries).items()},
                status=run_status(status, pid, host, out_dir),
                error=error,
                command=command,
                cwd=cwd,
                pid=pid,
                host=host,
                out_dir=out_dir,
                name=run_name,
                tags=labels,
            )
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:  # by hand, damaged
            why = _first_error(exc)
            raise StoreError(f"run {run_id!r} in {self.path} cannot be read: {why}") from None

    def resolve(self, run_id: str) -> str:
        """The full id of the run ``run_id`` names, exactly or as a unique prefix.

        Raises :class:`InputError` naming ``run_id`` and the candidates when no run or
        more than one run matches.
        """
        ref = str(run_id).strip()
        if not ref:
            raise InputError("empty run id")
        with self._reading() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (ref,)).fetchone():
                return ref
            matches = [
                r
                for (r,) in conn.execute(
                    "SELECT run_id FROM runs WHERE substr(run_id, 1, length(?1)) = ?1 "
                    "ORDER BY started_ts DESC LIMIT ?2",
                    (ref, _MAX_CANDIDATES + 1),
                )
            ]
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(matches[:_MAX_CANDIDATES])
            more = " ..." if len(matches) > _MAX_CANDIDATES else ""
            raise InputError(f"run id {ref!r} is ambiguous; it matches {shown}{more}")
        recent = [info.run_id for info in self.list_runs(limit=5)]
        hint = f"; recent runs: {', '.join(recent)}" if recent else "; the store has no runs"
        raise InputError(f"no run {ref!r} in {self.path}{hint}")

    def load(self, run_id: str, *, results: bool = False) -> StoredRun:
        """The run ``run_id`` names (exactly or by a unique prefix, like git).

        Items are streamed by ``iter_results()``; ``results=True`` also reads them all into
        ``results``. Raises :class:`InputError` for an unknown or ambiguous id.
        """
        full = self.resolve(run_id)
        with self._reading() as conn:
            row = conn.execute(
                "SELECT run_id, started_at, duration_s, judge, embedder, repeats, out_dir, "
                "dataset, dataset_fingerprint, config, versions, summaries, accounting, "
                "recorded_at, status, error, command, cwd, pid, host, data_fingerprint, "
                "provenance FROM runs WHERE run_id = ?",
                (full,),
            ).fetchone()
        if row is None:  # deleted between resolve and load
            raise InputError(f"no run {full!r} in {self.path}")
        (rid, started, duration, judge, embedder, repeats, out_dir, dataset, fp) = row[:9]
        rid = self._run_id(rid)
        config, versions, summaries, accounting, recorded = row[9:14]
        status, error, command, cwd, pid, host, data_fp, provenance = row[14:]
        try:
            stored_versions = json.loads(versions)
            run = StoredRun(
                run_id=rid,
                started_at=started,
                duration_s=duration,
                judge=judge,
                embedder=embedder,
                repeats=repeats,
                summaries={
                    k: MetricSummary.model_validate(v) for k, v in json.loads(summaries).items()
                },
                accounting=json.loads(accounting),
                out_dir=out_dir,
                config=json.loads(config),
                provenance=_read_provenance(provenance)
                or _legacy_provenance(stored_versions, dataset, fp, command),
                dataset=dataset,
                dataset_fingerprint=fp,
                data_fingerprint=data_fp,
                versions=stored_versions,
                recorded_at=datetime.fromtimestamp(recorded, timezone.utc).isoformat(
                    timespec="seconds"
                ),
                status=run_status(status, pid, host, out_dir),
                error=error,
                command=command,
                cwd=cwd,
                pid=pid,
                host=host,
            )
        except (ValueError, TypeError, RecursionError) as exc:  # a row written by hand, damaged
            why = _first_error(exc)
            raise StoreError(f"run {full!r} in {self.path} cannot be read: {why}") from None
        run._store_path = str(self.path)
        if results:
            run.results = list(run.iter_results())
        return run

    def latest(self, n: int = 2, *, name: str | None = None) -> list[StoredRun]:
        """The ``n`` most recent completed runs (of ``name``, when given), *oldest first*,
        so that ``compare(*store.latest())`` compares the newest run (B) against the one
        before it (A)."""
        infos = self.list_runs(limit=n, completed=True, name=name)
        return [self.load(info.run_id) for info in reversed(infos)]
