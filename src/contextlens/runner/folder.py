"""Where a run writes: its own folder ``OUT/<run id>/``, ``OUT/latest``, and the
``results.jsonl`` and ``cases.jsonl`` written as results come.

Runs that share ``OUT`` never touch each other's files; a run that fails leaves only its own
partial ``results.jsonl``; ``OUT/latest`` names the newest completed run.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from contextlens.cases import CASES_FILE, CaseRecord, DataFingerprint
from contextlens.errors import InputError
from contextlens.results import RESULTS_FILE, ItemResult
from contextlens.schemas import Dataset, ModelTestCase

__all__ = ["LATEST", "CaseLog", "ResultSink", "RunFolder", "latest_run", "new_run_id"]

LATEST = "latest"
"""The name, in an ``out`` folder, of the pointer to its newest completed run."""


def new_run_id() -> str:
    """A fresh run id: 12 hex digits."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class RunFolder:
    """Where one run writes: ``<out>/<run_id>/``.

    :func:`~contextlens.runner.evaluate` given a path makes one and completes it when the run
    ends; given a ``RunFolder`` it writes into it and leaves :meth:`complete` to the caller,
    who may add files first (the command adds ``report.html``).
    """

    out: Path
    run_id: str = field(default_factory=new_run_id)

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))

    @property
    def path(self) -> Path:
        """The run's own folder."""
        return self.out / self.run_id

    def create(self) -> Path:
        """Make the run's folder (and ``out``); ``FileExistsError`` if it exists: a folder
        serves one run."""
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            self.path.mkdir()
        except FileExistsError:
            raise FileExistsError(
                f"the run folder {self.path} exists already; a run folder serves one run"
            ) from None
        return self.path

    def complete(self) -> Path:
        """Make ``<out>/latest`` name this run and return it: a relative symlink to the run's
        folder, put in place atomically with ``os.replace``, or, where symlinks cannot be
        made, a text file holding the run id (replaced the same way)."""
        link = self.out / LATEST
        tmp = self.out / f".{LATEST}.{self.run_id}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        try:
            os.symlink(self.run_id, tmp, target_is_directory=True)
        except (OSError, NotImplementedError):
            tmp.write_text(self.run_id + "\n", encoding="utf-8")
        try:
            os.replace(tmp, link)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise InputError(
                f"cannot make it name run {self.run_id}: {exc.strerror or exc}", file=str(link)
            ) from None
        return link


def latest_run(out: str | Path) -> Path | None:
    """The folder of the newest completed run in ``out`` (as ``out/latest`` names it), or
    None when no run has completed there."""
    link = Path(out) / LATEST
    if link.is_symlink():
        return Path(out) / os.readlink(link)
    if link.is_file():
        run_id = link.read_text(encoding="utf-8").strip()
        return Path(out) / run_id if run_id else None
    return None


class CaseLog:
    """Writes each case, once scored, as one line of ``cases.jsonl`` (its id, fields and
    ``meta``), flushed at once; fingerprints the cases; without a folder, keeps them when
    ``keep``."""

    def __init__(self, folder: Path | None, *, keep: bool = False) -> None:
        self.fingerprint = DataFingerprint()
        self.cases: list[CaseRecord] | None = [] if keep and folder is None else None
        self.handle: IO[str] | None = None
        if folder is not None:
            self.handle = open(folder / CASES_FILE, "x", encoding="utf-8")  # noqa: SIM115

    def write(self, case_id: str, case: ModelTestCase | Dataset) -> None:
        record = CaseRecord(case_id=case_id, case=case)
        text = record.line()
        self.fingerprint.add(text)
        if self.cases is not None:
            self.cases.append(record)
        if self.handle is not None:
            self.handle.write(text)
            self.handle.flush()

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()


class ResultSink:
    """Writes each item result as one JSON line of ``results.jsonl``, flushed at once, and
    each case once scored into the run's :class:`CaseLog`."""

    def __init__(self, folder: Path | None, *, keep_cases: bool = False) -> None:
        self.handle: IO[str] | None = None
        if folder is not None:
            self.handle = open(folder / RESULTS_FILE, "x", encoding="utf-8")  # noqa: SIM115
        self.log = CaseLog(folder, keep=keep_cases)

    @property
    def fingerprint(self) -> DataFingerprint:
        return self.log.fingerprint

    @property
    def cases(self) -> list[CaseRecord] | None:
        return self.log.cases

    def write(self, item: ItemResult) -> None:
        if self.handle is not None:
            self.handle.write(item.model_dump_json() + "\n")
            self.handle.flush()

    def write_case(self, case_id: str, case: ModelTestCase | Dataset) -> None:
        """Record the case whose items were just written."""
        self.log.write(case_id, case)

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
        self.log.close()
