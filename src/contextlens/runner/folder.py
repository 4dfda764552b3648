"""Where a run writes: its own folder ``OUT/<run id>/``, ``OUT/latest``, and the
``results.jsonl`` and ``cases.jsonl`` written as results come.

Runs that share ``OUT`` never touch each other's files; a run that fails leaves only its own
partial ``results.jsonl``; ``OUT/latest`` names the newest completed run.
"""

from __future__ import annotations

import os
import uuid
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_json

from contextlens.cases import CASES_FILE, CaseRecord, DataFingerprint
from contextlens.errors import InputError
from contextlens.files import LineFile, OutputError, describe_os_error
from contextlens.redact import redact_value
from contextlens.results import RESULTS_FILE, ItemResult
from contextlens.runfiles import check_run_id, read_small
from contextlens.schemas import Dataset, ModelTestCase

__all__ = [
    "LATEST",
    "CaseLog",
    "ResultSink",
    "RunFolder",
    "latest_run",
    "masked_json",
    "new_run_id",
]

LATEST = "latest"
"""The name, in an ``out`` folder, of the pointer to its newest completed run."""
#: The largest ``latest`` file read (it holds one run id).
MAX_POINTER_BYTES = 4096


def masked_json(model: BaseModel, **dump: Any) -> str:
    """``model`` as ``model.model_dump_json(**dump)`` writes it, but each string in it masked
    (:func:`~contextlens.redact.redact_value`) before it is serialized, so a mask never
    touches the JSON around a secret: the text parses, to the same structure, whatever the
    strings hold."""
    data = model.model_dump(mode="json", **dump)
    return to_json(redact_value(data), inf_nan_mode="null").decode()


def new_run_id() -> str:
    """A fresh run id: 12 hex digits."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class RunFolder:
    """Where one run writes: ``<out>/<run_id>/``; ``run_id`` is a run id
    (:data:`contextlens.runfiles.RUN_ID`), else an :class:`InputError` at once.

    :func:`~contextlens.runner.evaluate` given a path makes one and completes it when the run
    ends; given a ``RunFolder`` it writes into it and leaves :meth:`complete` to the caller,
    who may add files first (the command adds ``report.html``).
    """

    out: Path
    run_id: str = field(default_factory=new_run_id)

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        check_run_id(self.run_id)  # read back from summary.json and OUT/latest, checked there

    @property
    def path(self) -> Path:
        """The run's own folder."""
        return self.out / self.run_id

    def check(self) -> None:
        """Raise :class:`OutputError` now if the run's folder could not be made (``out`` is a
        file, read-only, its name too long), before any work is done."""
        if self.out.exists() and not self.out.is_dir():
            raise OutputError(self.out, "it is a file, not a folder (--out names a folder)")
        probe = (
            self.out
            if self.out.exists()
            else next((p for p in self.out.parents if p.exists()), Path("."))
        )
        if not os.access(probe, os.W_OK | os.X_OK):
            raise OutputError(self.out, describe_os_error(PermissionError(13, "denied")))
        for part in self.path.parts:
            if len(part.encode("utf-8", "surrogatepass")) > 255:
                raise OutputError(self.path, "a name in the path is longer than 255 bytes")

    def create(self) -> Path:
        """Make the run's folder (and ``out``); :class:`OutputError` naming the path and the
        cause when it cannot be (it exists: a folder serves one run)."""
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            self.path.mkdir()
        except FileExistsError:
            if self.path.exists():
                raise OutputError(
                    self.path, "it exists already; a run folder serves one run"
                ) from None
            raise OutputError(self.out, "it is a file, not a folder") from None
        except OSError as exc:
            raise OutputError(self.path, describe_os_error(exc)) from None
        return self.path

    def complete(self) -> Path | None:
        """Make ``<out>/latest`` name this run and return it: a relative symlink to the run's
        folder, put in place atomically with ``os.replace``, or, where symlinks cannot be
        made, a text file holding the run id (replaced the same way). ``latest`` is a side
        file: when it cannot be made (a folder of that name, a full disk) the run is still
        complete, so this warns and returns None."""
        link = self.out / LATEST
        tmp = self.out / f".{LATEST}.{self.run_id}.{os.getpid()}.tmp"
        try:
            tmp.unlink(missing_ok=True)
            try:
                os.symlink(self.run_id, tmp, target_is_directory=True)
            except (OSError, NotImplementedError):
                tmp.write_text(self.run_id + "\n", encoding="utf-8")
            os.replace(tmp, link)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            warnings.warn(
                f"the run {self.run_id} is complete in {self.path}, but {link} could not be "
                f"made to name it: {describe_os_error(exc)}",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        return link


def latest_run(out: str | Path) -> Path | None:
    """The folder of the newest completed run in ``out`` (as ``out/latest`` names it), or
    None when no run has completed there. ``latest`` names a run folder of ``out`` by its
    run id (a link to ``<run id>``, or a file holding it); one that names anything else
    (``../elsewhere``, an absolute path) is an :class:`InputError` naming it."""
    link = Path(out) / LATEST
    if link.is_symlink():
        try:
            target = os.readlink(link)
        except OSError as exc:
            raise InputError(f"cannot read: {describe_os_error(exc)}", file=str(link)) from None
        return Path(out) / check_run_id(target, file=link)
    if link.is_file():
        run_id = read_small(link, MAX_POINTER_BYTES).strip()
        return Path(out) / check_run_id(run_id, file=link) if run_id else None
    return None


class CaseLog:
    """Writes each case, once scored, as one line of ``cases.jsonl`` (its id, fields and
    ``meta``; secrets masked), flushed at once; fingerprints the cases; without a folder,
    keeps them when ``keep``. A write that fails raises :class:`OutputError`."""

    def __init__(self, folder: Path | None, *, keep: bool = False) -> None:
        self.fingerprint = DataFingerprint()
        self.cases: list[CaseRecord] | None = [] if keep and folder is None else None
        self.path = None if folder is None else folder / CASES_FILE
        self.file = None if self.path is None else LineFile(self.path)

    def write(self, case_id: str, case: ModelTestCase | Dataset) -> None:
        record = CaseRecord.model_construct(case_id=case_id, case=case)  # checked already
        self.fingerprint.add(record.line())
        if self.cases is not None:
            self.cases.append(record)
        if self.file is not None:
            # as record.line() writes it, masked
            masked = masked_json(record, exclude_defaults=True, fallback=str)
            self.file.write(masked + "\n")

    def close(self) -> None:
        if self.file is not None:
            self.file.close()


class ResultSink:
    """Writes each item result as one JSON line of ``results.jsonl``, flushed at once, its
    secrets masked, and each case once scored into the run's :class:`CaseLog`. A write that
    fails (a full disk) raises :class:`OutputError`, and every later write at once raises it
    too: what is written stays whole."""

    def __init__(self, folder: Path | None, *, keep_cases: bool = False) -> None:
        self.path = None if folder is None else folder / RESULTS_FILE
        self.failed: OutputError | None = None
        self.file = None if self.path is None else LineFile(self.path)
        self.log = CaseLog(folder, keep=keep_cases)

    @property
    def fingerprint(self) -> DataFingerprint:
        return self.log.fingerprint

    @property
    def cases(self) -> list[CaseRecord] | None:
        return self.log.cases

    def write(self, item: ItemResult) -> None:
        if self.file is None:
            return
        if self.failed is not None:
            raise self.failed
        try:
            self.file.write(masked_json(item) + "\n")
        except OutputError as exc:
            self.failed = exc
            raise

    def write_case(self, case_id: str, case: ModelTestCase | Dataset) -> None:
        """Record the case whose items were just written."""
        if self.failed is not None:
            raise self.failed
        try:
            self.log.write(case_id, case)
        except OutputError as exc:
            self.failed = exc
            raise

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        self.log.close()
